package subscription_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse/cfntest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
)

type crFixture struct {
	*fixture
	cfn  *cfntest.Endpoint
	h    *subscription.CustomResource
	logs *bytes.Buffer
}

func newCRFixture(t *testing.T) *crFixture {
	t.Helper()
	f := newFixture(t)
	logs := &bytes.Buffer{}
	h, err := subscription.NewCustomResource(f.hl, f.env.URL, subscription.CustomResourceOptions{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Sleep:  func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &crFixture{fixture: f, cfn: cfntest.New(t), h: h, logs: logs}
}

func (c *crFixture) props() map[string]any {
	return map[string]any{
		"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:fast-path-setup",
		"DatastoreId":  "ds1",
		"Types":        []any{"Patient", "Observation"},
		"BusArn":       testBus,
		"Payload":      "full-resource",
		"Name":         "cdc-test",
	}
}

func (c *crFixture) event(kind cfn.RequestType, physicalID string, props, old map[string]any) cfn.Event {
	return cfn.Event{
		RequestType: kind, RequestID: "req-" + string(kind), ResponseURL: c.cfn.URL(),
		ResourceType: "Custom::HealthLakeSubscription", LogicalResourceID: "FastPathSubscription",
		StackID: "arn:aws:cloudformation:us-east-1:123456789012:stack/cdc-test/1", PhysicalResourceID: physicalID,
		ResourceProperties: props, OldResourceProperties: old,
	}
}

// handle runs an event and returns CloudFormation's response.
func (c *crFixture) handle(t *testing.T, ev cfn.Event) cfn.Response {
	t.Helper()
	if err := c.h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("handle %s: %v", ev.RequestType, err)
	}
	r := c.cfn.Last(t)
	if r.RequestID != ev.RequestID || r.LogicalResourceID != ev.LogicalResourceID || r.StackID != ev.StackID {
		t.Errorf("response does not echo the event: %+v", r)
	}
	return r
}

func TestCustomResourceCreateUpdateDelete(t *testing.T) {
	c := newCRFixture(t)
	ctx := context.Background()

	created := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	st, err := subscription.Status(ctx, c.hl, c.spec())
	if err != nil || st.SubscriptionID == "" {
		t.Fatalf("status after create: %+v, %v", st, err)
	}
	want := map[string]any{"SubscriptionId": st.SubscriptionID, "TopicId": st.TopicID, "Status": "requested"}
	pipeline := subscription.PipelineID(c.spec())
	if pipeline != "pipeline:ds1:cdc-test" {
		t.Fatalf("PipelineID = %q", pipeline)
	}
	if created.Status != cfn.StatusSuccess || created.PhysicalResourceID != pipeline || asJSON(created.Data) != asJSON(want) {
		t.Fatalf("create response %+v, want SUCCESS, id %s, data %v", created, pipeline, want)
	}

	// An update that keeps the settings keeps the Subscription; HealthLake
	// has activated it meanwhile.
	c.activate(t)
	same := c.handle(t, c.event(cfn.RequestUpdate, pipeline, c.props(), c.props()))
	if same.Status != cfn.StatusSuccess || same.PhysicalResourceID != pipeline || same.Data["Status"] != "active" ||
		same.Data["SubscriptionId"] != st.SubscriptionID {
		t.Errorf("update without change %+v", same)
	}

	// A changed bus replaces the Subscription and keeps the
	// PhysicalResourceId: CloudFormation sends no Delete.
	props := c.props()
	props["BusArn"] = otherBus
	props["Types"] = "Patient, Observation"
	moved := c.handle(t, c.event(cfn.RequestUpdate, pipeline, props, c.props()))
	newSub, _ := moved.Data["SubscriptionId"].(string)
	if moved.Status != cfn.StatusSuccess || moved.PhysicalResourceID != pipeline || newSub == "" || newSub == st.SubscriptionID ||
		moved.Data["TopicId"] != st.TopicID || moved.Data["Status"] != "requested" {
		t.Fatalf("update with a new bus %+v", moved)
	}
	c.absent(t, "Subscription", st.SubscriptionID)
	c.read(t, "Subscription", newSub)

	// The stack's deletion removes both.
	gone := c.handle(t, c.event(cfn.RequestDelete, pipeline, props, nil))
	if gone.Status != cfn.StatusSuccess || gone.PhysicalResourceID != pipeline {
		t.Errorf("delete %+v", gone)
	}
	c.absent(t, "Subscription", newSub)
	c.absent(t, "SubscriptionTopic", st.TopicID)
	// Lambda may run the Delete again: nothing left is fine.
	if again := c.handle(t, c.event(cfn.RequestDelete, pipeline, props, nil)); again.Status != cfn.StatusSuccess {
		t.Errorf("second delete %+v", again)
	}
	if strings.Contains(c.logs.String(), "X-Amz-Signature") {
		t.Errorf("the logs carry the ResponseURL: %s", c.logs.String())
	}
}

// An operator replaces the Subscription by hand (docs/OPERATIONS.md,
// FastPathMissedAlarm); the stack's deletion still removes it.
func TestCustomResourceDeleteRemovesASubscriptionReplacedByHand(t *testing.T) {
	c := newCRFixture(t)
	ctx := context.Background()
	created := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	first, _ := created.Data["SubscriptionId"].(string)
	other := c.spec()
	other.BusARN = otherBus // settings the stack did not give: Ensure replaces the Subscription
	res, err := subscription.Ensure(ctx, c.hl, other)
	if err != nil || res.SubscriptionID == "" || res.SubscriptionID == first {
		t.Fatalf("replacement by hand: %+v, %v", res, err)
	}
	gone := c.handle(t, c.event(cfn.RequestDelete, created.PhysicalResourceID, c.props(), nil))
	if gone.Status != cfn.StatusSuccess {
		t.Fatalf("delete %+v", gone)
	}
	c.absent(t, "Subscription", res.SubscriptionID)
	c.absent(t, "SubscriptionTopic", res.TopicID)
}

// A resource created when the PhysicalResourceId was the Subscription's id
// keeps that scheme: an Update that replaces the Subscription answers the new
// Subscription's id, and CloudFormation's Delete of the old id removes
// nothing; the stack's deletion, with the current id, removes everything.
func TestCustomResourceKeepsTheSubscriptionIdOfAnOlderResource(t *testing.T) {
	c := newCRFixture(t)
	ctx := context.Background()
	res, err := subscription.Ensure(ctx, c.hl, c.spec())
	if err != nil {
		t.Fatal(err)
	}
	legacy := res.SubscriptionID
	same := c.handle(t, c.event(cfn.RequestUpdate, legacy, c.props(), c.props()))
	if same.Status != cfn.StatusSuccess || same.PhysicalResourceID != legacy {
		t.Fatalf("update without change %+v", same)
	}
	props := c.props()
	props["BusArn"] = otherBus
	moved := c.handle(t, c.event(cfn.RequestUpdate, legacy, props, c.props()))
	if moved.Status != cfn.StatusSuccess || moved.PhysicalResourceID == legacy || moved.Data["SubscriptionId"] != moved.PhysicalResourceID {
		t.Fatalf("update with a new bus %+v", moved)
	}
	c.wire.take()
	cleanup := c.handle(t, c.event(cfn.RequestDelete, legacy, c.props(), nil))
	if cleanup.Status != cfn.StatusSuccess || cleanup.PhysicalResourceID != legacy {
		t.Errorf("delete of the replaced Subscription %+v", cleanup)
	}
	if w := writes(c.wire.take()); len(w) != 0 {
		t.Errorf("delete of the replaced Subscription wrote %q", w)
	}
	c.read(t, "Subscription", moved.PhysicalResourceID)
	gone := c.handle(t, c.event(cfn.RequestDelete, moved.PhysicalResourceID, props, nil))
	if gone.Status != cfn.StatusSuccess {
		t.Fatalf("delete %+v", gone)
	}
	c.absent(t, "Subscription", moved.PhysicalResourceID)
	c.absent(t, "SubscriptionTopic", res.TopicID)
}

func TestCustomResourceUpdateOfTheNameReplacesThePipelinesResources(t *testing.T) {
	c := newCRFixture(t)
	created := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	props := c.props()
	props["Name"] = "cdc-renamed"
	renamed := c.handle(t, c.event(cfn.RequestUpdate, created.PhysicalResourceID, props, c.props()))
	if renamed.Status != cfn.StatusSuccess || renamed.PhysicalResourceID == created.PhysicalResourceID {
		t.Fatalf("rename %+v", renamed)
	}
	// CloudFormation deletes the old resource with the old properties: the
	// old name's topic and Subscription go, the new name's stay. A Delete
	// whose id names another pipeline than its properties removes nothing.
	if odd := c.handle(t, c.event(cfn.RequestDelete, renamed.PhysicalResourceID, c.props(), nil)); odd.Status != cfn.StatusSuccess {
		t.Fatalf("delete with the properties of another pipeline %+v", odd)
	}
	c.read(t, "Subscription", created.Data["SubscriptionId"].(string))
	old := c.handle(t, c.event(cfn.RequestDelete, created.PhysicalResourceID, c.props(), nil))
	if old.Status != cfn.StatusSuccess {
		t.Fatalf("delete of the old name %+v", old)
	}
	c.absent(t, "Subscription", created.Data["SubscriptionId"].(string))
	c.absent(t, "SubscriptionTopic", created.Data["TopicId"].(string))
	c.read(t, "Subscription", renamed.Data["SubscriptionId"].(string))
	c.read(t, "SubscriptionTopic", renamed.Data["TopicId"].(string))
}

func TestCustomResourceFailedCreateAndItsRollback(t *testing.T) {
	c := newCRFixture(t)
	props := c.props()
	props["Types"] = ""
	failed := c.handle(t, c.event(cfn.RequestCreate, "", props, nil))
	if failed.Status != cfn.StatusFailed || failed.PhysicalResourceID != "pipeline:ds1:cdc-test" || !strings.Contains(failed.Reason, "at least one resource type") || failed.Data != nil {
		t.Fatalf("create without types %+v", failed)
	}
	// The rollback's Delete names the failed Create's id.
	rb := c.handle(t, c.event(cfn.RequestDelete, failed.PhysicalResourceID, props, nil))
	if rb.Status != cfn.StatusSuccess || rb.PhysicalResourceID != failed.PhysicalResourceID {
		t.Errorf("rollback delete %+v", rb)
	}
	// Properties that name no pipeline: nothing can have been created.
	bad := c.handle(t, c.event(cfn.RequestDelete, failed.PhysicalResourceID, map[string]any{"Name": 7}, nil))
	if bad.Status != cfn.StatusSuccess {
		t.Errorf("delete with unreadable properties %+v", bad)
	}
	// A Create whose properties name no pipeline answers the failed
	// Create's id, and its rollback removes nothing.
	nameless := c.handle(t, c.event(cfn.RequestCreate, "", map[string]any{"Name": 7}, nil))
	if nameless.Status != cfn.StatusFailed || nameless.PhysicalResourceID != subscription.FailedCreatePrefix+"req-Create" {
		t.Fatalf("create without a name %+v", nameless)
	}
	if rb := c.handle(t, c.event(cfn.RequestDelete, nameless.PhysicalResourceID, map[string]any{"Name": 7}, nil)); rb.Status != cfn.StatusSuccess {
		t.Errorf("rollback of the nameless create %+v", rb)
	}
	if w := writes(c.wire.take()); len(w) != 0 {
		t.Errorf("wrote %q", w)
	}
}

func TestCustomResourceRollbackOfAPartialCreateRemovesTheTopic(t *testing.T) {
	c := newCRFixture(t)
	// Every answer to a Subscription's create is lost (HealthLake made
	// it), after the topic was created.
	c.wire.setLose(func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Subscription")
	})
	failed := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	if failed.Status != cfn.StatusFailed || !strings.Contains(failed.Reason, "create the Subscription") ||
		failed.PhysicalResourceID != subscription.PipelineID(c.spec()) {
		t.Fatalf("create %+v", failed)
	}
	c.wire.setLose(nil)
	st, err := subscription.Status(context.Background(), c.hl, c.spec())
	if err != nil || st.TopicID == "" {
		t.Fatalf("status %+v, %v", st, err)
	}
	// The lost answers' Subscriptions were made all the same (HealthLake
	// acted): the rollback's Delete removes them and the topic.
	rb := c.handle(t, c.event(cfn.RequestDelete, failed.PhysicalResourceID, c.props(), nil))
	if rb.Status != cfn.StatusSuccess {
		t.Fatalf("rollback %+v", rb)
	}
	c.absent(t, "SubscriptionTopic", st.TopicID)
	subs, err := c.hl.SearchResources(context.Background(), "ds1", "Subscription", nil)
	if err != nil || len(subs) != 0 {
		t.Errorf("%d Subscriptions left (%v)", len(subs), err)
	}
}

