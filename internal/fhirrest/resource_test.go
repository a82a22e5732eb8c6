package fhirrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// wireLog records the HealthLake requests the gateway forwards.
type wireLog struct {
	mu   sync.Mutex
	next http.Handler
	reqs []wireReq
}

type wireReq struct {
	Method, Path, Query, Prefer, Consistency string
}

func (l *wireLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.reqs = append(l.reqs, wireReq{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Prefer"), r.Header.Get(fhirrest.HistoryConsistencyHeader)})
	l.mu.Unlock()
	l.next.ServeHTTP(w, r)
}

func (l *wireLog) all() []wireReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wireReq(nil), l.reqs...)
}

// newWiredFixture is newFixture with the emulator's requests recorded.
func newWiredFixture(t *testing.T) (*fixture, *wireLog) {
	t.Helper()
	f := newFixture(t, localaws.SecretAccessKey, 3)
	l := &wireLog{next: f.emu}
	f.env.Gateway.Handle(localaws.ServiceHealthLake, l)
	return f, l
}

const patient = `{"resourceType":"Patient","active":true,"gender":"female"}`

func TestResourceCreateReadUpdateDelete(t *testing.T) {
	f, wire := newWiredFixture(t)
	ctx := context.Background()
	w, err := f.client.CreateResource(ctx, "ds1", "Patient", []byte(patient))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if w.ID == "" || w.VersionID != "1" || !w.Created || w.Retried {
		t.Fatalf("create answer %+v", w)
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body, &doc); err != nil || doc["id"] != w.ID || doc["gender"] != "female" {
		t.Errorf("create body %s (%v)", w.Body, err)
	}
	got, err := f.client.ReadResource(ctx, "ds1", "Patient", w.ID)
	if err != nil || !strings.Contains(string(got), `"gender":"female"`) {
		t.Fatalf("read: %s, %v", got, err)
	}
	upd := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"active":false}`, w.ID)
	u, err := f.client.UpdateResource(ctx, "ds1", "Patient", w.ID, []byte(upd))
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if u.ID != w.ID || u.VersionID != "2" || u.Created {
		t.Errorf("update answer %+v", u)
	}
	if err := f.client.DeleteResource(ctx, "ds1", "Patient", w.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = f.client.ReadResource(ctx, "ds1", "Patient", w.ID)
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusGone || !fhirrest.IsAbsent(err) {
		t.Fatalf("read after delete: %v", err)
	}
	if strings.Contains(err.Error(), w.ID) {
		t.Errorf("read error names the resource: %v", err)
	}
	want := []wireReq{
		{Method: "POST", Path: "/datastore/ds1/r4/Patient", Prefer: "return=representation"},
		{Method: "GET", Path: "/datastore/ds1/r4/Patient/" + w.ID},
		{Method: "PUT", Path: "/datastore/ds1/r4/Patient/" + w.ID, Prefer: "return=representation"},
		{Method: "DELETE", Path: "/datastore/ds1/r4/Patient/" + w.ID},
		{Method: "GET", Path: "/datastore/ds1/r4/Patient/" + w.ID},
	}
	if got := wire.all(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests\n%v\nwant\n%v", got, want)
	}
	for _, call := range []string{"healthlake:FHIRPOST", "healthlake:FHIRPUT", "healthlake:FHIRDELETE"} {
		if f.env.Gateway.Calls()[call] != 1 {
			t.Errorf("gateway counted %d %s calls", f.env.Gateway.Calls()[call], call)
		}
	}
}

func TestReadAbsentResourceIsAbsent(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	_, err := f.client.ReadResource(context.Background(), "ds1", "Patient", "nobody")
	if !fhirrest.IsAbsent(err) || !fhirrest.IsNotFound(err) {
		t.Fatalf("read of an absent resource: %v", err)
	}
	if strings.Contains(err.Error(), "nobody") {
		t.Errorf("error names the resource: %v", err)
	}
}

func TestUpdateResourceCreatesWhenAbsent(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	w, err := f.client.UpdateResource(context.Background(), "ds1", "Patient", "p-1", []byte(`{"resourceType":"Patient","id":"p-1"}`))
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if w.ID != "p-1" || w.VersionID != "1" || !w.Created {
		t.Errorf("answer %+v", w)
	}
}

func TestCreateResourceRefusalCarriesTheOutcomeNotTheBody(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	_, err := f.client.CreateResource(context.Background(), "ds1", "Patient", []byte(`{"resourceType":"Observation","note":"secret-text"}`))
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusBadRequest || api.Operation != "CreateResource" {
		t.Fatalf("create of a mismatched body: %v", err)
	}
	if !strings.Contains(api.Message, "resourceType") || strings.Contains(err.Error(), "secret-text") {
		t.Errorf("error %q", err)
	}
}

func TestCreateResourceReadsLocationWithoutBody(t *testing.T) {
	env := localawstest.Start(t)
	var prefer string
	env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefer = r.Header.Get("Prefer")
		w.Header().Set("Location", env.URL+"/datastore/ds1/r4/Subscription/abc-123/_history/7")
		w.WriteHeader(http.StatusCreated)
	}))
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.CreateResource(context.Background(), "ds1", "Subscription", []byte(`{"resourceType":"Subscription"}`))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if w.ID != "abc-123" || w.VersionID != "7" || w.Body != nil || prefer != "return=representation" {
		t.Errorf("answer %+v, Prefer %q", w, prefer)
	}
}

func TestCreateResourceWithoutIDFails(t *testing.T) {
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `W/"1"`)
		w.WriteHeader(http.StatusCreated)
	}))
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateResource(context.Background(), "ds1", "Patient", []byte(patient)); err == nil || !strings.Contains(err.Error(), "no resource id") {
		t.Fatalf("create without an id in the answer: %v", err)
	}
}

func TestCreateResourceRetriedAfterLostAnswerIsMarked(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	lost := 1
	var mu sync.Mutex
	f.env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fail := r.Method == http.MethodPost && lost > 0
		if fail {
			lost--
		}
		mu.Unlock()
		if !fail {
			f.emu.ServeHTTP(w, r)
			return
		}
		// HealthLake wrote the resource, the answer was lost.
		f.emu.ServeHTTP(httptest.NewRecorder(), r)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	w, err := f.client.CreateResource(context.Background(), "ds1", "Patient", []byte(patient))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !w.Retried {
		t.Errorf("answer %+v: want Retried", w)
	}
	got, err := f.client.SearchResources(context.Background(), "ds1", "Patient", nil)
	if err != nil || len(got) != 2 {
		t.Fatalf("search: %d resources, %v (the lost attempt's and the retry's)", len(got), err)
	}
}

func TestDeleteResourceIsRetriedAndAbsentIsReported(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ctx := context.Background()
	w, err := f.client.CreateResource(ctx, "ds1", "Patient", []byte(patient))
	if err != nil {
		t.Fatal(err)
	}
	f.emu.ThrottleNext(1)
	if err := f.client.DeleteResource(ctx, "ds1", "Patient", w.ID); err != nil {
		t.Fatalf("delete after a throttle: %v", err)
	}
	if len(f.sleeps.d) != 1 {
		t.Errorf("slept %v, want one retry", f.sleeps.d)
	}
	// The emulator answers 204 to a delete of a deleted resource (FHIR
	// allows it); a 404 or 410 is an APIError IsAbsent reports.
	if err := f.client.DeleteResource(ctx, "ds1", "Patient", w.ID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","diagnostics":"Patient/x9 not found"}]}`))
	}))
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	err = c.DeleteResource(ctx, "ds1", "Patient", "x9")
	if !fhirrest.IsAbsent(err) || strings.Contains(err.Error(), "x9") {
		t.Fatalf("delete answered 404: %v", err)
	}
}

