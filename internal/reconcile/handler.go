// Package reconcile is the reconciliation: it finds what no window can see
// — a deletion that left no history ($erase, a hard $bulk-delete, a type
// opted out of history) and a version a run failed to deliver — without the
// run lock and without an export. It folds the delivered index partition by
// partition and counts its live versions by type and hour, compares those
// counts with HealthLake's (`_summary=count` over `_lastUpdated` ranges),
// bisects only the ranges whose counts differ, lists the store's resources
// in the ranges that still differ, and compares them with the delivered
// index there: deletes (delivered, no longer in the store, confirmed by the
// history and a read) and repairs (in the store, due, never delivered).
// Files: handler.go (types, dispatch), plan.go, fold.go, count.go, list.go,
// compare.go (the diff action; diff.go the merge), finish.go, s3.go.
// docs/RECONCILE.md describes the design.
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
)

// Actions of the reconcile Lambda.
const (
	ActionPlan   = "plan"
	ActionFold   = "fold"
	ActionCount  = "count"
	ActionRefine = "refine"
	ActionList   = "list"
	ActionDiff   = "diff"
	ActionFinish = "finish"
)

// S3API is the part of the S3 client the handler uses.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// DynamoAPI is the part of the DynamoDB client the handler uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// HealthLakeAPI is the part of the HealthLake client the handler uses
// (fhirrest.Client): counts and pages of a type's search by
// `_lastUpdated` range, a resource's instance history (newest first;
// fhirrest.ErrNoHistory when it is gone) and a read of the resource.
type HealthLakeAPI interface {
	Count(ctx context.Context, datastoreID, resourceType string, after, until time.Time) (int64, error)
	SearchPage(ctx context.Context, datastoreID, resourceType string, after, until time.Time, count int, next string) ([]json.RawMessage, string, error)
	History(ctx context.Context, datastoreID, resourceType, id string) ([]fhirrest.HistoryEntry, error)
	TypeHistoryPage(ctx context.Context, datastoreID, resourceType string, since time.Time, count int, next string) ([]fhirrest.HistoryEntry, string, error)
	// Exists reads the resource: a history that is gone is a hard delete
	// only when the resource is gone too.
	Exists(ctx context.Context, datastoreID, resourceType, id string) (bool, error)
}

// Defaults of Config.
const (
	DefaultPartitions = 16
	// DefaultDeliveredMargin: delivered-index objects written this long
	// before the previous reconciliation started are read again (a union,
	// so re-reading is harmless), against clock skew between S3 and Lambda.
	DefaultDeliveredMargin = time.Hour
	// DefaultLeafMax: a range whose counts differ is listed once HealthLake
	// counts at most this many resources in it (or it spans an hour).
	DefaultLeafMax = 1000
	// DefaultPageSize is the `_count` of a search page.
	DefaultPageSize = 100
	// DefaultDeadlineMargin: the count and list loops stop this long
	// before the invocation's deadline and answer "not done" (a quarter of
	// the 240 s timeout: no invocation runs past 80 % of it).
	DefaultDeadlineMargin = 60 * time.Second
)

// Config configures the handler.
type Config struct {
	Bucket, KMSKeyID, Table, DatastoreID string
	// Partitions is N, the number of index partitions (CDC_RECONCILE_PARTITIONS).
	Partitions int
	// DeliveredMargin: see DefaultDeliveredMargin.
	DeliveredMargin time.Duration
	// Publish configures the bus and the rate (a share of the pipeline's:
	// the reconciliation publishes while windows run).
	Publish publish.Config
	// ReadRate bounds the reconciliation's HealthLake reads, in requests
	// per second for all its invocations together (CDC_HEALTHLAKE_READ_RATE,
	// the ReconcileReadRate setting); 0 leaves them unpaced. The plan step
	// reads the types' histories at it; a compare child confirms deletions
	// at its share, ReadRate / MapMaxConcurrency (CDC_MAP_MAX_CONCURRENCY,
	// the children that may run at once; default 1).
	ReadRate          float64
	MapMaxConcurrency int
	// Filter keeps or drops resource types, as prepare-change does.
	Filter change.Filter
	// Origin is where the pipeline's responsibility starts when RUN/STATE
	// does not record it (CDC_INITIAL_CHECKPOINT as a time); zero = the
	// whole store (a snapshot start).
	Origin time.Time
	// LeafMax, PageSize and DeadlineMargin: see their defaults.
	LeafMax, PageSize int
	DeadlineMargin    time.Duration
	Logger            *slog.Logger
	// Metrics receives ReconcileRepairs, ReconcileDeletes and
	// ReconcileResources at finish; nil writes none.
	Metrics *metrics.Recorder
}

// Handler is the reconcile Lambda.
type Handler struct {
	s3  S3API
	db  DynamoAPI
	hl  HealthLakeAPI
	eb  publish.PutEventsAPI
	cfg Config
	// now is the clock (time.Now).
	now func() time.Time
}