func TestCustomResourceReportsHealthLakeFailure(t *testing.T) {
	c := newCRFixture(t)
	props := c.props()
	props["DatastoreId"] = "ds2" // the role may not touch it
	failed := c.handle(t, c.event(cfn.RequestUpdate, "sub-1", props, c.props()))
	if failed.Status != cfn.StatusFailed || failed.PhysicalResourceID != "sub-1" || !strings.Contains(failed.Reason, "find the SubscriptionTopic") {
		t.Fatalf("update on a data store the role may not use %+v", failed)
	}
	if len(failed.Reason) > 1100 {
		t.Errorf("reason of %d bytes", len(failed.Reason))
	}
	c.authz.Reset() // the denial was the point
}

func TestCustomResourceRetriesTheResponse(t *testing.T) {
	c := newCRFixture(t)
	c.cfn.SetFailFirst(2)
	r := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	if r.Status != cfn.StatusSuccess {
		t.Errorf("response %+v", r)
	}
	c.cfn.SetFailFirst(100)
	err := c.h.Handle(context.Background(), c.event(cfn.RequestUpdate, r.PhysicalResourceID, c.props(), c.props()))
	if err == nil || !strings.Contains(err.Error(), "after 5 attempts") || !strings.Contains(err.Error(), "HTTP 500") {
		t.Fatalf("undeliverable response: %v", err)
	}
	if strings.Contains(err.Error(), "X-Amz-Signature") || strings.Contains(c.logs.String(), "X-Amz-Signature") {
		t.Errorf("the error or logs carry the pre-signed URL: %v", err)
	}
	c.cfn.SetFailFirst(0)
	// An unreachable ResponseURL: the error does not name it either.
	c.cfn.Close()
	err = c.h.Handle(context.Background(), c.event(cfn.RequestUpdate, r.PhysicalResourceID, c.props(), c.props()))
	if err == nil || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Errorf("unreachable ResponseURL: %v", err)
	}
}

