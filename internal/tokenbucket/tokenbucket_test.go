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