// New returns a handler.
func New(s3c S3API, db DynamoAPI, hl HealthLakeAPI, eb publish.PutEventsAPI, cfg Config) (*Handler, error) {
	if s3c == nil || db == nil || hl == nil || eb == nil {
		return nil, errors.New("reconcile: S3, DynamoDB, HealthLake and EventBridge clients are required")
	}
	if cfg.Bucket == "" || cfg.Table == "" || cfg.DatastoreID == "" {
		return nil, errors.New("reconcile: bucket, table and datastore id are required")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.Partitions > MaxPartitions {
		return nil, fmt.Errorf("reconcile: %d partitions, at most %d", cfg.Partitions, MaxPartitions)
	}
	if cfg.DeliveredMargin <= 0 {
		cfg.DeliveredMargin = DefaultDeliveredMargin
	}
	if cfg.LeafMax <= 0 {
		cfg.LeafMax = DefaultLeafMax
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.DeadlineMargin <= 0 {
		cfg.DeadlineMargin = DefaultDeadlineMargin
	}
	if _, err := publish.New(eb, cfg.Publish); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return &Handler{s3: s3c, db: db, hl: hl, eb: eb, cfg: cfg, now: time.Now}, nil
}

// MaxPartitions bounds N: the partition list rides in the state (256 KiB).
const MaxPartitions = 10000

// Input is the payload of every action; each uses its own fields.
type Input struct {
	Action      string `json:"action"`
	RunID       string `json:"runId"`
	ExecutionID string `json:"executionId,omitempty"`
	// StartTime is the execution's start (plan): a hard delete's time.
	StartTime string `json:"startTime,omitempty"`
	// Partition is the partition to fold, refine or compare (fold, refine,
	// diff).
	Partition int `json:"partition,omitempty"`
	// Plan is plan's output (every later action).
	Plan *Plan `json:"plan,omitempty"`
}

// partition is the partition an action of a partition Map (fold, refine,
// diff) works on; one the plan does not have is an InputError.
func (in Input) partition() (int, error) {
	if in.Plan.Partitions <= 0 || in.Partition < 0 || in.Partition >= in.Plan.Partitions {
		return 0, &InputError{Msg: in.Action + " needs a partition in range"}
	}
	return in.Partition, nil
}

// Plan is the output of plan, carried to every later action.
type Plan struct {
	RunID      string `json:"runId"`
	Partitions int    `json:"partitions"`
	// Window is (origin, checkpoint]: what the pipeline is responsible for
	// and has published (RUN/STATE when the reconciliation started).
	Window envelope.Window `json:"window"`
	// StartedAt is the reconciliation's start: a hard delete's lastUpdated.
	StartedAt string `json:"startedAt"`
	// Export is what the events' export field names: the data store, and
	// "reconciliation/{runId}" as the job.
	Export envelope.ExportRef `json:"export"`
	// Types are the resource types compared.
	Types []string `json:"types"`
	// Split cuts each type's window in two before counting (zero: not
	// cut); it is also the anchor of the hour grid of the histograms and of
	// every split the count step makes (count.go, recentSplit).
	Split time.Time `json:"split"`
	// Previous is the last finished reconciliation, nil before the first.
	Previous *Previous `json:"previous"`
	// DeliveredKeysKey lists the delivered-index objects to read.
	DeliveredKeysKey string `json:"deliveredKeysKey"`
	Delivered        int    `json:"delivered"`
	// Changed counts the resources changed after the checkpoint
	// (changed.go): left out of the comparison.
	Changed int `json:"changed"`
	// PartitionList is 0..Partitions-1, the items of the fold, refine and
	// compare Maps.
	PartitionList []int `json:"partitionList"`
}

// Previous names a finished reconciliation.
type Previous struct {
	RunID      string `json:"runId"`
	Partitions int    `json:"partitions"`
	StartedAt  string `json:"startedAt"`
	// Checkpoint is the checkpoint it compared up to.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Result is the output of fold, diff and finish: counts only.
type Result struct {
	Partition int `json:"partition,omitempty"`
	Stats
	// Unconfirmed counts resources absent from the store's listing whose
	// history does not end in a delete, or that read as live (nothing is
	// published for them).
	Unconfirmed  int64 `json:"unconfirmed,omitempty"`
	HardDeletes  int64 `json:"hardDeletes,omitempty"`
	Unrepairable int64 `json:"unrepairable,omitempty"`
	// Deferred counts delete candidates a compare child had no time to
	// confirm: left as delivered, the next reconciliation finds them again.
	Deferred int64 `json:"deferred,omitempty"`
	// Counting and listing (finish): HealthLake count queries, the hours
	// counted again by the minute (the refine step), the ranges listed, the
	// search pages read and the resources listed.
	Queries int64 `json:"queries,omitempty"`
	Refined int64 `json:"refined,omitempty"`
	Leaves  int64 `json:"leaves,omitempty"`
	Pages   int64 `json:"pages,omitempty"`
	Listed  int64 `json:"listed,omitempty"`
	// DeliveredLive counts the live versions of the delivered index in
	// the plan's window (fold, finish).
	DeliveredLive int64 `json:"deliveredLive,omitempty"`
}

// Summary is the counts' one line, as `cdcctl status` and cdc-local print
// them: what was checked, then what was found.
func (r Result) Summary() string {
	return fmt.Sprintf("%d delivered versions checked, %d deletes (%d hard), %d repairs, %d unconfirmed, %d resources listed, %d pending",
		r.DeliveredLive, r.Deletes, r.HardDeletes, r.Repairs, r.Unconfirmed, r.Store, r.Pending)
}

// Done is the answer of the count and list loops.
type Done struct {
	Done bool `json:"done"`
	// Refine (count) asks the state machine to run the refine step, then
	// the count loop again.
	Refine bool `json:"refine"`
}

// Keys of the reconciliation's objects.
func storeRunKey(runID string, p, batch int) string {
	return fmt.Sprintf("%s%s/store/%05d/%06d.tsv.gz", Prefix, runID, p, batch)
}
func storeRunPrefix(runID string, p int) string {
	return fmt.Sprintf("%s%s/store/%05d/", Prefix, runID, p)
}

// IndexKey is partition p of a reconciliation's delivered index.
func IndexKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/index/%05d.tsv.gz", Prefix, runID, p)
}
func foldedKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/folded/%05d.tsv.gz", Prefix, runID, p)
}
func histKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/hist/%05d.json", Prefix, runID, p)
}

