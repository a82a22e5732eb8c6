// Package sink holds the destinations cdc-local delivers bus events to: every
// one implements the EventBridge emulator's Sink and receives exactly the JSON
// an EventBridge rule target receives (version, id, detail-type, source,
// account, time, region, resources, detail).
//
//   - stdout, or any io.Writer: one JSON line per event;
//   - file:PATH: one JSON line per event appended to PATH;
//   - http(s)://URL: one POST per event, application/json;
//   - Recorder: keeps the events in memory, for tests and the report.
//
// Parse turns a --sink flag value into one of them.
package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
)

// Sink is the EventBridge emulator's delivery seam.
type Sink = fakeeventbridge.Sink

// Event is what a rule target receives.
type Event = fakeeventbridge.Event

// Closer is a sink holding resources (a file) that must be released.
type Closer interface {
	Sink
	Close() error
}

// Parse builds the sink named by spec: "stdout", "file:PATH" or an http:// or
// https:// URL. stdout is the writer used for "stdout".
func Parse(spec string, stdout io.Writer) (Closer, error) {
	switch {
	case spec == "" || spec == "stdout":
		return NewWriter(stdout), nil
	case strings.HasPrefix(spec, "file:"):
		path := strings.TrimPrefix(spec, "file:")
		if path == "" {
			return nil, errors.New("sink file: empty path")
		}
		return OpenFile(path)
	case strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		return NewHTTP(spec, nil), nil
	}
	return nil, fmt.Errorf("sink %q: want stdout, file:PATH or an http(s):// URL", spec)
}

// Writer writes one JSON line per event to an io.Writer.
type Writer struct {
	mu sync.Mutex
	w  io.Writer
	c  io.Closer
}

// NewWriter returns a sink writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// OpenFile returns a sink appending to the file at path, created if needed.
func OpenFile(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sink file: %w", err)
	}
	return &Writer{w: f, c: f}, nil
}

// Deliver writes ev as one line.
func (s *Writer) Deliver(_ context.Context, _ string, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("sink: encode event %s: %w", ev.ID, err)
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("sink: write event %s: %w", ev.ID, err)
	}
	return nil
}

// Close closes the file of a file sink; for other writers it does nothing.
func (s *Writer) Close() error {
	if s.c == nil {
		return nil
	}
	if err := s.c.Close(); err != nil {
		return fmt.Errorf("sink: close: %w", err)
	}
	return nil
}

// HTTP POSTs each event to a URL.
type HTTP struct {
	url    string
	client *http.Client
}

// NewHTTP returns a sink posting to url with client (default: a client with a
// 10 s timeout).
func NewHTTP(url string, client *http.Client) *HTTP {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	return &HTTP{url: url, client: client}
}