func TestSearchResourcesFollowsNextLinks(t *testing.T) {
	env := localawstest.Start(t)
	emu := fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"ds1"}, Manual: true, SearchMaxCount: 2, HistoryLag: 1 << 40})
	l := &wireLog{next: emu}
	env.Gateway.Handle(localaws.ServiceHealthLake, l)
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids := map[string]bool{}
	for i := 0; i < 5; i++ {
		w, err := c.CreateResource(ctx, "ds1", "Patient", []byte(patient))
		if err != nil {
			t.Fatal(err)
		}
		ids[w.ID] = true
	}
	got, err := c.SearchResources(ctx, "ds1", "Patient", url.Values{"active": {"true"}})
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	if len(got) != 5 {
		t.Fatalf("search found %d resources, want 5 (every version is within the history lag: strong reads see them)", len(got))
	}
	for _, raw := range got {
		var doc struct{ ID string }
		if err := json.Unmarshal(raw, &doc); err != nil || !ids[doc.ID] {
			t.Errorf("unexpected resource %s", raw)
		}
	}
	var pages int
	for _, r := range l.all() {
		if r.Method != http.MethodGet {
			continue
		}
		pages++
		if r.Consistency != "strong" {
			t.Errorf("search page %s?%s without strong consistency", r.Path, r.Query)
		}
		if pages == 1 && r.Query != "active=true" {
			t.Errorf("first page query %q", r.Query)
		}
	}
	if pages != 3 {
		t.Errorf("%d search pages, want 3", pages)
	}
}

