// Package tokenbucket paces calls: the PutEvents requests of a publisher
// (internal/publish) and the reconciliation's HealthLake reads
// (internal/reconcile) each wait for a token before they go. The local
// emulators' request-rate quotas take tokens without waiting (Take).
package tokenbucket

import (
	"context"
	"sync"
	"time"
)

// Bucket is a token bucket: it holds at most burst tokens, refills at rate
// per second, and each call takes one. A call that finds no token reserves
// the next one and waits for it, so calls leave in order at no more than
// rate per second after the first burst (with a burst of 1, evenly spaced).
type Bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64 // may go negative: tokens reserved by waiting requests
	last   time.Time
	now    func() time.Time
}

// New returns a bucket of burst tokens (full) refilled at rate per second
// on the clock now (default time.Now).
func New(rate float64, burst int, now func() time.Time) *Bucket {
	if now == nil {
		now = time.Now
	}
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst), now: now}
}

// Wait takes a token, sleeping (with sleep) until it is due; it fails only
// when sleep does (ctx done), and the reserved token is then lost, which
// only slows later calls. A nil bucket does not pace: Wait returns ctx's
// error at once.
func (b *Bucket) Wait(ctx context.Context, sleep func(context.Context, time.Duration) error) error {
	if b == nil {
		return ctx.Err()
	}
	b.mu.Lock()
	b.refill()
	b.tokens--
	var d time.Duration
	if b.tokens < 0 {
		d = time.Duration(-b.tokens / b.rate * float64(time.Second))
	}
	b.mu.Unlock()
	if d <= 0 {
		return ctx.Err()
	}
	return sleep(ctx, d)
}

// SetRate changes the refill rate from now on: the tokens earned so far at
// the old rate are kept.
func (b *Bucket) SetRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.rate = rate
}

// Rate is the refill rate.
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}

// Take takes n tokens if the bucket holds them and reports whether it did;
// it never waits nor reserves. A service's request-rate quota uses it: a
// request that finds too few tokens is refused (throttled) and takes none.
func (b *Bucket) Take(n float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// refill adds the tokens earned since the last call at the current rate, up
// to the burst; a clock that went back earns none. b.mu is held.
func (b *Bucket) refill() {
	now := b.now()
	if !b.last.IsZero() && now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	if b.last.IsZero() || now.After(b.last) {
		b.last = now
	}
}
