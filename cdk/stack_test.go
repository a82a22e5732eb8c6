package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

const stackName = "CdcTest"

func keyArn(t *testing.T) map[string]any {
	id, _ := oneOfType(t, "AWS::KMS::Key", "Key")
	return getAtt(id, "Arn")
}

// --- one customer-managed KMS key ---------------------------------------------

func TestOneCustomerManagedKeyWithRotation(t *testing.T) {
	check(t, "one key", func() { synthesized.template.ResourceCountIs(jsii.String("AWS::KMS::Key"), jsii.Number(1)) })
	check(t, "rotation", func() {
		synthesized.template.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{"EnableKeyRotation": true})
	})
	_, key := oneOfType(t, "AWS::KMS::Key", "Key")
	if key["DeletionPolicy"] != "Retain" {
		t.Errorf("key DeletionPolicy = %v, want Retain (data encrypted with it outlives the stack)", key["DeletionPolicy"])
	}
}

// --- S3 bucket -------------------------------------------------------------------

func TestBucketPrivateTLSOnlyKMSAndExpiring(t *testing.T) {
	id, b := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	p := props(b)
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if path(p, "PublicAccessBlockConfiguration", k) != true {
			t.Errorf("PublicAccessBlockConfiguration.%s is not true", k)
		}
	}
	sse := path(p, "BucketEncryption", "ServerSideEncryptionConfiguration", 0)
	if path(sse, "ServerSideEncryptionByDefault", "SSEAlgorithm") != "aws:kms" ||
		!jsonEq(path(sse, "ServerSideEncryptionByDefault", "KMSMasterKeyID"), keyArn(t)) {
		t.Errorf("bucket not encrypted with the stack's key: %v", sse)
	}
	if b["DeletionPolicy"] != "Retain" {
		t.Errorf("bucket DeletionPolicy = %v, want Retain", b["DeletionPolicy"])
	}

	// Lifecycle: one expiring rule per prefix, days from a parameter.
	want := map[string]string{
		PrefixExports: ParamExportsExpiryDays, PrefixManifests: ParamManifestsExpiryDays,
		PrefixMapResults: ParamMapResultsExpiryDays, PrefixClaimCheck: ParamClaimChecksExpiryDays,
		PrefixQuarantine: ParamQuarantineExpiryDays,
	}
	got := map[string]string{}
	for _, r := range asList(path(p, "LifecycleConfiguration", "Rules")) {
		if path(r, "Status") != "Enabled" {
			t.Errorf("lifecycle rule %v not enabled", path(r, "Id"))
		}
		pref, _ := path(r, "Prefix").(string)
		got[pref] = flatten(path(r, "ExpirationInDays"))
	}
	for pref, param := range want {
		if got[pref] != "${"+param+"}" {
			t.Errorf("prefix %s expires after %q, want the %s parameter", pref, got[pref], param)
		}
	}
	// What the reconciliation reads back expires too, after the settings
	// that Validate holds to its interval.
	set := synthesized.cfg.Settings
	for pref, days := range map[string]int{PrefixDelivered: set.DeliveredExpiryDays, PrefixReconcile: set.ReconcileExpiryDays} {
		if got[pref] != fmt.Sprint(days) {
			t.Errorf("prefix %s expires after %q, want %d days", pref, got[pref], days)
		}
	}
	defaults := map[string]float64{ParamExportsExpiryDays: 7, ParamManifestsExpiryDays: 30,
		ParamMapResultsExpiryDays: 30, ParamClaimChecksExpiryDays: 30, ParamQuarantineExpiryDays: 90}
	for name, d := range defaults {
		if path(parameters(), name, "Default") != d {
			t.Errorf("parameter %s default = %v, want %v", name, path(parameters(), name, "Default"), d)
		}
	}

	// TLS-only bucket policy.
	_, pol := oneOfType(t, "AWS::S3::BucketPolicy", "ArtifactBucketPolicy")
	if !jsonEq(path(props(pol), "Bucket"), ref(id)) {
		t.Fatalf("bucket policy is attached to %v", path(props(pol), "Bucket"))
	}
	tlsDeny := false
	for _, s := range asList(path(props(pol), "PolicyDocument", "Statement")) {
		if path(s, "Effect") == "Deny" && path(s, "Condition", "Bool", "aws:SecureTransport") == "false" &&
			containsAll(strs(path(s, "Action")), []string{"s3:*"}) {
			tlsDeny = true
		}
	}
	if !tlsDeny {
		t.Errorf("no Deny of s3:* without aws:SecureTransport in the bucket policy")
	}
}

// --- DynamoDB table ----------------------------------------------------------------

func TestTableKeysPITRKMSAndTTL(t *testing.T) {
	_, tbl := oneOfType(t, "AWS::DynamoDB::Table", "Table")
	p := props(tbl)
	keys := map[string]string{}
	for _, k := range asList(p["KeySchema"]) {
		keys[path(k, "AttributeName").(string)] = path(k, "KeyType").(string)
	}
	if keys["pk"] != "HASH" || keys["sk"] != "RANGE" || len(keys) != 2 {
		t.Errorf("key schema = %v, want pk HASH, sk RANGE", keys)
	}
	if path(p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
		t.Errorf("point-in-time recovery is off")
	}
	if path(p, "SSESpecification", "SSEEnabled") != true || path(p, "SSESpecification", "SSEType") != "KMS" ||
		!jsonEq(path(p, "SSESpecification", "KMSMasterKeyId"), keyArn(t)) {
		t.Errorf("table not encrypted with the stack's key: %v", p["SSESpecification"])
	}
	if path(p, "TimeToLiveSpecification", "AttributeName") != "ttl" || path(p, "TimeToLiveSpecification", "Enabled") != true {
		t.Errorf("TTL = %v, want attribute ttl enabled", p["TimeToLiveSpecification"])
	}
	if tbl["DeletionPolicy"] != "Retain" || p["DeletionProtectionEnabled"] != true {
		t.Errorf("the checkpoint table must survive stack deletion: DeletionPolicy %v, protection %v",
			tbl["DeletionPolicy"], p["DeletionProtectionEnabled"])
	}
}

