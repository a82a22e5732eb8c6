// Package fastpath is the fast-path consumer: a Lambda fed by an SQS queue
// (event source mapping with partial batch responses) whose messages are the
// EventBridge events HealthLake's FHIR Subscription puts on an internal bus
// (source "healthlake", detail-type "FHIR Subscription Notification"). For
// each resource version a notification announces it publishes the
// pipeline's v1 event to the pipeline's bus with the eventId the export
// path gives the same version ({type}/{id}/_history/{versionId}), so a
// consumer deduplicates the two paths' deliveries, and it records what it
// published (items of the pipeline's table, internal/fastrecord) before it
// answers the batch, so the export path's windows can skip it.
//
// A full-resource notification is published with the resource's bytes as
// received; an id-only one is read back with a FHIR vread: the version's
// bytes make an upsert, a 410 Gone a delete. Anything the fast path does not
// recognise exactly is not published but counted (FastPathUnrecognized):
// the export path delivers every version anyway, so the fast path fails
// closed. A message whose versions were not all accepted by EventBridge is
// reported in BatchItemFailures and comes again: its versions are published
// again with the same eventIds. What was published is recorded at the end
// of every invocation (Handler.record).
package fastpath

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/readpace"
)

// Metric names of the fast path (EMF, dimension Pipeline only). One record
// per report: an execution environment sums its invocations' counts and
// reports them at most once per Config.ReportEvery (Handler.observe).
const (
	// MetricPublished counts the versions EventBridge accepted, deletes included.
	MetricPublished = "FastPathPublished"
	// MetricDeletes counts the delete events among them.
	MetricDeletes = "FastPathDeletes"
	// MetricUnrecognized counts messages, notification events and bundle
	// entries not recognised exactly, left to the export path.
	MetricUnrecognized = "FastPathUnrecognized"
	// MetricVReads counts the version reads of id-only notifications.
	MetricVReads = "FastPathVReads"
	// MetricClaimChecked counts the resources stored as claim-checks.
	MetricClaimChecked = "FastPathClaimChecked"
	// MetricFailed counts the messages reported in BatchItemFailures (they
	// come again).
	MetricFailed = "FastPathFailed"
	// MetricRecordFailed counts record writes that failed; their versions
	// are kept for the environment's next invocation, and a window that
	// runs before publishes them again (duplicates).
	MetricRecordFailed = "FastPathRecordFailed"
	// MetricLagSeconds is the largest lag of the report's published
	// versions: the time of publishing less the version's lastUpdated (a
	// delete's: its notification's timestamp). The maximum, not a sum, so
	// that an alarm on it bounds every version; emitted only when a version
	// was published.
	MetricLagSeconds = "FastPathLagSeconds"
)

// Reasons the handler adds to those of Parse. They name causes, never values.
const (
	ReasonOtherDatastore  = "subscriptionUrl names another data store than CDC_DATASTORE_ID"
	ReasonVersionNotFound = "the announced version was not found (HTTP 404): not visible yet, or erased"
	ReasonReadMismatch    = "the version read is not one JSON object of the announced resourceType, id and meta.versionId with a meta.lastUpdated"
	ReasonTooLarge        = "the event exceeds the PutEvents size limit even with a resourceRef"
)

// Handler is the fast-path Lambda handler. Safe for concurrent use: each
// invocation has its own publisher and emitter, and records what it
// published before it answers (Handler.record).
type Handler struct {
	s3  S3API
	rec *fastrecord.Writer
	eb  publish.PutEventsAPI
	hl  VersionReader
	cfg Config
	// reads paces the environment's version reads: unpaced until HealthLake
	// throttles one (internal/readpace; docs/FASTPATH.md). It waits on real
	// timers, so it keeps the real clock, not cfg.Now.
	reads *readpace.Pace

	mu   sync.Mutex
	kept []delivered.Entry // published, whose record write failed
	// rep is what the environment's invocations did since its last report
	// (log line and metrics, Handler.observe), made at lastReport.
	rep        tally
	lastReport time.Time
}

