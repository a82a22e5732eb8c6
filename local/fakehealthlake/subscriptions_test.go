package fakehealthlake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

const (
	hlBase      = "https://healthlake.us-east-1.amazonaws.com/datastore/ds1/r4/"
	testBus     = "arn:aws:events:us-east-1:123456789012:event-bus/FhirSubscriptions-bus"
	docBus      = "arn:aws:healthlake:eu-west-2:111122223333:event-bus/FhirSubscriptions-bus"
	subProfile  = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription"
	payloadURL  = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content"
	filterURL   = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-filter-criteria"
	idOnly      = "id-only"
	fullContent = "full-resource"
)

// notifier records the notifications the emulator hands over; fail, when
// set, decides whether an attempt fails (failed attempts are recorded in
// attempts only).
type notifier struct {
	mu       sync.Mutex
	got      []fakehealthlake.Notification
	attempts []fakehealthlake.Notification
	fail     func(n fakehealthlake.Notification, bundle notifBundle) error
}

func (r *notifier) notify(n fakehealthlake.Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, n)
	if r.fail != nil {
		if err := r.fail(n, decodeDetail(nil, n).Bundle); err != nil {
			return err
		}
	}
	r.got = append(r.got, n)
	return nil
}

// take returns the accepted notifications so far and forgets them.
func (r *notifier) take() []fakehealthlake.Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

type notifEntry struct {
	FullURL  string          `json:"fullUrl"`
	Resource json.RawMessage `json:"resource"`
	Request  *struct {
		Method string `json:"method"`
		URL    string `json:"url"`
	} `json:"request"`
}

type notifBundle struct {
	ResourceType string       `json:"resourceType"`
	ID           string       `json:"id"`
	Type         string       `json:"type"`
	Timestamp    string       `json:"timestamp"`
	Status       string       `json:"status"`
	Entry        []notifEntry `json:"entry"`
}

type notifDetail struct {
	SubscriptionURL string      `json:"subscriptionUrl"`
	Bundle          notifBundle `json:"notificationBundlePayload"`
}

type subStatus struct {
	ResourceType                 string `json:"resourceType"`
	ID                           string `json:"id"`
	Status                       string `json:"status"`
	Type                         string `json:"type"`
	EventsSinceSubscriptionStart string `json:"eventsSinceSubscriptionStart"`
	Subscription                 struct {
		Reference string `json:"reference"`
	} `json:"subscription"`
	Topic             string `json:"topic"`
	NotificationEvent []struct {
		EventNumber       string `json:"eventNumber"`
		Timestamp         string `json:"timestamp"`
		Focus             string `json:"focus"`
		AdditionalContext string `json:"additionalContext"`
		ID                string `json:"id"`
	} `json:"notificationEvent"`
}

// decodeDetail decodes a notification's detail (t nil: no failure report).
func decodeDetail(t *testing.T, n fakehealthlake.Notification) notifDetail {
	var d notifDetail
	if err := json.Unmarshal(n.Detail, &d); err != nil && t != nil {
		t.Fatalf("detail: %v: %s", err, n.Detail)
	}
	return d
}

// statusOfBundle decodes entry[0], the SubscriptionStatus.
func statusOfBundle(t *testing.T, b notifBundle) subStatus {
	t.Helper()
	if len(b.Entry) == 0 {
		t.Fatal("bundle without entries")
	}
	var s subStatus
	if err := json.Unmarshal(b.Entry[0].Resource, &s); err != nil {
		t.Fatal(err)
	}
	if s.ResourceType != "SubscriptionStatus" || b.Entry[0].FullURL != "urn:uuid:"+s.ID || b.Entry[0].Request != nil {
		t.Fatalf("entry[0] is not HealthLake's SubscriptionStatus entry: %+v %s", b.Entry[0], b.Entry[0].Resource)
	}
	return s
}

// subFx is a test emulator with a recording notifier.
type subFx struct {
	*fx
	rec *notifier
}

func setupSubs(t *testing.T, mutate func(*fakehealthlake.Options)) *subFx {
	t.Helper()
	rec := &notifier{}
	f := setup(t, func(o *fakehealthlake.Options) {
		o.OnNotification = rec.notify
		o.Subscriptions.NotificationJitter = -1
		o.Subscriptions.Seed = 7
		if mutate != nil {
			mutate(o)
		}
	})
	return &subFx{fx: f, rec: rec}
}

func (f *subFx) tick() { f.emu.Tick(context.Background()) }

func (f *subFx) after(d time.Duration) { f.clk.Set(f.clk.Now().Add(d)) }

