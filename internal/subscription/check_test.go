package subscription_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
)

// checkEvent is what the schedule sends: CheckEvent with the custom
// resource's properties, Types as the comma-separated parameter.
const checkEvent = `{"check":{"DatastoreId":"ds1","Types":"Patient,Observation","BusArn":"` + testBus + `","Payload":"full-resource","Name":"cdc-test"}}`

// checkRig is the setup Lambda serving scheduled checks, with its logs and
// metrics.
type checkRig struct {
	*fixture
	h       *subscription.CustomResource
	logs    *bytes.Buffer
	emf     *bytes.Buffer
	metrics *metrics.Recorder
}

func newCheckRig(t *testing.T) *checkRig {
	t.Helper()
	f := newFixture(t)
	logs, emf := &bytes.Buffer{}, &bytes.Buffer{}
	rec := metrics.New(emf, "cdc-test")
	h, err := subscription.NewCustomResource(f.hl, f.env.URL, subscription.CustomResourceOptions{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: rec,
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &checkRig{fixture: f, h: h, logs: logs, emf: emf, metrics: rec}
}

// check serves the event the schedule sends (CheckEvent with the custom
// resource's properties, Types as the comma-separated parameter) and
// returns the check's metrics and its log line.
func (c *checkRig) check(t *testing.T) (active, repaired float64, line map[string]any) {
	t.Helper()
	c.emf.Reset()
	if err := c.h.Serve(context.Background(), json.RawMessage(checkEvent)); err != nil {
		t.Fatalf("check: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(c.emf.Bytes(), &rec); err != nil {
		t.Fatalf("metrics %q: %v", c.emf.String(), err)
	}
	lines := strings.Split(strings.TrimSpace(c.logs.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatal(err)
	}
	a, _ := rec[subscription.MetricSubscriptionInactive].(float64)
	a = 1 - a // reported as inactive
	r, _ := rec[subscription.MetricSubscriptionRepaired].(float64)
	return a, r, line
}

// TestScheduledCheckRepairsTheSubscriptionAndReportsIt: a healthy
// Subscription is left alone (no write) and reported active; one deleted
// by hand is created again, one in error replaced, each reported repaired
// and not active until HealthLake activates it; a pipeline with neither
// topic nor Subscription (a stack being deleted) gets nothing created.
func TestScheduledCheckRepairsTheSubscriptionAndReportsIt(t *testing.T) {
	c := newCheckRig(t)
	ctx := context.Background()

	// Nothing of the pipeline: nothing is created.
	if a, r, line := c.check(t); a != 0 || r != 0 || line["level"] != "WARN" {
		t.Errorf("without a Subscription: active %v, repaired %v, log %v", a, r, line)
	}
	if w := writes(c.wire.take()); len(w) != 0 {
		t.Errorf("the check wrote %q with nothing of the pipeline in the data store", w)
	}

	first := mustEnsure(t, c.fixture, c.spec())
	c.activate(t)
	c.wire.take()
	if a, r, line := c.check(t); a != 1 || r != 0 || line["status"] != subscription.StatusActive || line["subscriptionId"] != first.SubscriptionID {
		t.Errorf("healthy: active %v, repaired %v, log %v", a, r, line)
	}
	if w := writes(c.wire.take()); len(w) != 0 {
		t.Errorf("the check of a healthy Subscription wrote %q", w)
	}

	// Deleted by hand: created again, requested until activated.
	if err := c.hl.DeleteResource(ctx, "ds1", subscription.SubscriptionType, first.SubscriptionID); err != nil {
		t.Fatal(err)
	}
	c.wire.take()
	a, r, line := c.check(t)
	if a != 0 || r != 1 || line["status"] != subscription.StatusRequested {
		t.Errorf("deleted by hand: active %v, repaired %v, log %v", a, r, line)
	}
	if w := writes(c.wire.take()); !slices.Equal(w, []string{"POST Subscription"}) {
		t.Errorf("writes %q, want the Subscription created again", w)
	}
	second, _ := line["subscriptionId"].(string)
	c.activate(t)
	if a, r, _ := c.check(t); a != 1 || r != 0 {
		t.Errorf("after the activation: active %v, repaired %v", a, r)
	}

	// In error (HealthLake could not deliver the handshake): replaced.
	if err := c.hl.DeleteResource(ctx, "ds1", subscription.SubscriptionType, second); err != nil {
		t.Fatal(err)
	}
	c.notes.fail = true
	if _, _, err := subscription.Check(ctx, c.hl, c.spec()); err != nil {
		t.Fatal(err)
	}
	c.activate(t)
	st, err := subscription.Status(ctx, c.hl, c.spec())
	if err != nil || st.Status != subscription.StatusError {
		t.Fatalf("status %+v, %v: want error", st, err)
	}
	c.notes.fail = false
	c.wire.take()
	a, r, line = c.check(t)
	if a != 0 || r != 1 || line["status"] != subscription.StatusRequested {
		t.Errorf("in error: active %v, repaired %v, log %v", a, r, line)
	}
	if w := writes(c.wire.take()); !slices.Equal(w, []string{"DELETE Subscription/" + st.SubscriptionID, "POST Subscription"}) {
		t.Errorf("writes %q, want the Subscription in error replaced", w)
	}
	if strings.Contains(c.logs.String(), "Patient/") {
		t.Errorf("the log names a resource: %s", c.logs.String())
	}
}

// TestServeTakesCustomResourceEvents: the setup Lambda's one handler still
// answers CloudFormation.
func TestServeTakesCustomResourceEvents(t *testing.T) {
	c := newCRFixture(t)
	ev := c.event("Create", "", c.props(), nil)
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.h.Serve(context.Background(), raw); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if r := c.cfn.Last(t); r.Status != "SUCCESS" || r.RequestID != ev.RequestID {
		t.Errorf("response %+v", r)
	}
	if err := c.h.Serve(context.Background(), json.RawMessage(`[1,2]`)); err == nil {
		t.Error("an event that is neither a check nor a custom resource event was served")
	}
}

// TestCheckStopsAtItsBudget: the check's HealthLake calls are cut off
// after CheckBudget, the bound a Delete waits out before its second pass.
func TestCheckStopsAtItsBudget(t *testing.T) {
	f := newFixture(t)
	h, err := subscription.NewCustomResource(f.hl, f.env.URL, subscription.CustomResourceOptions{
		Logger: slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)), CheckBudget: time.Nanosecond,
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	err = h.Serve(context.Background(), json.RawMessage(checkEvent))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a check past its budget returned %v, want the deadline", err)
	}
	if w := writes(f.wire.take()); len(w) != 0 {
		t.Errorf("a check past its budget wrote %q", w)
	}
}

// TestDeleteWaitFitsTheSetupTimeout: the deployed setup Lambda's timeout
// holds a Delete's first pass (given 30 s here), the wait for a running
// check, the second pass's reserve and the margin kept for the answer.
func TestDeleteWaitFitsTheSetupTimeout(t *testing.T) {
	timeout := stackconfig.Default().FastPathSetupFunction.Timeout
	need := 30*time.Second + subscription.DefaultCheckBudget + subscription.DefaultCheckSettle + 10*time.Second + 10*time.Second
	if need > timeout {
		t.Errorf("a Delete needs %v, the setup Lambda has %v", need, timeout)
	}
}
