package stackconfig_test

import (
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// resources is a deployment whose every value differs, so a variable given
// the wrong value shows.
var resources = stackconfig.Resources{
	Pipeline: "cdc-test", Bucket: "artifacts", Table: "cdc-table",
	DatastoreID: "0123456789abcdef0123456789abcdef", HealthLakeEndpoint: "https://healthlake.example",
	ExportRoleARN: "arn:aws:iam::123456789012:role/export", KMSKeyID: "arn:aws:kms:eu-west-1:123456789012:key/k",
	RecheckQueueURL: "https://sqs.example/recheck", EventBus: "cdc-bus", EventSource: "test.cdc",
	DetailType: "Test Change", ResourceTypes: "Patient,Observation", ExcludeTypes: "Binary",
	MaxEntryBytes: "200000", Validate: "r4", SafetyLag: "3m", InitialCheckpoint: "now",
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// The variables of each Lambda: the contract the template tests (cdk/) and
// docs/ARCHITECTURE.md hold the stack to.
func TestLambdaEnvNamesEachLambdasVariables(t *testing.T) {
	c := stackconfig.Default()
	common := []string{stackconfig.EnvPipelineName, stackconfig.EnvBucket}
	want := map[string][]string{
		stackconfig.RunLock: {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_SAFETY_LAG",
			"CDC_INITIAL_CHECKPOINT", "CDC_MAX_WINDOW", "CDC_LOCK_LEASE", "CDC_OVERLAP"},
		stackconfig.StartExport: {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_EXPORT_ROLE_ARN",
			"CDC_KMS_KEY_ID", "CDC_RECHECK_QUEUE_URL", "CDC_RESOURCE_TYPES", "CDC_RECHECK_MAX_DELAY", "CDC_DATASTORE_KEY"},
		stackconfig.CheckExport: {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_RECHECK_QUEUE_URL",
			"CDC_EXPORT_MAX_WAIT", "CDC_RECHECK_MAX_DELAY", "CDC_BATCH_MAX_FILES", "CDC_BATCH_MAX_BYTES",
			"CDC_MANIFEST_PART_BATCHES"},
		stackconfig.PrepareChange: {"CDC_TABLE", "CDC_HEALTHLAKE_ENDPOINT", "CDC_KMS_KEY_ID", "CDC_RESOURCE_TYPES",
			"CDC_EXCLUDE_TYPES", "CDC_EVENT_BUS", "CDC_EVENT_SOURCE", "CDC_DETAIL_TYPE", "CDC_MAX_ENTRY_BYTES",
			"CDC_VALIDATE", "CDC_PUTEVENTS_RATE", "CDC_DEADLINE_MARGIN", "CDC_MAP_MAX_CONCURRENCY", "CDC_WINDOW_DELETES",
			"CDC_FAST_PATH"},
		stackconfig.Reconcile: {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_KMS_KEY_ID",
			"CDC_RESOURCE_TYPES", "CDC_EXCLUDE_TYPES", "CDC_EVENT_BUS", "CDC_EVENT_SOURCE", "CDC_DETAIL_TYPE",
			"CDC_PUTEVENTS_RATE", "CDC_RECONCILE_PARTITIONS", "CDC_HEALTHLAKE_READ_RATE", "CDC_MAP_MAX_CONCURRENCY"},
		stackconfig.FastPath: {"CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_KMS_KEY_ID", "CDC_RESOURCE_TYPES",
			"CDC_EXCLUDE_TYPES", "CDC_EVENT_BUS", "CDC_EVENT_SOURCE", "CDC_DETAIL_TYPE", "CDC_MAX_ENTRY_BYTES",
			"CDC_PUTEVENTS_RATE", "CDC_TABLE"},
	}
	for name, vars := range want {
		env := c.LambdaEnv(name, resources)
		var got []string
		for k := range env {
			got = append(got, k)
		}
		exp := append(slices.Clone(common), vars...)
		sort.Strings(got)
		sort.Strings(exp)
		if !slices.Equal(got, exp) {
			t.Errorf("%s: variables %v\nwant %v", name, got, exp)
		}
		// The configuration's own values are Env's.
		for k, v := range c.Env(name) {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want Env's %q", name, k, env[k], v)
			}
		}
		if env[stackconfig.EnvPipelineName] != resources.Pipeline || env[stackconfig.EnvBucket] != resources.Bucket {
			t.Errorf("%s: pipeline %q, bucket %q", name, env[stackconfig.EnvPipelineName], env[stackconfig.EnvBucket])
		}
	}
}

// Each handler reads the values LambdaEnv gives it under the names it
// reads: the builder and the handlers' ConfigFromEnv agree.
func TestHandlersReadTheirLambdaEnv(t *testing.T) {
	c := stackconfig.Default()
	r := resources

	lock, err := runlock.ConfigFromEnv(getenv(c.LambdaEnv(stackconfig.RunLock, r)))
	if err != nil {
		t.Fatal(err)
	}
	if lock.Table != r.Table || lock.SafetyLag != 3*time.Minute || !lock.InitialNow || lock.Lease != c.Lease() {
		t.Errorf("run-lock config = %+v", lock)
	}
	if _, err := exportjob.ConfigFromEnv(getenv(c.LambdaEnv(stackconfig.RunLock, r))); err != nil {
		t.Errorf("run-lock's canceller: %v", err)
	}

	for _, name := range []string{stackconfig.StartExport, stackconfig.CheckExport} {
		ex, err := exportjob.ConfigFromEnv(getenv(c.LambdaEnv(name, r)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ex.Table != r.Table || ex.Bucket != r.Bucket || ex.DatastoreID != r.DatastoreID ||
			ex.HealthLakeEndpoint != r.HealthLakeEndpoint || ex.RecheckQueueURL != r.RecheckQueueURL ||
			ex.MaxCheckDelay != c.RecheckCap {
			t.Errorf("%s config = %+v", name, ex)
		}
		if name == stackconfig.StartExport && (ex.ExportRoleARN != r.ExportRoleARN || ex.KMSKeyID != r.KMSKeyID ||
			!slices.Equal(ex.ResourceTypes, []string{"Patient", "Observation"})) {
			t.Errorf("start-export config = %+v", ex)
		}
		if name == stackconfig.CheckExport && (ex.BatchLimits.MaxFiles != c.BatchMaxFiles || ex.PartBatches != c.ManifestPartBatches ||
			ex.MaxWait != c.ExportTimeout) {
			t.Errorf("check-export config = %+v", ex)
		}
	}

	pc, err := prepare.ConfigFromEnv(getenv(c.LambdaEnv(stackconfig.PrepareChange, r)))
	if err != nil {
		t.Fatal(err)
	}
	if pc.Bucket != r.Bucket || pc.KMSKeyID != r.KMSKeyID || pc.Publish.EventBus != r.EventBus ||
		pc.Publish.Source != r.EventSource || pc.Publish.DetailType != r.DetailType ||
		pc.Publish.MaxEntryBytes != 200000 || pc.Validation != fhir.ValidateR4 ||
		pc.MapMaxConcurrency != c.MapMaxConcurrency || pc.DeadlineMargin != c.DeadlineMargin {
		t.Errorf("prepare-change config = %+v", pc)
	}

	rc, err := reconcile.ConfigFromEnv(getenv(c.LambdaEnv(stackconfig.Reconcile, r)))
	if err != nil {
		t.Fatal(err)
	}
	if rc.Bucket != r.Bucket || rc.KMSKeyID != r.KMSKeyID || rc.Table != r.Table || rc.DatastoreID != r.DatastoreID ||
		rc.Publish.EventBus != r.EventBus || rc.Publish.Source != r.EventSource || rc.Partitions != c.ReconcilePartitions ||
		rc.ReadRate != c.ReconcileReadRate || rc.MapMaxConcurrency != c.MapMaxConcurrency {
		t.Errorf("reconcile config = %+v", rc)
	}
}