func TestCustomResourceAnswersBeforeTheDeadline(t *testing.T) {
	c := newCRFixture(t)
	// HealthLake never answers within the invocation.
	stall := make(chan struct{})
	defer close(stall)
	c.env.Gateway.SetAuthorizer(func(service string, w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
		return true
	})
	h, err := subscription.NewCustomResource(c.hl, c.env.URL, subscription.CustomResourceOptions{Margin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := h.Handle(ctx, c.event(cfn.RequestCreate, "", c.props(), nil)); err != nil {
		t.Fatalf("handle: %v", err)
	}
	r := c.cfn.Last(t)
	if r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, "context deadline exceeded") {
		t.Errorf("response %+v", r)
	}
}

func TestSpecFromProperties(t *testing.T) {
	props := map[string]any{"DatastoreId": "ds1", "Types": " Patient ,Observation,, ", "BusArn": testBus, "Name": "cdc"}
	spec, err := subscription.SpecFromProperties(props, "https://healthlake.eu-west-2.amazonaws.com/")
	if err != nil {
		t.Fatal(err)
	}
	want := subscription.Spec{
		DatastoreID: "ds1", BaseURL: "https://healthlake.eu-west-2.amazonaws.com/datastore/ds1/r4",
		Types: []string{"Patient", "Observation"}, BusARN: testBus, Payload: "full-resource", Name: "cdc",
	}
	if asJSON(spec) != asJSON(want) {
		t.Errorf("spec %+v, want %+v", spec, want)
	}
	for name, p := range map[string]map[string]any{
		"types as a number": {"DatastoreId": "ds1", "Types": 3.0, "BusArn": testBus, "Name": "cdc"},
		"list of numbers":   {"DatastoreId": "ds1", "Types": []any{1.0}, "BusArn": testBus, "Name": "cdc"},
		"no bus":            {"DatastoreId": "ds1", "Types": "Patient", "Name": "cdc"},
	} {
		if _, err := subscription.SpecFromProperties(p, "https://healthlake.eu-west-2.amazonaws.com"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestNewFromEnv(t *testing.T) {
	rt := lambdart.Runtime{AWS: aws.Config{Region: "eu-west-2", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")}}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if _, err := subscription.NewFromEnv(getenv, rt); err != nil {
		t.Errorf("with the region's endpoint: %v", err)
	}
	env["CDC_HEALTHLAKE_ENDPOINT"] = "http://127.0.0.1:4566"
	if _, err := subscription.NewFromEnv(getenv, rt); err != nil {
		t.Errorf("with an endpoint: %v", err)
	}
	env["CDC_HEALTHLAKE_ENDPOINT"] = "not a url"
	if _, err := subscription.NewFromEnv(getenv, rt); err == nil {
		t.Error("accepted a bad endpoint")
	}
	delete(env, "CDC_HEALTHLAKE_ENDPOINT")
	if _, err := subscription.NewFromEnv(getenv, lambdart.Runtime{}); err == nil || !strings.Contains(err.Error(), "region") {
		t.Errorf("without endpoint or region: %v", err)
	}

	// The stack gives the function no endpoint; with the FIPSEndpoints
	// setting it gives it AWS_USE_FIPS_ENDPOINT, and the function calls
	// HealthLake's FIPS host (here refused at once, as a denial).
	var mu sync.Mutex
	var hosts []string
	denied := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		hosts = append(hosts, r.URL.Host)
		mu.Unlock()
		return &http.Response{StatusCode: http.StatusForbidden, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"message":"denied"}`)), Request: r}, nil
	})
	rt = lambdart.Runtime{AWS: aws.Config{Region: "us-east-2", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		HTTPClient:    &http.Client{Transport: denied},
		ConfigSources: []any{config.LoadOptions{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled}}}}
	cr, err := subscription.NewFromEnv(getenv, rt)
	if err != nil {
		t.Fatal(err)
	}
	answers := cfntest.New(t)
	if err := cr.Handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, RequestID: "r", ResponseURL: answers.URL(),
		LogicalResourceID: "FastPathSubscription", StackID: "s",
		ResourceProperties: map[string]any{"DatastoreId": "ds1", "Types": "Patient", "BusArn": testBus, "Name": "cdc"}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hosts) == 0 || hosts[0] != "healthlake-fips.us-east-2.amazonaws.com" {
		t.Errorf("HealthLake called at %v, want healthlake-fips.us-east-2.amazonaws.com", hosts)
	}
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestDeleteRemovesWhatACheckCreatedDuringIt: CloudFormation deletes the
// check's schedule before the custom resource, but a check already running
// may have read the data store before the Delete's first pass and create a
// Subscription after it, on the topic just deleted. The Delete waits out
// the check's budget and removes it in a second pass.
func TestDeleteRemovesWhatACheckCreatedDuringIt(t *testing.T) {
	c := newCRFixture(t)
	ctx := context.Background()
	created := c.handle(t, c.event(cfn.RequestCreate, "", c.props(), nil))
	first, _ := created.Data["SubscriptionId"].(string)
	topic, _ := created.Data["TopicId"].(string)
	// Deleted by hand: the next check creates it again.
	if err := c.hl.DeleteResource(ctx, "ds1", subscription.SubscriptionType, first); err != nil {
		t.Fatal(err)
	}

	// The check stops at its first write until the Delete's first pass is done.
	atWrite, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.wire.setBefore(func(r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/Subscription") {
			once.Do(func() {
				close(atWrite)
				<-proceed
			})
		}
	})
	checkDone := make(chan error, 1)
	go func() {
		checkDone <- c.h.Serve(ctx, json.RawMessage(checkEvent))
	}()
	<-atWrite

	var waited time.Duration
	var checkErr error
	h, err := subscription.NewCustomResource(c.hl, c.env.URL, subscription.CustomResourceOptions{
		Logger: slog.New(slog.NewJSONHandler(c.logs, nil)),
		Sleep: func(_ context.Context, d time.Duration) error {
			if waited == 0 {
				// The Delete's wait: the check goes on and ends meanwhile.
				waited = d
				close(proceed)
				checkErr = <-checkDone
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.h = h
	gone := c.handle(t, c.event(cfn.RequestDelete, created.PhysicalResourceID, c.props(), nil))
	if checkErr != nil {
		t.Fatalf("check: %v", checkErr)
	}
	if gone.Status != cfn.StatusSuccess {
		t.Fatalf("delete %+v", gone)
	}
	if want := subscription.DefaultCheckBudget + subscription.DefaultCheckSettle; waited != want {
		t.Errorf("the Delete waited %v, want the check's budget and settle time, %v", waited, want)
	}
	subs, err := c.hl.SearchResources(ctx, "ds1", subscription.SubscriptionType, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range subs {
		var s struct{ ID, Criteria string }
		_ = json.Unmarshal(raw, &s)
		t.Errorf("Subscription/%s (criteria %s) outlived the Delete", s.ID, s.Criteria)
	}
	c.absent(t, "SubscriptionTopic", topic)
	if !strings.Contains(c.logs.String(), "(created by a check during the deletion)") {
		t.Errorf("the Delete's log does not name what the second pass removed:\n%s", c.logs.String())
	}
}

// TestDeleteOfNothingDoesNotWait: a Delete that found nothing of the
// pipeline (a repeated Delete, a rollback of a Create that made nothing)
// has nothing a check could race with, and answers at once.
func TestDeleteOfNothingDoesNotWait(t *testing.T) {
	c := newCRFixture(t)
	var waits []time.Duration
	h, err := subscription.NewCustomResource(c.hl, c.env.URL, subscription.CustomResourceOptions{
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	c.h = h
	if gone := c.handle(t, c.event(cfn.RequestDelete, subscription.PipelineID(c.spec()), c.props(), nil)); gone.Status != cfn.StatusSuccess {
		t.Fatalf("delete %+v", gone)
	}
	if len(waits) != 0 {
		t.Errorf("a Delete that removed nothing waited %v", waits)
	}
}
