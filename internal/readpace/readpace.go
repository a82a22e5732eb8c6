// Package readpace spaces a client's HealthLake reads to the room the data
// store has for them. HealthLake's read quota (read, vread, history) is per
// data store and shared with every other client of the store: 3,000 a
// second, 100 for a data store created before 21 August 2023
// (docs/DEPLOY.md, "HealthLake quotas"). A throttled read means the store
// has no room for the pace the client reads at, and retrying at the same
// pace would take the room of the store's other clients too. The
// reconciliation's reads (internal/reconcile) and the fast path's version
// reads (internal/fastpath) each keep a Pace.
package readpace

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

const (
	// MinRate is the slowest a Pace goes however often HealthLake throttles
	// its reads, in reads a second.
	MinRate = 1.0
	// RecoverAfter is how long reads must go unthrottled before a Pace's
	// rate rises again: by a tenth, at least one read a second.
	RecoverAfter = time.Second
	// estimateSpan is how far back an unpaced Pace looks to learn the rate
	// its reads went at.
	estimateSpan = 10
)

// Pace spaces reads. It starts at a ceiling rate (unpaced when there is
// none) and goes half as fast each time HealthLake throttles a read — once
// a second at most, so the throttled reads of one burst count once; an
// unpaced Pace takes half the rate its reads went at over the last ten
// seconds — down to MinRate. Each RecoverAfter without a throttle the rate
// rises by a tenth (at least one read a second), never above the ceiling;
// an unpaced Pace is unpaced again once it goes twice the rate it was cut
// from. Several Paces on one store (compare children, execution
// environments) each do the same and so share the quota as AIMD senders
// share a link. Safe for concurrent use.
type Pace struct {
	now     func() time.Time
	ceiling float64 // the starting rate; +Inf when unpaced

	mu      sync.Mutex
	bucket  *tokenbucket.Bucket // nil: unpaced
	start   time.Time
	secs    [estimateSpan]struct{ sec, n int64 } // reads by Unix second, for the estimate
	from    float64                              // unpaced: the rate the first cut halved
	cut     time.Time                            // when a throttle last lowered the rate (zero: never)
	changed time.Time                            // when the rate last changed
}

// New returns a Pace that starts at rate reads a second (≤ 0: unpaced) on
// the clock now (nil: time.Now).
func New(rate float64, now func() time.Time) *Pace {
	if now == nil {
		now = time.Now
	}
	p := &Pace{now: now, ceiling: math.Inf(1), start: now()}
	if rate > 0 {
		p.ceiling = rate
		p.bucket = tokenbucket.New(rate, 1, now)
	}
	return p
}

// Traced returns ctx reporting to p each throttled attempt of the
// HealthLake calls made with it (fhirrest.WithTrace).
func (p *Pace) Traced(ctx context.Context) context.Context {
	return fhirrest.WithTrace(ctx, &fhirrest.Trace{Throttled: p.Throttled})
}

// Wait waits for the next read's turn; it fails only when ctx ends first.
func (p *Pace) Wait(ctx context.Context) error {
	p.mu.Lock()
	now := p.now()
	p.count(now)
	b := p.bucket
	if b != nil && b.Rate() < p.ceiling && now.Sub(p.changed) >= RecoverAfter { // only a throttle lowers it
		r := min(p.ceiling, b.Rate()+max(1, b.Rate()/10))
		if math.IsInf(p.ceiling, 1) && r >= 2*p.from {
			p.bucket, b = nil, nil // unpaced again
		} else {
			b.SetRate(r)
		}
		p.changed = now
	}
	p.mu.Unlock()
	return b.Wait(ctx, backoff.Sleep)
}

// Do makes one read in its turn (Wait) with ctx traced (Traced), and makes
// it again, in its turn at the slower pace, while HealthLake still throttles
// it after the client's retries: at most rounds more times (rounds < 0:
// until ctx ends). It returns the last attempt's error, or Wait's when ctx
// ended first.
func (p *Pace) Do(ctx context.Context, rounds int, read func(context.Context) error) error {
	ctx = p.Traced(ctx)
	for i := 0; ; i++ {
		if err := p.Wait(ctx); err != nil {
			return err
		}
		err := read(ctx)
		if !fhirrest.IsThrottled(err) || ctx.Err() != nil || rounds >= 0 && i >= rounds {
			return err
		}
	}
}

// Throttled lowers the rate after a throttled read.
func (p *Pace) Throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if !p.cut.IsZero() && now.Sub(p.cut) < time.Second {
		return
	}
	if p.bucket == nil {
		p.from = p.went(now)
		p.bucket = tokenbucket.New(max(MinRate, p.from/2), 1, p.now)
	} else {
		p.bucket.SetRate(max(MinRate, p.bucket.Rate()/2))
	}
	p.cut, p.changed = now, now
}

// Rate is the current rate; +Inf when unpaced.
func (p *Pace) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bucket == nil {
		return math.Inf(1)
	}
	return p.bucket.Rate()
}

// count notes a read at now. p.mu is held.
func (p *Pace) count(now time.Time) {
	s := now.Unix()
	slot := &p.secs[(s%estimateSpan+estimateSpan)%estimateSpan]
	if slot.sec != s {
		slot.sec, slot.n = s, 0
	}
	slot.n++
}

// went is the rate the reads went at over the last estimateSpan seconds
// (since the Pace started, if later). p.mu is held.
func (p *Pace) went(now time.Time) float64 {
	s := now.Unix()
	var n int64
	for _, slot := range p.secs {
		if slot.sec > s-estimateSpan && slot.sec <= s {
			n += slot.n
		}
	}
	span := min(now.Sub(p.start).Seconds(), estimateSpan)
	return float64(n) / max(span, 1)
}
