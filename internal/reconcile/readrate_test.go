package reconcile

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// paceClock is a settable clock for readPace; the bucket's waits go through
// backoff.Sleep, so the test only calls wait when a token is due.
type paceClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *paceClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *paceClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestReadPaceHalvesOnThrottlesAndRecovers: an unpaced step takes half the
// rate its reads went at when the first throttle comes; the throttles of
// one second count once; each later one halves again, not below
// MinThrottledReadRate; ReadRecoverAfter without a throttle raises the rate
// by a tenth, at least one read a second; a paced step never rises above
// its starting rate.
func TestReadPaceHalvesOnThrottlesAndRecovers(t *testing.T) {
	clk := &paceClock{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	h := &Handler{now: clk.now}
	ctx := context.Background()

	p := h.newReadPace(0)
	for i := 0; i < 600; i++ { // 600 reads in 2 s: 300 a second
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !math.IsInf(p.rate(), 1) {
		t.Fatalf("rate %v before any throttle, want unpaced", p.rate())
	}
	clk.add(2 * time.Second)
	p.throttled()
	if p.rate() != 150 {
		t.Fatalf("rate %v after the first throttle at 300 reads a second, want 150", p.rate())
	}
	clk.add(500 * time.Millisecond)
	p.throttled() // the same burst
	if p.rate() != 150 {
		t.Fatalf("a second throttle within the second lowered the rate to %v", p.rate())
	}
	for i := 0; i < 10; i++ {
		clk.add(time.Second)
		p.throttled()
	}
	if p.rate() != MinThrottledReadRate {
		t.Fatalf("rate %v after 11 halvings from 150, want the floor %v", p.rate(), MinThrottledReadRate)
	}
	clk.add(ReadRecoverAfter)
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if p.rate() != 2 {
		t.Fatalf("rate %v after %v without a throttle, want 2 (one read a second more)", p.rate(), ReadRecoverAfter)
	}

	q := h.newReadPace(20)
	clk.add(time.Second)
	q.throttled()
	if q.rate() != 10 {
		t.Fatalf("paced at 20: rate %v after a throttle, want 10", q.rate())
	}
	for i := 0; i < 12; i++ { // 10 → 11 → 12.1 → … → 20
		clk.add(ReadRecoverAfter)
		if err := q.wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if q.rate() != 20 {
		t.Fatalf("paced at 20: rate %v after recovering, want back at 20 and no higher", q.rate())
	}
}
