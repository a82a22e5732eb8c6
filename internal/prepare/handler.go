// Package prepare is the prepare-change Lambda: the Distributed Map child for
// one batch of export files. It streams each NDJSON export object from S3
// through the fhir reader (never a whole file in memory or on disk),
// classifies each line against the run's window and type filter, publishes
// one event per in-window resource version through internal/publish
// (claim-checking large ones) with one publisher for the whole batch, so
// PutEvents batches span files and only the last one is partial, writes each
// file's bad lines to that file's quarantine object, and returns a small
// summary of counts. It stops taking lines at its internal deadline and
// fails with BatchDeadlineExceeded, so the Map retries the batch (same
// eventIds) instead of the invocation being killed.
package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/deletes"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/share"
)

// Input is the payload of one invocation, built by the Distributed Map's
// ItemSelector from one manifest batch and the run's context:
// {"files": [{"bucket","key","resourceType","bytes"}...], "window",
// "export": {"datastoreId","jobId"}, "runId", "executionId"}.
type Input struct {
	Files       []manifest.File    `json:"files"`
	Window      envelope.Window    `json:"window"`
	Export      envelope.ExportRef `json:"export"`
	RunID       string             `json:"runId"`
	ExecutionID string             `json:"executionId,omitempty"`
	// BatchCount is the number of batches of the Map this invocation is an
	// item of (the export part's batchCount): with fewer batches than the
	// Map's MaxConcurrency each invocation may publish faster (RateFor).
	// 0 = unknown.
	BatchCount int `json:"batchCount,omitempty"`
	// ChildStartTime is the start of the Map child (EXPRESS) execution this
	// invocation runs in: the child ends at ChildStartTime + 5 minutes
	// whatever the attempt, so a retried attempt stops taking lines that much
	// earlier (Config.internalDeadline). "" = unknown.
	ChildStartTime string `json:"childStartTime,omitempty"`
	// Checkpoint is the run's checkpoint window (since, until]; Window
	// reaches back before it by the overlap. Nil (an older payload): no
	// overlap handling.
	Checkpoint *envelope.Window `json:"checkpoint,omitempty"`
	// Continues: the previous window was committed up to Checkpoint.Since
	// (runlock.Acquisition.Continues), so the versions it published in this
	// run's overlap are skipped, not published again.
	Continues bool `json:"continues,omitempty"`
}

// MaxListedQuarantineKeys bounds Output.QuarantineKeys; Output.QuarantineObjects
// counts them all.
const MaxListedQuarantineKeys = 10

// Output is the summary of one invocation, totals over its files. It holds
// counts and a bounded list of keys only, so it stays far below the 256 KiB
// state limit for any batch. Lines counts non-blank lines; each ends as
// exactly one of Events, OutsideWindow, OverlapSkipped, FastPathSkipped,
// Filtered and Quarantined.
type Output struct {
	Files         int64 `json:"files"`
	Lines         int64 `json:"lines"`
	Events        int64 `json:"events"`
	OutsideWindow int64 `json:"outsideWindow"`
	Quarantined   int64 `json:"quarantined"`
	ClaimChecked  int64 `json:"claimChecked"`
	Bytes         int64 `json:"bytes"`
	// QuarantineKeys lists the first MaxListedQuarantineKeys quarantine
	// objects written, in file order; QuarantineObjects counts them all.
	QuarantineKeys    []string `json:"quarantineKeys,omitempty"`
	QuarantineObjects int64    `json:"quarantineObjects"`
	// Rejected counts the lines quarantined because EventBridge rejected
	// their event for good (MalformedDetail); Quarantined includes them.
	Rejected int64 `json:"rejected"`
	// Additions beyond the ARCHITECTURE.md minimum.
	Filtered int64 `json:"filtered"`
	Blank    int64 `json:"blank"`
	// ReadsResumed counts export-file reads S3 ended part way that went
	// on from the byte they had reached (pkg/resume).
	ReadsResumed   int64 `json:"readsResumed,omitempty"`
	PutEventsCalls int64 `json:"putEventsCalls"`
	EntriesRetried int64 `json:"entriesRetried"`
	// Throttled counts PutEvents calls that failed as a whole (throttled,
	// 5xx) and were retried.
	Throttled int64 `json:"throttled"`
	Chunks    int64 `json:"chunks"`
	// OverlapSkipped counts lines of the overlap whose version the previous
	// window had published: not sent again.
	OverlapSkipped int64 `json:"overlapSkipped"`
	// FastPathSkipped counts lines whose version the Subscriptions fast path
	// had published (docs/FASTPATH.md): not sent again. FastPathMissed
	// counts the events a window published while it consulted the fast
	// path's record: versions the fast path did not deliver in time.
	FastPathSkipped int64 `json:"fastPathSkipped,omitempty"`
	FastPathMissed  int64 `json:"fastPathMissed,omitempty"`
	// ShareLive is the most children of the run the batch shared the
	// PutEvents share with, itself included (0: not shared).
	ShareLive int `json:"shareLive,omitempty"`
}

