// Package deletes finds the deletions of one window and publishes them in
// that window's run. A HealthLake export carries no deletions; HealthLake's
// type-level history (`GET {type}/_history?_since=`) lists every version
// written since an instant, deletions included (request.method DELETE). The
// scan reads each resource type's history from the window's since, newest
// first, page by page, and publishes one v1 delete event per DELETE entry in
// (since, until] — eventId `{type}/{id}/_history/{versionId of the DELETE}`,
// the same id the reconciliation gives the same deletion.
//
// A scan that reaches its internal deadline returns a cursor (each type's
// next page) and the state machine calls again; what it published before is
// recorded in the delivered index once EventBridge accepted all of it, so a
// retried invocation re-publishes the same eventIds and nothing else.
// Deletions that leave no history (`$erase`, a hard `$bulk-delete`, a type
// opted out of history) are the reconciliation's (docs/RECONCILE.md).
package deletes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/indexobject"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/readpace"
)

// Action is the value of the "action" field that routes a prepare-change
// invocation to the delete scan.
const Action = "deletes"

// HistoryAPI is the part of the HealthLake client the scan uses.
type HistoryAPI interface {
	TypeHistoryPage(ctx context.Context, datastoreID, resourceType string, since time.Time, count int, next string) ([]fhirrest.HistoryEntry, string, error)
}

