// Package stackconfig is the deployed configuration that the CDK app and
// cdc-local share: each Lambda's timeout and memory, the queues' visibility
// timeouts and maxReceiveCount, the re-check cap, the export wait's
// HeartbeatSeconds and TimeoutSeconds, the execution timeout and the
// run-lock lease, and the PutEvents budget of prepare-change.
//
// Values that depend on each other are derived here from one setting each
// (HeartbeatSeconds from the re-check path, the lease from the run timeout,
// the per-invocation PutEvents rate from the account quota), and Validate
// refuses a configuration that AWS would accept but that would fail a
// healthy run: a heartbeat a retried check cannot meet, an export wait that
// outlives the execution, a prepare-change timeout past the 5-minute limit
// of the Distributed Map's EXPRESS children.
package stackconfig

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Names of the four Lambdas (their cmd/ directories and build/<name>/bootstrap).
const (
	StartExport   = "start-export"
	CheckExport   = "check-export"
	PrepareChange = "prepare-change"
	RunLock       = "run-lock"
	// Reconcile is the reconciliation's Lambda (docs/RECONCILE.md); it is
	// not one of Lambdas(), which are the pipeline's four.
	Reconcile = "reconcile"
	// FastPath is the Subscriptions fast path's Lambda (docs/FASTPATH.md),
	// deployed only when the FastPath setting is on; FastPathSetup the
	// custom resource that creates its SubscriptionTopic and Subscription.
	FastPath      = "fast-path"
	FastPathSetup = "fast-path-setup"
	// CheckDatastore is the custom resource that checks the data store at
	// every deploy that changes the DatastoreId or the DatastoreKey
	// (internal/datastorecheck); not one of Lambdas().
	CheckDatastore = "check-datastore"
)

// TableTTLAttribute is the pipeline table's time-to-live attribute (epoch
// seconds): DynamoDB deletes an item some time after it. The CDK app sets
// it on the table; runlock, exportjob, share and fastrecord write it.
const TableTTLAttribute = "ttl"

// Limits AWS documents, which Validate enforces.
const (
	// ExpressLimit is the longest an EXPRESS execution (a Distributed Map
	// child) runs; prepare-change must finish inside it.
	ExpressLimit = 5 * time.Minute
	// MaxLambdaTimeout is Lambda's largest function timeout.
	MaxLambdaTimeout = 15 * time.Minute
	// MaxSQSDelay is the largest DelaySeconds SQS accepts.
	MaxSQSDelay = 900 * time.Second
	// MaxVisibilityTimeout is the largest SQS visibility timeout.
	MaxVisibilityTimeout = 12 * time.Hour
	// MaxStandardDuration is the longest a STANDARD execution runs.
	MaxStandardDuration = 365 * 24 * time.Hour
	// MaxMapConcurrency is the Distributed Map's largest MaxConcurrency.
	MaxMapConcurrency = 10000
	// MaxReceiveCountLimit is the largest maxReceiveCount of a redrive policy.
	MaxReceiveCountLimit = 1000
	// MinReconcileReadRate is the least ReconcileReadRate other than 0: the
	// plan step reads a history page of every resource type (146 in R4)
	// at it, within the reconcile Lambda's timeout (15 s at this rate).
	MinReconcileReadRate = 10
	// MaxReconcilePartitions bounds the reconciliation's partitions: their
	// list rides in the execution's state (reconcile.MaxPartitions).
	MaxReconcilePartitions = 10000
	// MaxExpiryDays is the longest lifecycle expiry the stack accepts (the
	// bound of its …ExpiryDays parameters).
	MaxExpiryDays = 36500
	// MinUnreservedConcurrency is what Lambda keeps unreserved in an
	// account and Region: reserving more fails the deploy
	// ("ReservedConcurrentExecutions … below its minimum value").
	MinUnreservedConcurrency = 100
)

// Fixed ratios of the design.
const (
	// VisibilityFactor: each queue's visibility timeout is this many times
	// its consumer's timeout (AWS's guidance for event-source mappings).
	VisibilityFactor = 6
	// LeaseMargin: the run-lock lease is the run timeout plus this, so the
	// execution always ends before its lock can be taken over.
	LeaseMargin = time.Hour
	// MinReceiveCount: a message must survive at least two failed receives
	// before it moves to its dead-letter queue.
	MinReceiveCount = 3
)

// Function is one Lambda's deployed timeout and memory.
type Function struct {
	Timeout  time.Duration
	MemoryMB int
}

