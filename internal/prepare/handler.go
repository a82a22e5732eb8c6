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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/deletes"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
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
	Files       []manifest.File  `json:"files"`
	Window      events.Window    `json:"window"`
	Export      events.ExportRef `json:"export"`
	RunID       string           `json:"runId"`
	ExecutionID string           `json:"executionId,omitempty"`
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
	Checkpoint *events.Window `json:"checkpoint,omitempty"`
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
	Filtered       int64 `json:"filtered"`
	Blank          int64 `json:"blank"`
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
	t, err := events.ParseTime(in.ChildStartTime)
	if err != nil {
		return time.Time{}
	}
	return t.Add(ExpressLimit)
}

// eventWindow is the window events carry: the run's checkpoint window, the
// one `cdcctl status` and the run history show (the export window when the
// payload has none). A version the overlap delivers late has its
// lastUpdated up to the overlap before its since.
func (in Input) eventWindow() events.Window {
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

// fileState is one file of an invocation: its counts, its quarantine
// object, and its events without an outcome yet.
type fileState struct {
	ref      manifest.File // the file, or its byte range
	q        *quarantine
	counts   change.Counts
	blank    int64
	bytes    int64
	rejected int64  // lines quarantined after EventBridge rejected their event
	key      string // the quarantine object, once written
	pending  int    // events handed to the publisher without an outcome
	readDone bool   // every line read
	closed   bool   // quarantine object closed

	// linesBefore is the number of lines of the object before ref's range,
	// once based is set: 0 for a range at 0; for a later range, counted
	// from the object when it first quarantines a line (batch.linesBefore),
	// unless the range starts past Config.LineCountMaxBytes (q.lineFrom set,
	// based not).
	linesBefore int64
	based       bool
}

// lineRef is the token an event carries through the publisher: where its
// line is, to quarantine it if EventBridge rejects the event. raw is kept
// only at validation level none, the one level where that can happen.
type lineRef struct {
	file   *fileState
	number int64
	offset int64
	raw    []byte
	// The version the event carries, recorded in the delivered index once accepted.
	typ, id, versionID, lastUpdated string
}

// batch is one invocation's work: its files, publisher and emitter.
type batch struct {
	h        *Handler
	in       Input
	pub      *publish.Publisher
	em       *publish.Emitter
	rec      recorder // the batch's delivered-index object (D4)
	maxLive  int      // most children sharing the PutEvents share at once (0: not shared)
	ov       *overlap
	fp       *delivered.Set // what the fast path published; nil: not consulted
	files    []*fileState
	outcomes []publish.Outcome // reused buffer
	free     []*lineRef        // tokens whose event was accepted, for reuse
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

// run reads, classifies and publishes every file of the batch.
func (b *batch) run(parent context.Context) error {
	h := b.h
	ctx, cancel := h.cfg.internalDeadline(parent, b.in.childEnd())
	defer cancel()
	pcfg := h.cfg.Publish
	pcfg.Rate = h.cfg.RateFor(b.in.BatchCount)
	pcfg.Concurrency = h.cfg.concurrencyFor(pcfg.Concurrency)
	pub, err := publish.New(h.eb, pcfg)
	if err != nil {
		return fmt.Errorf("prepare-change: %w", err)
	}
	b.pub = pub
	defer func() { _ = pub.Wait() }() // no send outlives the invocation, also on error
	if stop := b.shareRate(ctx); stop != nil {
		defer stop()
	}
	b.em = &publish.Emitter{
		Publisher:  pub,
		ClaimCheck: &publish.ClaimCheck{S3: h.s3, Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID},
		Window:     b.in.eventWindow(),
		Export:     b.in.Export,
		CheckJSON:  h.cfg.Validation == fhir.ValidateNone,
	}
	if b.ov, err = h.overlapOf(ctx, b.in); err != nil {
		return b.failure(parent, ctx, err)
	}
	if b.fp, err = h.FastPathSet(ctx, b.in.Window.Since, b.in.Continues && b.in.Checkpoint != nil); err != nil {
		return b.failure(parent, ctx, &ReadFailed{Err: fmt.Errorf("prepare-change: the fast path's record: %w", err)})
	}
	defer func() {
		for _, fs := range b.files {
			fs.q.abort(context.WithoutCancel(ctx)) // no-op unless a multipart upload was left open
		}
	}()
	for _, f := range b.in.Files {
		fs := &fileState{ref: f, based: f.Start == 0, q: &quarantine{
			s3: h.s3, bucket: h.cfg.Bucket, key: QuarantineKey(b.in.RunID, f.Name()), kmsKeyID: h.cfg.KMSKeyID,
			rawCap: h.cfg.QuarantineRawBytes, partSize: h.cfg.QuarantinePartBytes,
		}}
		b.files = append(b.files, fs)
		if err := b.file(ctx, fs); err != nil {
			return b.failure(parent, ctx, err)
		}
		fs.readDone = true
		if err := b.closeReady(ctx); err != nil {
			return b.failure(parent, ctx, err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return b.failure(parent, ctx, b.publishFailed("", err))
	}
	if err := b.settle(ctx); err != nil {
		return b.failure(parent, ctx, err)
	}
	if err := b.closeReady(ctx); err != nil {
		return b.failure(parent, ctx, err)
	}
	for _, fs := range b.files {
		if !fs.closed {
			return fmt.Errorf("prepare-change: %d events of %s have no PutEvents outcome", fs.pending, fs.ref.Name())
		}
		if !fs.counts.Balanced() {
			return fmt.Errorf("prepare-change: line counts of %s do not balance: %+v", fs.ref.Name(), fs.counts)
		}
	}
	// What the batch published, once every event has its outcome: one
	// delivered-index object (the reconciliation reads it) and the overlap
	// object (the next window reads it).
	dkey := delivered.DeliveredKey(time.Now(), b.in.RunID, b.in.Files[0].Name())
	if err := b.rec.write(ctx, h.s3, h.cfg.Bucket, h.cfg.KMSKeyID, dkey); err != nil {
		return b.failure(parent, ctx, &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)})
	}
	if err := b.ov.write(ctx, h, b.in); err != nil {
		return b.failure(parent, ctx, &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)})
	}
	return nil
}

