// Package stack builds the whole healthlake-cdc pipeline in one process on
// one port — the embedded default behind cmd/cdc-local and the end-to-end
// tests.
//
// Start brings up localaws (S3 = gofakes3, SQS = goaws, DynamoDB = minidyn),
// mounts the project's EventBridge, Step Functions and HealthLake emulators
// on the same gateway, creates the artifact bucket, the start and re-check
// queues with their dead-letter queues, the RUN table and the event bus,
// registers the four Lambda handlers in an in-process registry (built from
// their packages' constructors with real SDK clients pointed at the local
// endpoint), connects the SQS event-source mappings (start queue →
// start-export, re-check queue → check-export), creates the state machine
// from statemachine/cdc.asl.json with local substitutions, and seeds the
// HealthLake data store. RunOnce runs one window; Run keeps a schedule.
package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/esm"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/faults"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// Defaults of Options.
const (
	DefaultAddr        = "127.0.0.1:4566"
	DefaultEvery       = 5 * time.Minute
	DefaultDatastoreID = "local"
	DefaultName        = "healthlake-cdc"
	DefaultBus         = "healthlake-cdc"
	// DefaultSampleSize is how many generated resources seed the data store
	// when no --seed directory is given.
	DefaultSampleSize = 60
)

// Function names of the four Lambdas.
const (
	FnStartExport   = "start-export"
	FnCheckExport   = "check-export"
	FnPrepareChange = "prepare-change"
	FnRunLock       = "run-lock"
)

