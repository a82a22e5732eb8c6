// Package iampolicy is the one definition of what every principal of the
// pipeline may do: the four Lambdas' execution roles, the state machine's
// role, the role HealthLake assumes to write exports, the scheduler's role,
// and the reconciliation's Lambda and state machine roles. The CDK app builds each role's policy from Policy, and cdc-local
// enforces the same statements on every call (local/iam), so a missing grant
// is a red local test instead of an AccessDenied in the first deployed hour.
//
// Statements are plain values parameterised by Resources: the CDK app passes
// CloudFormation tokens as strings, cdc-local passes local ARNs.
package iampolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Principal names one role of the stack.
type Principal string

// The principals of the stack.
const (
	StartExport      Principal = "start-export"
	CheckExport      Principal = "check-export"
	PrepareChange    Principal = "prepare-change"
	RunLock          Principal = "run-lock"
	StateMachine     Principal = "state-machine"
	HealthLakeExport Principal = "healthlake-export"
	Scheduler        Principal = "scheduler"
	// Reconcile is the reconcile Lambda's role, ReconcileStateMachine the
	// reconciliation state machine's (docs/RECONCILE.md).
	Reconcile             Principal = "reconcile"
	ReconcileStateMachine Principal = "reconcile-state-machine"
	// FastPath is the fast-path Lambda's role (internal/fastpath), which
	// turns HealthLake's Subscription notifications into change events;
	// FastPathSetup the role that creates the SubscriptionTopic and the
	// Subscription in the data store (docs/FASTPATH.md).
	FastPath      Principal = "fast-path"
	FastPathSetup Principal = "fast-path-setup"
	// CheckDatastore is the role of the deploy's data store check, the
	// custom resource that fails a deploy on a data store the pipeline
	// cannot run on (internal/datastorecheck).
	CheckDatastore Principal = "check-datastore"
)

// Principals lists every principal of the pipeline, Lambdas first.
func Principals() []Principal {
	return []Principal{StartExport, CheckExport, PrepareChange, RunLock, CheckDatastore, StateMachine, HealthLakeExport, Scheduler}
}

// Lambdas lists the pipeline's four run Lambdas' principals.
func Lambdas() []Principal { return []Principal{StartExport, CheckExport, PrepareChange, RunLock} }

// Functions lists every principal that is a Lambda function's execution
// role: the run Lambdas, the deploy's data store check, the
// reconciliation's and the fast path's.
func Functions() []Principal {
	return append(append(Lambdas(), CheckDatastore, Reconcile), FastPathPrincipals()...)
}

// ReconcilePrincipals lists the reconciliation's own principals: its Lambda
// and its state machine. Their statements need the Reconcile* fields of
// Resources; the pipeline's principals name the reconciliation's resources
// only when those fields are set (a stack that deploys no reconciliation).
func ReconcilePrincipals() []Principal { return []Principal{Reconcile, ReconcileStateMachine} }

// FastPathPrincipals lists the Subscriptions fast path's principals; their
// statements need the FastPath* fields of Resources.
func FastPathPrincipals() []Principal { return []Principal{FastPath, FastPathSetup} }

// All lists the pipeline's principals, the reconciliation's and the fast
// path's.
func All() []Principal {
	return append(append(Principals(), ReconcilePrincipals()...), FastPathPrincipals()...)
}

// Conditions is an IAM Condition block: operator → key → values.
type Conditions map[string]map[string][]string

// Statement is one statement of an identity policy: Allow unless Deny.
type Statement struct {
	// Sid names the statement; unique within its principal's policy.
	Sid string
	// Deny makes it a Deny statement (the stack has none today; the local
	// evaluator honours them).
	Deny      bool
	Actions   []string
	Resources []string
	// Conditions, when set, must all hold.
	Conditions Conditions
	// NotExercised, when set, says why a normal local run makes no call
	// this statement allows (the call is made by an AWS service cdc-local
	// does not emulate, or only on a failure path); such statements are
	// deployed and enforced all the same.
	NotExercised string
}