// --- queues ---------------------------------------------------------------------

func TestQueuesHaveDLQsAndSSEKMS(t *testing.T) {
	ids, qs := ofType("AWS::SQS::Queue")
	if len(ids) != 5 {
		t.Fatalf("%d queues, want start, re-check, their two DLQs and the events DLQ", len(ids))
	}
	for i, q := range qs {
		if !jsonEq(path(props(q), "KmsMasterKeyId"), keyArn(t)) {
			t.Errorf("queue %s is not SSE-KMS with the stack's key", ids[i])
		}
	}
	set := synthesized.cfg.Settings
	for _, name := range []string{"Start", "Recheck"} {
		_, q := oneOfType(t, "AWS::SQS::Queue", name+"Queue")
		dlqID, _ := oneOfType(t, "AWS::SQS::Queue", name+"DeadLetterQueue")
		rp := path(props(q), "RedrivePolicy")
		if !jsonEq(path(rp, "deadLetterTargetArn"), getAtt(dlqID, "Arn")) {
			t.Errorf("%s queue redrives to %v, want %s", name, path(rp, "deadLetterTargetArn"), dlqID)
		}
		// maxReceiveCount is the setting cdc-local redrives with too.
		if path(rp, "maxReceiveCount") != float64(set.MaxReceiveCount) || set.MaxReceiveCount < stackconfig.MinReceiveCount {
			t.Errorf("%s queue maxReceiveCount = %v, want the setting %d (at least %d)", name, path(rp, "maxReceiveCount"),
				set.MaxReceiveCount, stackconfig.MinReceiveCount)
		}
	}
	// Every queue policy denies plain-HTTP access.
	qpIDs, qps := ofType("AWS::SQS::QueuePolicy")
	if len(qpIDs) != 5 {
		t.Errorf("%d queue policies, want one per queue", len(qpIDs))
	}
	for i, qp := range qps {
		if path(props(qp), "PolicyDocument", "Statement", 0, "Condition", "Bool", "aws:SecureTransport") != "false" {
			t.Errorf("queue policy %s does not deny insecure transport", qpIDs[i])
		}
	}
}

func TestQueueConsumersReportBatchItemFailures(t *testing.T) {
	startQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartQueue")
	recheckQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckQueue")
	startFn, _ := oneOfType(t, "AWS::Lambda::Function", "StartExport")
	checkFn, _ := oneOfType(t, "AWS::Lambda::Function", "CheckExport")
	want := map[string]string{startQ: startFn, recheckQ: checkFn}
	_, esms := ofType("AWS::Lambda::EventSourceMapping")
	if len(esms) != 2 {
		t.Fatalf("%d event source mappings, want 2", len(esms))
	}
	for _, e := range esms {
		p := props(e)
		q := path(p, "EventSourceArn", "Fn::GetAtt", 0)
		fn := path(p, "FunctionName", "Ref")
		if want[q.(string)] != fn {
			t.Errorf("queue %v feeds %v, want %v", q, fn, want[q.(string)])
		}
		if !containsAll(strs(p["FunctionResponseTypes"]), []string{"ReportBatchItemFailures"}) {
			t.Errorf("mapping of %v lacks ReportBatchItemFailures", q)
		}
	}
	// Queue visibility timeout = 6 × the consumer's timeout (AWS's guidance
	// for event-source mappings; the heartbeat is derived from it).
	for q, fn := range want {
		vis, _ := path(props(resources()[q].(map[string]any)), "VisibilityTimeout").(float64)
		to, _ := path(props(resources()[fn].(map[string]any)), "Timeout").(float64)
		if to == 0 || vis != stackconfig.VisibilityFactor*to {
			t.Errorf("queue %s visibility %v, want %d × %s timeout %v", q, vis, stackconfig.VisibilityFactor, fn, to)
		}
	}
	// The state machine sends to the start queue; start-export sends the
	// first re-check and check-export re-queues itself.
	if !allows("StateMachineRole", "${"+startQ+".Arn}", "sqs:SendMessage") {
		t.Errorf("state machine role cannot sqs:SendMessage to the start queue")
	}
	for _, role := range []string{"StartExportRole", "CheckExportRole"} {
		if !allows(role, "${"+recheckQ+".Arn}", "sqs:SendMessage") {
			t.Errorf("%s cannot send to the re-check queue", role)
		}
	}
}

// --- Lambdas --------------------------------------------------------------------