// Options configure a stack. The zero value is cdc-local's default.
type Options struct {
	// Addr is the listen address (default 127.0.0.1:4566; ":0"-style
	// addresses pick a free port).
	Addr string
	// Name prefixes the queues, bucket, table and state machine. goaws keeps
	// queues process-wide, so tests give every stack its own name.
	Name string
	// DatastoreID is the HealthLake data store (default "local").
	DatastoreID string
	// SeedDir, when set, loads every *.ndjson file in it; otherwise
	// SampleSize generated resources (GenSeed) are loaded. SampleSize < 0
	// loads nothing.
	SeedDir    string
	SampleSize int
	GenSeed    int64
	// Every is the schedule (default 5 min).
	Every time.Duration
	// SafetyLag is the window's safety lag (default 0 locally).
	SafetyLag time.Duration
	// Sink receives every bus event; nil discards them.
	Sink fakeeventbridge.Sink
	// FaultRate and FaultSeed configure the fault plan (0: no faults).
	FaultRate float64
	FaultSeed uint64
	// ReportPath is the JSON report rewritten after every window ("" keeps
	// it in memory).
	ReportPath string
	// StateDir persists the data store (every version, as it is) and the
	// checkpoint across restarts; see Persist.
	StateDir string
	// TimeScale scales the state machine's waits (heartbeats, timeouts,
	// retries); 0 means real time.
	TimeScale float64
	// ExportDelay is how long an export job stays in each running status
	// (default 0: jobs move on at the next request).
	ExportDelay time.Duration
	// ExportStartup and ExportPerMB are the HealthLake emulator's export
	// duration model (start-up + per MiB exported), VisibilityLag how long a
	// write takes to become visible to exports (docs/LOCAL.md). 0 turns each
	// off.
	ExportStartup, ExportPerMB, VisibilityLag time.Duration
	// HistoryLag is how long a new version stays out of HealthLake's
	// eventually consistent history reads (the pipeline reads history with
	// strong consistency); HistoryOptOut the resource types with no
	// history; EraseDelay and BulkDeleteDelay how long an $erase or a
	// $bulk-delete job waits in each of SUBMITTED and IN_PROGRESS. All
	// modelled (docs/LOCAL.md); zero values model none.
	HistoryLag                  time.Duration
	HistoryOptOut               []string
	EraseDelay, BulkDeleteDelay time.Duration
	// HealthLakeQuotas chooses the HealthLake emulator's request-rate
	// quotas (fakehealthlake.Quotas): QuotasCurrent applies those of a data
	// store created now, QuotasLegacy makes the data store one created
	// before 21 August 2023, with that era's lower read, write and Bundle
	// rates, QuotasOff (or "") applies none. cdc-local
	// (--healthlake-quotas) and the simulation default to QuotasCurrent;
	// stack tests leave it off, as they leave the export model off: they
	// run windows back to back, far faster than the 5-minute schedule
	// those per-second quotas would meet, and opt in where a quota is what
	// they test.
	HealthLakeQuotas string
	// PutEventsQuota is the PutEvents requests per second the EventBridge
	// emulator allows the account in its Region (a token bucket; throttled
	// requests get ThrottlingException). 0: the deployed configuration's
	// quota (stackconfig); < 0: no quota.
	PutEventsQuota float64
	// RecheckDelay is the re-check queue delay check-export uses (default 1 s
	// locally).
	RecheckDelay time.Duration
	// VisibilityTimeout of the queues and their event-source mappings
	// (default: the deployed one, 6 × the consumer's timeout, from
	// internal/stackconfig, which each mapping holds to its function's
	// timeout as Lambda does; set, the functions keep their deployed
	// timeouts and that check is left out; with FastPath longer than the
	// fast-path mapping's batching window, a second) and MaxReceiveCount
	// before a message goes to its DLQ (default: the deployed one).
	VisibilityTimeout time.Duration
	MaxReceiveCount   int
	// ResourcesPerFile splits export files (default HealthLake's 5000).
	ResourcesPerFile int
	// NoJobEventRule leaves out the rule that routes HealthLake's job events
	// to the re-check queue, so only polling notices an export's end (tests
	// of the polling path and its dead-letter queue).
	NoJobEventRule bool
	// RecordEvents makes Delivered keep whole events (tests); by default it
	// keeps only eventIds.
	RecordEvents bool
	// Definition replaces statemachine/cdc.asl.json (with its ${Name}
	// placeholders), for tests of other definitions; nil uses the file CDK
	// deploys.
	Definition []byte
	// Logger receives ids, counts and durations only; default discards.
	Logger *slog.Logger
	// MetricsOutput receives the Lambdas' EMF metric lines (stdout in AWS);
	// default discards. Totals are kept either way (Stack.Metrics).
	MetricsOutput io.Writer
	// Now is the clock; default time.Now.
	Now func() time.Time
	// IAMOff relaxes IAM: every call is allowed and what the stack's
	// statements would deny is only counted (cdc-local --iam=off). By
	// default every principal's calls are enforced (docs/LOCAL.md, "IAM").
	IAMOff bool
	// LambdaEnv overrides or adds variables of the Lambdas' environment
	// (tests and benchmarks, e.g. a small CDC_MANIFEST_PART_BATCHES).
	LambdaEnv map[string]string
	// InMemory serves the gateway over in-memory pipes, not TCP (Addr is
	// ignored): the stack can then run inside a testing/synctest bubble on
	// its fake clock (local/sim, cdc-local --simulate).
	InMemory bool
	// ReconcileEvery is how often Run starts a reconciliation (0: the
	// deployed schedule, stackconfig ReconcileEvery, daily; < 0: none).
	// Stack.Reconcile starts one on demand either way.
	ReconcileEvery time.Duration
	// SpillDir, when set, keeps the bulk of what the emulators store on
	// disk in temporary files in this directory (removed by Close): S3
	// bodies of 64 KiB or more, the bus archive's events. A simulation of
	// millions of resources would otherwise not fit in memory.
	SpillDir string
	// TrustedLoads skips the golang-fhir-models validation of resources
	// loaded through the data store's Go API (Datastore.Load): for the
	// simulator's writer, whose generator output internal/gen's tests
	// validate. FHIR REST writes are validated either way.
	TrustedLoads bool
	// Latency is the per-call latency model (docs/LOCAL.md, "Latency
	// model"); nil or Off: none (tests). cdc-local and the simulator set it.
	Latency *localaws.LatencyConfig
	// DatastoreKey, when set, is the ARN of the customer-managed KMS key
	// the data store is encrypted with (the DatastoreKey setting): the
	// emulator reports it, every principal that calls HealthLake has
	// UseDatastoreKey, and IAM checks each HealthLake call's use of the key
	// (docs/LOCAL.md, "IAM"). Empty: an AWS owned key, no KMS check.
	DatastoreKey string
	// FastPath deploys the Subscriptions fast path (docs/FASTPATH.md): the
	// notification bus, its rule and queue, the fast-path Lambda, and a
	// SubscriptionTopic and Subscription on FastPathTypes (default: the
	// generator's types) with FastPathPayload (default full-resource).
	// Subscriptions is the HealthLake emulator's subscription model
	// (activation delay, notification delay, drops, duplicates; all
	// modelled, docs/LOCAL.md).
	FastPath        bool
	FastPathPayload string
	FastPathTypes   []string
	Subscriptions   fakehealthlake.SubscriptionOptions
	// FastPathCheckEvery is how often RunWith checks the Subscription
	// (CheckSubscription): 0 takes the deployed schedule,
	// stackconfig.FastPathCheckEvery; < 0 checks never.
	FastPathCheckEvery time.Duration
	// FastPathBatchingWindow is the fast-path mapping's batching window
	// (the FastPathBatchingWindow setting); 0 takes the deployed default,
	// a negative one is none (the setting's 0s: batches of up to 10).
	FastPathBatchingWindow time.Duration
	// FastPathLowTrafficWait is how long the fast-path mapping, when it has
	// a batching window, holds a batch whose first message came after an
	// empty long poll (esm.Config.LowTrafficWait; modelled, docs/LOCAL.md):
	// 0 takes Lambda's longest, esm.VeryLowTrafficWait (20 s); a negative
	// one does not model it.
	FastPathLowTrafficWait time.Duration
}

