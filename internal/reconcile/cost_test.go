package reconcile

import (
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// TestCostPerReconciliation prints the figures of docs/BENCHMARKS.md
// (go test -run CostPer -v ./internal/reconcile) and checks the model's
// shape: the store's size moves the Lambda and S3 cost, while HealthLake's
// queries grow with the types and the differences, not with the store.
func TestCostPerReconciliation(t *testing.T) {
	var prev float64
	var queries []float64
	for _, c := range []struct {
		resources, partitions float64
	}{{1e6, 4}, {1e7, 16}, {1e8, 128}} {
		m := CostModel{Resources: c.resources, Partitions: c.partitions, Types: 146,
			Changed: 1000, Differences: 10, LeafResources: 5000,
			DeliveredObjects: 288*2 + 288, FoldRate: 255_000, DiffRate: 255_000, ChildGB: 2}
		b := cost.Price(m.Usage(), cost.ListPrices())
		t.Logf("%.0f resources, %.0f partitions: $%.4f per reconciliation, $%.2f per month daily, %.0f HealthLake queries (%v)",
			c.resources, c.partitions, b.Total, 30*b.Total, m.Queries(), b.Items)
		if b.Total <= prev {
			t.Fatalf("the cost does not grow with the store: %v", b.Total)
		}
		prev = b.Total
		queries = append(queries, m.Queries())
	}
	if queries[0] != queries[len(queries)-1] {
		t.Errorf("HealthLake queries %v grow with the store", queries)
	}
}
