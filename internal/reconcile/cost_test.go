package reconcile

import (
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// TestCostPerReconciliation prints the figures of docs/BENCHMARKS.md
// (go test -run CostPer -v ./internal/reconcile) and checks the model's
// shape: more resources cost more, and the store runs dominate S3.
func TestCostPerReconciliation(t *testing.T) {
	var prev float64
	for _, c := range []struct {
		resources, partitions float64
	}{{1e6, 4}, {1e8, 128}} {
		m := CostModel{Resources: c.resources, Partitions: c.partitions, FilesPerBatch: 10, ResourcesPerFile: 5000,
			DeliveredObjects: 288 * 10, IndexRate: 350_000, DiffRate: 250_000, IndexGB: 1, DiffGB: 2}
		b := cost.Price(m.Usage(), cost.ListPrices())
		t.Logf("%.0f resources, %.0f partitions: $%.4f per reconciliation, $%.2f per month daily (%v)", c.resources, c.partitions, b.Total, 30*b.Total, b.Items)
		if b.Total <= prev {
			t.Fatalf("the cost does not grow with the store: %v", b.Total)
		}
		prev = b.Total
	}
}