func (o *Options) defaults() {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.DatastoreID == "" {
		o.DatastoreID = DefaultDatastoreID
	}
	if o.SampleSize == 0 {
		o.SampleSize = DefaultSampleSize
	}
	if o.GenSeed == 0 {
		o.GenSeed = 1
	}
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.RecheckDelay <= 0 {
		o.RecheckDelay = time.Second
	}
	if o.MaxReceiveCount <= 0 {
		o.MaxReceiveCount = stackconfig.Default().MaxReceiveCount
	}
	if o.MetricsOutput == nil {
		o.MetricsOutput = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Resources names what the stack created.
type Resources struct {
	// Bucket is the artifact bucket, Table the RUN table, Bus the event
	// bus, DatastoreID the HealthLake data store.
	Bucket, Table, Bus, DatastoreID string
	// StartQueueURL and RecheckQueueURL feed start-export and check-export;
	// the DLQ URLs are their dead-letter queues.
	StartQueueURL, StartDLQURL     string
	RecheckQueueURL, RecheckDLQURL string
	// StateMachineARN is the pipeline's state machine,
	// ReconcileStateMachineARN the reconciliation's.
	StateMachineARN          string
	ReconcileStateMachineARN string
	// HealthLakeEndpoint is the base URL of the HealthLake emulator (the
	// stack's endpoint).
	HealthLakeEndpoint string
	// FastPathQueueURL and FastPathDLQURL feed the fast-path Lambda (only
	// with Options.FastPath).
	FastPathQueueURL, FastPathDLQURL string
}

// Stack is the running pipeline.
type Stack struct {
	opts Options
	log  *slog.Logger

	// Env is the local AWS endpoint; Config the SDK configuration every
	// handler uses.
	Env    *localaws.Env
	Config aws.Config

	// EventBridge, SFN and HealthLake are the project's emulators mounted
	// on the gateway.
	EventBridge *fakeeventbridge.Emulator
	SFN         *fakesfn.Emulator
	HealthLake  *fakehealthlake.Emulator
	// Lambdas holds the four in-process functions.
	Lambdas *lambdas.Registry
	// Faults is the fault plan (rate 0 without --fault-rate).
	Faults *faults.Plan
	// Report is the run report, rewritten after every window.
	Report *report.Recorder
	// Res names the created resources.
	Res Resources

	// Delivered records every event the bus delivered (besides the sink):
	// eventIds, or whole events with Options.RecordEvents.
	Delivered *sink.Recorder
	// IAM enforces every principal's statements (internal/iampolicy) on
	// its calls and counts what it allowed and denied.
	IAM *iam.Authorizer
	// Metrics is the recorder every Lambda emits its EMF metrics through;
	// its totals are in the report and served at /_local/metrics.
	Metrics *metrics.Recorder

	// standardTransitions counts the STANDARD executions' state transitions;
	// expressRuns the Distributed Map's EXPRESS child executions (cost model).
	standardTransitions atomic.Int64
	expressMu           sync.Mutex
	expressRuns         map[string]bool

	s3c      *s3.Client
	sqsc     *sqs.Client
	ddb      *dynamodb.Client
	sfnc     *sfnapi.Client
	esms     []*esm.Mapping
	esmNames []string
	seeded   int
	// seedSkipped counts seed lines not loaded (guarded by mu).
	seedSkipped int

	started         time.Time
	startCheckpoint time.Time
	store           *runlock.Store
	// restoreFrom is the state directory's snapshot the data store is
	// restored from instead of seeded ("" when there is none).
	restoreFrom string
	httpc       *http.Client
	clock       *seedClock

	// own names the executions the stack starts itself; watch, while a
	// RunWith goes on, receives the others (handstarted.go).
	own   sync.Map
	watch atomic.Pointer[func(handStarted)]

	mu          sync.Mutex
	checkpoints []time.Time
	backwards   bool
	// jobRuns is the run window of each export job a window started, for
	// Exported's split by cause; covered the latest until a run committed.
	jobRuns map[string]jobRun
	covered time.Time
	closers []func()
	closed  bool
}

// LocalConfig returns cfg with the retry behaviour the local stack uses: more
// attempts than the SDK's default and short back-offs, without the retry
// quota (faults would drain it), so that injected faults are retried as
// AWS's SDK would and still quickly.
func LocalConfig(cfg aws.Config) aws.Config {
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 6
			o.MaxBackoff = 200 * time.Millisecond
			o.RateLimiter = ratelimit.None
		})
	}
	cfg.RetryMaxAttempts = 0
	cfg.HTTPClient = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
	}}
	return cfg
}