// file streams one export file, or its range, through the classifier and
// the emitter.
func (b *batch) file(ctx context.Context, fs *fileState) error {
	f, cfg := fs.ref, b.h.cfg
	get := &s3.GetObjectInput{Bucket: aws.String(f.Bucket), Key: aws.String(f.Key)}
	if f.Start > 0 {
		// From the byte before the range: the reader skips the end of
		// the line that began before it (fhir.Options.Start).
		get.Range = aws.String("bytes=" + strconv.FormatInt(f.Start-1, 10) + "-")
	}
	obj, err := b.h.s3.GetObject(ctx, get)
	if err != nil {
		return &ReadFailed{Err: fmt.Errorf("prepare-change: get s3://%s/%s: %w", f.Bucket, f.Name(), err)}
	}
	defer obj.Body.Close()
	rd := fhir.NewReader(obj.Body, fhir.Options{
		File: f.Key, DeclaredType: f.ResourceType, MaxLineBytes: cfg.MaxLineBytes, Validation: cfg.Validation,
		Start: f.Start, End: f.End,
	})
	defer func() {
		st := rd.Stats()
		fs.blank, fs.bytes = st.Blank, st.Bytes
	}()
	cls := change.Classifier{Window: b.in.Window, Filter: cfg.Filter}
	for {
		if ctx.Err() != nil {
			return ctx.Err() // the internal deadline: take no more lines
		}
		line, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &ReadFailed{Err: fmt.Errorf("prepare-change: read s3://%s/%s after %d lines: %w", f.Bucket, f.Name(), fs.counts.Lines, err)}
		}
		kind, reason := cls.Classify(line)
		var versionID string
		if kind == change.KindEvent {
			versionID = versionOf(line)
			repeat, err := b.ov.repeat(line, versionID)
			if err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
			if repeat {
				kind = change.KindRepeat
			}
		}
		if kind == change.KindEvent && b.fp != nil && b.fp.Has(delivered.Version{Type: line.ResourceType, ID: line.ID, VersionID: versionID}) {
			// Delivered by the fast path: recorded as delivered (the
			// reconciliation reads the index) and kept for the next
			// window's overlap, not published again.
			kind = change.KindFastPath
			e := delivered.Entry{Type: line.ResourceType, ID: line.ID, VersionID: versionID, LastUpdated: line.LastUpdated}
			if err := b.rec.add(e); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: delivered index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
			if err := b.ov.keep(e.Type, e.ID, e.VersionID, e.LastUpdated); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
		}
		if kind == change.KindEvent {
			tok := b.token(fs, line, versionID)
			fs.pending++
			r := events.Resource{ResourceType: line.ResourceType, ID: line.ID, VersionID: line.VersionID, LastUpdated: line.LastUpdated, Raw: line.Raw}
			_, err := b.em.Emit(ctx, r, tok)
			var tooLarge *publish.EntryTooLargeError
			var invalid *publish.InvalidResourceError
			switch {
			case errors.As(err, &tooLarge):
				fs.pending-- // nothing queued
				kind, reason = change.KindQuarantined, ReasonEventTooLarge
			case errors.As(err, &invalid):
				fs.pending--
				kind, reason = change.KindQuarantined, ReasonNotJSON
			case err != nil:
				return b.publishFailed(fmt.Sprintf(" (s3://%s/%s)", f.Bucket, fs.at(line.Number)), err)
			}
		}
		if kind == change.KindQuarantined {
			if err := b.quarantine(ctx, fs, line, reason); err != nil {
				return err
			}
		}
		fs.counts.Add(kind)
		if err := b.settle(ctx); err != nil {
			return err
		}
	}
}