// topicBody is a SubscriptionTopic with one trigger per "Type:interaction,…".
func topicBody(status string, triggers ...string) string {
	var tr []map[string]any
	for _, s := range triggers {
		typ, in, _ := strings.Cut(s, ":")
		m := map[string]any{"description": typ, "resource": typ}
		if in != "" {
			m["supportedInteraction"] = strings.Split(in, ",")
		}
		tr = append(tr, m)
	}
	return mustJSONs(map[string]any{
		"resourceType": "SubscriptionTopic", "url": "http://example.org/FHIR/SubscriptionTopic/test",
		"version": "1.0.0-fhir.r4b", "title": "test", "status": status, "resourceTrigger": tr,
	})
}

// subDoc is a Subscription as the AWS example writes it; edit changes it.
func subDoc(topicID, content string, edit func(m map[string]any)) string {
	m := map[string]any{
		"resourceType": "Subscription",
		"meta":         map[string]any{"profile": []string{subProfile}},
		"status":       "requested",
		"reason":       "test subscription",
		"criteria":     hlBase + "SubscriptionTopic/" + topicID,
		"channel": map[string]any{
			"type": "event-bridge", "endpoint": testBus, "payload": "application/fhir+json",
			"_payload": map[string]any{"extension": []any{map[string]any{"url": payloadURL, "valueCode": content}}},
		},
	}
	if edit != nil {
		edit(m)
	}
	return mustJSONs(m)
}

func withFilter(filter string) func(m map[string]any) {
	return func(m map[string]any) {
		m["_criteria"] = map[string]any{"extension": []any{map[string]any{"url": filterURL, "valueString": filter}}}
	}
}

// putTopic stores a topic.
func putTopic(t *testing.T, f *subFx, id, body string) {
	t.Helper()
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "SubscriptionTopic/"+id, body)
}

// postSub creates a Subscription and returns its id.
func postSub(t *testing.T, f *subFx, body string) string {
	t.Helper()
	st, m := f.fhir(t, http.MethodPost, "Subscription", body)
	if st != http.StatusCreated {
		t.Fatalf("POST Subscription = %d %v", st, m)
	}
	return m["id"].(string)
}

// activate creates a Subscription and lets it activate (one handshake).
func activate(t *testing.T, f *subFx, body string) string {
	t.Helper()
	id := postSub(t, f, body)
	f.after(5 * time.Minute)
	f.tick()
	if got := f.rec.take(); len(got) != 1 {
		t.Fatalf("activation sent %d notifications, want the handshake", len(got))
	}
	if st, m := f.fhir(t, http.MethodGet, "Subscription/"+id, ""); st != http.StatusOK || m["status"] != "active" {
		t.Fatalf("after activation: %d %v", st, m)
	}
	return id
}

func getResource(t *testing.T, f *subFx, path string) map[string]any {
	t.Helper()
	st, m := f.fhir(t, http.MethodGet, path, "")
	if st != http.StatusOK {
		t.Fatalf("GET %s = %d %v", path, st, m)
	}
	return m
}