func TestLambdasAreProvidedAL2023Arm64WithContractEnv(t *testing.T) {
	check(t, "six functions (the runs' four, the reconciliation's, the data store check's)", func() {
		synthesized.template.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(6))
	})
	check(t, "runtime", func() {
		synthesized.template.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Runtime":       "provided.al2023",
			"Architectures": []any{"arm64"},
			"Handler":       "bootstrap",
		})
	})
	common := []string{"CDC_PIPELINE_NAME", "CDC_BUCKET"}
	want := map[string][]string{
		"RunLock": {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_SAFETY_LAG",
			"CDC_INITIAL_CHECKPOINT", "CDC_MAX_WINDOW", "CDC_LOCK_LEASE", "CDC_OVERLAP"},
		"StartExport": {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_EXPORT_ROLE_ARN",
			"CDC_KMS_KEY_ID", "CDC_RECHECK_QUEUE_URL", "CDC_RESOURCE_TYPES", "CDC_RECHECK_MAX_DELAY", "CDC_DATASTORE_KEY"},
		"CheckExport": {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_RECHECK_QUEUE_URL", "CDC_EXPORT_MAX_WAIT",
			"CDC_RECHECK_MAX_DELAY", "CDC_BATCH_MAX_FILES", "CDC_BATCH_MAX_BYTES", "CDC_MANIFEST_PART_BATCHES"},
		// The endpoint for the delete scan's history reads (the Region's), and whether it runs.
		"PrepareChange": {"CDC_HEALTHLAKE_ENDPOINT", "CDC_KMS_KEY_ID", "CDC_RESOURCE_TYPES", "CDC_EXCLUDE_TYPES",
			"CDC_EVENT_BUS", "CDC_EVENT_SOURCE", "CDC_DETAIL_TYPE", "CDC_MAX_ENTRY_BYTES", "CDC_VALIDATE",
			"CDC_PUTEVENTS_RATE", "CDC_DEADLINE_MARGIN", "CDC_MAP_MAX_CONCURRENCY", "CDC_WINDOW_DELETES",
			"CDC_TABLE", "CDC_FAST_PATH"}, // the run's PutEvents share item (internal/share); whether the fast path runs
		"Reconcile": {"CDC_TABLE", "CDC_DATASTORE_ID", "CDC_HEALTHLAKE_ENDPOINT", "CDC_KMS_KEY_ID", "CDC_RESOURCE_TYPES",
			"CDC_EXCLUDE_TYPES", "CDC_EVENT_BUS", "CDC_EVENT_SOURCE", "CDC_DETAIL_TYPE", "CDC_PUTEVENTS_RATE", "CDC_RECONCILE_PARTITIONS", "CDC_HEALTHLAKE_READ_RATE", "CDC_MAP_MAX_CONCURRENCY"},
	}
	tableID, _ := oneOfType(t, "AWS::DynamoDB::Table", "Table")
	bucketID, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	for name, vars := range want {
		_, fn := oneOfType(t, "AWS::Lambda::Function", name)
		env, _ := path(props(fn), "Environment", "Variables").(map[string]any)
		var got []string
		for k := range env {
			got = append(got, k)
		}
		exp := append(append([]string{}, common...), vars...)
		sort.Strings(got)
		sort.Strings(exp)
		if strings.Join(got, ",") != strings.Join(exp, ",") {
			t.Errorf("%s env = %v\nwant %v", name, got, exp)
		}
		if env["CDC_PIPELINE_NAME"] != stackName {
			t.Errorf("%s CDC_PIPELINE_NAME = %v, want %s (the Pipeline metric dimension)", name, env["CDC_PIPELINE_NAME"], stackName)
		}
		if !jsonEq(env["CDC_BUCKET"], ref(bucketID)) {
			t.Errorf("%s CDC_BUCKET = %v", name, env["CDC_BUCKET"])
		}
		if _, ok := env["CDC_TABLE"]; ok && !jsonEq(env["CDC_TABLE"], ref(tableID)) {
			t.Errorf("%s CDC_TABLE = %v", name, env["CDC_TABLE"])
		}
		if _, ok := env["CDC_DATASTORE_ID"]; ok && !jsonEq(env["CDC_DATASTORE_ID"], ref(ParamDatastoreID)) {
			t.Errorf("%s CDC_DATASTORE_ID = %v, want the %s parameter", name, env["CDC_DATASTORE_ID"], ParamDatastoreID)
		}
		// The code comes from <lambdaDir>/<name>: an asset, never inline.
		if path(props(fn), "Code", "S3Key") == nil || path(props(fn), "Code", "ZipFile") != nil {
			t.Errorf("%s code is not an S3 asset: %v", name, path(props(fn), "Code"))
		}
	}
	// The values derived from the settings are those stackconfig gives
	// cdc-local: the lease, overlap and window cap, the export wait, the
	// batch limits, the PutEvents rate.
	set := synthesized.cfg.Settings
	for name, fn := range map[string]string{"RunLock": stackconfig.RunLock, "StartExport": stackconfig.StartExport,
		"CheckExport": stackconfig.CheckExport, "PrepareChange": stackconfig.PrepareChange} {
		_, f := oneOfType(t, "AWS::Lambda::Function", name)
		for k, v := range set.Env(fn) {
			if got := path(props(f), "Environment", "Variables", k); got != v {
				t.Errorf("%s %s = %v, want %q", name, k, got, v)
			}
		}
	}
	_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	busID, _ := oneOfType(t, "AWS::Events::EventBus", "EventBus")
	if !jsonEq(path(props(pc), "Environment", "Variables", "CDC_EVENT_BUS"), getAtt(busID, "Name")) &&
		!jsonEq(path(props(pc), "Environment", "Variables", "CDC_EVENT_BUS"), ref(busID)) {
		t.Errorf("CDC_EVENT_BUS = %v, want the bus this stack creates", path(props(pc), "Environment", "Variables", "CDC_EVENT_BUS"))
	}
}

func TestLambdaAssetsComeFromLambdaDir(t *testing.T) {
	// One staged asset per Lambda, each the bootstrap of <lambdaDir>/<name>.
	assets := synthesized.template.FindResources(jsii.String("AWS::Lambda::Function"), nil)
	seen := map[string]bool{}
	for _, r := range *assets {
		key := flatten(path(r, "Properties", "Code", "S3Key"))
		seen[key] = true
	}
	// The four dummy bootstraps are identical, so CDK may share the asset;
	// what matters is that each function points at a zip asset.
	if len(seen) == 0 {
		t.Fatalf("no Lambda code assets")
	}
	set := stackconfig.Default()
	if err := (Config{StackName: "x", LambdaDir: t.TempDir(), ASLFile: fixtureASL, Settings: set}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "bootstrap is missing") {
		t.Errorf("Validate of an empty lambdaDir = %v, want a missing-bootstrap error", err)
	}
	dir := t.TempDir()
	if err := fakeLambdaDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := (Config{StackName: "x", LambdaDir: dir, ASLFile: fixtureASL, Settings: set}).Validate(); err != nil {
		t.Errorf("Validate of a complete lambdaDir: %v", err)
	}
	if err := (Config{StackName: "x", LambdaDir: dir, ASLFile: filepath.Join(dir, "none.json"), Settings: set}).Validate(); err == nil {
		t.Errorf("Validate with a missing ASL file passed")
	}
}

