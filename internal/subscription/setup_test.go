package subscription_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	testBus      = "arn:aws:events:us-east-1:123456789012:event-bus/cdc-notifications"
	otherBus     = "arn:aws:events:us-east-1:123456789012:event-bus/cdc-notifications-2"
	activateWait = time.Minute
)

// clock is the emulator's settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// wire records the requests reaching the emulator and can lose the answer
// of chosen ones (HealthLake acted, the client saw a 500).
type wire struct {
	mu   sync.Mutex
	next http.Handler
	reqs []string // "METHOD /path?query"
	// lose, when it returns true, serves the request and answers 500.
	lose func(r *http.Request) bool
	// before, when set, runs before each request is served.
	before func(r *http.Request)
}

func (w *wire) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	line := r.Method + " " + strings.TrimPrefix(r.URL.Path, "/datastore/ds1/r4/")
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	w.reqs = append(w.reqs, line)
	lose := w.lose != nil && w.lose(r)
	before := w.before
	w.mu.Unlock()
	if before != nil {
		before(r)
	}
	if lose {
		w.next.ServeHTTP(httptest.NewRecorder(), r)
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return
	}
	w.next.ServeHTTP(rw, r)
}

func (w *wire) setLose(lose func(r *http.Request) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lose = lose
}

func (w *wire) setBefore(before func(r *http.Request)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.before = before
}

// take returns the requests so far and forgets them.
func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.reqs
	w.reqs = nil
	return out
}

// writes keeps the requests that change something.
func writes(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET ") {
			out = append(out, r)
		}
	}
	return out
}

// handshakes answers the emulator's notifications; fail makes them fail.
type handshakes struct {
	mu   sync.Mutex
	fail bool
	got  []fakehealthlake.Notification
}

func (h *handshakes) notify(n fakehealthlake.Notification) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return errors.New("the bus refused the event")
	}
	h.got = append(h.got, n)
	return nil
}

type fixture struct {
	env   *localaws.Env
	emu   *fakehealthlake.Emulator
	hl    *fhirrest.Client
	clock *clock
	wire  *wire
	notes *handshakes
	authz *iam.Authorizer
}