// Handle processes one SQS batch: it parses each message, publishes the
// versions it announces (one publisher for the batch), waits for their
// outcomes, records what was accepted (Handler.record) and reports in
// BatchItemFailures every message with a version not accepted.
// Unrecognised messages, handshakes and heartbeats are counted and done. It
// returns an error (the whole batch comes again) only when no publisher can
// be built.
// DeadlineMargin is how long before its context's deadline an invocation
// stops taking notifications (Config.DeadlineMargin; 0 when it has none).
func (h *Handler) DeadlineMargin() time.Duration { return max(0, h.cfg.DeadlineMargin) }

func (h *Handler) Handle(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	start := time.Now()
	pub, err := publish.New(h.eb, h.cfg.Publish)
	if err != nil {
		return lambdaevents.SQSEventResponse{}, fmt.Errorf("fast path: %w", err)
	}
	inv := &invocation{h: h, pub: pub, byID: map[string]*version{}, reasons: map[string]int64{}}
	inv.em = &publish.Emitter{Publisher: pub, ClaimCheck: &publish.ClaimCheck{S3: h.s3, Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID}}
	work, cancel := h.internalDeadline(ctx)
	batch := make([]parsed, len(ev.Records))
	for i, rec := range ev.Records {
		batch[i].n, batch[i].err = Parse([]byte(rec.Body))
	}
	inv.prefetch(work, batch)
	for i, rec := range ev.Records {
		inv.message(work, rec.MessageId, batch[i])
	}
	if err := pub.Flush(work); err != nil {
		inv.fail(fmt.Errorf("fast path: publish: %w", err))
	}
	cancel()
	inv.settle()
	h.record(ctx, inv, requestID(ctx))
	resp := lambdaevents.SQSEventResponse{BatchItemFailures: []lambdaevents.SQSBatchItemFailure{}}
	for _, m := range inv.msgs {
		if m.failed {
			inv.c.failedMessages++
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: m.id})
		}
	}
	h.observe(inv, time.Since(start))
	return resp, nil
}

// internalDeadline bounds ctx by its deadline less the margin.
func (h *Handler) internalDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || h.cfg.DeadlineMargin < 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-h.cfg.DeadlineMargin))
}

// requestID is the invocation's Lambda request id, else a random id.
func requestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// counts are an invocation's tallies (the log line and the metrics).
type counts struct {
	messages, handshakes, heartbeats int64
	changes                          int64 // versions announced by recognised notifications
	published, deletes               int64
	unrecognized, filtered           int64
	duplicates                       int64 // versions announced again within the invocation
	vreads                           int64
	failedVersions, failedMessages   int64
	lagMax                           time.Duration
	// recorded: versions this invocation wrote in the record; kept:
	// versions the environment keeps after it (their write failed);
	// recordFailed: record writes that failed (kept for the next try).
	recorded, kept, recordFailed int64
}

// message is one SQS message of the batch.
type message struct {
	id        string
	failed    bool // report in BatchItemFailures
	published bool // a version of it is in the record
}

// version is one version handed to the publisher, and its token: the
// messages that announced it wait on its outcome.
type version struct {
	entry    delivered.Entry
	at       time.Time // lastUpdated (a delete's: its notification's timestamp)
	msgs     []*message
	settled  bool
	accepted bool
}

// invocation is one batch's work.
type invocation struct {
	h       *Handler
	pub     *publish.Publisher
	em      *publish.Emitter
	msgs    []*message
	byID    map[string]*version // by eventId: each version published once per invocation
	order   []*version
	stopped bool // the publisher failed: nothing more is sent
	detail  []byte
	// published are the versions EventBridge accepted, in its order: what
	// Handler.record writes.
	published []delivered.Entry
	key       string // the record item written ("pk sk"), if any
	c         counts
	reasons   map[string]int64
	err       error // the first failure
	// reads are the id-only versions read back before the batch is
	// published (prefetch), by eventId.
	reads map[string]vreadResult
}