func TestConfigFromContext(t *testing.T) {
	c, err := ConfigFromContext(func(string) any { return nil })
	if err != nil || !reflect.DeepEqual(c, DefaultConfig()) || c.LambdaDir != "../build" {
		t.Errorf("no context: %+v, %v", c, err)
	}
	ctx := map[string]any{ContextLambdaDir: "/tmp/l", ContextASLFile: "x.json", ContextStackName: "S", "other": 1,
		ContextSettings: map[string]any{"RunTimeout": "12h", "PutEventsQuota": 2400.0}}
	c, err = ConfigFromContext(func(k string) any { return ctx[k] })
	if err != nil || c.LambdaDir != "/tmp/l" || c.ASLFile != "x.json" || c.StackName != "S" ||
		c.Settings.RunTimeout != 12*time.Hour || c.Settings.PutEventsQuota != 2400 {
		t.Errorf("context not applied: %+v, %v", c, err)
	}
	// -c settings='{...}' arrives as a string.
	ctx[ContextSettings] = `{"MapMaxConcurrency": 40}`
	if c, err = ConfigFromContext(func(k string) any { return ctx[k] }); err != nil || c.Settings.MapMaxConcurrency != 40 {
		t.Errorf("settings as a JSON string: %+v, %v", c.Settings, err)
	}
	for _, bad := range []any{`{"NoSuchSetting": 1}`, `not json`, 42.0, map[string]any{"RunTimeout": true}} {
		ctx[ContextSettings] = bad
		if _, err := ConfigFromContext(func(k string) any { return ctx[k] }); err == nil {
			t.Errorf("settings %v accepted", bad)
		}
	}
	cj := readCDKJSONContext("cdk.json")
	if cj[ContextLambdaDir] != DefaultLambdaDir || cj[ContextASLFile] != DefaultASLFile {
		t.Errorf("cdk.json context = %v, want the documented defaults", cj)
	}
}

// --- HealthLake export role and the start-export permissions --------------------------

func datastoreArnText() string {
	return "arn:${AWS::Partition}:healthlake:${AWS::Region}:${AWS::AccountId}:datastore/fhir/${" + ParamDatastoreID + "}"
}

func TestHealthLakeExportRoleTrustAndScope(t *testing.T) {
	roleID, role := oneOfType(t, "AWS::IAM::Role", "HealthLakeExportRole")
	st := asList(path(props(role), "AssumeRolePolicyDocument", "Statement"))
	if len(st) != 1 {
		t.Fatalf("export role trust has %d statements, want 1", len(st))
	}
	s := st[0]
	if path(s, "Principal", "Service") != "healthlake.amazonaws.com" || path(s, "Action") != "sts:AssumeRole" {
		t.Errorf("export role trusts %v", s)
	}
	if flatten(path(s, "Condition", "StringEquals", "aws:SourceAccount")) != "${AWS::AccountId}" {
		t.Errorf("trust not limited by aws:SourceAccount: %v", path(s, "Condition"))
	}
	if flatten(path(s, "Condition", "ArnEquals", "aws:SourceArn")) != datastoreArnText() {
		t.Errorf("trust not limited by the datastore ARN: %v", path(s, "Condition"))
	}
	bucketID, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	if !allows("HealthLakeExportRole", "${"+bucketID+".Arn}/exports/*", "s3:PutObject") {
		t.Errorf("export role cannot write exports/*")
	}
	if a := actionsOf("HealthLakeExportRole"); a["s3:GetObject"] || a["s3:DeleteObject"] {
		t.Errorf("export role may read or delete objects: %v", a)
	}
	for _, s := range statements() {
		if s.Owner == "HealthLakeExportRole" && containsAll(s.Actions, []string{"s3:PutObject"}) {
			for _, r := range s.Resources {
				if flatten(r) != "${"+bucketID+".Arn}/exports/*" {
					t.Errorf("export role writes outside exports/: %s", flatten(r))
				}
			}
		}
	}
	if !allows("HealthLakeExportRole", "${"+mustKeyID(t)+".Arn}", "kms:GenerateDataKey") {
		t.Errorf("export role cannot use the key")
	}

	// start-export passes exactly this role, only to HealthLake.
	passed := false
	for _, s := range statements() {
		if !containsAll(s.Actions, []string{"iam:PassRole"}) || s.Effect != "Allow" {
			continue
		}
		if s.Owner != "StartExportRole" {
			t.Errorf("%s may pass roles", s.Owner)
		}
		for _, r := range s.Resources {
			if flatten(r) != "${"+roleID+".Arn}" {
				t.Errorf("iam:PassRole on %s, want only the export role", flatten(r))
			}
		}
		if path(s.Raw, "Condition", "StringEquals", "iam:PassedToService") != "healthlake.amazonaws.com" {
			t.Errorf("iam:PassRole without iam:PassedToService healthlake.amazonaws.com")
		}
		passed = true
	}
	if !passed {
		t.Errorf("start-export cannot pass the export role")
	}
	if !allowsAcross("StartExportRole", datastoreArnText(), "healthlake:StartFHIRExportJobWithPost",
		"healthlake:DescribeFHIRExportJobWithGet", "healthlake:CancelFHIRExportJobWithDelete", "healthlake:ListFHIRExportJobs") {
		t.Errorf("start-export lacks the four HealthLake export actions on the datastore ARN")
	}
	// Every healthlake:* grant anywhere is on the datastore ARN.
	for _, s := range statements() {
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "healthlake:") {
				for _, r := range s.Resources {
					if flatten(r) != datastoreArnText() {
						t.Errorf("%s: %s on %s", s.Owner, a, flatten(r))
					}
				}
			}
		}
	}
}

func mustKeyID(t *testing.T) string {
	id, _ := oneOfType(t, "AWS::KMS::Key", "Key")
	return id
}

// --- event bus and archive ------------------------------------------------------------