// A requested Subscription is checked after the activation delay (default
// 5 minutes): the handshake bundle goes to the bus, then the Subscription
// becomes active (a new version) and its topic goes from unknown to active.
func TestSubscriptionActivatesAfterHandshake(t *testing.T) {
	f := setupSubs(t, nil)
	t0 := f.clk.Now()
	putTopic(t, f, "t1", topicBody("unknown", "Encounter:create,update"))
	id := postSub(t, f, subDoc("t1", idOnly, nil))
	if m := getResource(t, f, "Subscription/"+id); m["status"] != "requested" {
		t.Fatalf("created: %v", m)
	}
	f.clk.Set(t0.Add(5*time.Minute - time.Millisecond))
	f.tick()
	if got := f.rec.take(); len(got) != 0 {
		t.Fatalf("%d notifications before the activation delay", len(got))
	}
	if m := getResource(t, f, "Subscription/"+id); m["status"] != "requested" {
		t.Fatalf("before the delay: %v", m)
	}
	f.clk.Set(t0.Add(5 * time.Minute))
	f.tick()
	got := f.rec.take()
	if len(got) != 1 {
		t.Fatalf("%d notifications at activation, want 1 handshake", len(got))
	}
	n := got[0]
	if n.BusARN != testBus || n.Source != "healthlake" || n.DetailType != "FHIR Subscription Notification" || !n.Time.Equal(t0.Add(5*time.Minute)) {
		t.Errorf("envelope = %+v", n)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(n.Detail, &keys); err != nil || len(keys) != 2 || keys["subscriptionUrl"] == nil || keys["notificationBundlePayload"] == nil {
		t.Errorf("detail members = %s", n.Detail)
	}
	d := decodeDetail(t, n)
	subURL := hlBase + "Subscription/" + id
	if d.SubscriptionURL != subURL {
		t.Errorf("subscriptionUrl = %q", d.SubscriptionURL)
	}
	b := d.Bundle
	if b.ResourceType != "Bundle" || b.Type != "history" || b.Status != "requested" || b.ID == "" || len(b.Entry) != 1 {
		t.Errorf("handshake bundle = %+v", b)
	}
	if ts, err := time.Parse(time.RFC3339Nano, b.Timestamp); err != nil || !ts.Equal(t0.Add(5*time.Minute)) || len(b.Timestamp) != len("2025-09-04T23:43:50.341791934Z") {
		t.Errorf("bundle timestamp = %q", b.Timestamp)
	}
	s := statusOfBundle(t, b)
	if s.Status != "requested" || s.Type != "handshake" || s.EventsSinceSubscriptionStart != "0" ||
		s.Subscription.Reference != subURL || s.Topic != hlBase+"SubscriptionTopic/t1" || len(s.NotificationEvent) != 0 {
		t.Errorf("handshake status = %+v", s)
	}
	sub := getResource(t, f, "Subscription/"+id)
	if v, lu := meta(sub); sub["status"] != "active" || v != "2" || lu != "2026-11-21T10:05:00.000Z" || sub["error"] != nil {
		t.Errorf("subscription after the handshake = %v", sub)
	}
	topic := getResource(t, f, "SubscriptionTopic/t1")
	if v, _ := meta(topic); topic["status"] != "active" || v != "2" {
		t.Errorf("topic after activation = %v", topic)
	}
	// Both are ordinary resources: history and search see them.
	if b := hist(t, f.fx, "Subscription/"+id+"/_history", nil); len(b.Entry) != 2 {
		t.Errorf("subscription history has %d entries", len(b.Entry))
	}
	if m := getResource(t, f, "SubscriptionTopic?_summary=count"); m["total"] != float64(1) {
		t.Errorf("topic count = %v", m)
	}
	f.after(time.Hour)
	f.tick()
	if got := f.rec.take(); len(got) != 0 {
		t.Errorf("%d more notifications after activation", len(got))
	}
	if s := f.emu.SubscriptionStats(); s.Handshakes != 1 || s.Matched != 0 {
		t.Errorf("stats = %+v", s)
	}
}

// Without OnNotification the model is off: a Subscription is stored and
// stays requested.
func TestSubscriptionWithoutNotifierStaysRequested(t *testing.T) {
	f := &subFx{fx: setup(t, nil), rec: &notifier{}}
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	id := postSub(t, f, subDoc("t1", idOnly, nil))
	f.after(time.Hour)
	f.tick()
	if m := getResource(t, f, "Subscription/"+id); m["status"] != "requested" {
		t.Errorf("without a notifier: %v", m)
	}
}

// Writes missing what R4 requires (and a SubscriptionTopic without url or
// status, or with an unknown interaction) are refused with 400; so is a
// Subscription created "active".
func TestSubscriptionWritesRefusedWith400(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	for name, body := range map[string]string{
		"no criteria":     subDoc("t1", idOnly, func(m map[string]any) { delete(m, "criteria") }),
		"no reason":       subDoc("t1", idOnly, func(m map[string]any) { delete(m, "reason") }),
		"no status":       subDoc("t1", idOnly, func(m map[string]any) { delete(m, "status") }),
		"no channel type": subDoc("t1", idOnly, func(m map[string]any) { delete(m["channel"].(map[string]any), "type") }),
		"bad channel":     subDoc("t1", idOnly, func(m map[string]any) { m["channel"].(map[string]any)["type"] = "pigeon" }),
		"created active":  subDoc("t1", idOnly, func(m map[string]any) { m["status"] = "active" }),
	} {
		if st, out := f.raw(t, http.MethodPost, "Subscription", body); st != http.StatusBadRequest || !strings.Contains(out, "OperationOutcome") {
			t.Errorf("%s: POST = %d %s", name, st, out)
		}
	}
	for name, body := range map[string]string{
		"no status":   `{"resourceType":"SubscriptionTopic","url":"http://x/t"}`,
		"no url":      `{"resourceType":"SubscriptionTopic","status":"unknown"}`,
		"interaction": `{"resourceType":"SubscriptionTopic","url":"http://x/t","status":"unknown","resourceTrigger":[{"resource":"Encounter","supportedInteraction":["read"]}]}`,
	} {
		if st, out := f.raw(t, http.MethodPut, "SubscriptionTopic/bad", body); st != http.StatusBadRequest {
			t.Errorf("topic %s: PUT = %d %s", name, st, out)
		}
	}
}

// A Subscription HealthLake cannot create goes to status error after the
// activation delay, with the reason in `error`; no handshake is sent and
// it delivers nothing.
func TestSubscriptionInvalidGoesToError(t *testing.T) {
	cases := []struct {
		name, topic, want string
		edit              func(m map[string]any)
	}{
		{"missing topic", "", "no existing SubscriptionTopic", nil},
		{"retired topic", "retired", "unknown, draft or active", nil},
		{"relative criteria", "unknown", "full URL", func(m map[string]any) { m["criteria"] = "SubscriptionTopic/t1" }},
		{"no profile", "unknown", "meta.profile", func(m map[string]any) { delete(m, "meta") }},
		{"not a bus", "unknown", "ARN", func(m map[string]any) {
			m["channel"].(map[string]any)["endpoint"] = "arn:aws:sqs:us-east-1:123456789012:q"
		}},
		{"rest-hook", "unknown", "not modelled", func(m map[string]any) { m["channel"].(map[string]any)["type"] = "rest-hook" }},
		{"payload type", "unknown", "application/fhir+json", func(m map[string]any) { m["channel"].(map[string]any)["payload"] = "application/json" }},
		{"empty content", "unknown", "id-only or full-resource", func(m map[string]any) {
			m["channel"].(map[string]any)["_payload"] = map[string]any{"extension": []any{map[string]any{"url": payloadURL, "valueCode": "empty"}}}
		}},
		{"unmodelled filter", "unknown", "not modelled", withFilter("Encounter?date=gt2021")},
		{"filter of another type", "unknown", "not a resourceTrigger", withFilter("Observation?status=final")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := setupSubs(t, nil)
			if c.topic != "" {
				putTopic(t, f, "t1", topicBody(c.topic, "Encounter"))
			}
			id := postSub(t, f, subDoc("t1", idOnly, c.edit))
			f.after(5 * time.Minute)
			f.tick()
			m := getResource(t, f, "Subscription/"+id)
			msg, _ := m["error"].(string)
			if v, _ := meta(m); m["status"] != "error" || v != "2" || !strings.Contains(msg, c.want) {
				t.Errorf("subscription = %v, want error containing %q", m, c.want)
			}
			mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e1", `{"resourceType":"Encounter","id":"e1","status":"planned","class":{}}`)
			f.after(time.Minute)
			f.tick()
			if got := f.rec.take(); len(got) != 0 {
				t.Errorf("%d notifications from a Subscription in error", len(got))
			}
		})
	}
}

