package reconcile

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/backoff"
	"github.com/healthlake-cdc/healthlake-cdc/internal/healthlake"
	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
)

// The adaptive read pace (readPace).
const (
	// MinThrottledReadRate is the slowest a step's reads go however often
	// HealthLake throttles them, in reads a second.
	MinThrottledReadRate = 1.0
	// ReadRecoverAfter is how long reads must go unthrottled before their
	// rate rises again — by a tenth, at least one read a second — up to the
	// rate they started with.
	ReadRecoverAfter = time.Second
)

// childReadRate is one compare child's share of ReadRate: the Map runs
// MapMaxConcurrency of them at once (at least 1); 0 when unpaced.
func (c Config) childReadRate() float64 {
	return c.ReadRate / float64(max(1, c.MapMaxConcurrency))
}

// readPace spaces one step's HealthLake reads. They start at the
// ReconcileReadRate setting's rate (unpaced when it is 0) and go half as
// fast each time HealthLake throttles one — once a second at most, so a
// burst of throttled reads counts once; an unpaced step takes half the rate
// its reads went at so far — down to MinThrottledReadRate. Each
// ReadRecoverAfter without a throttle the rate rises by a tenth (at least
// one read a second), never above the starting one: the compare children
// run at once, each with its own pace, and so share the quota as AIMD
// senders share a link. HealthLake's read quota is per data store and
// shared with its other clients (docs/RECONCILE.md, step 6): a throttle
// means the store has no room for the reconciliation's pace, and retrying
// at the same pace would take the room of those clients too.
type readPace struct {
	now     func() time.Time
	ceiling float64 // the starting rate; +Inf when unpaced

	mu      sync.Mutex
	bucket  *tokenbucket.Bucket // nil: unpaced
	start   time.Time
	reads   int
	cut     time.Time // when a throttle last lowered the rate (zero: never)
	changed time.Time // when the rate last changed
}

// newReadPace returns a step's pace, starting at rate reads a second (≤ 0:
// unpaced).
func (h *Handler) newReadPace(rate float64) *readPace {
	p := &readPace{now: h.now, ceiling: math.Inf(1), start: h.now()}
	if rate > 0 {
		p.ceiling = rate
		p.bucket = tokenbucket.New(rate, 1, h.now)
	}
	return p
}

// traced returns ctx reporting the throttles of the reads made with it to p.
func (p *readPace) traced(ctx context.Context) context.Context {
	return healthlake.WithTrace(ctx, &healthlake.Trace{Throttled: p.throttled})
}

// wait waits for the next read's turn.
func (p *readPace) wait(ctx context.Context) error {
	p.mu.Lock()
	p.reads++
	b := p.bucket
	if b != nil && b.Rate() < p.ceiling { // only a throttle lowers it
		if now := p.now(); now.Sub(p.changed) >= ReadRecoverAfter {
			b.SetRate(min(p.ceiling, b.Rate()+max(1, b.Rate()/10)))
			p.changed = now
		}
	}
	p.mu.Unlock()
	return b.Wait(ctx, backoff.Sleep)
}

// throttled lowers the rate after a throttled read.
func (p *readPace) throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if !p.cut.IsZero() && now.Sub(p.cut) < time.Second {
		return
	}
	if p.bucket == nil {
		went := float64(p.reads) / max(now.Sub(p.start).Seconds(), 1)
		p.bucket = tokenbucket.New(max(MinThrottledReadRate, went/2), 1, p.now)
	} else {
		p.bucket.SetRate(max(MinThrottledReadRate, p.bucket.Rate()/2))
	}
	p.cut, p.changed = now, now
}

// rate is the current rate; +Inf when unpaced.
func (p *readPace) rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bucket == nil {
		return math.Inf(1)
	}
	return p.bucket.Rate()
}
