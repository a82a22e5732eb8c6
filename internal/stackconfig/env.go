package stackconfig

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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
	EnvHealthLakeReadRate  = "CDC_HEALTHLAKE_READ_RATE"
	EnvWindowDeletes       = "CDC_WINDOW_DELETES"
	// EnvFastPath ("true") tells prepare-change that the Subscriptions fast
	// path runs: windows skip what it delivered and count what it missed
	// (docs/FASTPATH.md).
	EnvFastPath = "CDC_FAST_PATH"
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
			EnvWindowDeletes:     strconv.FormatBool(c.WindowDeletes),
			EnvFastPath:          strconv.FormatBool(c.FastPath),
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
			// What the stack was told of the data store's key: a refused
			// export start compares it with the data store's own.
			EnvDatastoreKey: c.DatastoreKeyARN(),
		}
	case Reconcile:
		// Each compare child publishes at one prepare-change invocation's
		// share: together, at most the pipeline's. It runs beside the
		// windows (no lock), so the two may together reach twice the share
		// while it publishes (differences only; a mass hard delete the
		// most); throttling is retried until the deadline, as prepare-change
		// does.
		return map[string]string{
			EnvPutEventsRate:       strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64),
			EnvReconcilePartitions: strconv.Itoa(c.ReconcilePartitions),
			// ReconcileReadRate (0: unpaced): the plan step reads at it,
			// each of at most MapMaxConcurrency compare children at its share.
			EnvHealthLakeReadRate: strconv.FormatFloat(c.ReconcileReadRate, 'f', -1, 64),
			EnvMapMaxConcurrency:  strconv.Itoa(c.MapMaxConcurrency),
		}
	case FastPath:
		return map[string]string{
			EnvPutEventsRate: strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64),
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

// Environment variables of the Lambdas that name the stack's resources and
// its deploy-time settings (LambdaEnv sets them), and those a deployment may
// add by hand (their defaults are the handlers'). docs/ARCHITECTURE.md,
// "Configuration: environment variables", lists every one.
const (
	// EnvUseFIPSEndpoint is the AWS SDK's own variable: "true" makes every
	// client resolve its service's FIPS endpoint (FIPSEndpoints).
	EnvUseFIPSEndpoint    = "AWS_USE_FIPS_ENDPOINT"
	EnvPipelineName       = "CDC_PIPELINE_NAME"
	EnvBucket             = "CDC_BUCKET"
	EnvTable              = "CDC_TABLE"
	EnvDatastoreID        = "CDC_DATASTORE_ID"
	EnvHealthLakeEndpoint = "CDC_HEALTHLAKE_ENDPOINT"
	EnvExportRoleARN      = "CDC_EXPORT_ROLE_ARN"
	EnvKMSKeyID           = "CDC_KMS_KEY_ID"
	EnvRecheckQueueURL    = "CDC_RECHECK_QUEUE_URL"
	EnvEventBus           = "CDC_EVENT_BUS"
	EnvEventSource        = "CDC_EVENT_SOURCE"
	EnvDetailType         = "CDC_DETAIL_TYPE"
	EnvResourceTypes      = "CDC_RESOURCE_TYPES"
	EnvExcludeTypes       = "CDC_EXCLUDE_TYPES"
	EnvMaxEntryBytes      = "CDC_MAX_ENTRY_BYTES"
	EnvValidate           = "CDC_VALIDATE"
	EnvSafetyLag          = "CDC_SAFETY_LAG"
	EnvInitialCheckpoint  = "CDC_INITIAL_CHECKPOINT"
	// EnvDatastoreKey is the DatastoreKey setting (empty: an AWS owned key).
	EnvDatastoreKey = "CDC_DATASTORE_KEY"

	// Not set by the stack: the handlers' defaults hold (cdc-local sets
	// EnvRecheckDelay to its own timing).
	EnvRecheckDelay       = "CDC_RECHECK_DELAY"
	EnvExportClaimLease   = "CDC_EXPORT_CLAIM_LEASE"
	EnvExportLedgerTTL    = "CDC_EXPORT_LEDGER_TTL"
	EnvExportErrorsPolicy = "CDC_EXPORT_ERRORS_POLICY"
	EnvExportPrefix       = "CDC_EXPORT_PREFIX"
	EnvRunTimeout         = "CDC_RUN_TIMEOUT"
	EnvHistoryTTL         = "CDC_HISTORY_TTL"
	EnvLogLevel           = "CDC_LOG_LEVEL"
)

// HealthLakeFIPSRegions are the Regions where HealthLake has a FIPS
// endpoint, healthlake-fips.{region}.amazonaws.com (AWS General Reference,
// "AWS HealthLake endpoints and quotas"; the other services the pipeline
// calls have FIPS endpoints in these Regions too).
var HealthLakeFIPSRegions = []string{"us-east-1", "us-east-2", "us-west-2"}

// HasHealthLakeFIPS reports whether HealthLake has a FIPS endpoint in region.
func HasHealthLakeFIPS(region string) bool { return slices.Contains(HealthLakeFIPSRegions, region) }

// CheckFIPSRegion refuses FIPSEndpoints in a region where HealthLake has
// no FIPS endpoint: every HealthLake call would name a host that does not
// exist. Nil without the setting.
func (c Config) CheckFIPSRegion(region string) error {
	if !c.FIPSEndpoints || HasHealthLakeFIPS(region) {
		return nil
	}
	return fmt.Errorf("setting FIPSEndpoints: HealthLake has no FIPS endpoint in %s, only in %s (AWS General Reference, \"AWS HealthLake endpoints and quotas\"): deploy to one of those or without FIPSEndpoints",
		region, strings.Join(HealthLakeFIPSRegions, ", "))
}

// FunctionEnv returns the variables every Lambda of the stack gets beside
// its own (LambdaEnv): with FIPSEndpoints, EnvUseFIPSEndpoint.
func (c Config) FunctionEnv() map[string]string {
	if c.FIPSEndpoints {
		return map[string]string{EnvUseFIPSEndpoint: "true"}
	}
	return map[string]string{}
}

// HealthLakeHost is the first label of HealthLake's Regional host name:
// healthlake, or healthlake-fips for its FIPS endpoint.
func HealthLakeHost(fips bool) string {
	if fips {
		return "healthlake-fips"
	}
	return "healthlake"
}

// RegionalHealthLakeHost returns host with HealthLake's FIPS label
// (healthlake-fips.{region}…) replaced by the Regional one, and whether it
// had it; any other host comes back as it is, with false.
func RegionalHealthLakeHost(host string) (string, bool) {
	rest, fips := strings.CutPrefix(host, HealthLakeHost(true)+".")
	if !fips {
		return host, false
	}
	return HealthLakeHost(false) + "." + rest, true
}