func TestEventBusWithArchive(t *testing.T) {
	busID, bus := oneOfType(t, "AWS::Events::EventBus", "EventBus")
	if !jsonEq(path(props(bus), "Name"), ref(ParamEventBusName)) {
		t.Errorf("bus name = %v, want the %s parameter", path(props(bus), "Name"), ParamEventBusName)
	}
	_, arch := oneOfType(t, "AWS::Events::Archive", "EventArchive")
	if !jsonEq(path(props(arch), "SourceArn"), getAtt(busID, "Arn")) {
		t.Errorf("archive source = %v, want the bus", path(props(arch), "SourceArn"))
	}
	if !jsonEq(path(props(arch), "RetentionDays"), ref(ParamArchiveRetentionDays)) {
		t.Errorf("archive retention = %v", path(props(arch), "RetentionDays"))
	}
	// Retention is an explicit, finite choice: never "indefinitely" (0), by
	// default or at all.
	if min, _ := path(parameters(), ParamArchiveRetentionDays, "MinValue").(float64); min < 1 {
		t.Errorf("%s MinValue = %v, want at least 1 (0 keeps events forever)", ParamArchiveRetentionDays, min)
	}
	if d := path(parameters(), ParamArchiveRetentionDays, "Default"); d != float64(synthesized.cfg.Settings.ArchiveRetentionDays) {
		t.Errorf("%s Default = %v, want the setting %d", ParamArchiveRetentionDays, d, synthesized.cfg.Settings.ArchiveRetentionDays)
	}
	// Bus and archive carry full resources: both encrypted with the stack's key...
	if !jsonEq(path(props(bus), "KmsKeyIdentifier"), keyArn(t)) {
		t.Errorf("bus KmsKeyIdentifier = %v, want the stack's key", path(props(bus), "KmsKeyIdentifier"))
	}
	if !jsonEq(path(props(arch), "KmsKeyIdentifier"), keyArn(t)) {
		t.Errorf("archive KmsKeyIdentifier = %v, want the stack's key", path(props(arch), "KmsKeyIdentifier"))
	}
	// ...whose policy lets EventBridge use it for this bus only.
	busArn := "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/${" + ParamEventBusName + "}"
	var crypt, describe bool
	for _, s := range statements() {
		if s.ResourceType != "AWS::KMS::Key" || flatten(path(s.Raw, "Principal", "Service")) != "events.amazonaws.com" {
			continue
		}
		ctx := asList(path(s.Raw, "Condition", "StringEquals", "kms:EncryptionContext:aws:events:event-bus:arn"))
		switch {
		case containsAll(s.Actions, []string{"kms:GenerateDataKey", "kms:Decrypt"}) && len(ctx) > 0:
			crypt = flatten(ctx[0]) == busArn
		case containsAll(s.Actions, []string{"kms:DescribeKey"}):
			describe = true
		}
	}
	if !crypt || !describe {
		t.Errorf("key policy: EventBridge may not use the key for the bus (encrypt %v, describe %v)", crypt, describe)
	}
	if !allows("PrepareChangeRole", "${"+busID+".Arn}", "events:PutEvents") {
		t.Errorf("prepare-change cannot PutEvents on the bus")
	}
	for _, s := range statements() {
		// prepare-change, and the reconciliation's deletes and repairs.
		if containsAll(s.Actions, []string{"events:PutEvents"}) && s.Owner != "PrepareChangeRole" && s.Owner != "ReconcileRole" {
			t.Errorf("%s may publish events", s.Owner)
		}
	}
}

// --- state machine ------------------------------------------------------------------

func stateMachine(t *testing.T) (string, map[string]any) {
	return oneOfType(t, "AWS::StepFunctions::StateMachine", "StateMachine")
}

func TestStateMachineStandardLoggedWithoutExecutionData(t *testing.T) {
	_, sm := stateMachine(t)
	p := props(sm)
	if p["StateMachineType"] != "STANDARD" {
		t.Errorf("type = %v, want STANDARD", p["StateMachineType"])
	}
	if p["StateMachineName"] != StateMachineName(stackName) {
		t.Errorf("name = %v, want %s", p["StateMachineName"], StateMachineName(stackName))
	}
	lc := p["LoggingConfiguration"]
	if path(lc, "IncludeExecutionData") != false {
		t.Errorf("IncludeExecutionData = %v, want false (events carry PHI)", path(lc, "IncludeExecutionData"))
	}
	if path(lc, "Level") != "ALL" {
		t.Errorf("log level = %v", path(lc, "Level"))
	}
	lgID, _ := oneOfType(t, "AWS::Logs::LogGroup", "StateMachineLogs")
	if !jsonEq(path(lc, "Destinations", 0, "CloudWatchLogsLogGroup", "LogGroupArn"), getAtt(lgID, "Arn")) {
		t.Errorf("logs go to %v", path(lc, "Destinations"))
	}
	if _, ok := p["DefinitionString"].(string); !ok {
		t.Errorf("DefinitionString is not the file's text: %T", p["DefinitionString"])
	}
}

func TestStateMachineRoleStatements(t *testing.T) {
	runLock, _ := oneOfType(t, "AWS::Lambda::Function", "RunLock")
	prepare, _ := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	bucketID, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	startQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartQueue")
	smName := StateMachineName(stackName)
	prefix := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
	for _, c := range []struct {
		resource string
		actions  []string
	}{
		{"${" + runLock + ".Arn}", []string{"lambda:InvokeFunction"}},
		{"${" + prepare + ".Arn}", []string{"lambda:InvokeFunction"}},
		{"${" + startQ + ".Arn}", []string{"sqs:SendMessage"}},
		{"${" + bucketID + ".Arn}/manifests/*", []string{"s3:GetObject"}},
		{"${" + bucketID + ".Arn}/map-results/*", []string{"s3:PutObject"}},
		{"${" + mustKeyID(t) + ".Arn}", []string{"kms:GenerateDataKey", "kms:Decrypt"}},
		{prefix + "stateMachine:" + smName, []string{"states:StartExecution"}},
		{prefix + "execution:" + smName + ":*", []string{"states:DescribeExecution", "states:StopExecution"}},
		{prefix + "execution:" + smName + "/*", []string{"states:DescribeExecution", "states:StopExecution"}},
	} {
		if !allows("StateMachineRole", c.resource, c.actions...) {
			t.Errorf("state machine role lacks %v on %s", c.actions, c.resource)
		}
	}
	// lambda:InvokeFunction only on the two functions the definition calls.
	for _, s := range statements() {
		if s.Owner == "StateMachineRole" && containsAll(s.Actions, []string{"lambda:InvokeFunction"}) {
			for _, r := range s.Resources {
				f := flatten(r)
				if !strings.HasPrefix(f, "${"+runLock+".Arn}") && !strings.HasPrefix(f, "${"+prepare+".Arn}") {
					t.Errorf("state machine may invoke %s", f)
				}
			}
		}
	}
	// Its trust is limited to this account.
	_, role := oneOfType(t, "AWS::IAM::Role", "StateMachineRole")
	trust := path(props(role), "AssumeRolePolicyDocument", "Statement", 0)
	if path(trust, "Principal", "Service") != "states.amazonaws.com" ||
		flatten(path(trust, "Condition", "StringEquals", "aws:SourceAccount")) != "${AWS::AccountId}" {
		t.Errorf("state machine trust = %v", trust)
	}
	// start-export and check-export answer task tokens of this state machine only.
	for _, r := range []string{"StartExportRole", "CheckExportRole"} {
		if !allows(r, stateMachineArnText(), "states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat") {
			t.Errorf("%s cannot answer the task token", r)
		}
	}
}