// Config is the deployed configuration. Default returns the one the stack
// deploys unless a setting is overridden (Set).
type Config struct {
	// Lambdas by name (StartExport, CheckExport, PrepareChange, RunLock).
	StartExport, CheckExport, PrepareChange, RunLock Function

	// MaxReceiveCount is how often a start or re-check message is received
	// before it moves to its dead-letter queue.
	MaxReceiveCount int
	// RecheckCap is the longest delay between two export checks (the
	// re-check queue's backed-off DelaySeconds; check-export's
	// CDC_RECHECK_MAX_DELAY).
	RecheckCap time.Duration
	// HeartbeatMargin is added to the longest gap between two heartbeats
	// (event-source polling, clock skew) to give HeartbeatSeconds.
	HeartbeatMargin time.Duration
	// Heartbeat overrides the derived HeartbeatSeconds of the export wait
	// when non-zero; Validate refuses one a retried check cannot meet.
	Heartbeat time.Duration
	// ExportTimeout is the export wait's TimeoutSeconds and check-export's
	// CDC_EXPORT_MAX_WAIT: the longest an export may run.
	ExportTimeout time.Duration
	// RunTimeout is the execution's top-level TimeoutSeconds; the run-lock
	// lease is RunTimeout + LeaseMargin.
	RunTimeout time.Duration

	// MapMaxConcurrency is the Distributed Map's MaxConcurrency.
	MapMaxConcurrency int
	// PutEventsQuota is the account's PutEvents quota in the stack's
	// region, in requests per second.
	PutEventsQuota float64
	// PutEventsShare is the part of that quota this pipeline may use; other
	// producers in the account share the rest.
	PutEventsShare float64
	// DeadlineMargin: prepare-change stops taking work this long before its
	// timeout (CDC_DEADLINE_MARGIN).
	DeadlineMargin time.Duration

	// BatchMaxFiles and BatchMaxBytes bound one prepare-change batch;
	// ManifestPartBatches bounds one manifest part (check-export's
	// CDC_BATCH_MAX_FILES, CDC_BATCH_MAX_BYTES, CDC_MANIFEST_PART_BATCHES).
	// BatchMaxBytes 0 means BatchBudgetBytes: what one invocation can
	// publish at its PutEvents rate before its deadline.
	BatchMaxFiles       int
	BatchMaxBytes       int64
	ManifestPartBatches int

	// Overlap is exported and delivered again before each window's start
	// (run-lock's CDC_OVERLAP); MaxWindow caps a window's length (0: no
	// cap; CDC_MAX_WINDOW).
	Overlap   time.Duration
	MaxWindow time.Duration

	// ArchiveRetentionDays is the default retention of the event bus
	// archive; it is always finite.
	ArchiveRetentionDays int

	// Reconcile is the reconcile Lambda's timeout and memory: its index and
	// compare actions run as Distributed Map EXPRESS children.
	Reconcile Function
	// ReconcileEvery is the reconciliation's schedule (default daily);
	// ReconcilePartitions its index partitions (CDC_RECONCILE_PARTITIONS).
	ReconcileEvery      time.Duration
	ReconcilePartitions int
	// ReconcileReadRate bounds the HealthLake reads (history pages and
	// resource reads) the reconciliation makes to find the changes since
	// its checkpoint and to confirm deletions, in requests per second for
	// all its invocations together (CDC_HEALTHLAKE_READ_RATE; each of the
	// MapMaxConcurrency compare children takes its share); 0 leaves them
	// unpaced (ConfirmConcurrency at once per child). They share the data store's
	// read quota with its other clients (docs/DEPLOY.md, "Account
	// prerequisites and quotas").
	ReconcileReadRate float64
	// ReconcileHour (0–23) in ReconcileTimeZone (an IANA zone) anchors the
	// reconciliation's schedule: daily at that hour, or every ReconcileEvery
	// hours through it (ReconcileCron).
	ReconcileHour     int
	ReconcileTimeZone string

	// DeliveredExpiryDays and ReconcileExpiryDays expire delivered/ and
	// reconcile/ of the artifact bucket. The reconciliation reads the
	// delivered objects written since the previous one started and that
	// one's index under reconcile/, so both must outlive
	// MinReconcileRetentionDays; reconcile/ expires first
	// (ReconcileRetentionSlackDays), so that a reconciliation after a longer
	// gap fails for want of the previous index instead of running without
	// delivered objects it needs.
	DeliveredExpiryDays int
	ReconcileExpiryDays int

	// ReservedConcurrency reserves each Lambda's concurrency
	// (ReservedConcurrencyOf). Off by default: Lambda keeps
	// MinUnreservedConcurrency unreserved, and a new account's concurrency
	// quota is below it, so any reservation fails the first deploy.
	ReservedConcurrency bool

	// FIPSEndpoints makes every Lambda of the stack call AWS through the
	// FIPS endpoints of the services (FIPS 140 validated TLS): the SDK's
	// AWS_USE_FIPS_ENDPOINT, and HealthLake's healthlake-fips host for its
	// FHIR REST API. HealthLake has FIPS endpoints only in
	// HealthLakeFIPSRegions (AWS General Reference, "AWS HealthLake
	// endpoints and quotas"). Off by default.
	FIPSEndpoints bool

	// WindowDeletes makes every window read the resource types' HealthLake
	// history for the deletions in it and publish them (docs/EXPORT.md
	// "Deletes"). Off, deletions reach consumers only through the
	// reconciliation: the fallback for a data store whose type-level
	// history is unavailable.
	WindowDeletes bool

	// FastPath deploys the Subscriptions fast path (docs/FASTPATH.md): a
	// HealthLake Subscription on the pipeline's types delivers each change
	// to a notification bus within seconds, the fast-path Lambda publishes
	// it as the v1 event, and every window skips what it delivered and
	// counts what it missed (FastPathMissed). Off by default.
	FastPath bool
	// FastPathPayload is the Subscription's payload content: "full-resource"
	// (the resource rides in the notification; over 256 KB HealthLake sends
	// it id-only) or "id-only" (every version is read back with vread).
	FastPathPayload string
	// FastPathBatchingWindow is the fast-path queue mapping's
	// MaximumBatchingWindow. 0, the default, sets none: each receive's
	// messages (up to 10, Lambda's most without a window) are invoked at
	// once, about 3 s from write to event whatever the traffic. With a
	// window a notification waits up to it for its batch (up to
	// FastPathBatch), and a longer window makes fewer, larger invocations —
	// fewer deletes, Lambda invocations and record items: at 1 M changes a
	// day $2.44 per million changes without a window, $1.55 at 1 s, $1.10
	// at 3 s in the cost model (docs/COST.md, "The fast path"). But with
	// any window Lambda may wait up to 20 s before it invokes when the
	// queue's traffic is very low ("Using Lambda with Amazon SQS"; a p95 of
	// 23 s at 10,000 changes a day, simulated), and at such traffic a window
	// saves nothing (an invocation per message either way): a window is
	// for busy stores. Whole seconds from 0 to 30 s (a quarter of the
	// default 2-minute safety lag: the versions are recorded long before
	// the windows read the record).
	FastPathBatchingWindow time.Duration
	// DatastoreKey is the ARN of the customer-managed KMS key the HealthLake
	// data store is encrypted with (its SseConfiguration); empty: an AWS
	// owned key. HealthLake uses a customer-managed key with the caller's
	// permission — kms:Decrypt for reads and searches, kms:GenerateDataKey
	// for writes, kms:DescribeKey for every operation (HealthLake Developer
	// Guide, "Encryption at rest") — so every role that calls HealthLake
	// then has UseDatastoreKey (internal/iampolicy), and with FastPath the
	// notification bus is encrypted with it (HealthLake requires the data
	// store's key there).
	DatastoreKey string
	// FastPathBusKey is the ARN of the KMS key the notification bus is
	// encrypted with; empty: the stack's key. HealthLake requires a data
	// store encrypted with a customer-managed key to deliver to a bus on
	// that same key (HealthLake Developer Guide, "Creating a
	// Subscription"): set the data store's key here, and add the statement
	// of the stack output NotificationBusKeyPolicyStatement to its key
	// policy (docs/DEPLOY.md). Only with FastPath.
	FastPathBusKey string
	// FastPathFunction is the fast-path Lambda (an SQS event-source
	// mapping's consumer: its queue's visibility timeout is 6 × its timeout);
	// FastPathSetupFunction the custom resource that keeps the Subscription.
	FastPathFunction, FastPathSetupFunction Function
	// CheckDatastoreFunction is the deploy's data store check (a custom
	// resource: one DescribeFHIRDatastore call).
	CheckDatastoreFunction Function
}