// Deliver POSTs ev; any status outside 2xx is an error.
func (s *HTTP) Deliver(ctx context.Context, _ string, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("sink: encode event %s: %w", ev.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("sink: request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("sink: post event %s: %w", ev.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, bufio.NewReader(io.LimitReader(resp.Body, 1<<16)))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("sink: post event %s: status %d", ev.ID, resp.StatusCode)
	}
	return nil
}

// Close does nothing.
func (s *HTTP) Close() error { return nil }

// Tee delivers to every sink in order and fails on the first error.
type Tee []Sink

// Deliver implements Sink.
func (t Tee) Deliver(ctx context.Context, bus string, ev Event) error {
	for _, s := range t {
		if err := s.Deliver(ctx, bus, ev); err != nil {
			return err
		}
	}
	return nil
}

// Delivery is one event a Recorder kept, with the detail fields tests need.
type Delivery struct {
	Bus     string
	Event   Event
	EventID string // detail.eventId
	RunID   string // detail.runId, when present
}

// Recorder keeps every delivered event and indexes them by the detail's
// eventId. Safe for concurrent use; the zero value is not usable, use
// NewRecorder or NewIDRecorder.
type Recorder struct {
	keepEvents bool

	mu  sync.Mutex
	all []Delivery // whole deliveries (NewRecorder)
	// ids are the deliveries of an ID recorder: bus and eventId only, a
	// tenth of a Delivery's size (a simulation records millions).
	ids     []idDelivery
	byID    map[string]int // eventId → deliveries
	changed chan struct{}
}

// NewRecorder returns an empty recorder that keeps whole events.
func NewRecorder() *Recorder {
	return &Recorder{keepEvents: true, byID: map[string]int{}, changed: make(chan struct{})}
}

// NewIDRecorder returns a recorder that keeps only each delivery's bus and
// eventId: cheap enough for the benchmark and a long-running cdc-local.
func NewIDRecorder() *Recorder {
	return &Recorder{byID: map[string]int{}, changed: make(chan struct{})}
}

// Deliver records ev.
func (r *Recorder) Deliver(_ context.Context, bus string, ev Event) error {
	d := Delivery{Bus: bus}
	if r.keepEvents {
		ev.Detail = append(json.RawMessage(nil), ev.Detail...)
		var det struct {
			EventID string `json:"eventId"`
			RunID   string `json:"runId"`
		}
		_ = json.Unmarshal(ev.Detail, &det)
		d.Event, d.EventID, d.RunID = ev, det.EventID, det.RunID
	} else {
		d.EventID = EventID(ev.Detail)
	}
	r.mu.Lock()
	if r.keepEvents {
		r.all = append(r.all, d)
	} else {
		r.ids = append(r.ids, idDelivery{bus: d.Bus, eventID: d.EventID})
	}
	r.byID[d.EventID]++
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// Close does nothing.
func (r *Recorder) Close() error { return nil }

// idDelivery is what an ID recorder keeps of a delivery.
type idDelivery struct{ bus, eventID string }

// Len returns the number of deliveries.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lenLocked()
}

func (r *Recorder) lenLocked() int {
	if r.keepEvents {
		return len(r.all)
	}
	return len(r.ids)
}

// Deliveries returns a copy of every delivery in order.
func (r *Recorder) Deliveries() []Delivery { return r.Since(0) }

// Since returns the deliveries from position n on (an ID recorder's carry
// the bus and eventId only).
func (r *Recorder) Since(n int) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = max(n, 0)
	if n >= r.lenLocked() {
		return nil
	}
	if r.keepEvents {
		return append([]Delivery(nil), r.all[n:]...)
	}
	out := make([]Delivery, 0, len(r.ids)-n)
	for _, d := range r.ids[n:] {
		out = append(out, Delivery{Bus: d.bus, EventID: d.eventID})
	}
	return out
}

// Count returns how many times the event with the given detail eventId was
// delivered.
func (r *Recorder) Count(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byID[eventID]
}

// Counts returns the number of distinct detail eventIds delivered and of
// all deliveries, without copying anything (what a report needs after
// every window; EventIDs copies the whole index).
func (r *Recorder) Counts() (distinct, deliveries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byID), r.lenLocked()
}

// EventIDs returns the distinct detail eventIds delivered, with counts.
func (r *Recorder) EventIDs() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byID))
	for k, v := range r.byID {
		out[k] = v
	}
	return out
}

// Wait blocks until cond holds for the recorder or ctx is done.
func (r *Recorder) Wait(ctx context.Context, cond func(*Recorder) bool) error {
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		if cond(r) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sink: wait: %w", ctx.Err())
		case <-ch:
		}
	}
}

// Counter counts deliveries and passes nothing on; cheap enough for the
// benchmark.
type Counter struct {
	mu sync.Mutex
	n  int64
}

// Deliver counts ev.
func (c *Counter) Deliver(context.Context, string, Event) error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return nil
}

// Count returns the number of deliveries.
func (c *Counter) Count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// EventID returns the detail's eventId without decoding the whole detail
// (which holds the resource): it finds the member near the start and falls
// back to decoding when the value is escaped or absent there.
func EventID(detail []byte) string {
	const key = `"eventId":"`
	head := detail
	if len(head) > 2048 {
		head = head[:2048]
	}
	if i := bytes.Index(head, []byte(key)); i >= 0 {
		rest := head[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.IndexByte(rest[:j], '\\') < 0 {
			return string(rest[:j])
		}
	}
	var d struct {
		EventID string `json:"eventId"`
	}
	_ = json.Unmarshal(detail, &d)
	return d.EventID
}
