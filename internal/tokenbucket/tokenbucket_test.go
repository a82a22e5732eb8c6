package tokenbucket

import (
	"context"
	"testing"
	"time"
)

// TestSetRateChangesThePaceFromNowOn: after SetRate the bucket refills at
// the new rate; what was earned at the old one is kept.
func TestSetRateChangesThePaceFromNowOn(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var slept time.Duration
	clock := func() time.Time { return now.Add(slept) }
	sleep := func(_ context.Context, d time.Duration) error { slept += d; return nil }
	b := New(10, 1, clock)
	for i := 0; i < 11; i++ { // the burst, then 10 at 10/s: 1 s
		if err := b.Wait(context.Background(), sleep); err != nil {
			t.Fatal(err)
		}
	}
	if slept != time.Second {
		t.Fatalf("11 requests at 10/s slept %v, want 1s", slept)
	}
	b.SetRate(40)
	if b.Rate() != 40 {
		t.Fatalf("rate %v after setRate(40)", b.Rate())
	}
	slept0 := slept
	for i := 0; i < 40; i++ {
		if err := b.Wait(context.Background(), sleep); err != nil {
			t.Fatal(err)
		}
	}
	if d := slept - slept0; d < 990*time.Millisecond || d > 1010*time.Millisecond {
		t.Errorf("40 requests at 40/s slept %v, want about 1s", d)
	}
}

// TestTakeRefusesWithoutWaiting: Take serves the burst, then refuses until
// the clock has earned a token, and a refused call takes none.
func TestTakeRefusesWithoutWaiting(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	b := New(10, 10, func() time.Time { return now })
	for i := 0; i < 10; i++ {
		if !b.Take(1) {
			t.Fatalf("call %d of the burst of 10 refused", i+1)
		}
	}
	if b.Take(1) {
		t.Fatal("the 11th call in the same instant was served")
	}
	now = now.Add(99 * time.Millisecond)
	if b.Take(1) {
		t.Fatal("served after 99 ms at 10/s: no token is earned yet")
	}
	now = now.Add(time.Millisecond)
	if !b.Take(1) {
		t.Fatal("refused after 100 ms at 10/s: one token is earned")
	}
	now = now.Add(time.Second)
	if b.Take(11) {
		t.Fatal("took 11 from a bucket of at most 10")
	}
	if !b.Take(10) {
		t.Fatal("a refused Take of 11 took tokens: 10 are no longer there")
	}
	now = now.Add(-time.Second) // a clock that goes back earns nothing
	if b.Take(1) {
		t.Fatal("a clock going back earned tokens")
	}
}