// versionOf is the version line's eventId carries: meta.versionId, else a
// hash of the content.
func versionOf(line *fhir.Line) string {
	if line.VersionID != "" {
		return line.VersionID
	}
	return events.ContentVersion(line.Raw)
}

// token returns the token of line's event (of version versionID), reusing
// one whose event was accepted.
func (b *batch) token(fs *fileState, line *fhir.Line, versionID string) *lineRef {
	var tok *lineRef
	if n := len(b.free); n > 0 {
		tok, b.free = b.free[n-1], b.free[:n-1]
	} else {
		tok = new(lineRef)
	}
	raw := tok.raw[:0]
	*tok = lineRef{file: fs, number: line.Number, offset: line.Offset,
		typ: line.ResourceType, id: line.ID, versionID: versionID, lastUpdated: line.LastUpdated}
	if b.h.cfg.Validation == fhir.ValidateNone {
		tok.raw = append(raw, line.Raw...)
	}
	return tok
}

// settle takes the outcomes the publisher reported: it quarantines the
// lines whose event EventBridge rejected for good, moving them from events
// to quarantined in their file's counts, then closes what became ready.
func (b *batch) settle(ctx context.Context) error {
	b.outcomes = b.pub.Outcomes(b.outcomes[:0])
	if len(b.outcomes) == 0 {
		return nil
	}
	defer clear(b.outcomes) // drop the tokens
	for _, o := range b.outcomes {
		lr := o.Token.(*lineRef)
		fs := lr.file
		fs.pending--
		if o.Code == "" {
			if err := b.rec.add(delivered.Entry{Type: lr.typ, ID: lr.id, VersionID: lr.versionID, LastUpdated: lr.lastUpdated}); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: delivered index of %s: %w", fs.at(lr.number), err)}
			}
			if err := b.ov.keep(lr.typ, lr.id, lr.versionID, lr.lastUpdated); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of %s: %w", fs.at(lr.number), err)}
			}
			b.free = append(b.free, lr) // accepted: the token is free again
			continue
		}
		if o.Code != CodeMalformedDetail {
			continue // failed: the publisher's error fails the invocation and names its tokens
		}
		if fs.closed {
			return fmt.Errorf("prepare-change: a rejected event of %s arrived after its quarantine object was closed", fs.ref.Name())
		}
		l := &fhir.Line{File: fs.ref.Key, Number: lr.number, Offset: lr.offset, Raw: lr.raw}
		if err := b.quarantine(ctx, fs, l, ReasonMalformedDetail); err != nil {
			return err
		}
		fs.counts.Events--
		fs.counts.Quarantined++
		fs.rejected++
	}
	return b.closeReady(ctx)
}

