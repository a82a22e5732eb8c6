package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// Duplicates counts deliveries of an eventId already delivered, by cause.
type Duplicates struct {
	Total int64 `json:"total"`
	// Overlap: a later window delivered it again because its export window
	// starts before its window (the overlap) — the expected cost of the
	// overlap.
	Overlap int64 `json:"overlap"`
	// Retries: the same window delivered it again (a PutEvents retry, a
	// re-run Map item or a crashed invocation run again).
	Retries int64 `json:"retries"`
	// Rerun: a window with the same start delivered it again after the
	// run that first delivered it failed and the checkpoint stayed.
	Rerun int64 `json:"rerun"`
	// Replay: delivered again after a replay moved the checkpoint back.
	Replay int64 `json:"replay"`
	// FastPath: the fast path delivered it again (HealthLake delivered the
	// notification twice, to two invocations). CrossPath: one delivery from
	// each path — a notification later than the window that published the
	// version, or a window that ran before the fast path's record of it
	// was written (docs/FASTPATH.md). Both 0 without the fast path.
	FastPath  int64 `json:"fastPath,omitempty"`
	CrossPath int64 `json:"crossPath,omitempty"`
}

// delivery is what the observer keeps per eventId: when it was first and
// last delivered (virtual Unix nanoseconds), the window of its last
// delivery (an index into observer.windows; fastPathWindow for a fast-path
// delivery) and how often — 24 bytes, for millions of events.
type delivery struct {
	first, last int64
	window      int32
	count       int32
}

// window is a delivery's window bounds as the detail gives them.
type window struct{ since, until string }

// fastPathWindow is the window number of a fast-path delivery: its window
// is the version's instant (docs/FASTPATH.md), one per version, so it is
// not numbered.
const fastPathWindow int32 = -1

// observer is the bus's sink in a simulation: it records every delivery's
// virtual time, the write → delivery latency of each version and the
// duplicates with their causes.
type observer struct {
	mu       sync.Mutex
	start    time.Time
	seen     map[string]delivery
	windows  []window
	windowNo map[window]int32
	lat      []float64
	delLat   []float64
	dup      Duplicates
	replays  []time.Time
	total    int64
	// deleted is the newest deletion time (virtual Unix nanoseconds) a
	// delete event announced per "type/id".
	deleted map[string]int64
	// announced holds the FNV-1a hash of every "type/id" an upsert was
	// delivered for (8 bytes a resource).
	announced map[uint64]struct{}
	// fp, with the fast path on, is what each path delivered per eventId
	// and HealthLake's notification deliveries (fastpath.go).
	fp *fastPathLog
}

func newObserver(start time.Time) *observer {
	return &observer{start: start, seen: map[string]delivery{}, windowNo: map[window]int32{}, deleted: map[string]int64{}, announced: map[uint64]struct{}{}}
}

var _ sink.Sink = (*observer)(nil)

type detailHead struct {
	EventID     string `json:"eventId"`
	Operation   string `json:"operation"`
	LastUpdated string `json:"lastUpdated"`
	Window      struct {
		Since string `json:"since"`
		Until string `json:"until"`
	} `json:"window"`
	Export struct {
		JobID string `json:"jobId"`
	} `json:"export"`
}

// fromFastPath reports whether the event came from the fast path: its
// export.jobId names the Subscription that notified it.
func (d detailHead) fromFastPath() bool { return strings.HasPrefix(d.Export.JobID, "Subscription/") }

// readHead reads the fields of detailHead from a detail's top level,
// stopping once it has them: the detail schema puts them before the
// resource, so the resource's bytes are not scanned.
func readHead(detail []byte) (detailHead, bool) {
	var d detailHead
	dec := json.NewDecoder(bytes.NewReader(detail))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return d, false
	}
	var got int
	for got < 5 && dec.More() {
		t, err := dec.Token()
		if err != nil {
			return d, false
		}
		key, _ := t.(string)
		var dst any
		switch key {
		case "eventId":
			dst = &d.EventID
		case "operation":
			dst = &d.Operation
		case "lastUpdated":
			dst = &d.LastUpdated
		case "window":
			dst = &d.Window
		case "export":
			dst = &d.Export
		default:
			dst = new(json.RawMessage)
			got--
		}
		if err := dec.Decode(dst); err != nil {
			return d, false
		}
		got++
	}
	return d, d.EventID != ""
}

