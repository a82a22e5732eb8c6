package prepare_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// quotaRig is the test rig with the EventBridge emulator enforcing a
// PutEvents quota of quota requests/s with a bucket of burst.
func quotaRig(t *testing.T, quota float64, burst int) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	em := fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink,
		PutEventsQuota: quota, PutEventsBurst: burst})
	env.Gateway.Handle(localaws.ServiceEventBridge, em)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	return &rig{env: env, s3: s3c, em: em, sink: sink, eb: eventbridge.NewFromConfig(cfg)}
}

func putPatients(t *testing.T, r *rig, key string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", i), "1", "2026-11-21T09:30:00Z", i%7))
	}
	r.put(t, key, []byte(b.String()))
}

// realTime makes the publisher wait for real: its backoff and rate limit
// must pass real time for the emulator's bucket to refill.
func realTime(c *prepare.Config) {
	c.Publish.Sleep = nil
	c.Publish.BaseDelay, c.Publish.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	c.Publish.Concurrency = 4
}

// Under a low PutEvents quota the batch is throttled, slows down, and
// completes with every event delivered exactly once: throttling is retried
// past MaxAttempts until the deadline, never a failed entry.
func TestThrottledBatchCompletesWithEveryEventOnce(t *testing.T) {
	r := quotaRig(t, 20, 2)
	putPatients(t, r, exportKey, 300) // 30 PutEvents requests
	h := r.handler(t, func(c *prepare.Config) { realTime(c); c.Publish.MaxAttempts = 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := h.Handle(ctx, input(exportKey))
	if err != nil {
		t.Fatalf("a throttled batch failed: %v", err)
	}
	if out.Events != 300 || out.Throttled == 0 || r.em.Stats().QuotaThrottledCalls == 0 {
		t.Fatalf("summary %+v, emulator %+v", out, r.em.Stats())
	}
	seen := map[string]int{}
	for _, id := range eventIDs(t, r.sink) {
		seen[id]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
	if len(seen) != 300 {
		t.Fatalf("delivered %d of 300", len(seen))
	}
}

// CDC_PUTEVENTS_RATE below the quota: the publisher's own token bucket
// keeps every request within it, so EventBridge never throttles.
func TestRateBelowTheQuotaIsNeverThrottled(t *testing.T) {
	r := quotaRig(t, 40, 4) // slack for requests the scheduler delays and sends together
	putPatients(t, r, exportKey, 300)
	env := map[string]string{"CDC_BUCKET": bucket, "CDC_EVENT_BUS": bus, "CDC_PUTEVENTS_RATE": "25"}
	cfg, err := prepare.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	h := r.handler(t, func(c *prepare.Config) { realTime(c); c.Publish.Rate = cfg.Publish.Rate })
	out, err := h.Handle(context.Background(), input(exportKey))
	if err != nil || out.Events != 300 || r.sink.Len() != 300 {
		t.Fatalf("summary %+v: %v", out, err)
	}
	if st := r.em.Stats(); st.ThrottledCalls != 0 || out.Throttled != 0 {
		t.Fatalf("throttled below the quota: %+v", st)
	}
}

// At the internal deadline (ctx deadline − margin) the invocation stops
// taking lines and fails with BatchDeadlineExceeded, the errorType the Map
// retries; the retry publishes the rest, with the same eventIds.
func TestDeadlineFailsCleanlyAndARetryDeliversTheRest(t *testing.T) {
	r := quotaRig(t, 0, 0)
	putPatients(t, r, exportKey, 2000) // 200 requests at 50/s: 4 s
	h := r.handler(t, func(c *prepare.Config) { realTime(c); c.Publish.Rate = 50; c.DeadlineMargin = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	out, err := h.Handle(ctx, input(exportKey))
	var dl *prepare.BatchDeadlineExceeded
	if !errors.As(err, &dl) {
		t.Fatalf("err = %v, want BatchDeadlineExceeded", err)
	}
	if strings.Contains(err.Error(), "Patient/") || out.Lines >= 2000 {
		t.Fatalf("error %q, summary %+v", err, out)
	}
	if typ := lambdaErrorType(t, err); typ != "BatchDeadlineExceeded" {
		t.Fatalf("errorType %q", typ)
	}
	first := map[string]bool{}
	for _, id := range eventIDs(t, r.sink) {
		first[id] = true
	}
	if len(first) == 0 || len(first) >= 2000 {
		t.Fatalf("delivered %d before the deadline", len(first))
	}
	r.sink.Reset()
	h = r.handler(t, func(c *prepare.Config) { realTime(c) })
	out, err = h.Handle(context.Background(), input(exportKey))
	if err != nil || out.Events != 2000 {
		t.Fatalf("retry: %+v %v", out, err)
	}
	all := map[string]bool{}
	for _, id := range eventIDs(t, r.sink) {
		all[id] = true
	}
	for id := range first {
		if !all[id] {
			t.Fatalf("%s has another eventId on the retry", id)
		}
	}
	if len(all) != 2000 {
		t.Fatalf("retry delivered %d distinct events", len(all))
	}
}

// lambdaErrorType is the errorType the Go Lambda runtime reports for err:
// the name of its (pointer-stripped) type.
func lambdaErrorType(t *testing.T, err error) string {
	t.Helper()
	typ := reflect.TypeOf(err)
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	return typ.Name()
}

// TestRetryInsideTheMapChildStopsBeforeTheChildEnds: a Map child is an
// EXPRESS execution that ends 5 minutes after it started, whatever its
// Lambda's timeout; an attempt that starts late in the child (a retry) gets
// an internal deadline at the child's end less the margin, and stops with
// BatchDeadlineExceeded there, not at its own much later deadline.
func TestRetryInsideTheMapChildStopsBeforeTheChildEnds(t *testing.T) {
	r := quotaRig(t, 0, 0)
	putPatients(t, r, exportKey, 2000) // 200 requests at 50/s: 4 s
	h := r.handler(t, func(c *prepare.Config) { realTime(c); c.Publish.Rate = 50; c.DeadlineMargin = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the Lambda's own deadline: far away
	defer cancel()
	in := input(exportKey)
	// The child started 4 min 58.5 s ago: it ends in 1.5 s.
	in.ChildStartTime = envelope.FormatTime(time.Now().Add(-prepare.ExpressLimit + 1500*time.Millisecond))
	start := time.Now()
	out, err := h.Handle(ctx, in)
	var dl *prepare.BatchDeadlineExceeded
	if !errors.As(err, &dl) {
		t.Fatalf("err = %v, want BatchDeadlineExceeded", err)
	}
	if took := time.Since(start); took > 10*time.Second || out.Lines >= 2000 {
		t.Fatalf("stopped after %v with %+v: the child's end did not bound the attempt", took, out)
	}
	// Without a child start the same attempt runs to the end.
	r.sink.Reset()
	out, err = h.Handle(ctx, input(exportKey))
	if err != nil || out.Events != 2000 {
		t.Fatalf("without childStartTime: %+v %v", out, err)
	}
}

// TestConcurrencyCoversTheWholeShare: an invocation keeps enough PutEvents
// calls in flight to send the whole share alone at a 40 ms round trip,
// never fewer than configured, at most 32.
func TestConcurrencyCoversTheWholeShare(t *testing.T) {
	for _, c := range []struct {
		rate       float64
		mapConc    int
		configured int
		want       int
	}{
		{20, 10, 4, 9},   // quota 400: 200 requests/s × 40 ms = 8, +1
		{120, 10, 4, 32}, // quota 2,400: 1,200 × 40 ms = 48: capped
		{2, 10, 4, 4},    // a small share: the configured 4
		{20, 10, 40, 40}, // configured above the cap stays
		{0, 10, 4, 4},    // no rate: the configured
	} {
		cfg := prepare.Config{MapMaxConcurrency: c.mapConc}
		cfg.Publish.Rate = c.rate
		if got := prepare.ConcurrencyFor(cfg, c.configured); got != c.want {
			t.Errorf("rate %v × %d, configured %d: %d in flight, want %d", c.rate, c.mapConc, c.configured, got, c.want)
		}
	}
}
