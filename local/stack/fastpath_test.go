package stack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awsevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
	"github.com/healthlake-cdc/healthlake-cdc/local/esm"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// fastPathStack is a small stack with the fast path on, its Subscription
// on Patient activating after a short delay and notifications delivered
// after 50 ms (modelled figures, shortened for tests).
func fastPathStack(t *testing.T, subs fakehealthlake.SubscriptionOptions) *Stack {
	t.Helper()
	if subs.ActivationDelay == 0 {
		subs.ActivationDelay = 300 * time.Millisecond
	}
	if subs.NotificationDelay == 0 {
		subs.NotificationDelay = 50 * time.Millisecond
	}
	if subs.NotificationJitter == 0 {
		subs.NotificationJitter = 10 * time.Millisecond
	}
	subs.Seed = 7
	return startStack(t, func(o *Options) {
		o.SampleSize = 8
		o.FastPath = true
		o.FastPathTypes = []string{"Patient"}
		o.Subscriptions = subs
	})
}

// waitDelivered waits until eventID has been delivered n times (at most 20 s).
func waitDelivered(t *testing.T, st *Stack, eventID string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := st.Delivered.Wait(ctx, func(r *sink.Recorder) bool { return r.Count(eventID) >= n }); err != nil {
		t.Fatalf("%s delivered %d times, want %d: %v", eventID, st.Delivered.Count(eventID), n, err)
	}
}

// waitActive writes a probe Patient until the fast path delivers one of
// them (its mapping gathers for a second first): the Subscription has
// become active.
func waitActive(t *testing.T, st *Stack) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var probes []string
	for time.Now().Before(deadline) {
		v := putPatient(t, st, "fp-probe")
		probes = append(probes, envelope.EventID("Patient", "fp-probe", v))
		time.Sleep(300 * time.Millisecond)
		for _, id := range probes {
			if st.Delivered.Count(id) > 0 {
				return
			}
		}
	}
	t.Fatal("the Subscription did not become active within 20 s")
}

// TestFastPathDeliversWithinSecondsAndWindowsSkipIt: with the fast path on,
// an upsert and a delete reach the bus from HealthLake's notification
// before any window runs, with the eventIds the export path gives them; the
// next window exports the upsert and scans the delete but publishes neither
// again (FastPathSkipped), so each version reaches consumers once.
func TestFastPathDeliversWithinSecondsAndWindowsSkipIt(t *testing.T) {
	t.Parallel()
	st := fastPathStack(t, fakehealthlake.SubscriptionOptions{})
	committed(t, st) // the first window: the seeded store
	waitActive(t, st)
	committed(t, st) // the probes' window

	start := time.Now()
	v := putPatient(t, st, "fp-1")
	up := envelope.EventID("Patient", "fp-1", v)
	waitDelivered(t, st, up, 1)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the upsert took %s through the fast path", took)
	}
	w := committed(t, st)
	if n := st.Delivered.Count(up); n != 1 {
		t.Errorf("%s delivered %d times after the window, want once", up, n)
	}

	before := st.Delivered.Len()
	deleteResource(t, st, "Patient", "fp-1")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var del string
	_ = st.Delivered.Wait(ctx, func(r *sink.Recorder) bool {
		for _, c := range changesOf(t, r.Since(before)) {
			if c.ResourceID == "fp-1" && c.Operation == envelope.OperationDelete {
				del = c.EventID
				return true
			}
		}
		return false
	})
	if del == "" {
		t.Fatal("no delete of fp-1 through the fast path")
	}
	committed(t, st)
	if n := st.Delivered.Count(del); n != 1 {
		t.Errorf("%s delivered %d times after the window's delete scan, want once", del, n)
	}
	if tot := st.Metrics.Totals(); tot[metrics.FastPathSkipped] < 2 {
		t.Errorf("FastPathSkipped = %v (window %s), want the upsert and the delete skipped by their windows", tot[metrics.FastPathSkipped], w.RunID)
	}
}

// TestFastPathMissedIsWhatWasDropped: when HealthLake never delivers the
// notifications (every one dropped), the windows publish every change once
// and FastPathMissed counts them: nothing is lost.
func TestFastPathMissedIsWhatWasDropped(t *testing.T) {
	t.Parallel()
	st := fastPathStack(t, fakehealthlake.SubscriptionOptions{DropRate: 1})
	committed(t, st)
	time.Sleep(time.Second) // past the activation
	committed(t, st)
	missedBefore := st.Metrics.Totals()[metrics.FastPathMissed]
	var ids []string
	for _, id := range []string{"fp-a", "fp-b", "fp-c"} {
		ids = append(ids, envelope.EventID("Patient", id, putPatient(t, st, id)))
	}
	time.Sleep(500 * time.Millisecond)
	for _, id := range ids {
		if n := st.Delivered.Count(id); n != 0 {
			t.Fatalf("%s delivered %d times before any window though every notification was dropped", id, n)
		}
	}
	committed(t, st)
	for _, id := range ids {
		if n := st.Delivered.Count(id); n != 1 {
			t.Errorf("%s delivered %d times, want once (by the window)", id, n)
		}
	}
	if got := st.Metrics.Totals()[metrics.FastPathMissed] - missedBefore; got != 3 {
		t.Errorf("FastPathMissed grew by %v, want the 3 dropped versions", got)
	}
}