// --- schedule ---------------------------------------------------------------------

func TestScheduleStartsStateMachineEveryNMinutes(t *testing.T) {
	smID, _ := stateMachine(t)
	_, sch := oneOfType(t, "AWS::Scheduler::Schedule", "Schedule")
	p := props(sch)
	if !jsonEq(path(p, "Target", "Arn"), ref(smID)) {
		t.Errorf("schedule targets %v", path(p, "Target", "Arn"))
	}
	if !jsonEq(p["State"], ref(ParamScheduleState)) {
		t.Errorf("schedule state = %v, want the %s parameter", p["State"], ParamScheduleState)
	}
	ifExpr, _ := path(p, "ScheduleExpression", "Fn::If").([]any)
	if len(ifExpr) != 3 || ifExpr[1] != "rate(1 minute)" || flatten(ifExpr[2]) != "rate(${"+ParamScheduleMinutes+"} minutes)" {
		t.Errorf("schedule expression = %v", p["ScheduleExpression"])
	}
	cond := path(synthesized.json, "Conditions", ifExpr[0])
	if !jsonEq(cond, map[string]any{"Fn::Equals": []any{ref(ParamScheduleMinutes), "1"}}) {
		t.Errorf("condition %v = %v", ifExpr[0], cond)
	}
	if path(parameters(), ParamScheduleMinutes, "Default") != 5.0 {
		t.Errorf("default schedule = %v minutes, want 5", path(parameters(), ParamScheduleMinutes, "Default"))
	}
	roleID := path(p, "Target", "RoleArn", "Fn::GetAtt", 0).(string)
	if !allows(constructID(roleID), stateMachineArnText(), "states:StartExecution") {
		t.Errorf("scheduler role cannot start the state machine")
	}
	if a := actionsOf(constructID(roleID)); len(a) != 1 {
		t.Errorf("scheduler role may do more than StartExecution: %v", a)
	}
}

// --- alarms and log groups ------------------------------------------------------------

func TestAlarms(t *testing.T) {
	topicID, _ := oneOfType(t, "AWS::SNS::Topic", "AlarmTopic")
	smID, _ := stateMachine(t)
	recID, _ := oneOfType(t, "AWS::StepFunctions::StateMachine", "ReconcileStateMachine")
	type want struct {
		ns, metric, op string
		dims           map[string]any
		threshold      any
	}
	startDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartDeadLetterQueue")
	recheckDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckDeadLetterQueue")
	eventsDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "EventsDeadLetterQueue")
	cases := map[string]want{
		"StartDeadLetterAlarm": {"AWS/SQS", "ApproximateNumberOfMessagesVisible", "GreaterThanThreshold",
			map[string]any{"QueueName": getAtt(startDLQ, "QueueName")}, 0.0},
		"RecheckDeadLetterAlarm": {"AWS/SQS", "ApproximateNumberOfMessagesVisible", "GreaterThanThreshold",
			map[string]any{"QueueName": getAtt(recheckDLQ, "QueueName")}, 0.0},
		// Undelivered events, job events and scheduled starts (deadletter_test.go).
		"EventsDeadLetterAlarm": {"AWS/SQS", "ApproximateNumberOfMessagesVisible", "GreaterThanThreshold",
			map[string]any{"QueueName": getAtt(eventsDLQ, "QueueName")}, 0.0},
		"ExecutionFailedAlarm": {"AWS/States", "ExecutionsFailed", "GreaterThanThreshold",
			map[string]any{"StateMachineArn": ref(smID)}, 0.0},
		"CheckpointLagAlarm": {MetricNamespace, MetricCheckpointLag, "GreaterThanThreshold",
			map[string]any{MetricDimension: stackName}, ref(ParamCheckpointLagThreshold)},
		// Lost lines page someone (issue 11.9).
		"QuarantinedLinesAlarm": {MetricNamespace, MetricQuarantinedLines, "GreaterThanThreshold",
			map[string]any{MetricDimension: stackName}, 0.0},
		"EntriesFailedAlarm": {MetricNamespace, MetricEntriesFailed, "GreaterThanThreshold",
			map[string]any{MetricDimension: stackName}, 0.0},
		"ExportErrorsAlarm": {MetricNamespace, MetricExportErrors, "GreaterThanThreshold",
			map[string]any{MetricDimension: stackName}, 0.0},
		// A repair means a gap somewhere (docs/RECONCILE.md).
		"ReconcileRepairsAlarm": {MetricNamespace, metrics.ReconcileRepairs, "GreaterThanThreshold",
			map[string]any{MetricDimension: stackName}, 0.0},
		// A failed reconciliation leaves deletes unpublished for a day.
		"ReconcileFailedAlarm": {"AWS/States", "ExecutionsFailed", "GreaterThanThreshold",
			map[string]any{"StateMachineArn": ref(recID)}, 0.0},
	}
	// The lost-line alarms say where to look.
	for _, name := range []string{"QuarantinedLinesAlarm", "EntriesFailedAlarm", "ExportErrorsAlarm"} {
		_, a := oneOfType(t, "AWS::CloudWatch::Alarm", name)
		desc, _ := props(a)["AlarmDescription"].(string)
		if !strings.Contains(desc, "cdcctl quarantine") || !strings.Contains(desc, "docs/OPERATIONS.md") {
			t.Errorf("%s description %q does not name `cdcctl quarantine` and the runbook", name, desc)
		}
	}
	// The metric names are the ones the Lambdas emit (docs/ARCHITECTURE.md "Metrics").
	arch, err := os.ReadFile("../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{MetricQuarantinedLines, MetricEntriesFailed, MetricExportErrors} {
		if !strings.Contains(string(arch), "`"+m+"`") {
			t.Errorf("metric %s is not in docs/ARCHITECTURE.md", m)
		}
	}
	for name, w := range cases {
		_, a := oneOfType(t, "AWS::CloudWatch::Alarm", name)
		p := props(a)
		if p["Namespace"] != w.ns || p["MetricName"] != w.metric || p["ComparisonOperator"] != w.op {
			t.Errorf("%s watches %v/%v %v", name, p["Namespace"], p["MetricName"], p["ComparisonOperator"])
		}
		dims := map[string]any{}
		for _, d := range asList(p["Dimensions"]) {
			dims[path(d, "Name").(string)] = path(d, "Value")
		}
		if !jsonEq(dims, w.dims) {
			t.Errorf("%s dimensions = %v, want %v", name, dims, w.dims)
		}
		if !jsonEq(p["Threshold"], w.threshold) {
			t.Errorf("%s threshold = %v, want %v", name, p["Threshold"], w.threshold)
		}
		if !jsonEq(asList(p["AlarmActions"]), []any{ref(topicID)}) {
			t.Errorf("%s actions = %v, want the alarm topic", name, p["AlarmActions"])
		}
		// A silent pipeline (no lag reported at all) must alarm too.
		wantMissing := "notBreaching"
		if name == "CheckpointLagAlarm" {
			wantMissing = "breaching"
		}
		if p["TreatMissingData"] != wantMissing {
			t.Errorf("%s TreatMissingData = %v, want %s", name, p["TreatMissingData"], wantMissing)
		}
	}
	// The optional e-mail subscription exists only when AlarmEmail is set.
	_, sub := oneOfType(t, "AWS::SNS::Subscription", "AlarmEmailSubscription")
	cond, _ := sub["Condition"].(string)
	if !jsonEq(path(synthesized.json, "Conditions", cond), map[string]any{
		"Fn::Not": []any{map[string]any{"Fn::Equals": []any{ref(ParamAlarmEmail), ""}}},
	}) || !jsonEq(path(props(sub), "Endpoint"), ref(ParamAlarmEmail)) {
		t.Errorf("e-mail subscription is not conditional on %s: %v", ParamAlarmEmail, sub)
	}
	_, topic := oneOfType(t, "AWS::SNS::Topic", "AlarmTopic")
	if !jsonEq(path(props(topic), "KmsMasterKeyId"), keyArn(t)) {
		t.Errorf("alarm topic not encrypted with the stack's key")
	}
}