func (inv *invocation) skip(reason string) {
	inv.c.unrecognized++
	inv.reasons[reason]++
}

func (inv *invocation) fail(err error) {
	if inv.err == nil {
		inv.err = err
	}
}

// parsed is one SQS message's body as Parse read it.
type parsed struct {
	n   Notification
	err error
}

// message hands one SQS message's versions (p, its parsed body) to the
// publisher.
func (inv *invocation) message(ctx context.Context, id string, p parsed) {
	cfg := inv.h.cfg
	m := &message{id: id}
	inv.msgs = append(inv.msgs, m)
	inv.c.messages++
	n, err := p.n, p.err
	if err != nil {
		var ue *UnrecognizedError
		if errors.As(err, &ue) {
			inv.skip(ue.Reason)
		} else {
			inv.skip(err.Error())
		}
		return
	}
	switch n.Type {
	case TypeHandshake:
		inv.c.handshakes++
		return
	case TypeHeartbeat:
		inv.c.heartbeats++
		return
	}
	if n.DatastoreID != cfg.DatastoreID {
		inv.skip(ReasonOtherDatastore)
		return
	}
	for _, r := range n.Unrecognized {
		inv.skip(r)
	}
	exp := envelope.ExportRef{DatastoreID: cfg.DatastoreID, JobID: "Subscription/" + n.SubscriptionID}
	for _, c := range n.Changes {
		inv.c.changes++
		if !cfg.Filter.Allows(c.ResourceType) {
			inv.c.filtered++
			continue
		}
		if inv.stopped || ctx.Err() != nil {
			m.failed = true // the rest comes again
			if ctx.Err() != nil {
				inv.fail(fmt.Errorf("fast path: stopped %v before the invocation's deadline: %w", cfg.DeadlineMargin, ctx.Err()))
			}
			return
		}
		if err := inv.change(ctx, m, c, exp); err != nil {
			m.failed = true
			inv.fail(err)
			return
		}
	}
}

// change publishes one announced version: a full resource as an upsert, a
// deletion as a delete, an id-only version as what reading it shows.
func (inv *invocation) change(ctx context.Context, m *message, c Change, exp envelope.ExportRef) error {
	if v, ok := inv.byID[c.EventID()]; ok {
		v.msgs = append(v.msgs, m) // the same version in another message: one event
		inv.c.duplicates++
		return nil
	}
	switch {
	case c.Operation == OperationDelete:
		return inv.publishDelete(ctx, m, c, exp)
	case !c.NeedsRead():
		return inv.publishUpsert(ctx, m, c, c.LastUpdated, c.Resource, exp)
	}
	body, err := inv.vread(ctx, c)
	var gone *fhirrest.VersionGoneError
	switch {
	case errors.As(err, &gone) && gone.Deleted():
		// HealthLake keeps a deletion as a version of the history: the
		// announced version is that deletion.
		c.Operation = OperationDelete
		return inv.publishDelete(ctx, m, c, exp)
	case errors.As(err, &gone):
		// 404 is no proof of a deletion (an erased resource, a version
		// not visible yet): the export path, the delete scan or the
		// reconciliation decide.
		inv.skip(ReasonVersionNotFound)
		return nil
	case err != nil:
		return fmt.Errorf("fast path: read an announced %s version: %w", c.ResourceType, err)
	}
	body = bytes.TrimSpace(body)
	f, err := fhir.Peek(body)
	if err != nil || !isObject(body) || f.ResourceType != c.ResourceType || f.ID != c.ID || f.VersionID != c.VersionID || !isInstant(f.LastUpdated) {
		inv.skip(ReasonReadMismatch)
		return nil
	}
	return inv.publishUpsert(ctx, m, c, f.LastUpdated, body, exp)
}