// S3API is the part of the S3 client the scan uses (the delivered index).
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Input is one invocation: {"action": "deletes", "window", "export":
// {"datastoreId","jobId"}, "runId", "executionId", "cursor"}. Cursor is null
// on the first call and the previous Output's cursor after.
type Input struct {
	Action      string             `json:"action"`
	Window      envelope.Window    `json:"window"`
	Export      envelope.ExportRef `json:"export"`
	RunID       string             `json:"runId"`
	ExecutionID string             `json:"executionId,omitempty"`
	// Continues: the run continues the committed window before it
	// (runlock's acquire), so the deletes the fast path published are
	// skipped; after a replay they are published again on purpose.
	Continues bool    `json:"continues,omitempty"`
	Cursor    *Cursor `json:"cursor"`
	// Reuse is run-lock's reuse (a later manifest part of an export an
	// earlier run started), null or absent otherwise: the run that started
	// the export scanned its window, so the scan answers done at once.
	Reuse json.RawMessage `json:"reuse,omitempty"`
}

// reused reports whether the run publishes a later part of an export.
func (in Input) reused() bool {
	r := bytes.TrimSpace(in.Reuse)
	return len(r) > 0 && string(r) != "null"
}

// Cursor is where a scan stands: the types still to read, each with the
// next link of its history ("" = its first page), the invocations so far,
// and the totals so far. A few kilobytes at most (one link per type).
type Cursor struct {
	Pending []TypeCursor `json:"pending"`
	Seq     int          `json:"seq"`
	Totals  Totals       `json:"totals"`
}

// TypeCursor is one resource type's place in its history.
type TypeCursor struct {
	Type string `json:"type"`
	Next string `json:"next,omitempty"`
}

// Totals counts a scan's work.
type Totals struct {
	// Types is the number of resource types scanned.
	Types int `json:"types"`
	// Pages and Entries count the history pages and entries read.
	Pages   int64 `json:"pages"`
	Entries int64 `json:"entries"`
	// Deletes counts the delete events published (repeats within one
	// invocation counted once).
	Deletes int64 `json:"deletes"`
	// Outside counts DELETE entries after until (the next window's).
	Outside int64 `json:"outside"`
	// NeverAnnounced counts resources created and deleted inside the
	// window: no export saw them, no delete goes out (none with the fast
	// path on, which may have announced them).
	NeverAnnounced int64 `json:"neverAnnounced"`
	// FastPathSkipped counts deletes the Subscriptions fast path had
	// already published (docs/FASTPATH.md): recorded, not sent again.
	// FastPathMissed counts the deletes published while the fast path's
	// record was consulted: deletions it did not deliver in time.
	FastPathSkipped int64 `json:"fastPathSkipped,omitempty"`
	FastPathMissed  int64 `json:"fastPathMissed,omitempty"`
}

// Output is an invocation's answer: done, or the cursor to call again with.
type Output struct {
	Done   bool    `json:"done"`
	Cursor *Cursor `json:"cursor"`
	Totals Totals  `json:"totals"`
}

// Config configures the scan.
type Config struct {
	// Types are the resource types whose history is read (the pipeline's
	// type filter applied to every R4 type).
	Types []string
	// PageSize is the `_count` asked for (HealthLake answers the number
	// requested or its maximum, whichever is lower); 0 = DefaultPageSize.
	PageSize int
	// Concurrency is how many types are read at once; 0 = DefaultConcurrency.
	Concurrency int
	// DeadlineMargin: the scan stops reading pages this long before the
	// invocation's deadline and returns its cursor.
	DeadlineMargin time.Duration
	// Publish configures the bus and the rate: the pipeline's whole
	// PutEvents share, which Share divides with the Map's children.
	Publish publish.Config
	// Share, when set, is called once the scan has what it will publish,
	// with the run and the publisher's SetRate: the scan runs beside the
	// window's Map, and Share keeps its rate at its part of the run's share
	// (prepare-change: internal/share's board) until the returned stop is
	// called, after the last delete is accepted. Nil: the scan publishes at
	// Publish.Rate.
	Share func(ctx context.Context, runID string, setRate func(float64)) (stop func())
	// Bucket and KMSKeyID: where the delivered-index object is written.
	Bucket, KMSKeyID string
	// FastPath, when set, returns the versions the Subscriptions fast path
	// published since the window's since (nil: consult nothing); the scan
	// skips those deletes (docs/FASTPATH.md). prepare-change sets it when
	// CDC_FAST_PATH is on.
	FastPath func(ctx context.Context, since time.Time, continues bool) (*delivered.Set, error)
	Logger   *slog.Logger
	Metrics  *metrics.Recorder
}

// DefaultPageSize is the `_count` of a history page unless configured.
const DefaultPageSize = 100

// DefaultConcurrency is the number of types read at once unless configured.
const DefaultConcurrency = 8

// Finder is the delete scan. Safe for concurrent use.
type Finder struct {
	hl  HistoryAPI
	eb  publish.PutEventsAPI
	s3  S3API
	cfg Config
	// reads paces the environment's history pages: unpaced until
	// HealthLake throttles one (internal/readpace). The read quota is the
	// data store's, shared with the fast path, the reconciliation and the
	// store's other clients.
	reads *readpace.Pace
}

// New returns a Finder.
func New(hl HistoryAPI, eb publish.PutEventsAPI, s3c S3API, cfg Config) (*Finder, error) {
	if hl == nil || eb == nil || s3c == nil {
		return nil, errors.New("delete scan: HealthLake, EventBridge and S3 clients are required")
	}
	if cfg.Bucket == "" {
		return nil, errors.New("delete scan: no artifact bucket configured")
	}
	if len(cfg.Types) == 0 {
		return nil, errors.New("delete scan: no resource types to scan")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if _, err := publish.New(eb, cfg.Publish); err != nil {
		return nil, fmt.Errorf("delete scan: %w", err)
	}
	return &Finder{hl: hl, eb: eb, s3: s3c, cfg: cfg, reads: readpace.New(0, nil)}, nil
}

// ScanFailed is the error of a scan that could not read a history page or
// publish a delete: the run's Task retries the invocation from the same
// cursor (same eventIds). The Go type name is the Lambda errorType.
type ScanFailed struct{ Err error }

// Error implements error.
func (e *ScanFailed) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *ScanFailed) Unwrap() error { return e.Err }

func (in Input) check() error {
	switch {
	case in.Window.Since.IsZero() && in.Window.Until.IsZero():
		return errors.New("delete scan: input window is required")
	case in.Window.Empty():
		return fmt.Errorf("delete scan: input window %s is empty", in.Window)
	case in.RunID == "":
		return errors.New("delete scan: input runId is required")
	case in.Export.DatastoreID == "":
		return errors.New("delete scan: input export.datastoreId is required")
	}
	return nil
}

// Find scans one invocation's share of the window's history and publishes
// the deletions in it.
func (f *Finder) Find(ctx context.Context, in Input) (Output, error) {
	start := time.Now()
	out, err := f.find(ctx, in)
	f.observe(in, out, time.Since(start), err)
	return out, err
}

func (f *Finder) find(parent context.Context, in Input) (Output, error) {
	if err := in.check(); err != nil {
		return Output{}, err
	}
	if in.reused() {
		return Output{Done: true}, nil
	}
	if envelope.IsSnapshotSince(in.Window.Since) {
		// The first window publishes the store as it is: a deletion
		// before it concerns a resource no consumer was told of.
		return Output{Done: true}, nil
	}
	cur := in.Cursor
	if cur == nil {
		cur = &Cursor{Totals: Totals{Types: len(f.cfg.Types)}}
		for _, t := range f.cfg.Types {
			cur.Pending = append(cur.Pending, TypeCursor{Type: t})
		}
	}
	ctx, cancel := internalDeadline(parent, f.cfg.DeadlineMargin)
	defer cancel()
	pub, err := publish.New(f.eb, f.cfg.Publish)
	if err != nil {
		return Output{}, fmt.Errorf("delete scan: %w", err)
	}
	s := &scan{f: f, in: in, pub: pub, pubCtx: parent, seen: map[string]bool{}, totals: cur.Totals}
	next := s.run(ctx, cur.Pending)
	if s.err == nil && len(s.found) > 0 && f.cfg.FastPath != nil {
		// In the margin the reading deadline keeps, as publishing: a scan
		// stopped by that deadline has spent ctx.
		if s.fast, err = f.cfg.FastPath(parent, in.Window.Since, in.Continues); err != nil {
			s.err = fmt.Errorf("delete scan: the fast path's record: %w", err)
		}
	}
	var stopShare func()
	if s.err == nil && len(s.found) > 0 && f.cfg.Share != nil {
		stopShare = f.cfg.Share(parent, in.RunID, pub.SetRate)
	}
	if s.err == nil {
		if err := s.publishAll(); err != nil {
			s.err = err
		}
	}
	err = pub.Flush(parent)
	if stopShare != nil {
		stopShare()
	}
	if err != nil {
		return Output{Totals: s.totals}, &ScanFailed{Err: fmt.Errorf("delete scan: publish %d deletes: %w", len(s.record), err)}
	}
	if s.err != nil {
		return Output{Totals: s.totals}, &ScanFailed{Err: s.err}
	}
	if err := s.writeRecord(parent, cur.Seq); err != nil {
		return Output{Totals: s.totals}, &ScanFailed{Err: err}
	}
	if len(next) == 0 {
		return Output{Done: true, Totals: s.totals}, nil
	}
	if len(next) == len(cur.Pending) && s.progress == 0 {
		return Output{Totals: s.totals}, &ScanFailed{Err: fmt.Errorf("delete scan: no history page read before the invocation's deadline (%d types pending)", len(next))}
	}
	return Output{Cursor: &Cursor{Pending: next, Seq: cur.Seq + 1, Totals: s.totals}, Totals: s.totals}, nil
}

// scan is one invocation's work.
type scan struct {
	f        *Finder
	in       Input
	pub      *publish.Publisher
	pubCtx   context.Context // publishing may outlast the reading deadline
	mu       sync.Mutex
	seen     map[string]bool
	found    []fhirrest.HistoryEntry // deletes to publish, in the order found
	record   []delivered.Entry
	totals   Totals
	progress int64 // pages read by this invocation
	err      error
	detail   []byte
	fast     *delivered.Set // what the fast path published; nil: not consulted
}

// run reads the pending types' history with bounded parallelism until they
// are read or the deadline comes, and returns the types left with their
// next links, in the order given.
func (s *scan) run(ctx context.Context, pending []TypeCursor) []TypeCursor {
	left := make([]TypeCursor, len(pending))
	copy(left, pending)
	done := make([]bool, len(pending))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < s.f.cfg.Concurrency && w < len(pending); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				done[i] = s.readType(ctx, &left[i])
			}
		}()
	}
	for i := range pending {
		if ctx.Err() != nil || s.failed() {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	var next []TypeCursor
	for i, tc := range left {
		if !done[i] {
			next = append(next, tc)
		}
	}
	return next
}

// errStopped ends the repeats of a throttled page once the scan has failed.
var errStopped = errors.New("delete scan: stopped: another type failed")

func (s *scan) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err != nil
}