// Deliver records one delivered event; it never refuses one.
func (o *observer) Deliver(_ context.Context, _ string, ev sink.Event) error {
	d, ok := readHead(ev.Detail)
	if !ok {
		return nil
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total++
	fast := d.fromFastPath()
	w := fastPathWindow
	if !fast {
		w = o.window(window{since: d.Window.Since, until: d.Window.Until})
	}
	if o.fp != nil {
		o.fp.delivered(d, fast, w, now)
	}
	if key, _, cut := strings.Cut(d.EventID, "/_history/"); cut {
		if d.Operation == envelope.OperationDelete {
			if lu, err := envelope.ParseTime(d.LastUpdated); err == nil && lu.UnixNano() > o.deleted[key] {
				o.deleted[key] = lu.UnixNano()
			}
		} else {
			o.announced[keyHash(key)] = struct{}{}
		}
	}
	prev, ok := o.seen[d.EventID]
	if !ok {
		o.seen[d.EventID] = delivery{first: now.UnixNano(), last: now.UnixNano(), window: w, count: 1}
		if lu, err := envelope.ParseTime(d.LastUpdated); err == nil && !lu.Before(o.start) {
			if d.Operation == envelope.OperationDelete {
				o.delLat = append(o.delLat, now.Sub(lu).Seconds())
			} else {
				o.lat = append(o.lat, now.Sub(lu).Seconds())
			}
		}
		return nil
	}
	o.dup.Total++
	switch {
	case fast && prev.window == fastPathWindow:
		o.dup.FastPath++
	case fast || prev.window == fastPathWindow:
		o.dup.CrossPath++
	case prev.window == w:
		o.dup.Retries++
	case o.replayedAfter(time.Unix(0, prev.last)):
		o.dup.Replay++
	case o.windows[prev.window].since == d.Window.Since:
		o.dup.Rerun++
	default:
		o.dup.Overlap++
	}
	prev.last, prev.window = now.UnixNano(), w
	prev.count++
	o.seen[d.EventID] = prev
	return nil
}

// Close implements sink.Closer.
func (o *observer) Close() error { return nil }

// window returns the number of w, numbering it when new; the caller holds
// o.mu.
func (o *observer) window(w window) int32 {
	if n, ok := o.windowNo[w]; ok {
		return n
	}
	n := int32(len(o.windows))
	o.windows = append(o.windows, w)
	o.windowNo[w] = n
	return n
}

// replayedAfter reports whether a replay was applied after t; the caller
// holds o.mu.
func (o *observer) replayedAfter(t time.Time) bool {
	for _, r := range o.replays {
		if r.After(t) {
			return true
		}
	}
	return false
}

// replayed notes a replay applied now.
func (o *observer) replayed(at time.Time) {
	o.mu.Lock()
	o.replays = append(o.replays, at)
	o.mu.Unlock()
}

// delivered reports whether eventID was delivered.
func (o *observer) delivered(eventID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.seen[eventID]
	return ok
}

// Percentiles are latencies in seconds.
type Percentiles struct {
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
	Count int     `json:"count"`
}

// percentiles of xs (nearest rank); sorts xs.
func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	sort.Float64s(xs)
	rank := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(xs)))) - 1
		return xs[max(0, min(i, len(xs)-1))]
	}
	return Percentiles{P50: rank(0.50), P95: rank(0.95), P99: rank(0.99), Max: xs[len(xs)-1], Count: len(xs)}
}

// summary returns the latency percentiles of upserts, the duplicates, the
// distinct events and all deliveries.
func (o *observer) summary() (Percentiles, Duplicates, int64, int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lat := append([]float64(nil), o.lat...)
	return percentiles(lat), o.dup, int64(len(o.seen)), o.total
}

// deleteLatency returns the latency percentiles of delete events (deletion
// → first delivery): exports carry no deletions, so the reconciliation's
// schedule bounds them (docs/RECONCILE.md).
func (o *observer) deleteLatency() Percentiles {
	o.mu.Lock()
	defer o.mu.Unlock()
	return percentiles(append([]float64(nil), o.delLat...))
}

// falseDelete reports whether a delete event announced a deletion of
// typ/id after its current, live version was written (lastUpdated): a
// delete of a resource that exists at the end and was not re-created since.
func (o *observer) falseDelete(typ, id, lastUpdated string) bool {
	o.mu.Lock()
	at, ok := o.deleted[typ+"/"+id]
	o.mu.Unlock()
	if !ok {
		return false
	}
	lu, err := envelope.ParseTime(lastUpdated)
	return err != nil || at > lu.UnixNano()
}

// keyHash is FNV-1a of a "type/id".
func keyHash(key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return h.Sum64()
}

// unpublishedDelete reports whether typ/id, deleted or gone at the end, was
// announced by an upsert and never by a delete.
func (o *observer) unpublishedDelete(typ, id string) bool {
	key := typ + "/" + id
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.announced[keyHash(key)]; !ok {
		return false
	}
	_, deleted := o.deleted[key]
	return !deleted
}
