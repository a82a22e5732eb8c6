package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/local/esm"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// FastPathReport is the report's fastPath section (docs/SIMULATION.md, "The
// fast path"): what each path delivered first and how fast, HealthLake's
// modelled notifications, and the windows' FastPathMissed against the
// notifications HealthLake dropped. Latencies are virtual seconds from a
// version's lastUpdated, over the versions written during the run.
type FastPathReport struct {
	// Payload and Types are the Subscription's payload and topic types
	// (nil: every generated type).
	Payload string   `json:"payload"`
	Types   []string `json:"types,omitempty"`
	// ActivationDelaySeconds is the modelled delay; ActivatedAtSeconds when
	// the Subscription became active (its handshake delivered), from the
	// start (-1: never). WritesBeforeActivation are the workload's writes
	// (initial load left out) made before then: HealthLake notifies none of
	// them, the export path alone delivers them.
	ActivationDelaySeconds float64 `json:"activationDelaySeconds"`
	ActivatedAtSeconds     float64 `json:"activatedAtSeconds"`
	WritesBeforeActivation int64   `json:"writesBeforeActivation"`
	// LatencySeconds is write → first delivery over the upserts whose first
	// delivery came from the fast path; DeleteLatencySeconds the same for
	// deletes (deletion → first delete event).
	LatencySeconds       Percentiles `json:"latencySeconds"`
	DeleteLatencySeconds Percentiles `json:"deleteLatencySeconds"`
	// NotificationDelaySeconds is write → HealthLake's delivery of the
	// notification to the notification bus, every delivery (duplicates and
	// late ones included): the modelled delay (SubscriptionOptions.OnDelivered).
	NotificationDelaySeconds Percentiles `json:"notificationDelaySeconds"`
	// ExportLatencySeconds is write → first delivery over the versions
	// written after the activation whose first delivery came from the
	// export path: what the fast path missed (upserts and deletes).
	ExportLatencySeconds Percentiles `json:"exportLatencySeconds"`
	// DeliveredByFastPath counts the versions first delivered by the fast
	// path; DeliveredByExportPath those written after the activation first
	// delivered by the export path.
	DeliveredByFastPath   int64 `json:"deliveredByFastPath"`
	DeliveredByExportPath int64 `json:"deliveredByExportPath"`
	// Missed and Skipped are the FastPathMissed and FastPathSkipped metric
	// totals (the windows' and their delete scans'); Unrecognized the
	// FastPathUnrecognized total (what the fast path refused to publish).
	Missed       int64 `json:"missed"`
	Skipped      int64 `json:"skipped"`
	Unrecognized int64 `json:"unrecognized"`
	// MissedBreakdown is Missed explained from the deliveries (fastpath.go,
	// MissedBreakdown).
	MissedBreakdown MissedBreakdown `json:"missedBreakdown"`
	// Invocations is how many times the fast-path queue's mapping invoked
	// the Lambda, MessagesPerInvocation the messages it received
	// (redeliveries included) per invocation (injected duplicate
	// deliveries' included): its batching (esm.Stats).
	Invocations           int64   `json:"invocations"`
	MessagesPerInvocation float64 `json:"messagesPerInvocation"`
	// PeakPollers is the most pollers the mapping ran at once: five, up to
	// its MaximumConcurrency while receives came back full (esm.Stats).
	PeakPollers int64 `json:"peakPollers"`
	// LowTrafficBatches are the invocations' batches that gathered for
	// Lambda's wait at very low traffic (their first message came after an
	// empty long poll; fastPath.lowTrafficWait) rather than the window
	// (esm.Stats).
	LowTrafficBatches int64 `json:"lowTrafficBatches"`
	// Environments is how many execution environments the local Lambda made
	// for the fast path (one invocation at a time each, idle ones reused:
	// local/lambdas), EnvironmentsShutDown how many it shut down.
	Environments         int64 `json:"environments"`
	EnvironmentsShutDown int64 `json:"environmentsShutDown"`
	// Dropped, Duplicated and Delayed are HealthLake's modelled faults
	// (SubscriptionStats): notifications never delivered, delivered twice,
	// delivered ExtraDelay late.
	Dropped    int64 `json:"dropped"`
	Duplicated int64 `json:"duplicated"`
	Delayed    int64 `json:"delayed"`
	// DroppedLatest counts the dropped versions that were still the latest
	// version of their resource when the window covering them exported
	// (deletions always: the delete scan reads history): those the export
	// path must publish. DroppedSuperseded are the others (a later version
	// was visible to that export, which publishes that one instead).
	// DroppedDelivered are the dropped versions delivered at all.
	DroppedLatest     int64 `json:"droppedLatest"`
	DroppedSuperseded int64 `json:"droppedSuperseded"`
	DroppedDelivered  int64 `json:"droppedDelivered"`
	// DroppedDeletesNeverAnnounced are dropped deletions never delivered
	// whose resource was created inside the same window: the window's
	// delete scan takes such a resource for one no consumer was told of
	// (internal/deletes, NeverAnnounced), but the fast path had told them.
	DroppedDeletesNeverAnnounced int64 `json:"droppedDeletesNeverAnnounced,omitempty"`
	// Notifications are the rest of the subscription model's counts.
	Notifications NotificationCounts `json:"notifications"`
	// MissedEqualsDroppedLatest is Missed == DroppedLatest. MissedExplained
	// is whether every miss has a known cause (the breakdown sums to
	// Missed, none is "other", and the dropped ones published are exactly
	// DroppedLatest); Notes say why Missed and DroppedLatest differ.
	MissedEqualsDroppedLatest bool     `json:"missedEqualsDroppedLatest"`
	MissedExplained           bool     `json:"missedExplained"`
	Notes                     []string `json:"notes,omitempty"`
	// Cost is what the fast path itself cost in the run, measured, beside
	// the cost model's figure at the run's rate (fastpath_cost.go).
	Cost *FastPathCost `json:"cost,omitempty"`
}