// S3API is the part of the S3 client the handler uses.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	S3ListAPI
	S3WriteAPI
}

// Handler is the prepare-change Lambda handler. Safe for concurrent use:
// each invocation builds its own reader, publisher and writers.
type Handler struct {
	s3      S3API
	eb      publish.PutEventsAPI
	cfg     Config
	deletes *deletes.Finder // the window's delete scan; nil until EnableDeleteScan
}

// EnableDeleteScan lets the handler answer the run's delete scan
// (action "deletes", internal/deletes) through hl: every R4 type the type
// filter allows, recorded in the delivered index. The scan runs beside the
// window's Map: with Config.Share it publishes at its part of the run's
// share, counted on the board like a batch ("history-deletes"); without,
// at the whole share.
func (h *Handler) EnableDeleteScan(hl deletes.HistoryAPI) error {
	pcfg := h.cfg.Publish
	pcfg.Rate = h.cfg.RateFor(1)
	var fast func(context.Context, time.Time, bool) (*delivered.Set, error)
	if h.cfg.FastPath {
		fast = h.FastPathSet
	}
	var shared func(context.Context, string, func(float64)) func()
	if h.cfg.Share != nil && pcfg.Rate > 0 {
		shared = func(ctx context.Context, runID string, setRate func(float64)) func() {
			return h.cfg.Share.Keep(ctx, runID, share.ChildID(DeleteScanChild), pcfg.Rate, h.cfg.SharePeriod,
				func(rate float64, _ int) { setRate(rate) }, h.cfg.shareWarning(runID))
		}
	}
	f, err := deletes.New(hl, h.eb, h.s3, deletes.Config{
		Types: h.cfg.ScanTypes(), DeadlineMargin: h.cfg.DeadlineMargin, Publish: pcfg,
		Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID, Logger: h.cfg.Logger, Metrics: h.cfg.Metrics,
		FastPath: fast, Share: shared,
	})
	if err != nil {
		return fmt.Errorf("prepare-change: %w", err)
	}
	h.deletes = f
	return nil
}

// DeleteScanChild names the delete scan on the run's share board (its
// ChildID): no batch's first file key is this.
const DeleteScanChild = "history-deletes"

// Invoke is the Lambda's entry point: a payload with "action": "deletes" is
// the run's delete scan (deletes.Input → deletes.Output); any other is one
// batch of export files (Input → Output, Handle).
// DeadlineMargin is how long before its context's deadline an invocation
// stops taking work (Config.DeadlineMargin): a batch or a delete scan runs
// up to that point by design.
func (h *Handler) DeadlineMargin() time.Duration { return h.cfg.DeadlineMargin }

func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	var peek struct {
		Action string `json:"action"`
	}
	if err := json.Unmarshal(payload, &peek); err != nil {
		return nil, errors.New("prepare-change: the payload is not a JSON object")
	}
	switch peek.Action {
	case "":
		var in Input
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, fmt.Errorf("prepare-change: payload: %w", err)
		}
		return h.Handle(ctx, in)
	case deletes.Action:
		if h.cfg.NoWindowDeletes {
			if h.cfg.Logger != nil {
				h.cfg.Logger.Info("delete scan off (CDC_WINDOW_DELETES=false): the reconciliation publishes deletes")
			}
			return deletes.Output{Done: true}, nil
		}
		if h.deletes == nil {
			return nil, errors.New("prepare-change: the delete scan is not configured")
		}
		var in deletes.Input
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, fmt.Errorf("prepare-change: delete scan payload: %w", err)
		}
		return h.deletes.Find(ctx, in)
	default:
		return nil, fmt.Errorf("prepare-change: unknown action %.40q", peek.Action)
	}
}