// TestLogGroupsHaveRetentionAndEveryLambdaUsesOne: every log group keeps
// its lines LogRetentionDays and is under the stack's key, but the data
// store check's, which comes before the key (cdk/pipeline
// TestTheDeployChecksTheDataStore) and logs no resource.
func TestLogGroupsHaveRetentionAndEveryLambdaUsesOne(t *testing.T) {
	ids, lgs := ofType("AWS::Logs::LogGroup")
	if len(ids) != 8 {
		t.Errorf("%d log groups, want one per Lambda (6) and one per state machine (2)", len(ids))
	}
	byID := map[string]bool{}
	for i, lg := range lgs {
		byID[ids[i]] = true
		if !jsonEq(path(props(lg), "RetentionInDays"), ref(ParamLogRetentionDays)) {
			t.Errorf("log group %s retention = %v", ids[i], path(props(lg), "RetentionInDays"))
		}
		underKey := jsonEq(path(props(lg), "KmsKeyId"), keyArn(t))
		if check := constructID(ids[i]) == "CheckDatastoreLogs"; underKey == check {
			t.Errorf("log group %s under the stack's key: %v", ids[i], underKey)
		}
	}
	fnIDs, fns := ofType("AWS::Lambda::Function")
	for i, fn := range fns {
		lg := path(props(fn), "LoggingConfig", "LogGroup", "Ref")
		s, _ := lg.(string)
		if !byID[s] {
			t.Errorf("function %s logs to %v, not to a log group of the stack", fnIDs[i], lg)
		}
	}
}

// --- parameters; nothing account- or region-specific -------------------------------------

func TestParametersAndNothingHardCoded(t *testing.T) {
	for _, name := range []string{
		ParamDatastoreID, ParamEventBusName, ParamScheduleMinutes, ParamScheduleState, ParamResourceTypes, ParamExcludeTypes,
		ParamCheckpointLagThreshold, ParamLogRetentionDays, ParamExportsExpiryDays, ParamManifestsExpiryDays,
		ParamMapResultsExpiryDays, ParamClaimChecksExpiryDays, ParamQuarantineExpiryDays, ParamAlarmEmail,
		ParamArchiveRetentionDays,
	} {
		if parameters()[name] == nil {
			t.Errorf("parameter %s missing", name)
		}
	}
	// Values that must hold relations to each other are settings checked at
	// synth, not parameters CloudFormation could not hold to them.
	for _, name := range []string{"MapMaxConcurrency", "MapFilesPerBatch", "ExportHeartbeatSeconds", "ExportTimeoutSeconds",
		"MaxReceiveCount", "MaxWindow"} {
		if parameters()[name] != nil {
			t.Errorf("parameter %s: it is a stackconfig setting now", name)
		}
	}
	// A default is one of its parameter's allowed values, as written (cfn-lint
	// E2015 compares them as JSON values: 30 is not "30").
	for name, v := range parameters() {
		prm := v.(map[string]any)
		allowed, ok := prm["AllowedValues"].([]any)
		def, hasDefault := prm["Default"]
		if !ok || !hasDefault {
			continue
		}
		found := false
		for _, a := range allowed {
			found = found || jsonEq(a, def)
		}
		if !found {
			t.Errorf("parameter %s: default %#v is not among its allowed values %v", name, def, allowed)
		}
	}
	if _, hasDefault := parameters()[ParamDatastoreID].(map[string]any)["Default"]; hasDefault {
		t.Errorf("%s has a default; it must be given at deploy time", ParamDatastoreID)
	}
	text := templateText(t)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`\b\d{12}\b`), // account ids
		regexp.MustCompile(`\b(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov)-(north|south|east|west|central|northeast|southeast|northwest|southwest)-\d\b`),
		regexp.MustCompile(`arn:aws:`), // partition must come from AWS::Partition
	} {
		if m := re.FindString(text); m != "" {
			t.Errorf("template hard-codes %q", m)
		}
	}
}