// MissedBreakdown splits the export path's publications by windows that
// read the fast path's records (every window but the first) by why the
// fast path had not delivered the version.
type MissedBreakdown struct {
	// BeforeActivation: written before the Subscription was active, never
	// notified.
	BeforeActivation int64 `json:"beforeActivation"`
	// Dropped: HealthLake dropped the notification.
	Dropped int64 `json:"dropped"`
	// Late: the fast path delivered it after the window had published it
	// (a notification delivered late, past the window).
	Late int64 `json:"late"`
	// NotRecorded: the fast path had delivered it, but the window read the
	// record before the fast path's invocation wrote it (an invocation
	// writes its record after its PutEvents, before it answers its batch)
	// or the write failed.
	NotRecorded int64 `json:"notRecorded"`
	// NotRecordedTailSeconds is how long before the workload's last write
	// the oldest of them was written.
	NotRecordedTailSeconds float64 `json:"notRecordedTailSeconds,omitempty"`
	// NotPublished: notified, never published by the fast path (refused or
	// failed).
	NotPublished int64 `json:"notPublished"`
	// Pending: not notified by the end of the run though written after
	// the activation, recently enough that a late notification may still
	// be waiting (notifications.pending).
	Pending int64 `json:"pending"`
	// Other: none of these (not notified though written after the
	// activation).
	Other int64 `json:"other"`
	// Total is the sum: the publications the metric should count.
	Total int64 `json:"total"`
}

// NotificationCounts are the subscription model's other counts.
type NotificationCounts struct {
	Matched    int64 `json:"matched"`
	Sent       int64 `json:"sent"`
	Bundles    int64 `json:"bundles"`
	Retried    int64 `json:"retried"`
	GivenUp    int64 `json:"givenUp"`
	Cancelled  int64 `json:"cancelled"`
	Downgraded int64 `json:"downgraded"`
	Pending    int64 `json:"pending"`
}

// defaultActivationDelay is the emulator's (fakehealthlake.SubscriptionOptions).
const defaultActivationDelay = 5 * time.Minute

// fpVersion is what the observer keeps per eventId with the fast path on
// (virtual Unix nanoseconds; 0: never).
type fpVersion struct {
	lastUpdated int64
	// firstFast and firstExport are each path's first delivery, exports
	// the export path's deliveries and exportWin the window of its first.
	firstFast, firstExport int64
	exports                int32
	exportWin              int32
	// notified is HealthLake's first delivery of the notification.
	notified int64
	deleted  bool
}

// fastPathLog is the observer's record of both paths' deliveries and of
// HealthLake's notifications, per eventId.
// Guarded by observer.mu.
type fastPathLog struct {
	versions map[string]fpVersion
	// delays are every notification delivery's write → delivery, seconds.
	delays []float64
}

func newFastPathLog() *fastPathLog { return &fastPathLog{versions: map[string]fpVersion{}} }

// delivered records one delivery; the caller holds observer.mu.
func (l *fastPathLog) delivered(d detailHead, fast bool, w int32, now time.Time) {
	v := l.versions[d.EventID]
	if v.lastUpdated == 0 {
		if lu, err := envelope.ParseTime(d.LastUpdated); err == nil {
			v.lastUpdated = lu.UnixNano()
		}
	}
	v.deleted = d.Operation == envelope.OperationDelete
	t := now.UnixNano()
	switch {
	case fast:
		if v.firstFast == 0 {
			v.firstFast = t
		}
	default:
		if v.firstExport == 0 {
			v.firstExport, v.exportWin = t, w
		}
		v.exports++
	}
	l.versions[d.EventID] = v
}

