package reconcile

import (
	"context"
	"sync"
	"time"
)

// pacer spaces calls at most rate per second: each wait takes the next
// free slot (now, or 1/rate after the previous one) and sleeps until it.
// A nil pacer never waits. It keeps a compare child's deletion
// confirmations within its share of the ReconcileReadRate setting, so that
// the reconciliation leaves the data store's read quota to its other
// clients.
type pacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time
	now   func() time.Time
}

// childReadRate is one compare child's share of ReadRate: the Map runs
// MapMaxConcurrency of them at once (at least 1); 0 when unpaced.
func (c Config) childReadRate() float64 {
	return c.ReadRate / float64(max(1, c.MapMaxConcurrency))
}

// newPacer returns a pacer of rate calls per second, nil for rate ≤ 0.
func newPacer(rate float64, now func() time.Time) *pacer {
	if !(rate > 0) {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &pacer{every: time.Duration(float64(time.Second) / rate), now: now}
}

// wait blocks until the caller's slot, or ctx ends (its error then; the
// slot is spent).
func (p *pacer) wait(ctx context.Context) error {
	if p == nil {
		return ctx.Err()
	}
	p.mu.Lock()
	now := p.now()
	at := p.next
	if at.Before(now) {
		at = now
	}
	p.next = at.Add(p.every)
	p.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
