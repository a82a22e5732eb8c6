package fakeeventbridge

import (
	"context"
	"encoding/json"
	"sync"
)

// Event is exactly what an EventBridge rule target receives for one accepted
// PutEvents entry.
type Event struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
	// ReplayName is set on events a replay sends ("replay-name").
	ReplayName string `json:"replay-name,omitempty"`
}

// Sink receives every accepted entry, in request order, as the event a rule
// target would receive. The emulator calls Deliver synchronously while it
// answers PutEvents; a Deliver error turns that entry into an InternalFailure
// result entry, so that locally nothing accepted can vanish (AWS itself
// delivers asynchronously and retries targets for up to 24 hours).
type Sink interface {
	Deliver(ctx context.Context, bus string, ev Event) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, bus string, ev Event) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, bus string, ev Event) error { return f(ctx, bus, ev) }

// Delivered is one event a MemorySink received, with the bus it was put on.
type Delivered struct {
	Bus   string
	Event Event
}

// MemorySink keeps every delivered event in memory, for tests. Its zero value
// is ready to use and safe for concurrent use.
type MemorySink struct {
	mu     sync.Mutex
	events []Delivered
}

// Deliver records ev. The detail is copied.
func (m *MemorySink) Deliver(_ context.Context, bus string, ev Event) error {
	ev.Detail = append(json.RawMessage(nil), ev.Detail...)
	m.mu.Lock()
	m.events = append(m.events, Delivered{Bus: bus, Event: ev})
	m.mu.Unlock()
	return nil
}

// Events returns a copy of the delivered events in delivery order.
func (m *MemorySink) Events() []Delivered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Delivered(nil), m.events...)
}

// Len returns the number of delivered events.
func (m *MemorySink) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// Reset forgets every delivered event.
func (m *MemorySink) Reset() {
	m.mu.Lock()
	m.events = nil
	m.mu.Unlock()
}