// Resources are the ARNs (or, in the CDK app, tokens that resolve to ARNs)
// the statements name.
type Resources struct {
	// BucketARN is the artifact bucket (arn:aws:s3:::name).
	BucketARN string
	// TableARN is the RUN table; KeyARN the stack's KMS key.
	TableARN, KeyARN string
	// DatastoreARN is the HealthLake data store.
	DatastoreARN string
	// StartQueueARN and RecheckQueueARN feed start-export and check-export.
	StartQueueARN, RecheckQueueARN string
	// EventBusARN is the change-event bus.
	EventBusARN string
	// StateMachineARN is the pipeline; ExecutionsARN matches its executions
	// (…:execution:<name>:*), MapRunExecutionsARN the Distributed Map's child
	// executions (…:execution:<name>/*).
	StateMachineARN, ExecutionsARN, MapRunExecutionsARN string
	// RunLockFunctionARN and PrepareChangeFunctionARN are the functions the
	// state machine invokes.
	RunLockFunctionARN, PrepareChangeFunctionARN string
	// ExportRoleARN is the role HealthLake assumes to write exports.
	ExportRoleARN string
	// LogGroupARNs are the Lambdas' own log groups.
	LogGroupARNs map[Principal]string

	// The reconciliation (docs/RECONCILE.md): its Lambda, its state machine,
	// that machine's executions and Distributed Map child executions. All
	// set or all empty (no reconciliation deployed).
	ReconcileFunctionARN, ReconcileStateMachineARN       string
	ReconcileExecutionsARN, ReconcileMapRunExecutionsARN string

	// FastPathQueueARN is the queue the fast-path Lambda consumes: HealthLake's
	// Subscription notifications, routed from the notification bus
	// (docs/FASTPATH.md). Set only where the fast path is deployed.
	FastPathQueueARN string

	// DatastoreKeyARN is the data store's customer-managed KMS key; empty
	// for a data store on an AWS owned key. Region is the stack's Region,
	// which names HealthLake's endpoint in kms:ViaService. Set, every
	// principal that calls HealthLake may use the key through HealthLake
	// (UseDatastoreKey).
	DatastoreKeyARN, Region string

	// InVPC is set where the functions are attached to a VPC (docs/DEPLOY.md,
	// "Functions in a VPC"): each function's role then lets Lambda manage
	// the function's network interfaces (VpcNetworkInterfaces).
	InVPC bool
}

// HasFastPath reports whether the fast path's resources are set.
func (r Resources) HasFastPath() bool { return r.FastPathQueueARN != "" }

// HasReconcile reports whether the reconciliation's resources are set.
func (r Resources) HasReconcile() bool {
	return r.ReconcileFunctionARN != "" || r.ReconcileStateMachineARN != "" ||
		r.ReconcileExecutionsARN != "" || r.ReconcileMapRunExecutionsARN != ""
}

// S3 prefixes of the artifact bucket (docs/ARCHITECTURE.md, "S3 layout").
const (
	PrefixExports    = "exports/"
	PrefixManifests  = "manifests/"
	PrefixMapResults = "map-results/"
	PrefixClaimCheck = "claim-check/"
	PrefixQuarantine = "quarantine/"
	// PrefixDelivered holds the delivered index (what prepare-change and the
	// reconciliation published); PrefixReconcile the reconciliation's own
	// store runs, indexes and plans (docs/RECONCILE.md).
	PrefixDelivered = "delivered/"
	PrefixReconcile = "reconcile/"
	// PrefixOverlap holds, per window, the versions it published in the
	// last overlap of its window, which the next window skips as repeats
	// (docs/RUNLOCK.md, "Overlap").
	PrefixOverlap = "overlap/"
)

// Partition-key values of the table's items by owner (docs/ARCHITECTURE.md,
// "DynamoDB table"), as dynamodb:LeadingKeys patterns.
const (
	PKRun          = "RUN"         // runlock: STATE, HISTORY#…, REPLAY#…
	PKExportLedger = "EXPORT#*"    // exportjob: EXPORT#{runId}/JOB
	PKExportJob    = "EXPORTJOB#*" // exportjob: EXPORTJOB#{jobId}/RUN
	PKReconcile    = "RECONCILE"   // reconcile: RECONCILE/STATE
	PKShare        = "RATE#*"      // prepare-change: RATE#{runId}/CHILDREN (internal/share)
	PKFastPath     = "FASTPATH#*"  // fast path: FASTPATH#{bucket}#{shard}/{time}#… (internal/fastrecord)
)

// LeadingKeys is DynamoDB's condition key: the partition-key values of the
// items a request reads or writes.
const LeadingKeys = "dynamodb:LeadingKeys"