// quarantine adds line (numbered from its range's first line) to its file's
// quarantine object, numbered in the object, or from the range's first line
// with lineFrom for a range that starts past Config.LineCountMaxBytes.
func (b *batch) quarantine(ctx context.Context, fs *fileState, line *fhir.Line, reason string) error {
	switch {
	case fs.based || fs.q.lineFrom > 0:
	case fs.ref.Start-1 > b.h.cfg.LineCountMaxBytes:
		fs.q.lineFrom = fs.ref.Start
	default:
		n, err := b.linesBefore(ctx, fs.ref)
		if err != nil {
			return &ReadFailed{Err: fmt.Errorf("prepare-change: number the lines of s3://%s/%s: %w", fs.ref.Bucket, fs.ref.Name(), err)}
		}
		fs.linesBefore, fs.based = n, true
	}
	l := *line
	l.Number += fs.linesBefore
	if err := fs.q.add(ctx, &l, reason); err != nil {
		return &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)}
	}
	return nil
}

// linesBefore counts the lines of f's object that begin before f.Start: the
// LFs before byte Start−1, and the line that byte is in, which the range
// before reads. Only a range that quarantines a line reads its object's
// earlier bytes.
func (b *batch) linesBefore(ctx context.Context, f manifest.File) (int64, error) {
	if f.Start <= 1 {
		return f.Start, nil
	}
	obj, err := b.h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(f.Bucket), Key: aws.String(f.Key),
		Range: aws.String("bytes=0-" + strconv.FormatInt(f.Start-2, 10))})
	if err != nil {
		return 0, err
	}
	defer obj.Body.Close()
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := obj.Body.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n + 1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// at names line number (counted from the range's first line) of the file in
// an error: "{key} line N", or for a range after the first, whose earlier
// lines are not counted, "{key}@{start} line N" (docs/EXPORT.md).
func (fs *fileState) at(number int64) string {
	if fs.based {
		return fmt.Sprintf("%s line %d", fs.ref.Key, fs.linesBefore+number)
	}
	return fmt.Sprintf("%s line %d", fs.ref.Name(), number)
}

// closeReady closes the quarantine object of every file that is read and
// whose events all have an outcome.
func (b *batch) closeReady(ctx context.Context) error {
	for _, fs := range b.files {
		if !fs.closed && fs.readDone && fs.pending == 0 {
			key, err := fs.q.close(ctx)
			if err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)}
			}
			fs.key, fs.closed = key, true
		}
	}
	return nil
}

// publishFailed wraps a publisher error with where its entries came from:
// file keys and line numbers, never a resource id.
func (b *batch) publishFailed(where string, err error) error {
	var fe *publish.FailedEntriesError
	if where == "" {
		where = " of " + b.where()
	}
	if errors.As(err, &fe) && len(fe.Tokens) > 0 {
		var lines []string
		for _, t := range fe.Tokens {
			lr := t.(*lineRef)
			lines = append(lines, lr.file.at(lr.number))
		}
		where += "; first failed: " + strings.Join(lines, ", ")
	}
	return &PublishFailed{Err: fmt.Errorf("prepare-change: publish events%s: %w", where, err)}
}

// where names the files of the batch in an error.
func (b *batch) where() string {
	f := b.in.Files
	if len(f) == 1 {
		return "s3://" + f[0].Bucket + "/" + f[0].Name()
	}
	return fmt.Sprintf("a batch of %d files (s3://%s/%s first)", len(f), f[0].Bucket, f[0].Name())
}

// failure turns an error met after the internal deadline passed into a
// *BatchDeadlineExceeded: whatever failed, it failed because time ran out.
func (b *batch) failure(parent, ctx context.Context, err error) error {
	if ctx.Err() == nil || parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return err
	}
	var lines, events int64
	for _, fs := range b.files {
		lines += fs.counts.Lines
		events += fs.counts.Events
	}
	return &BatchDeadlineExceeded{Files: len(b.files), Of: len(b.in.Files), Lines: lines, Events: events, Margin: b.h.cfg.DeadlineMargin}
}

