package publish

import (
	"context"
	"sync"
	"time"
)

// bucket is a token bucket pacing PutEvents requests: it holds at most burst
// tokens, refills at rate per second, and each request takes one. A request
// that finds no token reserves the next one and waits for it, so requests
// leave in order at no more than rate per second after the first burst.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64 // may go negative: tokens reserved by waiting requests
	last   time.Time
	now    func() time.Time
}

func newBucket(rate float64, burst int, now func() time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), now: now}
}

// wait takes a token, sleeping until it is due; it fails only when sleep
// does (ctx done), and the reserved token is then lost, which only slows
// later requests.
func (b *bucket) wait(ctx context.Context, sleep func(context.Context, time.Duration) error) error {
	b.mu.Lock()
	now := b.now()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
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

// setRate changes the refill rate from now on: the tokens earned so far at
// the old rate are kept.
func (b *bucket) setRate(rate float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.last.IsZero() {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	b.rate = rate
}

// currentRate is the refill rate.
func (b *bucket) currentRate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rate
}