// readType reads one type's pages until its history ends (true) or the
// deadline or a failure stops it (false, tc.Next at the first unread page).
// Its pages go at the Finder's pace; a page HealthLake still throttles after
// the client's retries is read again at the slower pace, until the deadline.
func (s *scan) readType(ctx context.Context, tc *TypeCursor) bool {
	w := s.in.Window
	ts := newTypeScan()
	for {
		if s.failed() {
			return false
		}
		if ctx.Err() != nil {
			s.settle(ts, false)
			return false
		}
		var entries []fhirrest.HistoryEntry
		var link string
		err := s.f.reads.Do(ctx, -1, func(ctx context.Context) (err error) {
			if s.failed() {
				return errStopped // another type failed while this page was throttled
			}
			entries, link, err = s.f.hl.TypeHistoryPage(ctx, s.in.Export.DatastoreID, tc.Type, w.Since, s.f.cfg.PageSize, tc.Next)
			return err
		})
		if errors.Is(err, errStopped) {
			return false
		}
		if err != nil {
			if ctx.Err() != nil {
				s.settle(ts, false) // the deadline: the cursor stays at this page
				return false
			}
			s.fail(fmt.Errorf("delete scan: %w", err))
			return false
		}
		older := false
		for i, e := range entries {
			at, err := envelope.ParseTime(e.LastUpdated)
			if err != nil {
				s.fail(fmt.Errorf("delete scan: history of %s: entry %d: lastUpdated: %w", tc.Type, i+1, err))
				return false
			}
			switch {
			case !at.After(w.Since):
				older = true // newest first: the rest is older still
			case at.After(w.Until):
				if e.Deleted {
					s.count(func(t *Totals) { t.Outside++ })
				}
			default:
				ts.add(e)
			}
		}
		s.count(func(t *Totals) { t.Pages++; t.Entries += int64(len(entries)) })
		s.mu.Lock()
		s.progress++
		s.mu.Unlock()
		tc.Next = link
		if link == "" || older {
			return s.settle(ts, true)
		}
	}
}