// TestScheduledCheckRepairsADeletedSubscription: the schedule's check
// (CheckSubscription, the setup Lambda's handler with the rule's input)
// leaves an active Subscription alone and reports it active; when the
// Subscription is deleted by hand it creates it again and reports it
// inactive until HealthLake activates it, after which the fast path
// delivers again.
func TestScheduledCheckRepairsADeletedSubscription(t *testing.T) {
	t.Parallel()
	st := fastPathStack(t, fakehealthlake.SubscriptionOptions{})
	ctx := context.Background()
	waitActive(t, st)
	hc, err := fhirrest.NewFromConfig(st.Config, st.Res.HealthLakeEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	before, err := subscription.Status(ctx, hc, st.FastPathSpec())
	if err != nil || before.Status != subscription.StatusActive {
		t.Fatalf("status %+v, %v", before, err)
	}
	inactive := func() float64 { return st.Metrics.Totals()[metrics.FastPathSubscriptionInactive] }
	repaired := func() float64 { return st.Metrics.Totals()[subscription.MetricSubscriptionRepaired] }
	if err := st.CheckSubscription(ctx); err != nil {
		t.Fatal(err)
	}
	if inactive() != 0 || repaired() != 0 {
		t.Fatalf("check of an active Subscription: inactive %v, repaired %v", inactive(), repaired())
	}

	deleteResource(t, st, subscription.SubscriptionType, before.SubscriptionID)
	if err := st.CheckSubscription(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := subscription.Status(ctx, hc, st.FastPathSpec())
	if err != nil || after.SubscriptionID == "" || after.SubscriptionID == before.SubscriptionID || after.TopicID != before.TopicID {
		t.Fatalf("after the check: %+v (before %+v), %v", after, before, err)
	}
	if inactive() != 1 || repaired() != 1 {
		t.Errorf("check of a deleted Subscription: inactive %v, repaired %v, want 1 and 1", inactive(), repaired())
	}
	waitActive(t, st)
	if err := st.CheckSubscription(ctx); err != nil {
		t.Fatal(err)
	}
	if inactive() != 1 || repaired() != 1 {
		t.Errorf("check after the activation: inactive total %v, repaired total %v, want unchanged", inactive(), repaired())
	}
}

// TestFastPathTakesNotificationsNearTheEventLimit: a full-resource
// notification HealthLake sends whole (its detail up to 256 KB) grows by
// EventBridge's envelope past SQS's default message size; the fast-path
// queue takes messages up to 1 MiB, so every notification of a band of
// resource sizes around the limit — full-resource or, above it, id-only —
// is published by the fast path (as a claim-check) and none reaches the
// dead-letter queue.
func TestFastPathTakesNotificationsNearTheEventLimit(t *testing.T) {
	t.Parallel()
	st := fastPathStack(t, fakehealthlake.SubscriptionOptions{})
	waitActive(t, st)
	var ids []string
	for pad := 260_000; pad <= 262_200; pad += 100 {
		id := fmt.Sprintf("fp-big-%d", pad)
		body := `{"resourceType":"Patient","id":"` + id + `","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">` +
			strings.Repeat("x", pad) + `</div>"}}`
		v, err := st.PutResource(context.Background(), "Patient", id, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, envelope.EventID("Patient", id, v))
	}
	for _, id := range ids {
		waitDelivered(t, st, id, 1)
	}
	out, err := st.sqsc.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.Res.FastPathDLQURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
		t.Errorf("%s notifications in the fast-path dead-letter queue, want none", n)
	}
}

// TestFastPathBatchingWindowOption: the stack's mapping takes the deployed
// window unless Options.FastPathBatchingWindow sets one; a negative one is
// the setting's 0s — no window, batches of up to 10 — and the queue's
// visibility timeout follows the window.
func TestFastPathBatchingWindowOption(t *testing.T) {
	for _, c := range []struct {
		opt, window time.Duration
		batch       int
	}{
		{0, 0, 10}, // the deployed default: no window
		{time.Second, time.Second, 100},
		{3 * time.Second, 3 * time.Second, 100},
		{-1, 0, 10},
	} {
		s := &Stack{opts: Options{FastPathBatchingWindow: c.opt}}
		cfg := s.deployedConfig()
		if cfg.FastPathBatchingWindow != c.window || cfg.FastPathBatch() != c.batch {
			t.Errorf("option %s: window %s, batch %d; want %s, %d", c.opt, cfg.FastPathBatchingWindow, cfg.FastPathBatch(), c.window, c.batch)
		}
		if v := s.visibility(FnFastPath); v != 6*cfg.FastPathFunction.Timeout+c.window {
			t.Errorf("option %s: visibility %s", c.opt, v)
		}
	}
}

// TestFastPathMappingWaitsAtVeryLowTrafficByDefault: the stack's fast-path
// mapping models Lambda's wait of up to 20 s at very low traffic unless
// Options.FastPathLowTrafficWait turns it off or sets another, and the
// deployed visibility timeout (6 × the function's timeout plus the window)
// holds it, so the event-source mapping accepts it.
func TestFastPathMappingWaitsAtVeryLowTrafficByDefault(t *testing.T) {
	for _, c := range []struct {
		opt, want time.Duration
	}{
		{0, esm.VeryLowTrafficWait},
		{5 * time.Second, 5 * time.Second},
		{-1, 0},
	} {
		s := &Stack{opts: Options{FastPathLowTrafficWait: c.opt}}
		cfg := s.fastPathMapping(s.deployedConfig().FastPathFunction.Timeout)
		if cfg.LowTrafficWait != c.want {
			t.Errorf("option %s: LowTrafficWait %s, want %s", c.opt, cfg.LowTrafficWait, c.want)
		}
		cfg.QueueURL = "http://127.0.0.1/queue/fast-path"
		inv := esm.Func(func(context.Context, awsevents.SQSEvent) (awsevents.SQSEventResponse, error) {
			return awsevents.SQSEventResponse{}, nil
		})
		if _, err := esm.New(sqs.NewFromConfig(aws.Config{Region: "us-east-1"}), inv, cfg); err != nil {
			t.Errorf("option %s: the mapping refused the deployed settings: %v", c.opt, err)
		}
	}
}

// TestFastPathUsageCountsWhatItsDeliveriesUsed: FastPathUsage, the
// simulation's measured fast-path cost, grows with three notified upserts
// by a send each, the mapping's receives and deletes, one invocation and
// one record item (a write) per batch, and the next window's read of the
// record; without the fast path it is zero.
func TestFastPathUsageCountsWhatItsDeliveriesUsed(t *testing.T) {
	t.Parallel()
	if u := (&Stack{}).FastPathUsage(); u != (cost.Usage{}) {
		t.Errorf("without the fast path: %+v", u)
	}
	st := fastPathStack(t, fakehealthlake.SubscriptionOptions{})
	committed(t, st)
	waitActive(t, st)
	committed(t, st)
	time.Sleep(time.Second) // the probes' batches answered
	before, sent := st.FastPathUsage(), st.HealthLake.SubscriptionStats().Bundles
	for i := range 3 {
		id := fmt.Sprintf("fp-cost-%d", i)
		waitDelivered(t, st, envelope.EventID("Patient", id, putPatient(t, st, id)), 1)
	}
	committed(t, st)
	time.Sleep(time.Second)
	after := st.FastPathUsage()
	d := func(f func(cost.Usage) float64) float64 { return f(after) - f(before) }
	invocations := d(func(u cost.Usage) float64 { return u.LambdaRequests })
	if invocations < 1 || invocations > 3 || d(func(u cost.Usage) float64 { return u.LambdaGBSeconds }) <= 0 {
		t.Errorf("Lambda: %v invocations, %v GB-s more; want 1–3 and some", invocations, d(func(u cost.Usage) float64 { return u.LambdaGBSeconds }))
	}
	if w := d(func(u cost.Usage) float64 { return u.DynamoWriteUnits }); w != invocations {
		t.Errorf("%v record writes for %v invocations, want one each", w, invocations)
	}
	if r := d(func(u cost.Usage) float64 { return u.DynamoReadUnits }); r < 1 {
		t.Errorf("the window read the record with %v queries", r)
	}
	sends := float64(st.HealthLake.SubscriptionStats().Bundles - sent)
	if sqs := d(func(u cost.Usage) float64 { return u.SQSRequests }); sends != 3 || sqs < sends+2*invocations {
		t.Errorf("SQS: %v requests more for %v sends and %v invocations; want at least a send each, a receive and a delete per batch", sqs, sends, invocations)
	}
}