// publishUpsert emits the v1 upsert of one version whose resource is raw:
// inline, or claim-checked when too large.
func (inv *invocation) publishUpsert(ctx context.Context, m *message, c Change, lastUpdated string, raw []byte, exp envelope.ExportRef) error {
	at, err := envelope.ParseTime(lastUpdated)
	if err != nil { // checked by Parse and change: unreachable
		inv.skip(ReasonEntryFields)
		return nil
	}
	v := &version{entry: delivered.Entry{Type: c.ResourceType, ID: c.ID, VersionID: c.VersionID, LastUpdated: lastUpdated}, at: at, msgs: []*message{m}}
	inv.em.Window, inv.em.Export = InstantWindow(at), exp
	_, err = inv.em.Emit(ctx, envelope.Resource{ResourceType: c.ResourceType, ID: c.ID, VersionID: c.VersionID, LastUpdated: lastUpdated, Raw: raw}, v)
	return inv.queued(v, err)
}

// publishDelete adds the v1 delete of one version: the deletion's version,
// at its notification's timestamp.
func (inv *invocation) publishDelete(ctx context.Context, m *message, c Change, exp envelope.ExportRef) error {
	at, err := envelope.ParseTime(c.Timestamp)
	if err != nil { // checked by Parse: unreachable
		inv.skip(ReasonTimestamp)
		return nil
	}
	v := &version{entry: delivered.Entry{Type: c.ResourceType, ID: c.ID, VersionID: c.VersionID, LastUpdated: c.Timestamp, Deleted: true}, at: at, msgs: []*message{m}}
	inv.detail = envelope.AppendDeleteDetail(inv.detail[:0], envelope.Deletion{
		ResourceType: c.ResourceType, ResourceID: c.ID, VersionID: c.VersionID, LastUpdated: c.Timestamp,
		Window: InstantWindow(at), Export: exp,
	})
	return inv.queued(v, inv.pub.Add(ctx, inv.detail, v))
}

// queued keeps v, handed to the publisher with err as the answer: v waits
// for its outcome (none comes for an entry never sent: it fails).
func (inv *invocation) queued(v *version, err error) error {
	var tooLarge *publish.EntryTooLargeError
	if errors.As(err, &tooLarge) {
		inv.skip(ReasonTooLarge) // nothing stored or queued
		return nil
	}
	inv.byID[envelope.EventID(v.entry.Type, v.entry.ID, v.entry.VersionID)] = v
	inv.order = append(inv.order, v)
	if err == nil {
		return nil
	}
	if inv.pub.Wait() != nil {
		inv.stopped = true // the publisher sends nothing more
	}
	return fmt.Errorf("fast path: publish a %s version: %w", v.entry.Type, err)
}

// settle takes the outcomes: an accepted version goes to the record, a
// version without an accepted outcome fails its messages.
func (inv *invocation) settle() {
	for _, o := range inv.pub.Outcomes(nil) {
		v := o.Token.(*version)
		v.settled, v.accepted = true, o.Code == ""
	}
	now := inv.h.cfg.Now()
	for _, v := range inv.order {
		if !v.accepted {
			inv.c.failedVersions++
			for _, m := range v.msgs {
				m.failed = true
			}
			continue
		}
		inv.c.published++
		if v.entry.Deleted {
			inv.c.deletes++
		}
		inv.c.lagMax = max(inv.c.lagMax, now.Sub(v.at))
		inv.published = append(inv.published, v.entry)
		for _, m := range v.msgs {
			m.published = true
		}
	}
}

// record writes what the invocation published, with what earlier writes of
// the environment failed to record, before the batch is answered: a window
// that runs after the invocation finds it (docs/FASTPATH.md, "The record of
// what the fast path published"). The messages are answered whatever the
// write does: a version not recorded only makes a window publish it again,
// with the same eventId — a duplicate, never a loss — so a failed write is
// counted, logged and kept for the environment's next invocation (or its
// shutdown), and no message comes again for it. The write is bounded by the
// invocation's own deadline, not the margin before it.
func (h *Handler) record(ctx context.Context, inv *invocation, unique string) {
	h.mu.Lock()
	pending := append(h.kept, inv.published...)
	h.kept = nil
	h.mu.Unlock()
	h.write(ctx, inv, h.cfg.Now(), unique, pending)
}