// typeScan is what one type's pages showed of the window so far: for each
// resource with a DELETE in the window, its newest DELETE, and whether its
// oldest version in the window (so far) created it.
type typeScan struct {
	deletes map[string]fhirrest.HistoryEntry
	created map[string]bool
	order   []string
}

func newTypeScan() *typeScan {
	return &typeScan{deletes: map[string]fhirrest.HistoryEntry{}, created: map[string]bool{}}
}

// add takes one in-window entry; entries come newest first.
func (ts *typeScan) add(e fhirrest.HistoryEntry) {
	if e.Deleted {
		if _, ok := ts.deletes[e.ID]; !ok {
			ts.deletes[e.ID] = e
			ts.order = append(ts.order, e.ID)
		}
	}
	if _, ok := ts.deletes[e.ID]; ok {
		ts.created[e.ID] = e.Created // older entries overwrite: the oldest wins
	}
}

// settle publishes the type's deletes. With the type's window read to its
// start (complete), a resource whose oldest version in the window created
// it was created and deleted inside the window: no export saw it, no
// consumer was told of it, and no delete goes out (NeverAnnounced) —
// unless the fast path runs (Config.FastPath): it may have published the
// creation within seconds, so the delete goes out (skipped as usual when
// the fast path published the delete too). With the window not read to its
// start (the deadline came), every delete goes out: an announced resource
// is never left without its delete, at the cost of a rare delete for a
// resource no consumer knew.
func (s *scan) settle(ts *typeScan, complete bool) bool {
	for _, id := range ts.order {
		if complete && ts.created[id] && s.f.cfg.FastPath == nil {
			s.count(func(t *Totals) { t.NeverAnnounced++ })
			continue
		}
		if err := s.publish(ts.deletes[id]); err != nil {
			s.fail(err)
			return false
		}
	}
	return complete
}

func (s *scan) count(fn func(*Totals)) {
	s.mu.Lock()
	fn(&s.totals)
	s.mu.Unlock()
}

func (s *scan) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// publish queues the delete event of one DELETE entry (once per
// invocation); publishAll sends them after the reading, from one goroutine,
// so no reader ever waits on the publisher's pacing while holding a lock.
func (s *scan) publish(e fhirrest.HistoryEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := envelope.EventID(e.ResourceType, e.ID, e.VersionID)
	if s.seen[id] {
		return nil
	}
	s.seen[id] = true
	s.found = append(s.found, e)
	return nil
}