func TestSearchResourcesRefusesForeignNextLink(t *testing.T) {
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = w.Write([]byte(`{"resourceType":"Bundle","type":"searchset","link":[{"relation":"next","url":"https://elsewhere.example/x"}],"entry":[]}`))
	}))
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SearchResources(context.Background(), "ds1", "Patient", nil); err == nil || !strings.Contains(err.Error(), "leaves the HealthLake endpoint") {
		t.Fatalf("search with a foreign next link: %v", err)
	}
}

// TestReadRefusalsCarryTheCodeNotTheOutcomeText: a refused read, vread,
// history, existence check, search or delete keeps the status and the
// OperationOutcome's code and drops its text, which may name the resource
// (no PHI in errors); the answer's body is read once, in one APIError.
func TestReadRefusalsCarryTheCodeNotTheOutcomeText(t *testing.T) {
	const outcome = `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"forbidden","diagnostics":"Patient secret-id of Jane Roe is restricted"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/fhir+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(outcome))
	}))
	t.Cleanup(srv.Close)
	c, err := fhirrest.New(fhirrest.Options{Endpoint: srv.URL, Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"ReadResource": func() error { _, err := c.ReadResource(ctx, "ds1", "Patient", "secret-id"); return err },
		"VRead":        func() error { _, err := c.VRead(ctx, "ds1", "Patient", "secret-id", "2"); return err },
		"History":      func() error { _, err := c.History(ctx, "ds1", "Patient", "secret-id"); return err },
		"Exists":       func() error { _, err := c.Exists(ctx, "ds1", "Patient", "secret-id"); return err },
		"SearchResources": func() error {
			_, err := c.SearchResources(ctx, "ds1", "Patient", url.Values{"_id": {"secret-id"}})
			return err
		},
		"TypeHistoryPage": func() error {
			_, _, err := c.TypeHistoryPage(ctx, "ds1", "Patient", time.Time{}, 10, "")
			return err
		},
	}
	for name, call := range calls {
		err := call()
		var api *fhirrest.APIError
		if !errors.As(err, &api) || api.StatusCode != http.StatusForbidden || api.Code != "forbidden" {
			t.Errorf("%s: err = %v, want an APIError 403 forbidden", name, err)
			continue
		}
		if strings.Contains(err.Error(), "secret-id") || strings.Contains(err.Error(), "Jane") || api.Message != "Forbidden" {
			t.Errorf("%s: error carries the outcome's text: %v (message %q)", name, err, api.Message)
		}
	}
}
