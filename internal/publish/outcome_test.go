package publish_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
)

// Every entry added with a token comes back with its outcome exactly once;
// a Rejectable code is the caller's to handle: not retried, not a failure.
func TestOutcomesComeBackWithTheirTokens(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	var mu sync.Mutex
	p, err := publish.New(r.client, publish.Config{EventBus: testBus, Concurrency: 3, Rejectable: []string{"MalformedDetail"},
		Sleep: func(context.Context, time.Duration) error { return nil },
		Rand:  func() float64 { mu.Lock(); defer mu.Unlock(); return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	r.em.FailNextEntries(4, "InternalFailure")
	ctx := context.Background()
	var outs []publish.Outcome
	for i := 0; i < 35; i++ {
		d := detailN(i)
		if i == 17 {
			d = []byte(`{"n":17,"broken":tru}`)
		}
		if err := p.Add(ctx, d, i); err != nil {
			t.Fatalf("Add %d: %v", i, err)
		}
		outs = p.Outcomes(outs)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	outs = p.Outcomes(outs)
	seen := map[int]string{}
	for _, o := range outs {
		i := o.Token.(int)
		if _, dup := seen[i]; dup {
			t.Fatalf("token %d came back twice", i)
		}
		seen[i] = o.Code
	}
	if len(seen) != 35 || seen[17] != "MalformedDetail" {
		t.Fatalf("outcomes %v", seen)
	}
	for i, code := range seen {
		if i != 17 && code != "" {
			t.Fatalf("token %d: %q", i, code)
		}
	}
	if st := p.Stats(); st.Published != 34 || st.Rejected != 1 || st.Failed != 0 || st.Chunks != 34 || st.Retried != 4 {
		t.Fatalf("stats %+v", st)
	}
	if r.sink.Len() != 34 || len(p.Outcomes(nil)) != 0 {
		t.Fatalf("delivered %d", r.sink.Len())
	}
}

// With a deadline, throttling is retried past MaxAttempts: it slows the
// batch and never fails it; only the deadline (ctx done) ends the retries.
func TestThrottlingIsRetriedUntilTheDeadline(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var sleeps []time.Duration
	p, _ := publish.New(r.client, publish.Config{EventBus: testBus, MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second,
		Rand: func() float64 { return 0.999 },
		Sleep: func(ctx context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			return ctx.Err()
		}})
	r.em.ThrottleNextCalls(12)
	r.em.FailNextEntries(1, "ThrottlingException")
	for i := 0; i < 5; i++ {
		_ = p.Add(ctx, detailN(i), i)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("throttling failed the batch: %v", err)
	}
	if st := p.Stats(); st.Published != 5 || st.Failed != 0 || st.Throttled != 12 || st.Calls != 14 {
		t.Fatalf("stats %+v", st)
	}
	// Capped exponential backoff with full jitter (0.999 of the ceiling).
	for i, d := range sleeps {
		ceil := min(time.Second, 100*time.Millisecond<<i)
		if d > ceil || d < ceil*99/100 {
			t.Fatalf("sleep %d = %v, ceiling %v", i, d, ceil)
		}
	}

	// Throttled until the deadline: the send ends with the context's error.
	r.em.ThrottleNextCalls(1 << 20)
	n := 0
	p2, _ := publish.New(r.client, publish.Config{EventBus: testBus, MaxAttempts: 3, Sleep: func(ctx context.Context, d time.Duration) error {
		if n++; n == 40 {
			cancel() // the deadline passes
		}
		return ctx.Err()
	}})
	_ = p2.Add(ctx, detailN(1), 1)
	err := p2.Flush(ctx)
	var ce *publish.CallError
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || p2.Stats().Calls != 40 {
		t.Fatalf("err = %v after %d calls", err, p2.Stats().Calls)
	}
	if outs := p2.Outcomes(nil); len(outs) != 1 || outs[0].Code != "RequestFailed" {
		t.Fatalf("outcomes %+v", outs)
	}
}

// Rate paces requests with a token bucket: after the burst, one request per
// 1/Rate, retries included.
func TestRateLimitPacesRequests(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := clock
	p, err := publish.New(r.client, publish.Config{EventBus: testBus, Rate: 10, Burst: 2,
		Now: func() time.Time { return clock },
		Sleep: func(_ context.Context, d time.Duration) error {
			clock = clock.Add(d)
			return nil
		}, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	r.em.ThrottleNextCalls(1) // one retry: it takes a token too
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		_ = p.Add(ctx, detailN(i), nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// 7 requests, 2 from the burst, 5 at 100 ms each.
	if st := p.Stats(); st.Calls != 7 || clock.Sub(start) != 500*time.Millisecond {
		t.Fatalf("%d calls in %v", st.Calls, clock.Sub(start))
	}
	if _, err := publish.New(r.client, publish.Config{Rate: -1}); err == nil {
		t.Fatal("a negative rate was accepted")
	}
}

// A dry run builds the same entries and sends nothing.
func TestDryRunWritesDetailsAndSendsNothing(t *testing.T) {
	var got []string
	p, err := publish.NewDryRun(func(d []byte) error { got = append(got, string(d)); return nil }, publish.Config{MaxEntryBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Add(ctx, detailN(1), "a"); err != nil {
		t.Fatal(err)
	}
	var tl *publish.EntryTooLargeError
	if err := p.Add(ctx, []byte(`{"s":"`+strings.Repeat("x", 100)+`"}`), "b"); !errors.As(err, &tl) {
		t.Fatalf("oversized: %v", err)
	}
	if err := p.Flush(ctx); err != nil || fmt.Sprint(got) != fmt.Sprint([]string{string(detailN(1))}) {
		t.Fatalf("dry run wrote %v (%v)", got, err)
	}
	if outs := p.Outcomes(nil); len(outs) != 1 || outs[0].Token != "a" || outs[0].Code != "" {
		t.Fatalf("outcomes %+v", outs)
	}
}