// notified is SubscriptionOptions.OnDelivered: HealthLake delivered the
// notification of eventID, written at written, to the bus at handed.
func (o *observer) notified(eventID string, written, handed time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.fp
	l.delays = append(l.delays, handed.Sub(written).Seconds())
	v := l.versions[eventID]
	if v.notified == 0 {
		v.notified = handed.UnixNano()
		l.versions[eventID] = v
	}
}

// committedWindow is a committed window and when its export read the data
// store (the export job's end).
type committedWindow struct {
	since, until, readAt time.Time
}

// windowReads pairs each committed run with its export job (the last
// COMPLETED job submitted while it ran) and returns the windows sorted by
// since; a run whose job is not found is left out.
func windowReads(runs []report.Run, jobs []fakehealthlake.JobInfo) []committedWindow {
	var out []committedWindow
	for _, r := range runs {
		if r.Outcome != report.OutcomeCommitted || r.Window == nil {
			continue
		}
		since, err1 := envelope.ParseTime(r.Window.Since)
		until, err2 := envelope.ParseTime(r.Window.Until)
		if err1 != nil || err2 != nil {
			continue
		}
		var readAt time.Time
		for _, j := range jobs {
			if j.Status == fakehealthlake.StatusCompleted && !j.SubmitTime.Before(r.StartedAt) &&
				(r.FinishedAt.IsZero() || !j.SubmitTime.After(r.FinishedAt)) {
				readAt = j.EndTime
			}
		}
		if !readAt.IsZero() {
			out = append(out, committedWindow{since: since, until: until, readAt: readAt})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].since.Before(out[b].since) })
	return out
}

// fastPathInputs is what the fast-path section is computed from.
type fastPathInputs struct {
	fp          FastPath
	types       []string
	start       time.Time
	activatedAt time.Time // zero: never
	stats       fakehealthlake.SubscriptionStats
	mapping     esm.Stats     // the fast-path queue's mapping
	lambda      lambdas.Stats // the fast-path Lambda's
	dropped     []string
	totals      map[string]float64
	windows     []committedWindow
	// firstWindow is the first window that succeeded.
	firstWindow *report.Span
	stamps      map[string][]stamp
	// lastWrite is the workload's last write, end the end of the run.
	lastWrite, end time.Time
	// maxNotificationDelay is the longest modelled notification delay
	// (delay + jitter, + the extra delay when some are late).
	maxNotificationDelay time.Duration
	// visibilityLag is the export's write-to-export lag: a version is
	// visible to an export that reads at readAt when written by readAt − lag.
	visibilityLag time.Duration
}