// Start builds and starts the stack. Close releases it.
func Start(ctx context.Context, opts Options) (st *Stack, err error) {
	opts.defaults()
	if opts.SafetyLag < 0 {
		return nil, errors.New("stack: negative safety lag")
	}
	if err := ValidHealthLakeQuotas(opts.HealthLakeQuotas); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	plan, err := faults.New(opts.FaultRate, opts.FaultSeed)
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	env, err := localaws.Start(localaws.Options{Addr: opts.Addr, InMemory: opts.InMemory, SpillDir: opts.SpillDir})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s := &Stack{
		opts:        opts,
		log:         opts.Logger,
		Env:         env,
		Config:      LocalConfig(env.Config()),
		Faults:      plan,
		Report:      report.New(opts.ReportPath, opts.Now()),
		Delivered:   sink.NewIDRecorder(),
		started:     opts.Now(),
		Metrics:     metrics.New(opts.MetricsOutput, metrics.DefaultPipeline),
		expressRuns: map[string]bool{},
		httpc:       &http.Client{Timeout: 60 * time.Second},
	}
	s.clock = &seedClock{now: opts.Now}
	if env.InMemory() {
		// Every client must dial the in-memory gateway.
		s.Config.HTTPClient = env.HTTPClient()
		s.httpc = env.HTTPClient()
	}
	if opts.RecordEvents {
		s.Delivered = sink.NewRecorder()
	}
	s.closers = append(s.closers, func() { _ = env.Close() })
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.s3c = awsclient.NewS3(s.Config)
	s.sqsc = sqs.NewFromConfig(s.Config)
	s.ddb = dynamodb.NewFromConfig(s.Config)
	s.sfnc = sfnapi.NewFromConfig(s.Config)
	s.Lambdas = lambdas.New(env.Region, env.AccountID)
	s.Res = Resources{
		Bucket: opts.Name + "-artifacts", Table: opts.Name + "-runs", Bus: DefaultBus,
		DatastoreID: opts.DatastoreID, HealthLakeEndpoint: env.URL,
	}
	s.Report.Update(func(r *report.Report) { r.Endpoint = env.URL })

	if err := s.loadState(); err != nil {
		return nil, err
	}
	if err := s.setupIAM(); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if err := s.startEmulators(); err != nil {
		return nil, err
	}
	if err := s.createResources(ctx); err != nil {
		return nil, err
	}
	if err := s.createEventRules(ctx); err != nil {
		return nil, err
	}
	if err := s.createFastPath(ctx); err != nil {
		return nil, err
	}
	if err := s.registerHandlers(ctx); err != nil {
		return nil, err
	}
	if err := s.registerFastPath(); err != nil {
		return nil, err
	}
	if err := s.createStateMachine(ctx); err != nil {
		return nil, err
	}
	// The custom resource's DatastoreKey property, as the CDK app sets it.
	if _, err := s.CheckDatastore(ctx, s.deployedConfig().DatastoreKeyARN()); err != nil {
		return nil, err
	}
	if err := s.ensureSubscription(ctx); err != nil {
		return nil, err
	}
	if err := s.seed(ctx); err != nil {
		return nil, err
	}
	if err := s.startMappings(ctx); err != nil {
		return nil, err
	}
	if opts.FaultRate > 0 {
		s.installFaults()
	}
	if err := s.startLatency(); err != nil {
		return nil, err
	}
	return s, nil
}

