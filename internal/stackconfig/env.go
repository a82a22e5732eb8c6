package stackconfig

import (
	"strconv"
	"time"
)

// Environment variables the configuration sets on the Lambdas.
const (
	EnvPutEventsRate       = "CDC_PUTEVENTS_RATE"
	EnvMapMaxConcurrency   = "CDC_MAP_MAX_CONCURRENCY"
	EnvDeadlineMargin      = "CDC_DEADLINE_MARGIN"
	EnvBatchMaxFiles       = "CDC_BATCH_MAX_FILES"
	EnvBatchMaxBytes       = "CDC_BATCH_MAX_BYTES"
	EnvManifestPartBatches = "CDC_MANIFEST_PART_BATCHES"
	EnvRecheckMaxDelay     = "CDC_RECHECK_MAX_DELAY"
	EnvExportMaxWait       = "CDC_EXPORT_MAX_WAIT"
	EnvLockLease           = "CDC_LOCK_LEASE"
	EnvOverlap             = "CDC_OVERLAP"
	EnvMaxWindow           = "CDC_MAX_WINDOW"
	EnvReconcilePartitions = "CDC_RECONCILE_PARTITIONS"
)

// Env returns the environment variables of the named Lambda that come from
// this configuration (the CDK app adds resource names; cdc-local its local
// values). Durations are Go durations ("4m0s"), the rate a decimal number.
func (c Config) Env(name string) map[string]string {
	dur := func(d time.Duration) string { return d.String() }
	switch name {
	case PrepareChange:
		return map[string]string{
			EnvPutEventsRate:  strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64),
			EnvDeadlineMargin: dur(c.DeadlineMargin),
			// With it prepare-change scales its rate up when its Map runs
			// fewer children than MaxConcurrency (prepare.Config.RateFor).
			EnvMapMaxConcurrency: strconv.Itoa(c.MapMaxConcurrency),
		}
	case CheckExport:
		return map[string]string{
			EnvBatchMaxFiles:       strconv.Itoa(c.BatchMaxFiles),
			EnvBatchMaxBytes:       strconv.FormatInt(c.BatchBytes(), 10),
			EnvManifestPartBatches: strconv.Itoa(c.ManifestPartBatches),
			EnvRecheckMaxDelay:     dur(c.RecheckCap),
			EnvExportMaxWait:       dur(c.ExportTimeout),
		}
	case StartExport:
		return map[string]string{
			// start-export sends the first re-check; its delay never
			// exceeds the cap either.
			EnvRecheckMaxDelay: dur(c.RecheckCap),
		}
	case Reconcile:
		// Repairs and deletes are published at prepare-change's rate: the
		// run lock keeps the two from publishing at the same time.
		return map[string]string{
			EnvPutEventsRate:       strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64),
			EnvReconcilePartitions: strconv.Itoa(c.ReconcilePartitions),
		}
	case RunLock:
		return map[string]string{
			EnvLockLease: dur(c.Lease()),
			EnvOverlap:   dur(c.Overlap),
			EnvMaxWindow: dur(c.MaxWindow),
		}
	}
	return map[string]string{}
}