// A handshake the bus refuses puts the Subscription in error.
func TestSubscriptionHandshakeFailureIsError(t *testing.T) {
	f := setupSubs(t, nil)
	f.rec.fail = func(fakehealthlake.Notification, notifBundle) error { return errors.New("bus not found") }
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	id := postSub(t, f, subDoc("t1", idOnly, nil))
	f.after(5 * time.Minute)
	f.tick()
	m := getResource(t, f, "Subscription/"+id)
	if msg, _ := m["error"].(string); m["status"] != "error" || !strings.Contains(msg, "handshake") {
		t.Errorf("subscription = %v", m)
	}
	if topic := getResource(t, f, "SubscriptionTopic/t1"); topic["status"] != "unknown" {
		t.Errorf("topic = %v, want still unknown", topic)
	}
}

// eventsOf returns the accepted notifications' bundles sorted by their
// first event's additionalContext.
func eventsOf(t *testing.T, ns []fakehealthlake.Notification) []notifBundle {
	t.Helper()
	var out []notifBundle
	for _, n := range ns {
		out = append(out, decodeDetail(t, n).Bundle)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return statusOfBundle(t, out[i]).NotificationEvent[0].AdditionalContext < statusOfBundle(t, out[j]).NotificationEvent[0].AdditionalContext
	})
	return out
}

const encounter = `{"resourceType":"Encounter","id":"e1","status":"planned","class":{}}`