// fastPathReport computes the report's fastPath section.
func (o *observer) fastPathReport(in fastPathInputs) *FastPathReport {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.fp
	r := &FastPathReport{Payload: in.fp.Payload, Types: in.types, ActivatedAtSeconds: -1}
	if r.Payload == "" {
		r.Payload = PayloadFullResource
	}
	switch d := in.fp.subscriptionOptions(0).ActivationDelay; {
	case d == 0:
		r.ActivationDelaySeconds = defaultActivationDelay.Seconds()
	case d > 0:
		r.ActivationDelaySeconds = d.Seconds()
	}
	act := int64(0)
	if !in.activatedAt.IsZero() {
		act = in.activatedAt.UnixNano()
		r.ActivatedAtSeconds = in.activatedAt.Sub(in.start).Seconds()
	}
	start := in.start.UnixNano()
	for _, ss := range in.stamps {
		for _, s := range ss {
			// <= act: the simulation runs in virtual time, where a write
			// and the activation can share an instant in either order.
			if s.at >= start && (act == 0 || s.at <= act) {
				r.WritesBeforeActivation++
			}
		}
	}

	// The first window reads no fast-path records (it continues no
	// committed window): its publications are no misses.
	firstWin := int32(-1)
	if in.firstWindow != nil {
		if n, ok := o.windowNo[window{since: in.firstWindow.Since, until: in.firstWindow.Until}]; ok {
			firstWin = n
		}
	}
	dropped := make(map[string]bool, len(in.dropped))
	for _, id := range in.dropped {
		dropped[id] = true
	}
	var fastLat, fastDelLat, exportLat []float64
	b := &r.MissedBreakdown
	for id, v := range l.versions {
		if v.firstFast == 0 && v.firstExport == 0 {
			continue // notified, never delivered
		}
		first := v.firstFast
		byFast := first != 0 && (v.firstExport == 0 || first <= v.firstExport)
		if !byFast {
			first = v.firstExport
		}
		if v.lastUpdated >= start {
			lat := time.Duration(first - v.lastUpdated).Seconds()
			switch {
			case byFast && v.deleted:
				r.DeliveredByFastPath++
				fastDelLat = append(fastDelLat, lat)
			case byFast:
				r.DeliveredByFastPath++
				fastLat = append(fastLat, lat)
			case act != 0 && v.lastUpdated >= act:
				r.DeliveredByExportPath++
				exportLat = append(exportLat, lat)
			}
		}
		n := int64(v.exports)
		if n > 0 && v.exportWin == firstWin {
			n--
		}
		if n <= 0 {
			continue
		}
		switch {
		case dropped[id]:
			b.Dropped += n
		case v.notified == 0 && (act == 0 || v.lastUpdated <= act): // same instant: either order
			b.BeforeActivation += n
		case v.notified == 0 && in.stats.Pending > 0 && v.lastUpdated >= in.end.Add(-in.maxNotificationDelay).UnixNano():
			b.Pending += n
		case v.notified == 0:
			b.Other += n
		case v.firstFast != 0 && v.firstFast < v.firstExport:
			b.NotRecorded += n
			if !in.lastWrite.IsZero() {
				b.NotRecordedTailSeconds = max(b.NotRecordedTailSeconds, time.Duration(in.lastWrite.UnixNano()-v.lastUpdated).Seconds())
			}
		case v.firstFast != 0 || v.notified > v.firstExport:
			b.Late += n
		default:
			b.NotPublished += n
		}
	}
	b.Total = b.BeforeActivation + b.Dropped + b.Late + b.NotRecorded + b.NotPublished + b.Pending + b.Other
	r.LatencySeconds = percentiles(fastLat)
	r.DeleteLatencySeconds = percentiles(fastDelLat)
	r.ExportLatencySeconds = percentiles(exportLat)
	r.NotificationDelaySeconds = percentiles(append([]float64(nil), l.delays...))

	s := in.stats
	r.Dropped, r.Duplicated, r.Delayed = int64(s.Dropped), int64(s.Duplicated), int64(s.Delayed)
	r.Notifications = NotificationCounts{Matched: int64(s.Matched), Sent: int64(s.Sent), Bundles: int64(s.Bundles), Retried: int64(s.Retried),
		GivenUp: int64(s.GivenUp), Cancelled: int64(s.Cancelled), Downgraded: int64(s.Downgraded), Pending: int64(s.Pending)}
	r.Invocations, r.PeakPollers, r.LowTrafficBatches = in.mapping.Invocations, in.mapping.PeakPollers, in.mapping.LowTrafficBatches
	r.Environments, r.EnvironmentsShutDown = in.lambda.Environments, in.lambda.EnvironmentsShutDown
	if r.Invocations > 0 {
		r.MessagesPerInvocation = float64(in.mapping.Messages) / float64(r.Invocations)
	}
	r.Missed = int64(in.totals[metrics.FastPathMissed])
	r.Skipped = int64(in.totals[metrics.FastPathSkipped])
	r.Unrecognized = int64(in.totals[fastpath.MetricUnrecognized])

	for id := range dropped {
		if v := l.versions[id]; v.firstExport != 0 || v.firstFast != 0 {
			r.DroppedDelivered++
		}
		if droppedIsLatest(id, in) {
			r.DroppedLatest++
			if v := l.versions[id]; v.firstExport == 0 && v.firstFast == 0 && createdInWindow(id, in) {
				r.DroppedDeletesNeverAnnounced++
			}
		} else {
			r.DroppedSuperseded++
		}
	}
	r.MissedEqualsDroppedLatest = r.Missed == r.DroppedLatest
	r.MissedExplained = r.Missed == b.Total && b.Other == 0 && b.NotPublished == 0 && r.DroppedDelivered == r.DroppedLatest
	r.Notes = fastPathNotes(r)
	return r
}