// write records entries; on failure it keeps them (at most maxKept, the
// newest) for the next write. h.mu is not held: the write is a network call.
func (h *Handler) write(ctx context.Context, inv *invocation, now time.Time, unique string, entries []delivered.Entry) {
	if len(entries) == 0 {
		return
	}
	key, err := h.rec.Put(ctx, now, unique, entries)
	if err == nil {
		inv.key = key
		inv.c.recorded = int64(len(entries))
		return
	}
	inv.c.recordFailed++
	inv.fail(err)
	h.mu.Lock()
	h.kept = append(entries, h.kept...)
	if n := len(h.kept); n > maxKept {
		h.kept = h.kept[n-maxKept:] // the oldest go unrecorded: duplicates later
	}
	inv.c.kept = int64(len(h.kept))
	h.mu.Unlock()
}

// Shutdown writes what the environment still keeps (versions whose record
// write failed) and makes its last report: Lambda calls it (SIGTERM,
// lambdart.Start) when it shuts the execution environment down, which
// gives it about 500 ms.
func (h *Handler) Shutdown(ctx context.Context) {
	inv := &invocation{h: h, reasons: map[string]int64{}}
	h.mu.Lock()
	pending := h.kept
	h.kept = nil
	h.mu.Unlock()
	h.write(ctx, inv, h.cfg.Now(), requestID(ctx), pending)
	h.mu.Lock()
	h.rep.addRecord(inv)
	rep := h.rep
	h.rep, h.lastReport = tally{}, h.cfg.Now()
	h.mu.Unlock()
	h.emit(rep)
}

// maxKept bounds what an environment keeps after failed record writes
// (about 1 MB of entries in memory).
const maxKept = 20000

// InstantWindow is the window of a fast-path event: the instant of its
// version, (until − 1 ms, until] with until = at rounded up to the
// millisecond, so that at lies in it.
func InstantWindow(at time.Time) envelope.Window {
	until := at.UTC().Truncate(time.Millisecond)
	if until.Before(at) {
		until = until.Add(time.Millisecond)
	}
	return envelope.Window{Since: until.Add(-time.Millisecond), Until: until}
}

// tally is what an environment's invocations did between two reports.
type tally struct {
	invocations                  int64
	c                            counts
	reasons                      map[string]int64
	claimChecked, calls, retried int64
	records                      int64  // record writes that succeeded
	record                       string // the key of the last of them
	durationMax                  time.Duration
}

// addRecord sums what inv did to the record.
func (t *tally) addRecord(inv *invocation) {
	c := inv.c
	t.c.recorded += c.recorded
	t.c.recordFailed += c.recordFailed
	t.c.kept = c.kept // what the environment keeps now
	if inv.key != "" {
		t.records++
		t.record = inv.key
	}
}

// add sums one invocation (ps its publisher's stats) into t.
func (t *tally) add(inv *invocation, claimChecked int64, ps publish.Stats, took time.Duration) {
	c := inv.c
	t.invocations++
	t.c.messages += c.messages
	t.c.handshakes += c.handshakes
	t.c.heartbeats += c.heartbeats
	t.c.changes += c.changes
	t.c.published += c.published
	t.c.deletes += c.deletes
	t.c.unrecognized += c.unrecognized
	t.c.filtered += c.filtered
	t.c.duplicates += c.duplicates
	t.c.vreads += c.vreads
	t.c.failedVersions += c.failedVersions
	t.c.failedMessages += c.failedMessages
	t.c.lagMax = max(t.c.lagMax, c.lagMax)
	t.claimChecked += claimChecked
	t.calls += ps.Calls
	t.retried += ps.Retried
	t.durationMax = max(t.durationMax, took)
	t.addRecord(inv)
	for r, n := range inv.reasons {
		if t.reasons == nil {
			t.reasons = map[string]int64{}
		}
		t.reasons[r] += n
	}
}