// A notification goes out NotificationDelay (default 2 s; no jitter here)
// after its write, one per create, update and delete of a type the topic
// triggers on; writes of other types do not notify.
func TestSubscriptionNotifiesAfterNotificationDelay(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter:create,update,delete"))
	activate(t, f, subDoc("t1", idOnly, nil))
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e1", encounter)
	f.after(time.Second)
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", strings.Replace(encounter, "planned", "finished", 1))
	f.after(time.Second)
	mustStatus(t, f.fx, http.StatusNoContent, http.MethodDelete, "Encounter/e1", "")
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Observation/o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{}}`)
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	f.after(2*time.Second - time.Millisecond)
	f.tick()
	if got := f.rec.take(); len(got) != 2 {
		t.Fatalf("%d notifications before the last write's delay passed, want 2", len(got))
	}
	f.after(time.Millisecond)
	f.tick()
	if got := f.rec.take(); len(got) != 1 {
		t.Fatalf("%d notifications once the delete's delay passed, want 1", len(got))
	}
	f.after(time.Hour)
	f.tick()
	if got := f.rec.take(); len(got) != 0 {
		t.Fatalf("%d late notifications", len(got))
	}
	if s := f.emu.SubscriptionStats(); s.Matched != 3 || s.Sent != 3 || s.Bundles != 3 || s.Pending != 0 {
		t.Errorf("stats = %+v", s)
	}
}

// An id-only notification is entry[0] only: HealthLake's
// SubscriptionStatus with one notificationEvent (eventNumber "0",
// eventsSinceSubscriptionStart "-1", focus and additionalContext strings,
// the write time in nanoseconds, a new id per version).
func TestSubscriptionIDOnlyShape(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter:create,update,delete"))
	id := activate(t, f, subDoc("t1", idOnly, nil))
	var written []time.Time
	for i, w := range []struct {
		method, body string
		status       int
	}{
		{http.MethodPut, encounter, http.StatusCreated},
		{http.MethodPut, strings.Replace(encounter, "planned", "finished", 1), http.StatusOK},
		{http.MethodDelete, "", http.StatusNoContent},
	} {
		f.after(time.Second + time.Duration(i+1)*1234567*time.Nanosecond)
		written = append(written, f.clk.Now())
		mustStatus(t, f.fx, w.status, w.method, "Encounter/e1", w.body)
	}
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Observation/o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{}}`)
	f.after(3 * time.Second)
	f.tick()
	got := eventsOf(t, f.rec.take())
	if len(got) != 3 {
		t.Fatalf("%d notifications, want 3 (create, update, delete of Encounter/e1)", len(got))
	}
	ids := map[string]bool{}
	for i, b := range got {
		if b.Type != "history" || b.Status != "requested" || len(b.Entry) != 1 {
			t.Errorf("bundle %d = %+v", i, b)
		}
		s := statusOfBundle(t, b)
		if s.Status != "active" || s.Type != "event-notification" || s.EventsSinceSubscriptionStart != "-1" ||
			s.Subscription.Reference != hlBase+"Subscription/"+id || s.Topic != hlBase+"SubscriptionTopic/t1" || len(s.NotificationEvent) != 1 {
			t.Fatalf("status %d = %+v", i, s)
		}
		ev := s.NotificationEvent[0]
		want := "Encounter/e1/_history/" + itoa(i+1)
		if ev.EventNumber != "0" || ev.Focus != "Encounter/e1" || ev.AdditionalContext != want || ev.ID == "" || ids[ev.ID] {
			t.Errorf("event %d = %+v, want additionalContext %s and a new id", i, ev, want)
		}
		ids[ev.ID] = true
		if ev.Timestamp != written[i].UTC().Format("2006-01-02T15:04:05.000000000Z") {
			t.Errorf("event %d timestamp = %s, want the write time %s", i, ev.Timestamp, written[i])
		}
	}
}