// New returns a handler that reads and writes through s3c and publishes
// through eb.
func New(s3c S3API, eb publish.PutEventsAPI, cfg Config) (*Handler, error) {
	if s3c == nil || eb == nil {
		return nil, errors.New("prepare-change: S3 and EventBridge clients are required")
	}
	if cfg.Bucket == "" {
		return nil, errors.New("prepare-change: no artifact bucket configured")
	}
	if cfg.FastPath && cfg.FastPathRecord == nil {
		return nil, errors.New("prepare-change: CDC_FAST_PATH=true needs the fast path's record (CDC_TABLE)")
	}
	if cfg.LineCountMaxBytes <= 0 {
		cfg.LineCountMaxBytes = DefaultLineCountMaxBytes
	}
	if cfg.QuarantineRawBytes <= 0 {
		cfg.QuarantineRawBytes = DefaultQuarantineRawBytes
	}
	if cfg.QuarantinePartBytes <= 0 {
		cfg.QuarantinePartBytes = 8 << 20
	}
	if cfg.Publish.Concurrency <= 0 {
		cfg.Publish.Concurrency = DefaultPutConcurrency
	}
	if cfg.QuarantinePartBytes < 5<<20 {
		cfg.QuarantinePartBytes = 5 << 20 // S3's minimum size of a part but the last
	}
	cfg.Publish.Rejectable = []string{CodeMalformedDetail}
	if _, err := publish.New(eb, cfg.Publish); err != nil {
		return nil, fmt.Errorf("prepare-change: %w", err)
	}
	return &Handler{s3: s3c, eb: eb, cfg: cfg}, nil
}

// DefaultPutConcurrency is the number of PutEvents calls one invocation
// keeps in flight unless Config.Publish.Concurrency says otherwise: enough to
// hide the call latency (a file of 5,000 resources is 500 calls).
const DefaultPutConcurrency = 4

// Quarantine reasons prepare-change adds to those of the reader and the
// classifier. They name the cause, never content.
const (
	// ReasonEventTooLarge: the event exceeds the size limit even with a resourceRef.
	ReasonEventTooLarge = "event exceeds the PutEvents size limit even with a resourceRef"
	// ReasonNotJSON: a line too large for an inline event that is not one
	// JSON object (possible at validation level none); inline, EventBridge
	// would have rejected it with MalformedDetail.
	ReasonNotJSON = "the line is not one valid JSON object (checked before claim-checking it)"
	// ReasonMalformedDetail: EventBridge rejected the line's event with
	// MalformedDetail (possible at validation level none).
	ReasonMalformedDetail = "EventBridge rejected the event with MalformedDetail: the line is not valid JSON"
)

// CodeMalformedDetail is the PutEvents per-entry error code for a detail
// EventBridge cannot parse as JSON. The envelope is always well-formed, so
// the cause is the exported line, and no retry can fix it: the line is
// quarantined.
const CodeMalformedDetail = "MalformedDetail"

// ExpressLimit is the longest an EXPRESS execution (a Map child) runs.
const ExpressLimit = 5 * time.Minute

// childEnd is when the invocation's Map child execution ends: its start +
// ExpressLimit (zero when the start is unknown).
func (in Input) childEnd() time.Time {
	if in.ChildStartTime == "" {
		return time.Time{}
	}
	t, err := envelope.ParseTime(in.ChildStartTime)
	if err != nil {
		return time.Time{}
	}
	return t.Add(ExpressLimit)
}

// eventWindow is the window events carry: the run's checkpoint window, the
// one `cdcctl status` and the run history show (the export window when the
// payload has none). A version the overlap delivers late has its
// lastUpdated up to the overlap before its since.
func (in Input) eventWindow() envelope.Window {
	if in.Checkpoint != nil {
		return *in.Checkpoint
	}
	return in.Window
}