// observe reports the invocation. An invocation that leaves messages to
// come again is logged at once (Warn, its own counts). Otherwise its counts
// join the environment's, which are reported — one log line and one EMF
// record, counts only — at most once per ReportEvery (at every invocation
// when it is negative), at the first invocation after the environment was idle
// that long, and when Lambda shuts the environment down (Shutdown). One
// line and one record per invocation cost more in CloudWatch Logs
// ingestion than the invocation itself (docs/COST.md, "The fast path").
func (h *Handler) observe(inv *invocation, took time.Duration) {
	ps := inv.pub.Stats()
	claimChecked := inv.em.ClaimChecked()
	now := h.cfg.Now()
	h.mu.Lock()
	h.rep.add(inv, claimChecked, ps, took)
	// An environment idle that long before this invocation is due too: its
	// last report came at the end of its last invocation.
	due := h.cfg.ReportEvery < 0 || h.lastReport.IsZero() || now.Sub(h.lastReport) >= h.cfg.ReportEvery
	var rep tally
	if due {
		rep = h.rep
		h.rep, h.lastReport = tally{}, now
	}
	h.mu.Unlock()
	if due {
		h.emit(rep)
	}
	if h.cfg.Logger != nil && (inv.err != nil || inv.c.failedMessages > 0) {
		var one tally
		one.add(inv, claimChecked, ps, took)
		attrs := one.attrs()
		if inv.err != nil {
			attrs = append(attrs, "error", inv.err.Error()) // errors name types and counts, never a resource
		}
		h.cfg.Logger.Warn("fast path: messages will come again", attrs...)
	}
}

// attrs are a tally's log attributes.
func (t tally) attrs() []any {
	c := t.c
	attrs := []any{"invocations", t.invocations, "messages", c.messages, "handshakes", c.handshakes, "heartbeats", c.heartbeats, "changes", c.changes,
		"published", c.published, "deletes", c.deletes, "unrecognized", c.unrecognized, "filtered", c.filtered,
		"duplicates", c.duplicates, "vreads", c.vreads, "claimChecked", t.claimChecked, "failedVersions", c.failedVersions,
		"failedMessages", c.failedMessages, "putEventsCalls", t.calls, "entriesRetried", t.retried,
		"lagSecondsMax", c.lagMax.Seconds(), "recorded", c.recorded, "records", t.records, "kept", c.kept, "recordFailed", c.recordFailed,
		"durationMsMax", t.durationMax.Milliseconds()}
	if len(t.reasons) > 0 {
		attrs = append(attrs, "unrecognizedReasons", t.reasons)
	}
	if t.record != "" {
		attrs = append(attrs, "record", t.record)
	}
	return attrs
}

// emit writes one report: the log line (counts only) and the metrics.
func (h *Handler) emit(t tally) {
	if t.invocations == 0 && t.records == 0 && t.c.recordFailed == 0 {
		return
	}
	if h.cfg.Logger != nil {
		h.cfg.Logger.Info("fast path", t.attrs()...)
	}
	if h.cfg.Metrics == nil {
		return
	}
	c := t.c
	values := []metrics.Value{
		metrics.Count(MetricPublished, c.published),
		metrics.Count(MetricDeletes, c.deletes),
		metrics.Count(MetricUnrecognized, c.unrecognized),
		metrics.Count(MetricVReads, c.vreads),
		metrics.Count(MetricClaimChecked, t.claimChecked),
		metrics.Count(MetricFailed, c.failedMessages),
		metrics.Count(MetricRecordFailed, c.recordFailed),
	}
	if c.published > 0 {
		values = append(values, metrics.Seconds(MetricLagSeconds, c.lagMax))
	}
	_ = h.cfg.Metrics.Emit(values, nil, map[string]any{"invocations": t.invocations, "messages": c.messages, "filtered": c.filtered, "handshakes": c.handshakes})
}