// A full-resource subscription also gets the version's stored bytes with
// request CREATE (UPDATE for an update, modelled); a deletion's entry has
// request DELETE and no resource (modelled). Interactions the topic does
// not list do not notify.
func TestSubscriptionNotifiesFullResource(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("draft", "Encounter:create,update,delete", "Patient:create"))
	activate(t, f, subDoc("t1", fullContent, func(m map[string]any) { m["channel"].(map[string]any)["endpoint"] = docBus }))
	steps := []struct{ method, path, body string }{
		{http.MethodPut, "Encounter/e1", `{"resourceType":"Encounter","id":"e1","status":"planned","class":{},"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">a & b</div>"}}`},
		{http.MethodPut, "Encounter/e1", strings.Replace(encounter, "planned", "finished", 1)},
		{http.MethodDelete, "Encounter/e1", ""},
		{http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`},
		{http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`},
		{http.MethodDelete, "Patient/p1", ""},
	}
	for _, s := range steps {
		f.after(time.Millisecond)
		if st, out := f.raw(t, s.method, s.path, s.body); st >= 300 {
			t.Fatalf("%s %s = %d %s", s.method, s.path, st, out)
		}
	}
	f.after(3 * time.Second)
	f.tick()
	ns := f.rec.take()
	if len(ns) != 4 {
		t.Fatalf("%d notifications, want 4 (Encounter create/update/delete, Patient create)", len(ns))
	}
	if ns[0].BusARN != docBus {
		t.Errorf("bus = %s", ns[0].BusARN)
	}
	got := eventsOf(t, ns)
	want := []struct{ ctx, method, focus string }{
		{"Encounter/e1/_history/1", "CREATE", "Encounter/e1"},
		{"Encounter/e1/_history/2", "UPDATE", "Encounter/e1"},
		{"Encounter/e1/_history/3", "DELETE", "Encounter/e1"},
		{"Patient/p1/_history/1", "CREATE", "Patient/p1"},
	}
	for i, b := range got {
		s := statusOfBundle(t, b)
		if len(b.Entry) != 2 || s.NotificationEvent[0].AdditionalContext != want[i].ctx {
			t.Fatalf("bundle %d: %d entries, event %+v; want %s", i, len(b.Entry), s.NotificationEvent, want[i].ctx)
		}
		e := b.Entry[1]
		if e.FullURL != want[i].focus || e.Request == nil || e.Request.Method != want[i].method || e.Request.URL != want[i].focus {
			t.Errorf("bundle %d entry = %+v %+v", i, e, e.Request)
		}
		if want[i].method == "DELETE" {
			if e.Resource != nil {
				t.Errorf("deletion entry carries a resource: %s", e.Resource)
			}
			continue
		}
		_, stored := f.raw(t, http.MethodGet, want[i].ctx, "")
		if string(e.Resource) != stored {
			t.Errorf("bundle %d resource\n%s\nwant the stored bytes\n%s", i, e.Resource, stored)
		}
	}
}

// A full-resource notification over 256 KB (the default
// MaxFullResourceBytes) is sent id-only.
func TestSubscriptionOverSizeFullResourceIsIDOnly(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter:create"))
	activate(t, f, subDoc("t1", fullContent, nil))
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/small", `{"resourceType":"Encounter","id":"small","status":"planned","class":{}}`)
	big := `{"resourceType":"Encounter","id":"big","status":"planned","class":{},"text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\">` +
		strings.Repeat("x", 256<<10) + `</div>"}}`
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/big", big)
	f.after(3 * time.Second)
	f.tick()
	entries := map[string]int{}
	for _, b := range eventsOf(t, f.rec.take()) {
		entries[statusOfBundle(t, b).NotificationEvent[0].Focus] = len(b.Entry)
	}
	if entries["Encounter/small"] != 2 || entries["Encounter/big"] != 1 {
		t.Errorf("entries per bundle = %v, want small full-resource (2) and big id-only (1)", entries)
	}
	if s := f.emu.SubscriptionStats(); s.Downgraded != 1 || s.Sent != 2 {
		t.Errorf("stats = %+v", s)
	}
}

// A backport-filter-criteria on _criteria narrows the notifications: the
// parameters are ANDed; a deletion is judged on the version it deletes.
func TestSubscriptionFilterCriteria(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	activate(t, f, subDoc("t1", idOnly, withFilter("Encounter?subject=Patient/p1&status=finished,cancelled")))
	enc := func(id, subject, status string) string {
		return `{"resourceType":"Encounter","id":"` + id + `","status":"` + status + `","class":{},"subject":{"reference":"` + subject + `"}}`
	}
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e1", enc("e1", "Patient/p1", "finished"))
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e2", enc("e2", "Patient/p2", "finished"))
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e3", enc("e3", "Patient/p1", "planned"))
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e3", enc("e3", "Patient/p1", "cancelled"))
	mustStatus(t, f.fx, http.StatusNoContent, http.MethodDelete, "Encounter/e1", "")
	mustStatus(t, f.fx, http.StatusNoContent, http.MethodDelete, "Encounter/e2", "")
	f.after(3 * time.Second)
	f.tick()
	var ctx []string
	for _, b := range eventsOf(t, f.rec.take()) {
		ctx = append(ctx, statusOfBundle(t, b).NotificationEvent[0].AdditionalContext)
	}
	if want := []string{"Encounter/e1/_history/1", "Encounter/e1/_history/2", "Encounter/e3/_history/2"}; !slices.Equal(ctx, want) {
		t.Errorf("notified %v, want %v", ctx, want)
	}
}