// DefaultPutEventsQuota is the lowest default PutEvents quota that
// EventBridge documents for any region (400 requests per second; us-east-1
// has 10,000, us-east-2 2,400: PutEventsRegionalDefault). Set PutEventsQuota to the quota of the
// stack's region (Service Quotas) to use more of it.
const DefaultPutEventsQuota = 400

// putEventsRegionalDefaults are the default PutEvents quotas (requests per
// second, per account and Region) that the EventBridge quotas page
// ("Amazon EventBridge quotas", PutEvents throttle limit in transactions
// per second, L-9B653E91) names by Region; "each of the other supported
// Regions" has putEventsOtherRegions.
var putEventsRegionalDefaults = map[string]float64{
	"us-east-1": 10000, "us-west-2": 10000, "eu-west-1": 10000,
	"us-east-2": 2400, "eu-central-1": 2400, "eu-south-2": 2400,
	"us-west-1": 1200, "ap-northeast-1": 1200, "ap-southeast-1": 1200, "ap-southeast-2": 1200, "eu-west-2": 1200,
	"ap-east-1": 600, "ap-northeast-2": 600, "ap-south-1": 600, "ca-central-1": 600, "eu-north-1": 600,
	"eu-west-3": 600, "sa-east-1": 600,
}

// putEventsOtherRegions is the page's default for every other supported
// Region.
const putEventsOtherRegions = 400

// commercialRegion matches a Region name of the commercial partition (the
// quotas page's; GovCloud and China Regions are other partitions, whose
// defaults it does not give).
var commercialRegion = regexp.MustCompile(`^[a-z]{2}-[a-z]+-[0-9]+$`)

// PutEventsRegionalDefault returns the default PutEvents quota of region
// and whether it is known: the page's figure for the Regions it names, 400
// for any other commercial Region, unknown for an empty name, GovCloud and
// China.
func PutEventsRegionalDefault(region string) (float64, bool) {
	r := strings.ToLower(strings.TrimSpace(region))
	if q, ok := putEventsRegionalDefaults[r]; ok {
		return q, true
	}
	if commercialRegion.MatchString(r) && !strings.HasPrefix(r, "cn-") {
		return putEventsOtherRegions, true
	}
	return 0, false
}

