package readpace

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// clock is a settable clock; a Pace's waits go through backoff.Sleep, so the
// tests only call Wait when a token is due.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func waitN(t *testing.T, p *Pace, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := p.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPaceHalvesOnThrottlesAndRecovers: an unpaced Pace takes half the rate
// its reads went at when the first throttle comes; the throttles of one
// second count once; each later one halves again, not below MinRate;
// RecoverAfter without a throttle raises the rate by a tenth, at least one
// read a second; a paced Pace never rises above its starting rate.
func TestPaceHalvesOnThrottlesAndRecovers(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}

	p := New(0, clk.now)
	waitN(t, p, 600) // 600 reads in 2 s: 300 a second
	if !math.IsInf(p.Rate(), 1) {
		t.Fatalf("rate %v before any throttle, want unpaced", p.Rate())
	}
	clk.add(2 * time.Second)
	p.Throttled()
	if p.Rate() != 150 {
		t.Fatalf("rate %v after the first throttle at 300 reads a second, want 150", p.Rate())
	}
	clk.add(500 * time.Millisecond)
	p.Throttled() // the same burst
	if p.Rate() != 150 {
		t.Fatalf("a second throttle within the second lowered the rate to %v", p.Rate())
	}
	for i := 0; i < 10; i++ {
		clk.add(time.Second)
		p.Throttled()
	}
	if p.Rate() != MinRate {
		t.Fatalf("rate %v after 11 halvings from 150, want the floor %v", p.Rate(), MinRate)
	}
	clk.add(RecoverAfter)
	waitN(t, p, 1)
	if p.Rate() != 2 {
		t.Fatalf("rate %v after %v without a throttle, want 2 (one read a second more)", p.Rate(), RecoverAfter)
	}

	q := New(20, clk.now)
	clk.add(time.Second)
	q.Throttled()
	if q.Rate() != 10 {
		t.Fatalf("paced at 20: rate %v after a throttle, want 10", q.Rate())
	}
	for i := 0; i < 12; i++ { // 10 → 11 → 12.1 → … → 20
		clk.add(RecoverAfter)
		waitN(t, q, 1)
	}
	if q.Rate() != 20 {
		t.Fatalf("paced at 20: rate %v after recovering, want back at 20 and no higher", q.Rate())
	}
}

// TestUnpacedPaceLearnsFromRecentReads: a long-lived Pace (the fast path's,
// one per execution environment) halves the rate of its last ten seconds,
// not of its whole life, and is unpaced again once its rate has risen to
// twice the rate it was cut from.
func TestUnpacedPaceLearnsFromRecentReads(t *testing.T) {
	clk := &clock{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	p := New(0, clk.now)
	waitN(t, p, 10)
	clk.add(time.Hour) // an hour idle: 10 reads over its life
	for i := 0; i < 10; i++ {
		waitN(t, p, 40) // then 40 a second for 10 s
		clk.add(time.Second)
	}
	clk.add(-time.Second + 500*time.Millisecond) // still in the burst's last second
	p.Throttled()
	if got := p.Rate(); got != 20 {
		t.Fatalf("rate %v after a throttle at 40 reads a second (an hour idle before), want 20", got)
	}
	// 20 → 22 → 24.2 → … each second without a throttle, until 80.
	for i := 0; i < 100 && !math.IsInf(p.Rate(), 1); i++ {
		clk.add(RecoverAfter)
		before := p.Rate()
		waitN(t, p, 1)
		if r := p.Rate(); !math.IsInf(r, 1) && r <= before {
			t.Fatalf("rate %v after %v without a throttle, was %v", r, RecoverAfter, before)
		}
		if r := p.Rate(); !math.IsInf(r, 1) && r >= 80 {
			t.Fatalf("rate %v kept paced at twice the rate it was cut from (40)", r)
		}
	}
	if !math.IsInf(p.Rate(), 1) {
		t.Fatalf("rate %v after 100 s without a throttle, want unpaced again", p.Rate())
	}
}

// TestWaitEndsWithItsContext: a read whose turn is beyond its context's end
// is not made.
func TestWaitEndsWithItsContext(t *testing.T) {
	p := New(1, nil) // one read a second on the real clock
	waitN(t, p, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); err == nil {
		t.Fatal("the second read within the second did not wait past its context's end")
	}
}

// TestDoReadsAgainWhileThrottled: Do repeats a read HealthLake throttled, at
// most rounds more times, or until its context ends when rounds < 0; any
// other outcome ends it at once.
func TestDoReadsAgainWhileThrottled(t *testing.T) {
	throttle := &fhirrest.APIError{Operation: "VRead", StatusCode: 429, Code: "ThrottlingException"}
	calls := 0
	p := New(0, nil)
	err := p.Do(context.Background(), 2, func(context.Context) error { calls++; return throttle })
	if calls != 3 || !fhirrest.IsThrottled(err) {
		t.Fatalf("rounds 2: %d calls, err %v; want 3 calls and the throttle", calls, err)
	}

	calls = 0
	if err := p.Do(context.Background(), 5, func(context.Context) error { calls++; return errors.New("not found") }); calls != 1 || err == nil {
		t.Fatalf("another error: %d calls, err %v; want 1 call and the error", calls, err)
	}

	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = New(0, nil).Do(ctx, -1, func(context.Context) error {
		calls++
		if calls == 4 {
			cancel()
		}
		return throttle
	})
	if calls != 4 || err == nil {
		t.Fatalf("rounds -1: %d calls, err %v; want the repeats to end with the context, after 4", calls, err)
	}
}