// runRates writes n Encounters and ticks every 100 ms for 70 s; it
// returns the emulator, the notifier and each delivery's modelled delay.
func runRates(t *testing.T, n int) (*subFx, []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var delays []time.Duration
	f := setupSubs(t, func(o *fakehealthlake.Options) {
		o.Subscriptions = fakehealthlake.SubscriptionOptions{
			Seed: 42, DropRate: 0.2, DuplicateRate: 0.2, DelayRate: 0.1, ExtraDelay: time.Minute,
			OnDelivered: func(_ string, written, delivered time.Time) {
				mu.Lock()
				delays = append(delays, delivered.Sub(written))
				mu.Unlock()
			},
		}
	})
	putTopic(t, f, "t1", topicBody("unknown", "Encounter:create"))
	activate(t, f, subDoc("t1", idOnly, nil))
	ds, _ := f.emu.Datastore("ds1")
	for i := range n {
		mustLoad(t, ds, "Encounter", "e"+itoa(i), `{"resourceType":"Encounter","status":"planned","class":{}}`)
	}
	for range 700 {
		f.after(100 * time.Millisecond)
		f.tick()
	}
	return f, delays
}

// Drop, duplicate and delay rates with a fixed seed: every event is either
// dropped (and listed) or delivered, once or (duplicated) twice with the
// same notificationEvent.id; late ones take ExtraDelay more; the same seed
// drops the same events.
func TestSubscriptionDropDuplicateDelayRates(t *testing.T) {
	const n = 300
	f, delays := runRates(t, n)
	s := f.emu.SubscriptionStats()
	times := map[string]int{}
	notifID := map[string]string{}
	for _, b := range eventsOf(t, f.rec.take()) {
		ev := statusOfBundle(t, b).NotificationEvent[0]
		times[ev.AdditionalContext]++
		if id, ok := notifID[ev.AdditionalContext]; ok && id != ev.ID {
			t.Errorf("a duplicate of %s has another notificationEvent.id", ev.AdditionalContext)
		}
		notifID[ev.AdditionalContext] = ev.ID
	}
	dropped := f.emu.DroppedNotifications()
	twice := 0
	for _, c := range times {
		if c == 2 {
			twice++
		}
	}
	for _, d := range dropped {
		if times[d] != 0 {
			t.Errorf("%s dropped and delivered", d)
		}
	}
	if s.Matched != n || s.Dropped != len(dropped) || len(times)+len(dropped) != n || twice != s.Duplicated ||
		s.Sent != n-s.Dropped+s.Duplicated || s.Pending != 0 {
		t.Errorf("stats %+v; %d distinct delivered, %d twice, %d dropped", s, len(times), twice, len(dropped))
	}
	if s.Dropped < n/10 || s.Dropped > n/3 || s.Duplicated == 0 || s.Delayed == 0 {
		t.Errorf("rates not applied: %+v", s)
	}
	late := 0
	for _, d := range delays {
		switch {
		case d >= 2*time.Second && d < 3100*time.Millisecond:
		case d >= 62*time.Second && d < 63100*time.Millisecond:
			late++
		default:
			t.Errorf("delay %v outside NotificationDelay+jitter (+ExtraDelay)", d)
		}
	}
	if len(delays) != s.Sent || late != s.Delayed {
		t.Errorf("%d delays, %d late; stats %+v", len(delays), late, s)
	}
	g, _ := runRates(t, n)
	if again := g.emu.DroppedNotifications(); !slices.Equal(again, dropped) {
		t.Errorf("the same seed dropped other events")
	}
}

