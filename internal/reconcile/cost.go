package reconcile

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// CostModel is what one reconciliation consumes, from the measured
// per-core rates (docs/BENCHMARKS.md) and the shape of the work.
type CostModel struct {
	Resources  float64
	Partitions float64
	// FilesPerBatch and ResourcesPerFile shape the index Map (HealthLake
	// writes about 5,000 resources a file).
	FilesPerBatch, ResourcesPerFile float64
	// DeliveredObjects is how many delivered-index objects the runs wrote
	// since the previous reconciliation (one per export file per run).
	DeliveredObjects float64
	// IndexRate and DiffRate are resources/s of one child (one core).
	IndexRate, DiffRate float64
	// IndexGB and DiffGB are the children's Lambda memory.
	IndexGB, DiffGB float64
}

// Usage returns the AWS usage of one reconciliation: Lambda time of the
// index and compare children, their EXPRESS child executions, the S3 reads
// (export files, every batch's store run per partition, the delivered
// objects per partition, the previous index) and writes. The HealthLake
// export itself has no per-job price; EventBridge events for repairs and
// deletes are the differences, normally none, and not counted.
func (m CostModel) Usage() cost.Usage {
	files := m.Resources / m.ResourcesPerFile
	batches := files / m.FilesPerBatch
	if batches < 1 {
		batches = 1
	}
	indexS := m.Resources / m.IndexRate
	diffS := m.Resources / m.DiffRate
	return cost.Usage{
		StateTransitions: 12 + 2*batches + 2*m.Partitions, // the Map's item transitions are counted by the EXPRESS children
		ExpressRequests:  batches + m.Partitions,
		ExpressGBSeconds: (indexS + diffS) * 0.064,
		LambdaRequests:   batches + m.Partitions + 2,
		LambdaGBSeconds:  indexS*m.IndexGB + diffS*m.DiffGB,
		LambdaArm64:      true,
		DynamoReadUnits:  1,
		DynamoWriteUnits: 1,
		S3GetRequests:    files + batches*m.Partitions + m.DeliveredObjects*m.Partitions + 2*m.Partitions + 2,
		S3PutListRequests: batches*m.Partitions + 3*m.Partitions + 3 +
			m.Partitions*(1+m.DeliveredObjects/1000), // listing the store runs and the delivered prefix
	}
}