// OwnItems limits a DynamoDB statement to the items whose partition key
// matches one of patterns: every leading key of the request must match
// (ForAllValues:StringLike), and the key must be present (Null false), because
// ForAllValues holds for a request that carries no leading key at all (IAM
// User Guide, "Single-valued vs. multivalued context keys").
func OwnItems(patterns ...string) Conditions {
	return Conditions{
		"ForAllValues:StringLike": {LeadingKeys: patterns},
		"Null":                    {LeadingKeys: {"false"}},
	}
}

// Objects returns the ARN pattern of the bucket's objects under prefix.
func (r Resources) Objects(prefix string) string { return r.BucketARN + "/" + prefix + "*" }

// HealthLakeService is the service principal the export role is passed to.
const HealthLakeService = "healthlake.amazonaws.com"

// Policy returns the statements of p's identity policy.
func Policy(p Principal, r Resources) ([]Statement, error) {
	var out []Statement
	logs := func() Statement {
		return Statement{
			Sid:          "WriteOwnLogs",
			Actions:      []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resources:    []string{r.LogGroupARNs[p]},
			NotExercised: "the Lambda runtime writes the function's logs; cdc-local has no CloudWatch Logs",
		}
	}
	healthlakeFollow := Statement{
		Sid: "FollowExports",
		Actions: []string{
			"healthlake:DescribeFHIRExportJobWithGet", "healthlake:CancelFHIRExportJobWithDelete", "healthlake:ListFHIRExportJobs",
		},
		Resources: []string{r.DatastoreARN},
	}
	// Both machines wait for the export through the same start message.
	answerToken := Statement{
		Sid:       "AnswerTaskToken",
		Actions:   []string{"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"},
		Resources: []string{r.StateMachineARN},
	}
	// The export ledger and the job pointers (EXPORT#{runId}/JOB,
	// EXPORTJOB#{jobId}/RUN): only those items, never RUN's or RECONCILE's.
	ledger := Statement{
		Sid:        "ExportLedger",
		Actions:    []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
		Resources:  []string{r.TableARN},
		Conditions: OwnItems(PKExportLedger, PKExportJob),
	}
	consume := func(queue string) Statement {
		return Statement{
			Sid:       "ConsumeQueue",
			Actions:   []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"},
			Resources: []string{queue},
		}
	}
	sendRecheck := Statement{Sid: "SendRecheck", Actions: []string{"sqs:SendMessage"}, Resources: []string{r.RecheckQueueARN}}

	switch p {
	case RunLock:
		out = []Statement{
			logs(),
			// The RUN record: Acquire/Commit/Fail transactions (Put, Update),
			// status reads (GetItem, Query). Cancelling a failed or
			// abandoned run's export reads and updates that run's ledger
			// item (exportjob.Canceller: GetItem, UpdateItem on
			// EXPORT#{runId}); never the job pointers or RECONCILE.
			{Sid: "RunRecord", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKRun, PKExportLedger)},
			// DynamoDB and S3 decrypt the table key and the Map's result
			// objects with the caller's permission.
			{Sid: "UseKey", Actions: []string{"kms:Decrypt"}, Resources: []string{r.KeyARN}},
			{Sid: "ReadMapResults", Actions: []string{"s3:GetObject"}, Resources: []string{r.Objects(PrefixMapResults)}},
			// Whether the lock holder (a run or a reconciliation) still runs.
			{Sid: "LockHolderStatus", Actions: []string{"states:DescribeExecution"}, Resources: []string{r.ExecutionsARN}},
			// Cancels the export of a failed or abandoned run.
			healthlakeFollow,
		}
	case StartExport:
		out = []Statement{
			logs(),
			consume(r.StartQueueARN),
			sendRecheck,
			ledger,
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"}, Resources: []string{r.KeyARN}},
			{Sid: "StartExport", Actions: []string{"healthlake:StartFHIRExportJobWithPost"}, Resources: []string{r.DatastoreARN}},
			healthlakeFollow,
			// After HealthLake refuses an export start, the data store's
			// status, age and key explain why (exportjob.RefusalHint).
			{Sid: "DescribeDatastore", Actions: []string{"healthlake:DescribeFHIRDatastore"}, Resources: []string{r.DatastoreARN},
				NotExercised: "only after HealthLake refuses an export start; local/stack TestARefusedExportStartNamesTheDataStoresKey makes that call as start-export"},
			{
				Sid: "PassExportRole", Actions: []string{"iam:PassRole"}, Resources: []string{r.ExportRoleARN},
				Conditions: Conditions{"StringEquals": {"iam:PassedToService": {HealthLakeService}}},
			},
			answerToken,
		}
	case CheckExport:
		out = []Statement{
			logs(),
			consume(r.RecheckQueueARN),
			sendRecheck,
			ledger,
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resources: []string{r.KeyARN}},
			healthlakeFollow,
			// An export whose status carries no output list is listed
			// (issue 11.1): only the export prefix.
			{
				Sid: "ListExports", Actions: []string{"s3:ListBucket"}, Resources: []string{r.BucketARN},
				Conditions: Conditions{"StringLike": {"s3:prefix": {PrefixExports + "*"}}},
			},
			{Sid: "WriteManifests", Actions: []string{"s3:PutObject"}, Resources: []string{r.Objects(PrefixManifests)}},
			// An export COMPLETED_WITH_ERRORS: check-export reads the job's
			// error files (only those, never the resource files) and
			// quarantines their entries (issue 11.6).
			{Sid: "ReadExportErrors", Actions: []string{"s3:GetObject"}, Resources: []string{r.BucketARN + "/" + PrefixExports + "*/OperationOutcome/*"}},
			{Sid: "WriteQuarantine", Actions: []string{"s3:PutObject"}, Resources: []string{r.Objects(PrefixQuarantine)}},
			answerToken,
		}
	case PrepareChange:
		out = []Statement{
			logs(),
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resources: []string{r.KeyARN}},
			{Sid: "ReadExports", Actions: []string{"s3:GetObject"}, Resources: []string{r.Objects(PrefixExports)}},
			// ... and the delivered index, one object per batch (docs/RECONCILE.md).
			{Sid: "WriteClaimChecksAndQuarantine", Actions: []string{"s3:PutObject"}, Resources: []string{r.Objects(PrefixClaimCheck), r.Objects(PrefixQuarantine), r.Objects(PrefixDelivered)}},
			// Quarantine objects are written by multipart upload; a failed
			// upload is aborted (issue 11.11).
			{Sid: "AbortQuarantineUpload", Actions: []string{"s3:AbortMultipartUpload"}, Resources: []string{r.Objects(PrefixQuarantine)},
				NotExercised: "only a failed multipart upload is aborted; local/stack TestIAMAbortQuarantineUpload makes that call as prepare-change"},
			{Sid: "PublishChanges", Actions: []string{"events:PutEvents"}, Resources: []string{r.EventBusARN}},
			// Each batch writes the versions it published in the next
			// window's overlap, and reads the previous window's to skip
			// what it published (docs/RUNLOCK.md, "Overlap").
			{Sid: "OverlapIndex", Actions: []string{"s3:GetObject", "s3:PutObject"}, Resources: []string{r.Objects(PrefixOverlap)}},
			{
				Sid: "ListOverlapIndex", Actions: []string{"s3:ListBucket"}, Resources: []string{r.BucketARN},
				Conditions: Conditions{"StringLike": {"s3:prefix": {PrefixOverlap + "*"}}},
			},
			// The run's PutEvents share, divided among the children
			// publishing at once (internal/share): its own item only.
			{Sid: "SharePutEventsRate", Actions: []string{"dynamodb:UpdateItem"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKShare)},
			// The window's deletions from the type-level history
			// (GET {Type}/_history?_since=…: GetHistoryByResourceId, the one
			// history action SAR names).
			{Sid: "ReadTypeHistory", Actions: []string{"healthlake:GetHistoryByResourceId"}, Resources: []string{r.DatastoreARN}},
		}
	case StateMachine:
		out = []Statement{
			// The definition invokes the unqualified function ARNs: no
			// version or alias grants (":*").
			{Sid: "InvokeFunctions", Actions: []string{"lambda:InvokeFunction"}, Resources: []string{
				r.RunLockFunctionARN, r.PrepareChangeFunctionARN,
			}},
			{Sid: "SendStart", Actions: []string{"sqs:SendMessage"}, Resources: []string{r.StartQueueARN}},
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resources: []string{r.KeyARN}},
			{Sid: "ReadManifests", Actions: []string{"s3:GetObject"}, Resources: []string{r.Objects(PrefixManifests)}},
			{Sid: "WriteMapResults", Actions: []string{"s3:PutObject", "s3:GetObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload"}, Resources: []string{r.Objects(PrefixMapResults)}},
			{Sid: "StartMapRuns", Actions: []string{"states:StartExecution"}, Resources: []string{r.StateMachineARN},
				NotExercised: "the Distributed Map's child executions run inside the local interpreter, not through StartExecution"},
			{Sid: "ManageMapRuns", Actions: []string{"states:DescribeExecution", "states:StopExecution"}, Resources: []string{r.ExecutionsARN, r.MapRunExecutionsARN},
				NotExercised: "the Distributed Map's child executions run inside the local interpreter, not through DescribeExecution/StopExecution"},
		}
	case HealthLakeExport:
		out = []Statement{
			{Sid: "WriteExports", Actions: []string{"s3:PutObject"}, Resources: []string{r.Objects(PrefixExports)}},
			{Sid: "CheckBucket", Actions: []string{"s3:ListBucket", "s3:GetBucketPublicAccessBlock", "s3:GetEncryptionConfiguration"}, Resources: []string{r.BucketARN}},
			{Sid: "UseKey", Actions: []string{"kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"}, Resources: []string{r.KeyARN}},
		}
	case Scheduler:
		out = []Statement{
			{Sid: "StartPipeline", Actions: []string{"states:StartExecution"}, Resources: []string{r.StateMachineARN}},
		}
		if r.ReconcileStateMachineARN != "" {
			// The reconciliation's own schedule (stackconfig ReconcileEvery).
			out = append(out, Statement{Sid: "StartReconciliation", Actions: []string{"states:StartExecution"}, Resources: []string{r.ReconcileStateMachineARN}})
		}
	case Reconcile:
		out = []Statement{
			logs(),
			// Indexes, plans and delivered records are written under the
			// stack's key and read with it.
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resources: []string{r.KeyARN}},
			// The delivered index and its own objects (plan, folded
			// indexes, histograms, listed pages, the ranged read-back of a
			// repair).
			{Sid: "ReadIndexes", Actions: []string{"s3:GetObject"}, Resources: []string{
				r.Objects(PrefixDelivered), r.Objects(PrefixReconcile)}},
			// Store runs, indexes, stats; its delivered records; claim-checks
			// of repairs over the entry limit.
			{Sid: "WriteIndexes", Actions: []string{"s3:PutObject"}, Resources: []string{
				r.Objects(PrefixReconcile), r.Objects(PrefixDelivered), r.Objects(PrefixClaimCheck)}},
			{
				Sid: "ListIndexes", Actions: []string{"s3:ListBucket"}, Resources: []string{r.BucketARN},
				Conditions: Conditions{"StringLike": {"s3:prefix": {PrefixDelivered + "*", PrefixReconcile + "*"}}},
			},
			// RECONCILE/STATE: the previous reconciliation, and finish's record.
			{Sid: "ReconcileState", Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKReconcile)},
			// RUN/STATE, read only: the checkpoint and origin it compares
			// up to (it takes no lock).
			{Sid: "ReadCheckpoint", Actions: []string{"dynamodb:GetItem"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKRun)},
			// Counts and pages of a type's search by _lastUpdated
			// (SearchWithGet), a delete's version and time from the
			// instance history (GetHistoryByResourceId, per SAR), and the
			// read of the resource that confirms its 404/410.
			{Sid: "ReadStore", Actions: []string{"healthlake:SearchWithGet", "healthlake:GetHistoryByResourceId", "healthlake:ReadResource"}, Resources: []string{r.DatastoreARN}},
			{Sid: "PublishChanges", Actions: []string{"events:PutEvents"}, Resources: []string{r.EventBusARN}},
		}
	case ReconcileStateMachine:
		out = []Statement{
			{Sid: "InvokeFunctions", Actions: []string{"lambda:InvokeFunction"}, Resources: []string{r.ReconcileFunctionARN}},
			{Sid: "StartMapRuns", Actions: []string{"states:StartExecution"}, Resources: []string{r.ReconcileStateMachineARN},
				NotExercised: "the Distributed Map's child executions run inside the local interpreter, not through StartExecution"},
			{Sid: "ManageMapRuns", Actions: []string{"states:DescribeExecution", "states:StopExecution"}, Resources: []string{r.ReconcileExecutionsARN, r.ReconcileMapRunExecutionsARN},
				NotExercised: "the Distributed Map's child executions run inside the local interpreter, not through DescribeExecution/StopExecution"},
		}
	case FastPath:
		out = []Statement{
			logs(),
			consume(r.FastPathQueueARN),
			// The queue, claim-checks and the table are under the stack's
			// key.
			{Sid: "UseKey", Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resources: []string{r.KeyARN}},
			{Sid: "PublishChanges", Actions: []string{"events:PutEvents"}, Resources: []string{r.EventBusARN}},
			// What it published, one item per invocation (the windows read
			// them to skip those versions): its own items only.
			{Sid: "RecordPublished", Actions: []string{"dynamodb:PutItem"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKFastPath)},
			// Claim-checks of large resources.
			{Sid: "WriteClaimChecks", Actions: []string{"s3:PutObject"}, Resources: []string{r.Objects(PrefixClaimCheck)}},
			// An id-only notification (or a full-resource one over 256 KB,
			// which HealthLake sends id-only) is read back by version: vread
			// is VersionReadResource in the Service Authorization Reference.
			{Sid: "ReadVersions", Actions: []string{"healthlake:VersionReadResource"}, Resources: []string{r.DatastoreARN}},
		}
	case CheckDatastore:
		out = []Statement{
			logs(),
			// The deploy's check describes the data store: its status,
			// creation date and key (internal/datastorecheck).
			{Sid: "DescribeDatastore", Actions: []string{"healthlake:DescribeFHIRDatastore"}, Resources: []string{r.DatastoreARN}},
		}
	case FastPathSetup:
		out = []Statement{
			logs(),
			// SubscriptionTopic and Subscription are FHIR resources of the
			// data store: created, read (status), updated and deleted with
			// the generic FHIR actions (HealthLake has no subscription
			// actions of its own), found by search.
			{Sid: "ManageSubscription", Actions: []string{
				"healthlake:CreateResource", "healthlake:ReadResource", "healthlake:UpdateResource",
				"healthlake:DeleteResource", "healthlake:SearchWithGet",
			}, Resources: []string{r.DatastoreARN}},
		}
	default:
		return nil, fmt.Errorf("iampolicy: unknown principal %q", p)
	}
	if p == PrepareChange && r.HasFastPath() {
		// A window skips what the fast path published: it queries the
		// fast path's record items of its span (docs/FASTPATH.md).
		out = append(out,
			Statement{Sid: "ReadFastPathRecords", Actions: []string{"dynamodb:Query"}, Resources: []string{r.TableARN},
				Conditions: OwnItems(PKFastPath)})
	}
	if r.InVPC && IsFunction(p) {
		out = append(out, vpcNetworkInterfaces)
	}
	if r.DatastoreKeyARN != "" {
		if r.Region == "" {
			return nil, fmt.Errorf("iampolicy: %s: DatastoreKeyARN without Region", p)
		}
		var keyActions []string
		for _, a := range Actions(out) {
			if strings.HasPrefix(a, "healthlake:") {
				keyActions = append(keyActions, DatastoreKeyActions(a)...)
			}
		}
		if len(keyActions) > 0 {
			out = append(out, Statement{
				Sid:        "UseDatastoreKey",
				Actions:    Actions([]Statement{{Actions: keyActions}}),
				Resources:  []string{r.DatastoreKeyARN},
				Conditions: Conditions{"StringEquals": {ViaService: HealthLakeViaService(r.Region)}},
			})
		}
	}
	if r.HasReconcile() && (r.ReconcileFunctionARN == "" || r.ReconcileStateMachineARN == "" ||
		r.ReconcileExecutionsARN == "" || r.ReconcileMapRunExecutionsARN == "") {
		return nil, fmt.Errorf("iampolicy: %s: the reconciliation's resources are partly set", p)
	}
	if err := validate(p, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ViaService is KMS's condition key naming the AWS service that used a key
// on the caller's behalf.
const ViaService = "kms:ViaService"

// HealthLakeEndpoint is the kms:ViaService value of HealthLake in region,
// as the KMS Developer Guide lists it ("healthlake.AWS_region.amazonaws.com").
func HealthLakeEndpoint(region string) string { return "healthlake." + region + ".amazonaws.com" }

// HealthLakeViaService returns the kms:ViaService values a statement admits
// for HealthLake in region: its Regional endpoint (HealthLakeEndpoint) and
// the Region-less name HealthLake's own example key policy uses (HealthLake
// Developer Guide, "Encryption at rest").
func HealthLakeViaService(region string) []string {
	return []string{HealthLakeEndpoint(region), "healthlake.amazonaws.com"}
}

// DatastoreKeyActions returns the KMS actions HealthLake performs with a
// data store's customer-managed key, under the caller's permission, for a
// call authorised by the HealthLake action a: kms:Decrypt for reads,
// searches and history, kms:GenerateDataKey for writes, kms:DescribeKey for
// every call on the data store's content (HealthLake Developer Guide,
// "Encryption at rest": "required for all operations"). The page names
// categories, not actions: history under "read", export calls under "all
// operations", and none for the data store's management (describe, list,
// tags) are this mapping's reading (docs/LOCAL.md, "IAM"). local/iam checks
// the same table.
func DatastoreKeyActions(a string) []string {
	switch a {
	case "healthlake:ReadResource", "healthlake:VersionReadResource", "healthlake:SearchWithGet",
		"healthlake:SearchWithPost", "healthlake:GetHistoryByResourceId":
		return []string{"kms:Decrypt", "kms:DescribeKey"}
	case "healthlake:CreateResource", "healthlake:UpdateResource", "healthlake:PatchResource", "healthlake:DeleteResource":
		return []string{"kms:GenerateDataKey", "kms:DescribeKey"}
	}
	switch a {
	case "healthlake:DescribeFHIRDatastore", "healthlake:ListFHIRDatastores", "healthlake:ListTagsForResource",
		"healthlake:TagResource", "healthlake:UntagResource":
		// The data store's management, not its content: HealthLake's own
		// read-only managed policy grants them with no KMS action.
		return nil
	}
	if strings.HasPrefix(a, "healthlake:") {
		return []string{"kms:DescribeKey"}
	}
	return nil
}

// SidVpcNetworkInterfaces names the statement of a function's role in a VPC
// (vpcNetworkInterfaces); the CDK app gives it a policy of its own.
const SidVpcNetworkInterfaces = "VpcNetworkInterfaces"

// vpcNetworkInterfaces is what Lambda needs of a function's role to attach
// the function to its VPC: it creates, describes and deletes the function's
// network interfaces and their addresses under the role, when the function
// is created or updated and when Lambda reclaims them, and checks the role
// for them at CreateFunction (Lambda Developer Guide, "Giving Lambda
// functions access to resources in an Amazon VPC": these six actions, as AWS's
// managed policy AWSLambdaVPCAccessExecutionRole grants them, on "*";
// DescribeNetworkInterfaces and DescribeSubnets support no resource-level
// permission at all).
var vpcNetworkInterfaces = Statement{
	Sid: SidVpcNetworkInterfaces,
	Actions: []string{"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
		"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"},
	Resources:    []string{"*"},
	NotExercised: "Lambda manages a VPC function's network interfaces with its role; cdc-local has no VPC",
}

// IsFunction reports whether p is a Lambda function's execution role
// (one of Functions).
func IsFunction(p Principal) bool { return slices.Contains(Functions(), p) }

// MustPolicy is Policy for the principals of Principals, which cannot fail
// unless a Resources field is empty.
func MustPolicy(p Principal, r Resources) []Statement {
	s, err := Policy(p, r)
	if err != nil {
		panic(err)
	}
	return s
}

// validate rejects statements with no action, an empty resource or a
// duplicate Sid.
func validate(p Principal, stmts []Statement) error {
	seen := map[string]bool{}
	for _, s := range stmts {
		if s.Sid == "" || seen[s.Sid] {
			return fmt.Errorf("iampolicy: %s: missing or duplicate Sid %q", p, s.Sid)
		}
		seen[s.Sid] = true
		if len(s.Actions) == 0 || len(s.Resources) == 0 {
			return fmt.Errorf("iampolicy: %s/%s: no actions or resources", p, s.Sid)
		}
		for _, r := range s.Resources {
			if r == "" || strings.HasPrefix(r, "/") || strings.HasPrefix(r, ":") {
				return fmt.Errorf("iampolicy: %s/%s: empty resource (a Resources field is not set)", p, s.Sid)
			}
		}
	}
	return nil
}

// Actions returns the sorted, distinct actions of stmts.
func Actions(stmts []Statement) []string {
	set := map[string]bool{}
	for _, s := range stmts {
		for _, a := range s.Actions {
			set[a] = true
		}
	}
	out := make([]string, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Without returns stmts without the statement named sid.
func Without(stmts []Statement, sid string) []Statement {
	out := make([]Statement, 0, len(stmts))
	for _, s := range stmts {
		if s.Sid != sid {
			out = append(out, s)
		}
	}
	return out
}