// Options returns the options in use, defaults filled in.
func (s *Stack) Options() Options { return s.opts }

// Seeded returns the number of resources loaded into the data store at start.
func (s *Stack) Seeded() int { return s.seeded }

// The values of Options.HealthLakeQuotas.
const (
	QuotasCurrent = "current"
	QuotasLegacy  = "legacy"
	QuotasOff     = "off"
)

// ValidHealthLakeQuotas reports an error for a value of
// Options.HealthLakeQuotas that is none of QuotasCurrent, QuotasLegacy,
// QuotasOff (or empty: off).
func ValidHealthLakeQuotas(v string) error {
	switch v {
	case "", QuotasCurrent, QuotasLegacy, QuotasOff:
		return nil
	}
	return fmt.Errorf("HealthLake quotas must be %s, %s or %s, not %q", QuotasCurrent, QuotasLegacy, QuotasOff, v)
}

// healthLakeQuotas are the HealthLake emulator's quota options for
// Options.HealthLakeQuotas: whether they apply, and the data store's
// creation date (zero: the clock's at start). A simulation's clock starts
// in 2000 (testing/synctest), before any data store of today's quotas — or
// one whose exports the pipeline can follow (created from 2023-06-01: the
// deploy's data store check) — existed: its data store is then dated
// fakehealthlake.LegacyBefore.
func (s *Stack) healthLakeQuotas() (on bool, created time.Time) {
	on = s.opts.HealthLakeQuotas == QuotasCurrent || s.opts.HealthLakeQuotas == QuotasLegacy
	switch {
	case s.opts.HealthLakeQuotas == QuotasLegacy:
		// Before the current quotas, after 2023-06-01 (the data store
		// check's datastore.ExportStatusFrom).
		return true, fakehealthlake.LegacyBefore.AddDate(0, -1, 0)
	case s.clock.Now().Before(fakehealthlake.LegacyBefore):
		return on, fakehealthlake.LegacyBefore
	}
	return on, time.Time{}
}