// check returns the invocation's input checked.
func (in Input) check() error {
	if len(in.Files) == 0 {
		return errors.New("prepare-change: input files is empty")
	}
	for i, f := range in.Files {
		if f.Bucket == "" || f.Key == "" {
			return fmt.Errorf("prepare-change: input files[%d].bucket and .key are required", i)
		}
		if err := f.Check(); err != nil {
			return fmt.Errorf("prepare-change: input files[%d]: %w", i, err)
		}
	}
	switch {
	case in.Window.Since.IsZero() && in.Window.Until.IsZero():
		return errors.New("prepare-change: input window is required")
	case in.Window.Empty():
		return fmt.Errorf("prepare-change: input window %s is empty", in.Window)
	case in.RunID == "":
		return errors.New("prepare-change: input runId is required")
	case in.Checkpoint != nil && (in.Checkpoint.Until != in.Window.Until || in.Checkpoint.Since.Before(in.Window.Since)):
		return fmt.Errorf("prepare-change: input checkpoint window %s does not end the export window %s", in.Checkpoint, in.Window)
	}
	return nil
}

// Handle processes one batch of export files. It fails (and Step Functions
// retries the whole batch) with a *ReadFailed or *PublishFailed when S3 or
// EventBridge fail for good, and with a *BatchDeadlineExceeded at the
// internal deadline; bad lines are quarantined and counted, never fatal, and
// so is a line whose event EventBridge rejects as malformed. A retried
// invocation publishes the same eventIds and rewrites the same claim-check
// and quarantine objects.
func (h *Handler) Handle(ctx context.Context, in Input) (Output, error) {
	start := time.Now()
	b := &batch{h: h, in: in}
	err := in.check()
	if err == nil {
		err = b.run(ctx)
	}
	out := b.summary()
	h.observe(in, out, b.linesPerType(), time.Since(start), err)
	return out, err
}

// observe logs the invocation's outcome with its run context and emits its
// metrics: totals, and the resources exported per resource type.
func (h *Handler) observe(in Input, out Output, perType map[string]int64, took time.Duration, err error) {
	if h.cfg.Logger != nil {
		log := logging.Run(h.cfg.Logger, in.ExecutionID, in.RunID, in.Export.JobID, in.Window.String())
		attrs := []any{"files", out.Files, "lines", out.Lines, "events", out.Events, "outsideWindow", out.OutsideWindow,
			"quarantined", out.Quarantined, "overlapSkipped", out.OverlapSkipped, "fastPathSkipped", out.FastPathSkipped,
			"fastPathMissed", out.FastPathMissed, "claimChecked", out.ClaimChecked, "putEventsCalls", out.PutEventsCalls,
			"entriesRetried", out.EntriesRetried, "throttled", out.Throttled, "bytes", out.Bytes, "readsResumed", out.ReadsResumed, "durationMs", took.Milliseconds()}
		if err != nil {
			log.Error("prepare-change failed", append(attrs, "error", err.Error())...)
		} else {
			log.Info("prepare-change published", attrs...)
		}
	}
	if h.cfg.Metrics == nil {
		return
	}
	props := map[string]any{"executionId": in.ExecutionID, "runId": in.RunID, "jobId": in.Export.JobID}
	failed := int64(0)
	var fe *publish.FailedEntriesError
	if errors.As(err, &fe) {
		failed = int64(fe.Count)
	}
	_ = h.cfg.Metrics.Emit([]metrics.Value{
		metrics.Count(metrics.EventsPublished, out.Events),
		metrics.Count(metrics.EntriesRetried, out.EntriesRetried),
		metrics.Count(metrics.EntriesFailed, failed),
		metrics.Count(metrics.QuarantinedLines, out.Quarantined),
		metrics.Count(metrics.ClaimChecks, out.ClaimChecked),
		metrics.Count(metrics.OverlapSkipped, out.OverlapSkipped),
		metrics.Count(metrics.ReadsResumed, out.ReadsResumed),
	}, nil, props)
	if h.cfg.FastPath {
		_ = h.cfg.Metrics.Emit([]metrics.Value{
			metrics.Count(metrics.FastPathSkipped, out.FastPathSkipped),
			metrics.Count(metrics.FastPathMissed, out.FastPathMissed),
		}, nil, props)
	}
	types := make([]string, 0, len(perType))
	for t := range perType {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		_ = h.cfg.Metrics.Emit([]metrics.Value{metrics.Count(metrics.ResourcesExported, perType[t])},
			map[string]string{"ResourceType": t}, props)
	}
}