// newFixture starts the HealthLake emulator (data store ds1, the
// subscription model on, activation after activateWait) behind the local
// gateway, which enforces the fast-path-setup role's statements, and a
// client signing as that role.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := localawstest.Start(t)
	clk := &clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	notes := &handshakes{}
	key := localaws.PrincipalAccessKeyID(string(iampolicy.FastPathSetup))
	secret := localaws.PrincipalSecretAccessKey(key)
	emu := fakehealthlake.New(fakehealthlake.Options{
		Datastores: []string{"ds1"}, Manual: true, Now: clk.Now, Endpoint: env.URL,
		MoreAccessKeys: map[string]string{key: secret},
		OnNotification: notes.notify,
		Subscriptions:  fakehealthlake.SubscriptionOptions{ActivationDelay: activateWait, Seed: 1},
	})
	w := &wire{next: emu}
	env.Gateway.Handle(localaws.ServiceHealthLake, w)
	authz := iam.NewAuthorizer(&iam.Mapper{Region: env.Region, Account: env.AccountID}, iam.Enforce)
	stmts, err := iampolicy.Policy(iampolicy.FastPathSetup, iampolicy.Resources{
		DatastoreARN: env.ARN("healthlake", "datastore/fhir/ds1"),
		LogGroupARNs: map[iampolicy.Principal]string{iampolicy.FastPathSetup: env.ARN("logs", "log-group:/aws/lambda/fast-path-setup:*")},
	})
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	authz.AddIdentity(key, iam.Identity{Principal: iampolicy.FastPathSetup, ARN: "arn:aws:sts::" + env.AccountID + ":assumed-role/fast-path-setup/t", Statements: stmts})
	authz.AddAdmin(localaws.AccessKeyID)
	authz.Install(env.Gateway)
	hl, err := fhirrest.New(fhirrest.Options{
		Endpoint: env.URL, Region: env.Region, Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
		MaxAttempts: 3, Sleep: func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	f := &fixture{env: env, emu: emu, hl: hl, clock: clk, wire: w, notes: notes, authz: authz}
	t.Cleanup(func() {
		if d := authz.Denials(); len(d) > 0 {
			t.Errorf("the fast-path-setup role was denied %+v", d)
		}
	})
	return f
}

func (f *fixture) spec() subscription.Spec {
	return subscription.Spec{
		DatastoreID: "ds1",
		BaseURL:     subscription.FHIRBase(f.env.URL, "ds1"),
		Types:       []string{"Patient", "Observation"},
		BusARN:      testBus,
		Payload:     subscription.PayloadFullResource,
		Name:        "cdc-test",
	}
}

// activate lets the emulator's activation delay pass.
func (f *fixture) activate(t *testing.T) {
	t.Helper()
	f.clock.add(activateWait + time.Second)
	f.emu.Tick(context.Background())
}

func (f *fixture) read(t *testing.T, typ, id string) map[string]any {
	t.Helper()
	b, err := f.hl.ReadResource(context.Background(), "ds1", typ, id)
	if err != nil {
		t.Fatalf("read %s/%s: %v", typ, id, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) absent(t *testing.T, typ, id string) {
	t.Helper()
	if _, err := f.hl.ReadResource(context.Background(), "ds1", typ, id); !fhirrest.IsAbsent(err) {
		t.Errorf("%s/%s: read answered %v, want absent", typ, id, err)
	}
}

func mustEnsure(t *testing.T, f *fixture, spec subscription.Spec) subscription.Result {
	t.Helper()
	res, err := subscription.Ensure(context.Background(), f.hl, spec)
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return res
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestEnsureCreatesTopicAndSubscriptionInHealthLakeShape(t *testing.T) {
	f := newFixture(t)
	spec := f.spec()
	res := mustEnsure(t, f, spec)
	if res.TopicID == "" || res.SubscriptionID == "" || res.Status != subscription.StatusRequested || !res.UpToDate || res.Error != "" {
		t.Fatalf("result %+v", res)
	}
	wantChanges := []string{"created SubscriptionTopic/" + res.TopicID, "created Subscription/" + res.SubscriptionID}
	if !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("changes %q, want %q", res.Changes, wantChanges)
	}
	topic := f.read(t, "SubscriptionTopic", res.TopicID)
	delete(topic, "meta")
	wantTopic := map[string]any{
		"resourceType": "SubscriptionTopic", "id": res.TopicID,
		"url": "urn:healthlake-cdc:cdc-test:changes", "title": "healthlake-cdc cdc-test changes", "status": "unknown",
		"description": "Every create, update and delete of the resource types the healthlake-cdc pipeline cdc-test publishes (its fast path).",
		"resourceTrigger": []any{
			map[string]any{"description": "Observation create, update and delete", "resource": "Observation", "supportedInteraction": []any{"create", "update", "delete"}},
			map[string]any{"description": "Patient create, update and delete", "resource": "Patient", "supportedInteraction": []any{"create", "update", "delete"}},
		},
	}
	if asJSON(topic) != asJSON(wantTopic) {
		t.Errorf("topic\n%s\nwant\n%s", asJSON(topic), asJSON(wantTopic))
	}
	sub := f.read(t, "Subscription", res.SubscriptionID)
	meta, _ := sub["meta"].(map[string]any)
	if asJSON(meta["profile"]) != `["http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription"]` {
		t.Errorf("meta %v", meta)
	}
	delete(sub, "meta")
	wantSub := map[string]any{
		"resourceType": "Subscription", "id": res.SubscriptionID, "status": "requested",
		"reason":   "healthlake-cdc fast path of pipeline cdc-test",
		"criteria": f.env.URL + "/datastore/ds1/r4/SubscriptionTopic/" + res.TopicID,
		"channel": map[string]any{
			"type": "event-bridge", "endpoint": testBus, "payload": "application/fhir+json",
			"_payload": map[string]any{"extension": []any{map[string]any{
				"url":       "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content",
				"valueCode": "full-resource",
			}}},
		},
	}
	if asJSON(sub) != asJSON(wantSub) {
		t.Errorf("subscription\n%s\nwant\n%s", asJSON(sub), asJSON(wantSub))
	}
	wantReqs := []string{
		"GET SubscriptionTopic?url=urn%3Ahealthlake-cdc%3Acdc-test%3Achanges",
		"POST SubscriptionTopic",
		"POST Subscription",
		"GET SubscriptionTopic/" + res.TopicID,
		"GET Subscription/" + res.SubscriptionID,
	}
	if got := f.wire.take(); !slices.Equal(got, wantReqs) {
		t.Errorf("requests\n%q\nwant\n%q", got, wantReqs)
	}
	// HealthLake checks it, sends the handshake and activates it (and the
	// topic, which was "unknown").
	f.activate(t)
	st, err := subscription.Status(context.Background(), f.hl, spec)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.Status != subscription.StatusActive || st.SubscriptionID != res.SubscriptionID || st.TopicID != res.TopicID || !st.UpToDate {
		t.Errorf("status after activation %+v", st)
	}
	if got := f.read(t, "SubscriptionTopic", res.TopicID)["status"]; got != "active" {
		t.Errorf("topic status %v after activation, want active", got)
	}
	if len(f.notes.got) != 1 {
		t.Errorf("%d notifications, want the handshake", len(f.notes.got))
	}
	// Every call was the fast-path-setup role's, allowed by its statement
	// (the fixture fails the test on any denial).
	if n := f.authz.Allowed()["fast-path-setup/ManageSubscription"]; n != 8 {
		t.Errorf("ManageSubscription allowed %d calls, want 8 (%v)", n, f.authz.Allowed())
	}
}

func TestEnsureTwiceChangesNothing(t *testing.T) {
	f := newFixture(t)
	first := mustEnsure(t, f, f.spec())
	f.wire.take()
	second := mustEnsure(t, f, f.spec())
	if second.TopicID != first.TopicID || second.SubscriptionID != first.SubscriptionID || len(second.Changes) != 0 ||
		second.Status != subscription.StatusRequested || !second.UpToDate {
		t.Errorf("second ensure %+v after %+v", second, first)
	}
	if w := writes(f.wire.take()); len(w) != 0 {
		t.Errorf("second ensure wrote %q", w)
	}
	// Once HealthLake has activated them (the topic's status is then
	// "active"), Ensure still keeps both.
	f.activate(t)
	third := mustEnsure(t, f, f.spec())
	if third.SubscriptionID != first.SubscriptionID || third.Status != subscription.StatusActive || len(third.Changes) != 0 {
		t.Errorf("ensure after activation %+v", third)
	}
	if w := writes(f.wire.take()); len(w) != 0 {
		t.Errorf("ensure after activation wrote %q", w)
	}
	// The types given in another order or repeated are the same topic.
	spec := f.spec()
	spec.Types = []string{"Observation", "Patient", "Observation"}
	if res := mustEnsure(t, f, spec); len(res.Changes) != 0 {
		t.Errorf("ensure with reordered types: %q", res.Changes)
	}
}

func TestEnsureReplacesSubscriptionInError(t *testing.T) {
	f := newFixture(t)
	first := mustEnsure(t, f, f.spec())
	f.notes.fail = true
	f.activate(t)
	st, err := subscription.Status(context.Background(), f.hl, f.spec())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	if st.Status != subscription.StatusError || st.SubscriptionID != first.SubscriptionID || st.Error == "" || st.UpToDate {
		t.Fatalf("status after a failed handshake %+v", st)
	}
	f.notes.fail = false
	f.wire.take()
	res := mustEnsure(t, f, f.spec())
	if res.SubscriptionID == first.SubscriptionID || res.TopicID != first.TopicID || res.Status != subscription.StatusRequested || res.Error != "" {
		t.Fatalf("ensure of a Subscription in error %+v", res)
	}
	want := []string{"deleted Subscription/" + first.SubscriptionID + " (status error)", "created Subscription/" + res.SubscriptionID}
	if !slices.Equal(res.Changes, want) {
		t.Errorf("changes %q, want %q", res.Changes, want)
	}
	wantWrites := []string{"DELETE Subscription/" + first.SubscriptionID, "POST Subscription"}
	if got := writes(f.wire.take()); !slices.Equal(got, wantWrites) {
		t.Errorf("writes %q, want %q", got, wantWrites)
	}
	f.absent(t, "Subscription", first.SubscriptionID)
	f.activate(t)
	if st, _ := subscription.Status(context.Background(), f.hl, f.spec()); st.Status != subscription.StatusActive || st.SubscriptionID != res.SubscriptionID {
		t.Errorf("status of the new Subscription %+v", st)
	}
}

func TestEnsureReplacesSubscriptionWhenSpecChanges(t *testing.T) {
	for name, change := range map[string]func(*subscription.Spec){
		"bus":     func(s *subscription.Spec) { s.BusARN = otherBus },
		"payload": func(s *subscription.Spec) { s.Payload = subscription.PayloadIDOnly },
		"types":   func(s *subscription.Spec) { s.Types = []string{"Patient", "Encounter"} },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			first := mustEnsure(t, f, f.spec())
			f.activate(t)
			spec := f.spec()
			change(&spec)
			f.wire.take()
			res := mustEnsure(t, f, spec)
			if res.SubscriptionID == first.SubscriptionID || res.TopicID != first.TopicID || res.Status != subscription.StatusRequested {
				t.Fatalf("ensure of a changed spec %+v", res)
			}
			wantWrites := []string{"DELETE Subscription/" + first.SubscriptionID, "POST Subscription"}
			if name == "types" {
				wantWrites = []string{"DELETE Subscription/" + first.SubscriptionID, "PUT SubscriptionTopic/" + first.TopicID, "POST Subscription"}
			}
			if got := writes(f.wire.take()); !slices.Equal(got, wantWrites) {
				t.Errorf("writes %q, want %q", got, wantWrites)
			}
			f.absent(t, "Subscription", first.SubscriptionID)
			sub := f.read(t, "Subscription", res.SubscriptionID)
			ch := sub["channel"].(map[string]any)
			if ch["endpoint"] != spec.BusARN || !strings.Contains(asJSON(ch["_payload"]), `"valueCode":"`+spec.Payload+`"`) {
				t.Errorf("new Subscription's channel %s", asJSON(ch))
			}
			topic := f.read(t, "SubscriptionTopic", res.TopicID)
			var types []string
			for _, tr := range topic["resourceTrigger"].([]any) {
				types = append(types, tr.(map[string]any)["resource"].(string))
			}
			want := slices.Sorted(slices.Values(spec.Types))
			if !slices.Equal(types, want) {
				t.Errorf("topic triggers %q, want %q", types, want)
			}
			// HealthLake had made the topic active: an update keeps that.
			if topic["status"] != "active" {
				t.Errorf("topic status %v, want active (kept)", topic["status"])
			}
			// The new Subscription activates on the updated topic, and is
			// then kept.
			f.activate(t)
			again := mustEnsure(t, f, spec)
			if again.SubscriptionID != res.SubscriptionID || again.Status != subscription.StatusActive || len(again.Changes) != 0 {
				t.Errorf("ensure after the change activated %+v", again)
			}
		})
	}
}

func TestEnsureDeletesDuplicateAfterLostAnswer(t *testing.T) {
	f := newFixture(t)
	lost := map[string]int{"SubscriptionTopic": 1, "Subscription": 1}
	f.wire.setLose(func(r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		typ := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if lost[typ] > 0 {
			lost[typ]--
			return true
		}
		return false
	})
	res := mustEnsure(t, f, f.spec())
	wantTail := []string{"deleted SubscriptionTopic/", "created Subscription/" + res.SubscriptionID, "deleted Subscription/"}
	if len(res.Changes) != 4 || !strings.HasPrefix(res.Changes[1], wantTail[0]) || res.Changes[2] != wantTail[1] || !strings.HasPrefix(res.Changes[3], wantTail[2]) {
		t.Errorf("changes %q", res.Changes)
	}
	topics, err := f.hl.SearchResources(context.Background(), "ds1", "SubscriptionTopic", nil)
	if err != nil || len(topics) != 1 || !strings.Contains(string(topics[0]), res.TopicID) {
		t.Errorf("topics left: %d (%v)", len(topics), err)
	}
	subs, err := f.hl.SearchResources(context.Background(), "ds1", "Subscription", nil)
	if err != nil || len(subs) != 1 || !strings.Contains(string(subs[0]), res.SubscriptionID) {
		t.Errorf("subscriptions left: %d (%v)", len(subs), err)
	}
	if again := mustEnsure(t, f, f.spec()); len(again.Changes) != 0 || again.SubscriptionID != res.SubscriptionID {
		t.Errorf("ensure after the duplicates went %+v", again)
	}
}

func TestEnsureWhenSearchParametersAreRefused(t *testing.T) {
	f := newFixture(t)
	other := f.spec()
	other.Name = "cdc-other"
	ro := mustEnsure(t, f, other)
	// A HealthLake that honours no search parameter of these types.
	f.env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.RawQuery != "" {
			w.Header().Set("Content-Type", "application/fhir+json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-supported","diagnostics":"unknown search parameter"}]}`))
			return
		}
		f.wire.ServeHTTP(w, r)
	}))
	first := mustEnsure(t, f, f.spec())
	second := mustEnsure(t, f, f.spec())
	if second.SubscriptionID != first.SubscriptionID || second.TopicID != first.TopicID || len(second.Changes) != 0 {
		t.Errorf("second ensure %+v after %+v", second, first)
	}
	if err := subscription.Remove(context.Background(), f.hl, f.spec()); err != nil {
		t.Fatalf("remove: %v", err)
	}
	f.absent(t, "Subscription", first.SubscriptionID)
	f.read(t, "Subscription", ro.SubscriptionID)
	f.read(t, "SubscriptionTopic", ro.TopicID)
}

func TestRemoveDeletesSubscriptionThenTopic(t *testing.T) {
	f := newFixture(t)
	res := mustEnsure(t, f, f.spec())
	f.activate(t)
	f.wire.take()
	if err := subscription.Remove(context.Background(), f.hl, f.spec()); err != nil {
		t.Fatalf("remove: %v", err)
	}
	want := []string{"DELETE Subscription/" + res.SubscriptionID, "DELETE SubscriptionTopic/" + res.TopicID}
	if got := writes(f.wire.take()); !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	f.absent(t, "Subscription", res.SubscriptionID)
	f.absent(t, "SubscriptionTopic", res.TopicID)
	if err := subscription.Remove(context.Background(), f.hl, f.spec()); err != nil {
		t.Errorf("remove of nothing: %v", err)
	}
	if w := writes(f.wire.take()); len(w) != 0 {
		t.Errorf("remove of nothing wrote %q", w)
	}
	st, err := subscription.Status(context.Background(), f.hl, f.spec())
	if err != nil || st.SubscriptionID != "" || st.TopicID != "" || st.Status != "" {
		t.Errorf("status after remove %+v, %v", st, err)
	}
}

func TestPipelinesOnOneDatastoreAreApart(t *testing.T) {
	f := newFixture(t)
	a := f.spec()
	b := f.spec()
	b.Name, b.BusARN = "cdc-other", otherBus
	ra := mustEnsure(t, f, a)
	rb := mustEnsure(t, f, b)
	if ra.TopicID == rb.TopicID || ra.SubscriptionID == rb.SubscriptionID || len(rb.Changes) != 2 {
		t.Fatalf("two pipelines share %+v and %+v", ra, rb)
	}
	// A Subscription on a's topic that is not a pipeline's (another reason)
	// is left alone by Ensure.
	foreign := f.read(t, "Subscription", ra.SubscriptionID)
	delete(foreign, "id")
	delete(foreign, "meta")
	foreign["meta"] = map[string]any{"profile": []string{subscription.BackportSubscriptionProfile}}
	foreign["reason"] = "someone else's"
	w, err := f.hl.CreateResource(context.Background(), "ds1", "Subscription", []byte(asJSON(foreign)))
	if err != nil {
		t.Fatalf("create a foreign Subscription: %v", err)
	}
	if res := mustEnsure(t, f, a); len(res.Changes) != 0 {
		t.Errorf("ensure touched %q", res.Changes)
	}
	if err := subscription.Remove(context.Background(), f.hl, b); err != nil {
		t.Fatal(err)
	}
	f.absent(t, "Subscription", rb.SubscriptionID)
	f.absent(t, "SubscriptionTopic", rb.TopicID)
	f.read(t, "Subscription", ra.SubscriptionID)
	f.read(t, "SubscriptionTopic", ra.TopicID)
	f.read(t, "Subscription", w.ID)
}

func TestEnsureRefusesAnIncompleteSpec(t *testing.T) {
	f := newFixture(t)
	for name, c := range map[string]struct {
		change func(*subscription.Spec)
		want   string
	}{
		"no types":         {func(s *subscription.Spec) { s.Types = nil }, "at least one resource type"},
		"bad type":         {func(s *subscription.Spec) { s.Types = []string{"patient"} }, "not a FHIR resource type"},
		"subscription":     {func(s *subscription.Spec) { s.Types = []string{"Subscription"} }, "cannot be subscribed"},
		"no bus":           {func(s *subscription.Spec) { s.BusARN = "" }, "event bus ARN"},
		"queue not bus":    {func(s *subscription.Spec) { s.BusARN = "arn:aws:sqs:us-east-1:123456789012:q" }, "event bus ARN"},
		"payload":          {func(s *subscription.Spec) { s.Payload = "empty" }, "payload"},
		"name":             {func(s *subscription.Spec) { s.Name = "a b" }, "name"},
		"no name":          {func(s *subscription.Spec) { s.Name = "" }, "name"},
		"no datastore":     {func(s *subscription.Spec) { s.DatastoreID = "" }, "datastore id"},
		"relative base":    {func(s *subscription.Spec) { s.BaseURL = "/datastore/ds1/r4" }, "absolute"},
		"other data store": {func(s *subscription.Spec) { s.BaseURL = subscription.FHIRBase(f.env.URL, "ds2") }, "does not end in /datastore/ds1/r4"},
	} {
		spec := f.spec()
		c.change(&spec)
		if _, err := subscription.Ensure(context.Background(), f.hl, spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ensure answered %v, want %q", name, err, c.want)
		}
	}
	if got := f.wire.take(); len(got) != 0 {
		t.Errorf("an invalid spec sent %q", got)
	}
}

func TestEnsureOnUnknownDatastoreFails(t *testing.T) {
	f := newFixture(t)
	spec := f.spec()
	spec.DatastoreID, spec.BaseURL = "nope", subscription.FHIRBase(f.env.URL, "nope")
	// An administrator: the role may touch ds1 only.
	admin, err := fhirrest.New(fhirrest.Options{Endpoint: f.env.URL, Region: f.env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = subscription.Ensure(context.Background(), admin, spec)
	if !fhirrest.IsNotFound(err) || !strings.Contains(err.Error(), "find the SubscriptionTopic") {
		t.Fatalf("ensure on an unknown data store: %v", err)
	}
}

func TestTopicURLAndReasonNameThePipeline(t *testing.T) {
	if got := subscription.TopicURL("HealthLakeCdc"); got != "urn:healthlake-cdc:HealthLakeCdc:changes" {
		t.Errorf("topic url %q", got)
	}
	if got := subscription.Reason("HealthLakeCdc"); got != "healthlake-cdc fast path of pipeline HealthLakeCdc" {
		t.Errorf("reason %q", got)
	}
	// The FIPS host (the FIPSEndpoints setting) serves the data store HealthLake names under the Regional one.
	for _, endpoint := range []string{"https://healthlake.us-east-1.amazonaws.com/", "https://healthlake-fips.us-east-1.amazonaws.com"} {
		if got := subscription.FHIRBase(endpoint, "abc"); got != "https://healthlake.us-east-1.amazonaws.com/datastore/abc/r4" {
			t.Errorf("FHIR base of %s: %q", endpoint, got)
		}
	}
	spec := subscription.Spec{BaseURL: "https://healthlake.us-east-1.amazonaws.com/datastore/abc/r4"}
	if got := spec.Criteria("t1"); got != "https://healthlake.us-east-1.amazonaws.com/datastore/abc/r4/SubscriptionTopic/t1" {
		t.Errorf("criteria %q", got)
	}
}