// putEventsQuota is the EventBridge emulator's PutEvents quota: the
// option, else the deployed configuration's (stackconfig); none when < 0.
func (s *Stack) putEventsQuota() float64 {
	switch q := s.opts.PutEventsQuota; {
	case q < 0:
		return 0
	case q > 0:
		return q
	}
	return stackconfig.Default().PutEventsQuota
}

// startEmulators mounts the project's emulators on the gateway.
func (s *Stack) startEmulators() error {
	env := s.Env
	// The sink first: an event the sink refused fails its entry (and is
	// retried by the publisher), so the recorder counts only delivered ones.
	var delivered sink.Tee
	if s.opts.Sink != nil {
		delivered = append(delivered, s.opts.Sink)
	}
	delivered = append(delivered, s.Delivered)
	s.EventBridge = fakeeventbridge.New(fakeeventbridge.Options{
		Region: env.Region, AccountID: env.AccountID, Buses: []string{s.Res.Bus}, Sink: delivered,
		PutEventsQuota: s.putEventsQuota(),
		ArchiveDir:     s.opts.SpillDir,
		// Rule targets are sent to through the gateway (as admin: queue
		// policies are not modelled).
		Queues: s.sqsc,
	})
	s.closers = append(s.closers, s.EventBridge.Close)
	env.Gateway.Handle(localaws.ServiceEventBridge, s.EventBridge)

	// Without a state directory there is nothing to save: no snapshot of
	// the whole data store at each export's end.
	var onExportFinish func(string, func(io.Writer) error)
	if s.opts.StateDir != "" {
		onExportFinish = s.saveSnapshot
	}
	quotas, created := s.healthLakeQuotas()
	s.HealthLake = fakehealthlake.New(fakehealthlake.Options{
		Region: env.Region, AccountID: env.AccountID,
		// HealthLake writes exports as the role the start call passed.
		S3: awsclient.NewS3(s.principalConfig(iampolicy.HealthLakeExport)), Datastores: []string{s.opts.DatastoreID},
		DatastoreKMSKeyID:  s.opts.DatastoreKey,
		ResourcesPerFile:   s.opts.ResourcesPerFile,
		Quotas:             quotas,
		DatastoreCreatedAt: created,
		ProcessingDelay:    s.opts.ExportDelay,
		ExportStartup:      s.opts.ExportStartup,
		ExportPerMB:        s.opts.ExportPerMB,
		VisibilityLag:      s.opts.VisibilityLag,
		HistoryLag:         s.opts.HistoryLag,
		HistoryOptOut:      s.opts.HistoryOptOut,
		EraseDelay:         s.opts.EraseDelay,
		BulkDeleteDelay:    s.opts.BulkDeleteDelay,
		Endpoint:           env.URL,
		OnJobEvent:         s.onJobEvent,
		OnNotification:     s.fastPathNotifier(),
		Subscriptions:      s.opts.Subscriptions,
		// Seeded resources meet the bar of a real HealthLake write.
		ValidateOnLoad: !s.opts.TrustedLoads,
		Now:            s.clock.Now,
		FaultRate:      s.Faults.Probability(faults.HealthLakeAPIError),
		Seed:           s.opts.FaultSeed + 1,
		OnExportFinish: onExportFinish,
		BodyDir:        s.opts.SpillDir,
	})
	s.closers = append(s.closers, func() { _ = s.HealthLake.Close() })
	env.Gateway.Handle(localaws.ServiceHealthLake, s.HealthLake)
	s.startHealthLakeTicker()

	// Each state machine's tasks act as its role.
	invoker, machineSQS, machineS3 := s.machineClients()
	s.SFN = fakesfn.New(fakesfn.Options{
		Region: env.Region, AccountID: env.AccountID,
		Lambda: invoker, SQS: machineSQS, S3: machineS3, TimeScale: s.opts.TimeScale,
		OnTransition: s.onTransition,
		OnStart:      s.onExecutionStart,
	})
	env.Gateway.Handle(localaws.ServiceSFN, s.SFN)
	env.Gateway.HandleLocal(LocalMetricsPath, http.HandlerFunc(s.serveMetrics))
	env.Gateway.HandleLocal(LocalConfigPath, http.HandlerFunc(s.serveConfig))
	s.closers = append(s.closers, s.SFN.Close)
	return nil
}