func (b *batch) summary() Output {
	var out Output
	out.Files = int64(len(b.files))
	for _, fs := range b.files {
		c := fs.counts
		out.Lines += c.Lines
		out.Events += c.Events
		out.OutsideWindow += c.OutsideWindow
		out.Quarantined += c.Quarantined
		out.OverlapSkipped += c.OverlapSkipped
		out.FastPathSkipped += c.FastPathSkipped
		out.Filtered += c.Filtered
		out.Blank += fs.blank
		out.Bytes += fs.bytes
		out.Rejected += fs.rejected
		if fs.key != "" {
			out.QuarantineObjects++
			if len(out.QuarantineKeys) < MaxListedQuarantineKeys {
				out.QuarantineKeys = append(out.QuarantineKeys, fs.key)
			}
		}
	}
	if b.fp != nil {
		out.FastPathMissed = out.Events
	}
	out.ShareLive = b.maxLive
	if b.pub != nil {
		ps := b.pub.Stats()
		out.ClaimChecked = b.em.ClaimChecked()
		out.PutEventsCalls, out.EntriesRetried, out.Throttled, out.Chunks = ps.Calls, ps.Retried, ps.Throttled, ps.Chunks
	}
	return out
}

// linesPerType returns the lines read per resource type.
func (b *batch) linesPerType() map[string]int64 {
	perType := map[string]int64{}
	for _, fs := range b.files {
		perType[fs.ref.ResourceType] += fs.counts.Lines
	}
	return perType
}

// observe logs the invocation's outcome with its run context and emits its
// metrics: totals, and the resources exported per resource type.
func (h *Handler) observe(in Input, out Output, perType map[string]int64, took time.Duration, err error) {
	if h.cfg.Logger != nil {
		log := logging.Run(h.cfg.Logger, in.ExecutionID, in.RunID, in.Export.JobID, in.Window.String())
		attrs := []any{"files", out.Files, "lines", out.Lines, "events", out.Events, "outsideWindow", out.OutsideWindow,
			"quarantined", out.Quarantined, "overlapSkipped", out.OverlapSkipped, "fastPathSkipped", out.FastPathSkipped,
			"fastPathMissed", out.FastPathMissed, "claimChecked", out.ClaimChecked, "putEventsCalls", out.PutEventsCalls,
			"entriesRetried", out.EntriesRetried, "throttled", out.Throttled, "bytes", out.Bytes, "durationMs", took.Milliseconds()}
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

// Errors Handle returns for Step Functions to retry the batch. Their Go type
// names are the Lambda errorType the Map child's Retry matches (the Go
// runtime reports the type name), so they break the Error suffix rule on
// purpose. Messages name files, line numbers and counts, never resources.

// BatchDeadlineExceeded: the invocation reached its internal deadline (the
// context's deadline less Config.DeadlineMargin) and stopped taking lines.
// What it published is harmless on retry: the same eventIds.
type BatchDeadlineExceeded struct {
	Files, Of     int   // files begun, of the batch's
	Lines, Events int64 // lines read and events emitted before stopping
	Margin        time.Duration
}

// Error implements error.
func (e *BatchDeadlineExceeded) Error() string {
	return fmt.Sprintf("prepare-change: stopped %v before the invocation's deadline, in file %d of %d after %d lines (%d events, which a retry publishes again with the same eventIds)",
		e.Margin, e.Files, e.Of, e.Lines, e.Events)
}

// PublishFailed: writing the batch's output failed for good: PutEvents
// entries or calls whose retries were spent, a claim-check or a quarantine
// object.
type PublishFailed struct{ Err error }

// Error implements error.
func (e *PublishFailed) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *PublishFailed) Unwrap() error { return e.Err }

// ReadFailed: an export file could not be read from S3.
type ReadFailed struct{ Err error }

// Error implements error.
func (e *ReadFailed) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *ReadFailed) Unwrap() error { return e.Err }