// A bus that refuses a bundle gets it again with exponential backoff (1 s,
// 2 s, 4 s, …), the same bundle, until it is accepted; a bus that always
// refuses is given up 14 days after the event.
func TestSubscriptionFailingNotifierIsRetried(t *testing.T) {
	var delivered []time.Duration
	var dmu sync.Mutex
	f := setupSubs(t, func(o *fakehealthlake.Options) {
		o.Subscriptions.OnDelivered = func(_ string, w, d time.Time) { dmu.Lock(); delivered = append(delivered, d.Sub(w)); dmu.Unlock() }
	})
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	activate(t, f, subDoc("t1", idOnly, nil))
	failures := 3
	f.rec.fail = func(fakehealthlake.Notification, notifBundle) error {
		if failures > 0 {
			failures--
			return errors.New("throttled")
		}
		return nil
	}
	t0 := f.clk.Now()
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e1", encounter)
	for _, at := range []time.Duration{2, 3, 5, 9} {
		f.clk.Set(t0.Add(at*time.Second - time.Millisecond))
		f.tick()
		if got := f.rec.take(); len(got) != 0 {
			t.Fatalf("delivered before %v", at*time.Second)
		}
		f.clk.Set(t0.Add(at * time.Second))
		f.tick()
	}
	got := f.rec.take()
	if len(got) != 1 {
		t.Fatalf("%d notifications after the retries", len(got))
	}
	f.rec.mu.Lock()
	attempts := slices.Clone(f.rec.attempts[1:]) // [0] is the handshake
	f.rec.mu.Unlock()
	if len(attempts) != 4 {
		t.Fatalf("%d attempts, want 4", len(attempts))
	}
	for _, a := range attempts {
		if decodeDetail(t, a).Bundle.ID != decodeDetail(t, got[0]).Bundle.ID {
			t.Error("a retry sent another bundle")
		}
	}
	if s := f.emu.SubscriptionStats(); s.Retried != 3 || s.Sent != 1 || s.GivenUp != 0 {
		t.Errorf("stats = %+v", s)
	}
	if len(delivered) != 1 || delivered[0] != 9*time.Second {
		t.Errorf("delivered delays = %v", delivered)
	}

	f.rec.fail = func(fakehealthlake.Notification, notifBundle) error { return errors.New("bus gone") }
	t1 := f.clk.Now()
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", encounter)
	var last time.Time
	for f.clk.Now().Before(t1.Add(15 * 24 * time.Hour)) {
		f.after(time.Hour)
		before := len(f.rec.attempts)
		f.tick()
		if len(f.rec.attempts) > before {
			last = f.clk.Now()
		}
	}
	s := f.emu.SubscriptionStats()
	if s.GivenUp != 1 || s.Pending != 0 || last.Before(t1.Add(13*24*time.Hour)) || last.After(t1.Add(14*24*time.Hour)) {
		t.Errorf("stats %+v; last attempt %v after the write", s, last.Sub(t1))
	}
}

// Deleting the Subscription stops its notifications (also those already
// waiting); so does `end` once past; a Subscription in error delivers
// nothing.
func TestSubscriptionDeleteAndEndStopNotifications(t *testing.T) {
	f := setupSubs(t, nil)
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	id := activate(t, f, subDoc("t1", idOnly, nil))
	mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/e1", encounter)
	f.after(3 * time.Second)
	f.tick()
	if got := f.rec.take(); len(got) != 1 {
		t.Fatalf("%d notifications while active", len(got))
	}
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", encounter)
	mustStatus(t, f.fx, http.StatusNoContent, http.MethodDelete, "Subscription/"+id, "")
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", encounter)
	f.after(3 * time.Second)
	f.tick()
	if got := f.rec.take(); len(got) != 0 {
		t.Errorf("%d notifications after the Subscription was deleted", len(got))
	}
	if s := f.emu.SubscriptionStats(); s.Cancelled != 1 || s.Matched != 2 {
		t.Errorf("stats = %+v", s)
	}

	end := f.clk.Now().Add(5*time.Minute + 10*time.Second)
	activate(t, f, subDoc("t1", idOnly, func(m map[string]any) { m["end"] = end.Format(time.RFC3339Nano) }))
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", encounter)
	f.clk.Set(end)
	mustStatus(t, f.fx, http.StatusOK, http.MethodPut, "Encounter/e1", encounter)
	f.after(3 * time.Second)
	f.tick()
	if got := f.rec.take(); len(got) != 1 {
		t.Errorf("%d notifications around end, want 1 (the write before it)", len(got))
	}
}

// Events of one Subscription due at the same tick share a bundle, up to
// EventsPerBundle (modelled).
func TestSubscriptionEventsPerBundle(t *testing.T) {
	f := setupSubs(t, func(o *fakehealthlake.Options) { o.Subscriptions.EventsPerBundle = 2 })
	putTopic(t, f, "t1", topicBody("unknown", "Encounter"))
	activate(t, f, subDoc("t1", fullContent, nil))
	for _, id := range []string{"a", "b", "c"} {
		mustStatus(t, f.fx, http.StatusCreated, http.MethodPut, "Encounter/"+id, strings.Replace(encounter, `"e1"`, `"`+id+`"`, 1))
	}
	f.after(2 * time.Second)
	f.tick()
	var shape []int
	for _, n := range f.rec.take() {
		b := decodeDetail(t, n).Bundle
		s := statusOfBundle(t, b)
		if len(b.Entry) != 1+len(s.NotificationEvent) {
			t.Errorf("bundle of %d events has %d entries", len(s.NotificationEvent), len(b.Entry))
		}
		shape = append(shape, len(s.NotificationEvent))
	}
	if !slices.Equal(shape, []int{2, 1}) {
		t.Errorf("events per bundle = %v, want [2 1]", shape)
	}
	if s := f.emu.SubscriptionStats(); s.Bundles != 2 || s.Sent != 3 {
		t.Errorf("stats = %+v", s)
	}
}
