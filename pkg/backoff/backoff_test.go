package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	base, max := 100*time.Millisecond, time.Second
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 80: time.Second} {
		if got := Ceiling(base, max, attempt); got != want {
			t.Errorf("Ceiling(attempt %d) = %s, want %s", attempt, got, want)
		}
	}
	if got := Ceiling(time.Duration(1)<<62, time.Duration(1)<<62+1, 3); got != time.Duration(1)<<62+1 {
		t.Errorf("overflow not capped: %s", got)
	}
}

func TestSleepStopsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}