// droppedIsLatest reports whether a dropped version was still its
// resource's latest version when the window covering it exported: no later
// version written by the export's read less the visibility lag. A deletion
// always counts (the window's delete scan reads history, not the latest
// version), and so does a version no committed window covers (the export
// path still owes it).
func droppedIsLatest(eventID string, in fastPathInputs) bool {
	key, vid, ok := strings.Cut(eventID, "/_history/")
	if !ok {
		return true
	}
	n, err := strconv.ParseUint(vid, 10, 32)
	if err != nil {
		return true
	}
	ss := in.stamps[key]
	i := sort.Search(len(ss), func(i int) bool { return uint64(ss[i].vid) >= n })
	if i == len(ss) || uint64(ss[i].vid) != n || ss[i].deleted || i+1 == len(ss) {
		return true
	}
	at, next := ss[i].at, ss[i+1].at
	k := sort.Search(len(in.windows), func(k int) bool { return in.windows[k].until.UnixNano() >= at })
	if k == len(in.windows) || in.windows[k].since.UnixNano() >= at {
		return true
	}
	return next > in.windows[k].readAt.Add(-in.visibilityLag).UnixNano()
}

// createdInWindow reports whether eventID is a deletion whose resource was
// created inside the committed window that covers the deletion.
func createdInWindow(eventID string, in fastPathInputs) bool {
	key, vid, _ := strings.Cut(eventID, "/_history/")
	ss := in.stamps[key]
	if len(ss) == 0 {
		return false
	}
	var del *stamp
	for i := range ss {
		if strconv.FormatUint(uint64(ss[i].vid), 10) == vid {
			del = &ss[i]
		}
	}
	if del == nil || !del.deleted {
		return false
	}
	k := sort.Search(len(in.windows), func(k int) bool { return in.windows[k].until.UnixNano() >= del.at })
	return k < len(in.windows) && ss[0].at > in.windows[k].since.UnixNano()
}

// fastPathNotes says, with the report's numbers, why Missed and
// DroppedLatest differ and what else stands out.
func fastPathNotes(r *FastPathReport) []string {
	var notes []string
	b := r.MissedBreakdown
	if !r.MissedEqualsDroppedLatest {
		parts := []string{fmt.Sprintf("missed %d ≠ droppedLatest %d", r.Missed, r.DroppedLatest)}
		if b.BeforeActivation > 0 {
			parts = append(parts, fmt.Sprintf("%d versions written before the Subscription became active at %.0f s (activation delay %.0f s; HealthLake notifies nothing before; the initial load's newest, after the first window's until, included) were published by windows that read the fast path's records: FastPathMissed counts them, as its alarm will in the first windows after the fast path is enabled",
				b.BeforeActivation, r.ActivatedAtSeconds, r.ActivationDelaySeconds))
		}
		if b.Late > 0 || b.Pending > 0 {
			parts = append(parts, fmt.Sprintf("%d notifications came after the window that covers their version had published it, and %d were still on their way when the run ended (%d made late by HealthLake): the window counted them missed; the fast path published those that came again (duplicates.crossPath)",
				b.Late, b.Pending, r.Delayed))
		}
		if b.NotRecorded > 0 {
			parts = append(parts, fmt.Sprintf("%d versions the fast path had published were published again by a window that read the record before the fast path's invocation had written it, or after its write failed (duplicates.crossPath); the oldest of these was written %.0f s before the workload's last write",
				b.NotRecorded, b.NotRecordedTailSeconds))
		}
		if b.NotPublished > 0 {
			parts = append(parts, fmt.Sprintf("%d versions were notified but never published by the fast path (unrecognized %d)", b.NotPublished, r.Unrecognized))
		}
		if b.Other > 0 {
			parts = append(parts, fmt.Sprintf("%d versions written after the activation were never notified", b.Other))
		}
		if r.Missed != b.Total {
			parts = append(parts, fmt.Sprintf("the deliveries account for %d of the %d misses (the metric also counts publications a consumer did not receive: retried batches, failed runs)", b.Total, r.Missed))
		}
		notes = append(notes, strings.Join(parts, "; "))
	}
	if r.DroppedDelivered != r.DroppedLatest {
		s := fmt.Sprintf("droppedDelivered %d ≠ droppedLatest %d: the export path did not publish exactly the dropped versions that were still the latest when their window exported", r.DroppedDelivered, r.DroppedLatest)
		if n := r.DroppedDeletesNeverAnnounced; n > 0 {
			s += fmt.Sprintf("; %d of them are deletions of resources created inside the deletion's window, which the window's delete scan does not publish (internal/deletes NeverAnnounced: no export saw the resource) although the fast path had published its upserts — consumers keep them until a reconciliation (unpublishedDeletes)", n)
		}
		notes = append(notes, s)
	}
	if r.DroppedSuperseded > 0 {
		notes = append(notes, fmt.Sprintf("droppedSuperseded %d dropped versions were replaced by a later version before their window exported: the export path publishes the later one (state transfer), not these", r.DroppedSuperseded))
	}
	return notes
}