// refineKey holds the hours the refine step counts by the minute; fineKey
// partition p's minute histogram of them.
func refineKey(runID string) string { return Prefix + runID + "/refine.json" }
func fineKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/fine/%05d.json", Prefix, runID, p)
}
func countStateKey(runID string) string { return Prefix + runID + "/count.json" }
func listStateKey(runID string) string  { return Prefix + runID + "/list.json" }
func listedKey(runID string, seq int) string {
	return fmt.Sprintf("%s%s/listed/%06d.ndjson", Prefix, runID, seq)
}
func statsKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/stats/%05d.json", Prefix, runID, p)
}
func statsPrefix(runID string) string { return Prefix + runID + "/stats/" }

// reconcileDeliveredKey is what a diff child published, in the delivered
// index's form.
func reconcileDeliveredKey(day time.Time, runID string, p int) string {
	return delivered.DeliveredKey(day, runID, fmt.Sprintf("reconcile-%05d", p))
}

// Prefix holds the reconciliation's own objects.
const Prefix = "reconcile/"

// InputError is a malformed payload (not retried).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "reconcile input: " + e.Msg }

// Refused: the reconciliation cannot run now (no checkpoint yet).
type Refused struct{ Msg string }

func (e *Refused) Error() string { return "reconciliation refused: " + e.Msg }

// Handle runs one action.
// DeadlineMargin is how long before its context's deadline an invocation
// stops its count and list loops (Config.DeadlineMargin); confirmations
// stop PublishReserve earlier still.
func (h *Handler) DeadlineMargin() time.Duration { return h.cfg.DeadlineMargin }

func (h *Handler) Handle(ctx context.Context, in Input) (any, error) {
	if in.RunID == "" {
		return nil, &InputError{Msg: "runId is required"}
	}
	if in.Action != ActionPlan && in.Plan == nil {
		return nil, &InputError{Msg: in.Action + " needs the plan"}
	}
	var out any
	var err error
	switch in.Action {
	case ActionPlan:
		out, err = h.plan(ctx, in)
	case ActionFold:
		out, err = h.fold(ctx, in)
	case ActionCount:
		out, err = h.count(ctx, in)
	case ActionRefine:
		out, err = h.refine(ctx, in)
	case ActionList:
		out, err = h.list(ctx, in)
	case ActionDiff:
		out, err = h.diff(ctx, in)
	case ActionFinish:
		out, err = h.finish(ctx, in)
	default:
		return nil, &InputError{Msg: fmt.Sprintf("unknown action %q: want plan, fold, count, refine, list, diff or finish", clip.String(in.Action, 40))}
	}
	if err != nil && h.cfg.Logger != nil {
		h.cfg.Logger.Error("reconcile action failed", "action", in.Action, "runId", in.RunID, "executionId", in.ExecutionID, "error", err.Error())
	}
	return out, err
}

// Types returns the resource types the reconciliation compares: every R4
// type the pipeline's filter allows.
func (h *Handler) Types() []string { return h.types() }

// deadline bounds ctx by its deadline less the margin.
func (h *Handler) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-h.cfg.DeadlineMargin))
}