func templateText(t *testing.T) string {
	t.Helper()
	// The definition string is checked on its own (it holds service
	// integration ARNs like arn:aws:states:::lambda:invoke, which are fixed
	// by the States Language), so it is left out here.
	cp := map[string]any{}
	for k, v := range synthesized.json {
		cp[k] = v
	}
	res := map[string]any{}
	for id, r := range resources() {
		if r.(map[string]any)["Type"] == "AWS::StepFunctions::StateMachine" {
			continue
		}
		res[id] = r
	}
	cp["Resources"] = res
	b, err := jsonMarshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeploysTheRealDefinition fails while the tests fall back to the fixture.
func TestDeploysTheRealDefinition(t *testing.T) {
	if synthesized.fixture {
		t.Fatalf("%s is missing; the tests ran against %s", realASL, fixtureASL)
	}
	b, err := os.ReadFile(realASL)
	if err != nil {
		t.Fatal(err)
	}
	_, sm := stateMachine(t)
	if props(sm)["DefinitionString"] != string(b) {
		t.Errorf("the deployed DefinitionString is not %s verbatim", realASL)
	}
}

// The stack outputs what cdcctl needs (CDC_TABLE, CDC_BUCKET,
// CDC_STATE_MACHINE_ARN and the queue URLs for `cdcctl dlq`).
func TestOutputsForCdcctl(t *testing.T) {
	outputs, _ := synthesized.json["Outputs"].(map[string]any)
	startQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartQueue")
	startDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartDeadLetterQueue")
	recheckQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckQueue")
	recheckDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckDeadLetterQueue")
	want := map[string]any{
		"StartQueueUrl": ref(startQ), "StartDeadLetterQueueUrl": ref(startDLQ),
		"RecheckQueueUrl": ref(recheckQ), "RecheckDeadLetterQueueUrl": ref(recheckDLQ),
	}
	for name, v := range want {
		o, _ := outputs[name].(map[string]any)
		if o == nil || !jsonEq(o["Value"], v) {
			t.Errorf("output %s = %v, want value %v", name, o, v)
		}
	}
	for _, name := range []string{"StateMachineArn", "TableName", "BucketName", "KeyArn"} {
		if outputs[name] == nil {
			t.Errorf("output %s missing", name)
		}
	}
}

// The only physical names the stack fixes are the ones pipeline.CheckName
// holds to their limits (docs/DEPLOY.md, "Resource names and their
// limits"); every other resource gets a name CloudFormation generates within
// its service's limit, and the retained log groups no fixed name at all.
func TestOnlyCheckedNamesAreFixed(t *testing.T) {
	generated := map[string]string{
		"AWS::SQS::Queue": "QueueName", "AWS::Lambda::Function": "FunctionName", "AWS::DynamoDB::Table": "TableName",
		"AWS::Scheduler::Schedule": "Name", "AWS::CloudWatch::Alarm": "AlarmName", "AWS::IAM::Role": "RoleName",
		"AWS::IAM::ManagedPolicy": "ManagedPolicyName", "AWS::SNS::Topic": "TopicName", "AWS::S3::Bucket": "BucketName",
	}
	for typ, prop := range generated {
		ids, rs := ofType(typ)
		for i, r := range rs {
			if v, ok := props(r)[prop]; ok {
				t.Errorf("%s %s has the fixed %s %v: check it in pipeline.DerivedNames", typ, ids[i], prop, v)
			}
		}
	}
	derived := map[string]bool{}
	for _, d := range pipeline.DerivedNames(stackName) {
		derived[d.Name] = true
	}
	for typ, prop := range map[string]string{
		"AWS::Events::Archive": "ArchiveName", "AWS::Events::Rule": "Name", "AWS::EventSchemas::Registry": "RegistryName",
		"AWS::StepFunctions::StateMachine": "StateMachineName", "AWS::CloudWatch::Dashboard": "DashboardName",
	} {
		ids, rs := ofType(typ)
		for i, r := range rs {
			if v, _ := props(r)[prop].(string); !derived[v] {
				t.Errorf("%s %s is named %v, not one of pipeline.DerivedNames", typ, ids[i], props(r)[prop])
			}
		}
	}
	ids, lgs := ofType("AWS::Logs::LogGroup")
	for i, lg := range lgs {
		if name, ok := props(lg)["LogGroupName"]; ok && !strings.Contains(flatten(name), "AWS::StackId") {
			t.Errorf("retained log group %s has the fixed name %v: deleting and deploying the stack again would fail", ids[i], name)
		}
	}
}

// TestMaxEntryBytesStaysWithinPutEvents: the claim-check threshold can be
// raised no further than PutEvents takes (1 MB since January 2026, read as
// 1,000,000 bytes) and defaults to 256 KB (docs/EVENTS.md, "Claim check").
func TestMaxEntryBytesStaysWithinPutEvents(t *testing.T) {
	p, _ := parameters()[ParamMaxEntryBytes].(map[string]any)
	if p == nil {
		t.Fatalf("parameter %s missing", ParamMaxEntryBytes)
	}
	if max, _ := p["MaxValue"].(float64); max <= 0 || max > 1_000_000 {
		t.Errorf("%s MaxValue = %v, want at most 1,000,000 (PutEvents' 1 MB)", ParamMaxEntryBytes, p["MaxValue"])
	}
	if p["Default"] != 262144.0 {
		t.Errorf("%s Default = %v, want 262144", ParamMaxEntryBytes, p["Default"])
	}
}