// installFaults plugs the fault plan into every injection point.
func (s *Stack) installFaults() {
	s.Faults.SetJobFaulter(s.HealthLake)
	s.Env.Gateway.SetFaults(s.Faults.GatewayInjector())
	s.Env.Gateway.SetBodyCuts(s.Faults.BodyCuts())
	s.Env.Gateway.SetAnswerLoss(s.Faults.AnswerLosses())
	s.EventBridge.SetEntryFault(s.Faults.EntryFault())
	s.Lambdas.SetFaults(s.Faults)
}

// Close stops the schedule's mappings, the emulators and the listener.
func (s *Stack) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	for _, m := range s.esms {
		m.Stop()
	}
	// Lambda shuts the environments down: the fast path's SIGTERM hook
	// writes what each keeps and makes its last report (lambdart.Start).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s.Lambdas.Shutdown(ctx)
	s.deleteQueues(ctx)
	cancel()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// deleteQueues deletes the stack's queues. goaws keeps queues in package
// globals (localaws.Start), so without this a closed stack's queues stay
// visible to every later stack of the process — to `cdcctl dlq`'s lookup by
// name, for one. Best effort: the process may be ending anyway.
func (s *Stack) deleteQueues(ctx context.Context) {
	if s.sqsc == nil {
		return
	}
	out, err := s.sqsc.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(s.opts.Name + "-")})
	if err != nil {
		return
	}
	for _, u := range out.QueueUrls {
		if strings.HasPrefix(u[strings.LastIndexByte(u, '/')+1:], s.opts.Name+"-") {
			_, _ = s.sqsc.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)})
		}
	}
}

// CLIEnv returns the environment variables that point the AWS CLI, the SDKs
// and cdcctl at the stack.
func (s *Stack) CLIEnv() [][2]string {
	return [][2]string{
		{"AWS_ENDPOINT_URL", s.Env.URL},
		{"AWS_ACCESS_KEY_ID", localaws.AccessKeyID},
		{"AWS_SECRET_ACCESS_KEY", localaws.SecretAccessKey},
		{"AWS_REGION", s.Env.Region},
		{"AWS_DEFAULT_REGION", s.Env.Region},
		{stackconfig.EnvTable, s.Res.Table},
		{stackconfig.EnvBucket, s.Res.Bucket},
		{stackconfig.EnvDatastoreID, s.Res.DatastoreID},
		{stackconfig.EnvHealthLakeEndpoint, s.Res.HealthLakeEndpoint},
		{"CDC_STATE_MACHINE_ARN", s.Res.StateMachineARN},
		{"CDC_RECONCILE_STATE_MACHINE_ARN", s.Res.ReconcileStateMachineARN},
		{"CDC_START_QUEUE_URL", s.Res.StartQueueURL},
		{"CDC_START_DLQ_URL", s.Res.StartDLQURL},
		{stackconfig.EnvRecheckQueueURL, s.Res.RecheckQueueURL},
		{"CDC_RECHECK_DLQ_URL", s.Res.RecheckDLQURL},
	}
}
