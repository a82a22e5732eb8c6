package reconcile

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// CostModel is what one reconciliation consumes (docs/RECONCILE.md: plan,
// fold, count, list, compare, finish), from the measured per-core rates
// (docs/BENCHMARKS.md) and the shape of the work. It exports nothing. The
// refine step, which runs only when a differing hour holds more than
// LeafMax resources, is left out: one more read of each partition's folded
// index, for fewer resources listed.
type CostModel struct {
	Resources  float64
	Partitions float64
	// Types is the number of resource types compared (146 by default).
	Types float64
	// Changed is how many resources changed after the checkpoint (read from
	// the types' history at plan), Differences how many ranges' counts
	// differ and are bisected, LeafResources the resources listed in them.
	Changed, Differences, LeafResources float64
	// DeliveredObjects is how many delivered-index objects the runs wrote
	// since the previous reconciliation (one per export file per run, one
	// per delete-scan invocation).
	DeliveredObjects float64
	// FoldRate and DiffRate are resources/s of one child (one core).
	FoldRate, DiffRate float64
	// ChildGB is the fold and compare children's Lambda memory.
	ChildGB float64
}

// Bisections is how many counts one differing range costs: cut in half
// from a day-to-years range down to an hour, two counts a level.
const Bisections = 2 * 16

// Queries returns the HealthLake requests of one reconciliation: two counts
// per type, the bisection of each differing range, the history pages since
// the checkpoint (one per type, more when many changed) and the search pages
// of the leaves (100 resources a page).
func (m CostModel) Queries() float64 {
	history := m.Types + m.Changed/100
	return 2*m.Types + m.Differences*Bisections + history + m.LeafResources/100 + m.Differences
}

// Usage returns the AWS usage of one reconciliation: the fold and compare
// children's Lambda time (both read the partition's index, the compare
// child only compares inside the leaves), their EXPRESS executions, the
// count, list and plan Tasks, and the S3 requests: the delivered objects
// read by every fold child, the folded and next index written and read,
// the histograms, the listed pages. EventBridge events for repairs and
// deletes are the differences, normally few, and not counted; HealthLake
// queries are counted apart (Queries): the data store's price includes
// 3,500 an hour.
func (m CostModel) Usage() cost.Usage {
	foldS := m.Resources / m.FoldRate
	diffS := m.Resources / m.DiffRate
	loops := 4.0 // count and list, each called about twice
	return cost.Usage{
		StateTransitions: 10 + 2*loops + 2*m.Partitions,
		ExpressRequests:  2 * m.Partitions,
		ExpressGBSeconds: (foldS + diffS) * 0.064,
		LambdaRequests:   2*m.Partitions + loops + 2,
		LambdaGBSeconds:  (foldS+diffS)*m.ChildGB + loops*30*1, // the loops: up to 30 s each at 1 GB
		LambdaArm64:      true,
		DynamoReadUnits:  2,
		DynamoWriteUnits: 1,
		S3GetRequests:    m.DeliveredObjects*m.Partitions + 3*m.Partitions + m.Partitions*m.LeafResources/100 + 4,
		S3PutListRequests: 3*m.Partitions + m.LeafResources/100*(1+m.Partitions) + 6 +
			m.Partitions*(1+m.DeliveredObjects/1000), // listing the store runs and the delivered day folders
	}
}