// publishAll publishes the queued deletes; the caller flushes.
func (s *scan) publishAll() error {
	for _, e := range s.found {
		rec := delivered.Entry{Type: e.ResourceType, ID: e.ID, VersionID: e.VersionID, LastUpdated: e.LastUpdated, Deleted: true}
		if s.fast != nil {
			if s.fast.Has(delivered.Version{Type: e.ResourceType, ID: e.ID, VersionID: e.VersionID}) {
				s.totals.FastPathSkipped++
				s.record = append(s.record, rec)
				continue
			}
			s.totals.FastPathMissed++
		}
		d := envelope.Deletion{ResourceType: e.ResourceType, ResourceID: e.ID, VersionID: e.VersionID, LastUpdated: e.LastUpdated,
			Window: s.in.Window, Export: s.in.Export}
		s.detail = envelope.AppendDeleteDetail(s.detail[:0], d)
		if err := s.pub.Add(s.pubCtx, s.detail, nil); err != nil {
			return fmt.Errorf("delete scan: publish a delete of a %s: %w", e.ResourceType, err)
		}
		s.totals.Deletes++
		s.record = append(s.record, rec)
	}
	return nil
}

// RecordKey is the delivered-index object of invocation seq of a run's
// scan, written on day.
func RecordKey(day time.Time, runID string, seq int) string {
	return delivered.DeliveredKey(day, runID, "history-deletes/"+strconv.Itoa(seq))
}

// writeRecord writes the deletes EventBridge accepted to the delivered
// index (the reconciliation reads them: a delete published here is "gone",
// never published again).
func (s *scan) writeRecord(ctx context.Context, seq int) error {
	if err := indexobject.Put(ctx, s.f.s3, s.f.cfg.Bucket, s.f.cfg.KMSKeyID, RecordKey(time.Now(), s.in.RunID, seq), s.record); err != nil {
		return fmt.Errorf("delete scan: delivered index: %w", err)
	}
	return nil
}

// internalDeadline returns ctx bounded by its deadline less margin.
func internalDeadline(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// observe logs the invocation (counts only, never a resource id) and emits
// the deletes as EventsPublished.
func (f *Finder) observe(in Input, out Output, took time.Duration, err error) {
	if f.cfg.Logger != nil {
		log := logging.Run(f.cfg.Logger, in.ExecutionID, in.RunID, in.Export.JobID, in.Window.String())
		attrs := []any{"done", out.Done, "types", out.Totals.Types, "pages", out.Totals.Pages, "entries", out.Totals.Entries,
			"deletes", out.Totals.Deletes, "outsideWindow", out.Totals.Outside, "neverAnnounced", out.Totals.NeverAnnounced,
			"fastPathSkipped", out.Totals.FastPathSkipped, "fastPathMissed", out.Totals.FastPathMissed, "durationMs", took.Milliseconds()}
		if out.Cursor != nil {
			attrs = append(attrs, "typesPending", len(out.Cursor.Pending))
		}
		if err != nil {
			log.Error("delete scan failed", append(attrs, "error", err.Error())...)
		} else {
			log.Info("delete scan", attrs...)
		}
	}
	if f.cfg.Metrics != nil && err == nil {
		var prev int64
		if in.Cursor != nil {
			prev = in.Cursor.Totals.Deletes
		}
		props := map[string]any{"executionId": in.ExecutionID, "runId": in.RunID, "jobId": in.Export.JobID, "operation": envelope.OperationDelete}
		_ = f.cfg.Metrics.Emit([]metrics.Value{metrics.Count(metrics.EventsPublished, out.Totals.Deletes-prev)}, nil, props)
		if f.cfg.FastPath != nil && in.Continues {
			var prevSkipped, prevMissed int64
			if in.Cursor != nil {
				prevSkipped, prevMissed = in.Cursor.Totals.FastPathSkipped, in.Cursor.Totals.FastPathMissed
			}
			_ = f.cfg.Metrics.Emit([]metrics.Value{
				metrics.Count(metrics.FastPathSkipped, out.Totals.FastPathSkipped-prevSkipped),
				metrics.Count(metrics.FastPathMissed, out.Totals.FastPathMissed-prevMissed),
			}, nil, props)
		}
	}
}