// QuotaAdvice compares PutEventsQuota with region's default quota when it
// is known, and returns what the operator should know ("" when they agree,
// or the Region is unknown or empty). It warns rather than refuses: an
// account may have had its quota raised through Service Quotas.
func (c Config) QuotaAdvice(region string) string {
	def, ok := PutEventsRegionalDefault(region)
	if !ok || c.PutEventsQuota == def {
		return ""
	}
	if c.PutEventsQuota > def {
		return fmt.Sprintf("PutEventsQuota %.0f is above %s's default PutEvents quota of %.0f requests/s: unless the account's quota was raised (Service Quotas, EventBridge \"PutEvents throttle limit in transactions per second\"), the pipeline asks for more than EventBridge allows and its publishing is throttled and retried (docs/DEPLOY.md)",
			c.PutEventsQuota, region, def)
	}
	return fmt.Sprintf("PutEventsQuota %.0f is below %s's default PutEvents quota of %.0f requests/s: the pipeline publishes at %.0f events/s where it could at %.0f; set PutEventsQuota to %.0f, or to the account's quota if it was changed (docs/DEPLOY.md)",
		c.PutEventsQuota, region, def, c.PutEventsQuota*c.PutEventsShare*10, def*c.PutEventsShare*10, def)
}

// kmsKeyARN matches a KMS key's ARN (not an alias's).
var kmsKeyARN = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$`)

// IsKMSKeyARN reports whether s is a KMS key's ARN (not an alias's).
func IsKMSKeyARN(s string) bool { return kmsKeyARN.MatchString(s) }

// DatastoreKeyARN is the data store's customer-managed key: DatastoreKey,
// or FastPathBusKey, which HealthLake requires to be that same key; "" for
// a data store on an AWS owned key.
func (c Config) DatastoreKeyARN() string {
	if c.DatastoreKey != "" {
		return c.DatastoreKey
	}
	return c.FastPathBusKey
}

// Default returns the configuration the stack deploys.
func Default() Config {
	return Config{
		StartExport:   Function{Timeout: 60 * time.Second, MemoryMB: 256},
		CheckExport:   Function{Timeout: 120 * time.Second, MemoryMB: 256},
		PrepareChange: Function{Timeout: 240 * time.Second, MemoryMB: 1024},
		RunLock:       Function{Timeout: 60 * time.Second, MemoryMB: 256},

		MaxReceiveCount: 5,
		RecheckCap:      60 * time.Second,
		HeartbeatMargin: 60 * time.Second,
		ExportTimeout:   6 * time.Hour,
		RunTimeout:      25 * time.Hour,

		MapMaxConcurrency: 10,
		PutEventsQuota:    DefaultPutEventsQuota,
		PutEventsShare:    0.5,
		DeadlineMargin:    30 * time.Second,

		BatchMaxFiles:       10,
		BatchMaxBytes:       0, // BatchBudgetBytes
		ManifestPartBatches: 1000,

		Overlap:   time.Minute,
		MaxWindow: 0,

		ArchiveRetentionDays: 30,

		// A compare child holds one partition of both indexes (about
		// 660 MiB per million resources, docs/RECONCILE.md).
		Reconcile:           Function{Timeout: 240 * time.Second, MemoryMB: 1024},
		ReconcileEvery:      24 * time.Hour,
		ReconcilePartitions: 16,
		ReconcileHour:       3,
		ReconcileTimeZone:   "UTC",

		DeliveredExpiryDays:    35,
		ReconcileExpiryDays:    30,
		WindowDeletes:          true,
		FastPathPayload:        "full-resource",
		FastPathBatchingWindow: 0,
		FastPathFunction:       Function{Timeout: 60 * time.Second, MemoryMB: 512},
		FastPathSetupFunction:  Function{Timeout: 120 * time.Second, MemoryMB: 256},
		CheckDatastoreFunction: Function{Timeout: 30 * time.Second, MemoryMB: 128},
	}
}

// FastPathCheckEvery is how often a schedule invokes the fast-path-setup
// Lambda to check the pipeline's Subscription between deploys
// (subscription.CheckEvent: repair it, report FastPathSubscriptionInactive).
// HealthLake activates a new Subscription 5 to 10 minutes after it is
// created: its alarm waits three checks.
const FastPathCheckEvery = 10 * time.Minute

// FastPathBatchSize is the fast-path queue mapping's BatchSize with a
// batching window: an invocation takes up to 100 notifications, gathered
// for at most Config.FastPathBatchingWindow (Config.FastPathBatch).
const FastPathBatchSize = 100

// FastPathBatch is the fast-path queue mapping's BatchSize: FastPathBatchSize
// with a batching window, 10 without one (Lambda takes more than 10 only
// with a window of at least a second). The CDK app deploys it; cdc-local's
// mapping (local/esm) runs with it.
func (c Config) FastPathBatch() int {
	if c.FastPathBatchingWindow == 0 {
		return 10
	}
	return FastPathBatchSize
}

// FastPathReportEvery is how often a fast-path execution environment
// reports its invocations' summed counts (one log line and one EMF record:
// internal/fastpath Config.ReportEvery); the cost model uses it too.
const FastPathReportEvery = 10 * time.Second

// FastPathMaxConcurrency is the fast-path queue mapping's
// MaximumConcurrency: the Lambda publishes at one prepare-change
// invocation's PutEvents rate, so MapMaxConcurrency invocations together
// publish at most the pipeline's share, as the Map's children do; within
// SQS mappings' 2–1000.
func (c Config) FastPathMaxConcurrency() int { return min(max(c.MapMaxConcurrency, 2), 1000) }

// ExportQueueMaxConcurrency is the MaximumConcurrency of the start and
// re-check queues' mappings (start-export, check-export): SQS mappings'
// least, 2. A run has one message on either queue at a time; two let a
// second run's message, or a redelivered one, go beside it.
const ExportQueueMaxConcurrency = 2

// ReservedConcurrencyOf is the named Lambda's reserved concurrency, 0 (none)
// unless ReservedConcurrency is set: prepare-change and reconcile at
// MapMaxConcurrency (the Map runs that many; the run lock keeps the two
// apart); start-export and check-export one above their queue mappings'
// maximum concurrency (2), so a mapping is never throttled into its
// dead-letter queue; run-lock a few overlapping executions (a throttled
// call is retried by the state machine); the fast-path Lambda its queue
// mapping's MaximumConcurrency (FastPathMaxConcurrency: the mapping never
// asks for more), the custom resources' one each (CloudFormation invokes
// them once per stack operation).
func (c Config) ReservedConcurrencyOf(name string) int {
	if !c.ReservedConcurrency {
		return 0
	}
	switch name {
	case PrepareChange, Reconcile:
		return c.MapMaxConcurrency
	case RunLock:
		return 5
	case StartExport, CheckExport:
		return ExportQueueMaxConcurrency + 1
	case FastPath:
		return c.FastPathMaxConcurrency()
	case FastPathSetup, CheckDatastore:
		return 1
	}
	return 0
}

// ReservedConcurrencyTotal is what the stack's Lambdas reserve together
// with ReservedConcurrency on (32 with the defaults; 43 with FastPath too),
// whether or not it is on; the account's concurrency quota must be at least
// this plus MinUnreservedConcurrency.
func (c Config) ReservedConcurrencyTotal() int {
	on := c
	on.ReservedConcurrency = true
	names := append(Lambdas(), CheckDatastore, Reconcile)
	if c.FastPath {
		names = append(names, FastPath, FastPathSetup)
	}
	n := 0
	for _, name := range names {
		n += on.ReservedConcurrencyOf(name)
	}
	return n
}

// ReconcileCron is the reconciliation's EventBridge Scheduler expression,
// evaluated in ReconcileTimeZone: at minute 0 of ReconcileHour every day,
// or, for a ReconcileEvery of fewer hours (a divisor of 24), of every hour
// that is ReconcileHour plus a multiple of it. Validate checks the values.
func (c Config) ReconcileCron() string {
	every := int(c.ReconcileEvery / time.Hour)
	hours := strconv.Itoa(c.ReconcileHour)
	switch {
	case every == 1:
		hours = "*"
	case every > 1 && every < 24:
		hours = strconv.Itoa(c.ReconcileHour%every) + "/" + strconv.Itoa(every)
	}
	return "cron(0 " + hours + " * * ? *)"
}

// ReconcileRetentionMargin is added to two ReconcileEvery intervals in
// MinReconcileRetentionDays: a reconciliation runs for up to RunTimeout
// (its export, like a run's), and reads delivered objects from
// DeliveredMargin (1 h, internal/reconcile) before the previous one started.
func (c Config) ReconcileRetentionMargin() time.Duration { return c.RunTimeout + time.Hour }

// MinReconcileRetentionDays is the shortest expiry of delivered/ and
// reconcile/ that keeps what a reconciliation reads when the one before it
// failed or was skipped: two intervals plus ReconcileRetentionMargin,
// rounded up to whole days (4 with the defaults).
func (c Config) MinReconcileRetentionDays() int {
	return days(2*c.ReconcileEvery + c.ReconcileRetentionMargin())
}

// ReconcileRetentionSlackDays is how many days before the delivered
// objects it is combined with a reconciliation's index expires at the
// least: its objects are written up to ReconcileRetentionMargin after the
// oldest delivered object the next reconciliation reads.
func (c Config) ReconcileRetentionSlackDays() int { return days(c.ReconcileRetentionMargin()) }

// days is d in whole days, rounded up.
func days(d time.Duration) int {
	return int(math.Ceil(d.Hours() / 24))
}

// Function returns the named Lambda's timeout and memory.
func (c Config) Function(name string) (Function, bool) {
	switch name {
	case StartExport:
		return c.StartExport, true
	case CheckExport:
		return c.CheckExport, true
	case PrepareChange:
		return c.PrepareChange, true
	case RunLock:
		return c.RunLock, true
	case Reconcile:
		return c.Reconcile, true
	case FastPath:
		return c.FastPathFunction, true
	case FastPathSetup:
		return c.FastPathSetupFunction, true
	case CheckDatastore:
		return c.CheckDatastoreFunction, true
	}
	return Function{}, false
}

// Lambdas lists the four Lambda names.
func Lambdas() []string { return []string{StartExport, CheckExport, PrepareChange, RunLock} }

// VisibilityTimeout is the visibility timeout of a queue consumed by fn.
func VisibilityTimeout(fn Function) time.Duration { return VisibilityFactor * fn.Timeout }

// FastPathVisibility is the fast-path queue's visibility timeout: six
// times the fast-path function's timeout plus the mapping's batching
// window, as Lambda's guide asks of a queue whose mapping has a window
// ("Using Lambda with Amazon SQS").
func (c Config) FastPathVisibility() time.Duration {
	return VisibilityTimeout(c.FastPathFunction) + c.FastPathBatchingWindow
}

// StartVisibility is the start queue's visibility timeout (consumer start-export).
func (c Config) StartVisibility() time.Duration { return VisibilityTimeout(c.StartExport) }

// RecheckVisibility is the re-check queue's visibility timeout (consumer check-export).
func (c Config) RecheckVisibility() time.Duration { return VisibilityTimeout(c.CheckExport) }

// LongestHeartbeatGap is the longest time between two heartbeats of a
// healthy export wait in which one check (or the start) fails and is
// retried: check-export heartbeats at the start of every check, so after a
// heartbeat the check runs up to its timeout, its next message waits up to
// the re-check cap, and when that check fails before heartbeating the
// message reappears only after the visibility timeout. The start path
// (start-export retried after the start queue's visibility timeout, then
// the first check) is bounded the same way.
func (c Config) LongestHeartbeatGap() time.Duration {
	recheck := c.CheckExport.Timeout + c.RecheckCap + c.RecheckVisibility()
	first := c.StartExport.Timeout + c.RecheckCap + c.RecheckVisibility()
	start := c.StartVisibility() + c.StartExport.Timeout
	return max(recheck, first, start)
}

// HeartbeatSeconds is the export wait's heartbeat: the override when set,
// else LongestHeartbeatGap + HeartbeatMargin.
func (c Config) HeartbeatSeconds() time.Duration {
	if c.Heartbeat > 0 {
		return c.Heartbeat
	}
	return c.LongestHeartbeatGap() + c.HeartbeatMargin
}

// Lease is the run-lock lease (run-lock's CDC_LOCK_LEASE).
func (c Config) Lease() time.Duration { return c.RunTimeout + LeaseMargin }

// PutEventsRate is the PutEvents requests per second one prepare-change
// invocation may send, so that MapMaxConcurrency of them together stay
// within PutEventsShare of the account quota (CDC_PUTEVENTS_RATE).
func (c Config) PutEventsRate() float64 {
	if c.MapMaxConcurrency <= 0 {
		return 0
	}
	return c.PutEventsQuota * c.PutEventsShare / float64(c.MapMaxConcurrency)
}

// MinAvgLineBytes is the smallest average exported line the batch budget
// assumes: smaller lines mean more events per byte (the Synthea sample
// averages 1.46 KB; a minimal resource is a few hundred bytes).
const MinAvgLineBytes = 512

// BatchBudgetBytes is the most export bytes one prepare-change invocation
// can publish before its internal deadline: PutEventsRate requests of 10
// entries a second over the timeout less DeadlineMargin, half of it kept for
// retries and throttling, each event at least MinAvgLineBytes. A batch above
// it could never finish: every retry would hit the deadline, and the run
// would fail the same way each time (0 with no rate limit: unbounded).
func (c Config) BatchBudgetBytes() int64 {
	rate := c.PutEventsRate()
	if rate <= 0 {
		return 0
	}
	secs := (c.PrepareChange.Timeout - c.DeadlineMargin).Seconds()
	return int64(rate * 10 * secs / 2 * MinAvgLineBytes)
}

// BatchBytes is the batch bound check-export applies (CDC_BATCH_MAX_BYTES):
// BatchMaxBytes, or BatchBudgetBytes when it is 0.
func (c Config) BatchBytes() int64 {
	if c.BatchMaxBytes > 0 {
		return c.BatchMaxBytes
	}
	if b := c.BatchBudgetBytes(); b > 0 {
		return b
	}
	return 128 << 20
}

// Seconds returns d in whole seconds, rounded up (CloudFormation and the
// States Language take integers).
func Seconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// Validate reports every problem of the configuration, or nil.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if w := c.FastPathBatchingWindow; w < 0 || w > 30*time.Second || w%time.Second != 0 {
		bad("FastPathBatchingWindow %s: want whole seconds from 0s (no window, batches of up to 10) to 30s (well below the 2-minute safety lag)", w)
	}
	if c.FastPathPayload != "full-resource" && c.FastPathPayload != "id-only" {
		bad("FastPathPayload %q: want full-resource or id-only (the payloads HealthLake documents)", c.FastPathPayload)
	}
	switch {
	case c.FastPathBusKey != "" && !c.FastPath:
		bad("FastPathBusKey is set but FastPath is off: it encrypts the fast path's notification bus only")
	case c.FastPathBusKey != "" && !kmsKeyARN.MatchString(c.FastPathBusKey):
		bad("FastPathBusKey %q: want a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), the data store's key itself, not an alias", c.FastPathBusKey)
	case c.FastPathBusKey != "" && c.DatastoreKey != "" && c.FastPathBusKey != c.DatastoreKey:
		bad("FastPathBusKey %q differs from DatastoreKey %q: HealthLake delivers only to a bus on the data store's own key (set DatastoreKey alone)", c.FastPathBusKey, c.DatastoreKey)
	}
	if c.DatastoreKey != "" && !kmsKeyARN.MatchString(c.DatastoreKey) {
		bad("DatastoreKey %q: want a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>), the data store's key itself, not an alias (aws healthlake describe-fhir-datastore: SseConfiguration.KmsEncryptionConfig.KmsKeyId)", c.DatastoreKey)
	}
	for _, name := range Lambdas() {
		fn, _ := c.Function(name)
		switch {
		case fn.Timeout < time.Second || fn.Timeout > MaxLambdaTimeout:
			bad("%s timeout %s: want 1 s to %s", name, fn.Timeout, MaxLambdaTimeout)
		case fn.Timeout%time.Second != 0:
			bad("%s timeout %s: want whole seconds", name, fn.Timeout)
		}
		if fn.MemoryMB < 128 || fn.MemoryMB > 10240 {
			bad("%s memory %d MB: want 128 to 10240", name, fn.MemoryMB)
		}
		if v := VisibilityTimeout(fn); v > MaxVisibilityTimeout {
			bad("%s: visibility timeout %s of its queue exceeds SQS's %s", name, v, MaxVisibilityTimeout)
		}
	}
	if c.PrepareChange.Timeout >= ExpressLimit {
		bad("prepare-change timeout %s: want below %s, the limit of the Distributed Map's EXPRESS children", c.PrepareChange.Timeout, ExpressLimit)
	}
	if c.DeadlineMargin <= 0 || c.DeadlineMargin >= c.PrepareChange.Timeout {
		bad("deadline margin %s: want above 0 and below the prepare-change timeout %s", c.DeadlineMargin, c.PrepareChange.Timeout)
	}
	if c.MaxReceiveCount < MinReceiveCount || c.MaxReceiveCount > MaxReceiveCountLimit {
		bad("maxReceiveCount %d: want %d to %d", c.MaxReceiveCount, MinReceiveCount, MaxReceiveCountLimit)
	}
	if c.RecheckCap < time.Second || c.RecheckCap > MaxSQSDelay {
		bad("re-check cap %s: want 1 s to %s (SQS DelaySeconds)", c.RecheckCap, MaxSQSDelay)
	}
	if c.HeartbeatMargin < 0 || c.Heartbeat < 0 {
		bad("heartbeat %s and margin %s: want no negative value", c.Heartbeat, c.HeartbeatMargin)
	}
	hb, gap := c.HeartbeatSeconds(), c.LongestHeartbeatGap()
	if hb <= gap {
		bad("HeartbeatSeconds %d: a retried check may heartbeat only after %d s (re-check cap %s + check-export timeout %s + re-check visibility timeout %s)",
			Seconds(hb), Seconds(gap), c.RecheckCap, c.CheckExport.Timeout, c.RecheckVisibility())
	}
	if hb >= c.ExportTimeout {
		bad("HeartbeatSeconds %d: want below the export wait's TimeoutSeconds %d", Seconds(hb), Seconds(c.ExportTimeout))
	}
	if c.ExportTimeout >= c.RunTimeout {
		bad("export wait %s: want below the run timeout %s, or the execution times out first", c.ExportTimeout, c.RunTimeout)
	}
	if c.RunTimeout <= 0 || c.RunTimeout > MaxStandardDuration {
		bad("run timeout %s: want above 0 and at most %s (STANDARD executions)", c.RunTimeout, MaxStandardDuration)
	}
	for what, d := range map[string]time.Duration{"export wait": c.ExportTimeout, "run timeout": c.RunTimeout, "heartbeat": hb} {
		if d%time.Second != 0 {
			bad("%s %s: want whole seconds", what, d)
		}
	}
	if c.MapMaxConcurrency < 1 || c.MapMaxConcurrency > MaxMapConcurrency {
		bad("Map MaxConcurrency %d: want 1 to %d", c.MapMaxConcurrency, MaxMapConcurrency)
	}
	if !(c.PutEventsQuota > 0) || math.IsInf(c.PutEventsQuota, 0) {
		bad("PutEvents quota %v: want a positive number of requests per second", c.PutEventsQuota)
	}
	if !(c.PutEventsShare > 0 && c.PutEventsShare <= 1) {
		bad("PutEvents share %v: want above 0 and at most 1", c.PutEventsShare)
	}
	if !(c.ReconcileReadRate == 0 || c.ReconcileReadRate >= MinReconcileReadRate) || math.IsInf(c.ReconcileReadRate, 0) {
		bad("reconcile read rate %v: want 0 (unpaced) or at least %v requests per second (the plan step reads every type's history at it within its timeout)",
			c.ReconcileReadRate, MinReconcileReadRate)
	}
	if c.BatchMaxFiles < 1 || c.BatchMaxBytes < 0 || c.ManifestPartBatches < 1 {
		bad("batch limits %d files, %d bytes, %d batches per manifest part: want files and batches at least 1, bytes 0 (derived) or more",
			c.BatchMaxFiles, c.BatchMaxBytes, c.ManifestPartBatches)
	}
	if b := c.BatchBudgetBytes(); b > 0 && c.BatchMaxBytes > b {
		bad("batch of %d bytes: one prepare-change invocation publishes at most about %d bytes before its deadline at %.1f PutEvents requests/s; a larger batch would fail on every retry (lower BatchMaxBytes, or 0 to derive it)",
			c.BatchMaxBytes, b, c.PutEventsRate())
	}
	if c.Overlap < 0 || c.MaxWindow < 0 {
		bad("overlap %s and max window %s: want no negative value", c.Overlap, c.MaxWindow)
	}
	switch r := c.Reconcile; {
	case r.Timeout < time.Second || r.Timeout >= ExpressLimit || r.Timeout%time.Second != 0:
		bad("reconcile timeout %s: want whole seconds from 1 s to below %s, the limit of the Distributed Map's EXPRESS children", r.Timeout, ExpressLimit)
	case r.MemoryMB < 128 || r.MemoryMB > 10240:
		bad("reconcile memory %d MB: want 128 to 10240", r.MemoryMB)
	}
	if c.ReconcileEvery < time.Hour || c.ReconcileEvery > 24*time.Hour || c.ReconcileEvery%time.Hour != 0 || (24*time.Hour)%c.ReconcileEvery != 0 {
		bad("ReconcileEvery %s: want whole hours that divide a day (1h, 2h, 3h, 4h, 6h, 8h, 12h or 24h): the schedule is a cron at ReconcileHour", c.ReconcileEvery)
	}
	if c.ReconcileHour < 0 || c.ReconcileHour > 23 {
		bad("ReconcileHour %d: want 0 to 23", c.ReconcileHour)
	}
	if err := checkTimeZone(c.ReconcileTimeZone); err != nil {
		bad("ReconcileTimeZone %q: %v", c.ReconcileTimeZone, err)
	}
	if min := c.MinReconcileRetentionDays(); c.DeliveredExpiryDays < min || c.DeliveredExpiryDays > MaxExpiryDays {
		bad("DeliveredExpiryDays %d: want %d to %d: the reconciliation reads the delivered objects written since the previous one started, and after a failed one since the one before (2 × ReconcileEvery %s + RunTimeout %s + 1 h)",
			c.DeliveredExpiryDays, min, MaxExpiryDays, c.ReconcileEvery, c.RunTimeout)
	}
	if min := c.MinReconcileRetentionDays(); c.ReconcileExpiryDays < min || c.ReconcileExpiryDays > MaxExpiryDays {
		bad("ReconcileExpiryDays %d: want %d to %d: the reconciliation reads the previous one's index under reconcile/, and after a failed one the index of the one before (2 × ReconcileEvery %s + RunTimeout %s + 1 h)",
			c.ReconcileExpiryDays, min, MaxExpiryDays, c.ReconcileEvery, c.RunTimeout)
	} else if slack := c.ReconcileRetentionSlackDays(); c.ReconcileExpiryDays+slack > c.DeliveredExpiryDays {
		bad("ReconcileExpiryDays %d: want at most DeliveredExpiryDays %d − %d, so that a reconciliation's index expires before the delivered objects it is combined with (a reconciliation after a longer gap then fails instead of missing deletes)",
			c.ReconcileExpiryDays, c.DeliveredExpiryDays, slack)
	}
	if c.ReconcilePartitions < 1 || c.ReconcilePartitions > MaxReconcilePartitions {
		bad("reconcile partitions %d: want 1 to %d", c.ReconcilePartitions, MaxReconcilePartitions)
	}
	if c.ArchiveRetentionDays < 1 {
		bad("archive retention %d days: want at least 1 (the archive never keeps events forever by default)", c.ArchiveRetentionDays)
	}
	if len(errs) > 0 {
		return fmt.Errorf("stack configuration: %w", errors.Join(errs...))
	}
	return nil
}

// checkTimeZone refuses a zone EventBridge Scheduler would not take as
// ScheduleExpressionTimezone: empty, "Local" (the synthesizing machine's
// zone), or a name the IANA database lacks. The CDK app embeds the database
// (time/tzdata), so the answer does not depend on the machine.
func checkTimeZone(name string) error {
	if name == "" || name == "Local" {
		return errors.New("want an IANA time zone name such as UTC or Europe/Berlin")
	}
	if _, err := time.LoadLocation(name); err != nil {
		return fmt.Errorf("not an IANA time zone name (%v)", err)
	}
	return nil
}
