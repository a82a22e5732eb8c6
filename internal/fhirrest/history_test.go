package fhirrest_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestHistoryReadsVersionsAndDeletionsNewestFirst(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ctx := context.Background()
	ds, _ := f.emu.Datastore("ds1")
	for _, body := range []string{`{"resourceType":"Patient","id":"p1"}`, `{"resourceType":"Patient","id":"p1","active":true}`} {
		if _, err := ds.Load("Patient", "p1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	delVersion, ok := ds.Delete("Patient", "p1")
	if !ok || delVersion != "3" {
		t.Fatalf("Delete = %q %v", delVersion, ok)
	}
	got, err := f.client.History(ctx, "ds1", "Patient", "p1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[0].Deleted || got[0].VersionID != "3" || got[1].Deleted || got[1].VersionID != "2" || got[2].VersionID != "1" {
		t.Fatalf("history = %+v", got)
	}
	for i := 0; i+1 < len(got); i++ {
		if got[i].LastUpdated <= got[i+1].LastUpdated {
			t.Errorf("entry %d (%s) not after entry %d (%s)", i, got[i].LastUpdated, i+1, got[i+1].LastUpdated)
		}
	}
	// Re-created: a higher version on top of the deletion.
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	got, err = f.client.History(ctx, "ds1", "Patient", "p1")
	if err != nil || len(got) != 4 || got[0].Deleted || got[0].VersionID != "4" || !got[1].Deleted {
		t.Fatalf("history after re-creation = %+v, %v", got, err)
	}
	// Hard delete: the history is gone.
	ds.HardDelete("Patient", "p1")
	if _, err := f.client.History(ctx, "ds1", "Patient", "p1"); !errors.Is(err, fhirrest.ErrNoHistory) {
		t.Fatalf("history after hard delete: %v", err)
	} else if strings.Contains(err.Error(), "p1") {
		t.Errorf("error names the resource: %v", err)
	}
	if _, err := f.client.History(ctx, "ds1", "Patient", "never"); !errors.Is(err, fhirrest.ErrNoHistory) {
		t.Fatalf("history of an absent resource: %v", err)
	}
}

func TestHistoryRetriesThrottlingAndIsSigned(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	f.emu.ThrottleNext(2)
	got, err := f.client.History(context.Background(), "ds1", "Patient", "p1")
	if err != nil || len(got) != 1 || got[0].VersionID != "1" {
		t.Fatalf("history after throttling = %+v, %v", got, err)
	}
	bad := newFixture(t, "wrong-secret", 1)
	if _, err := bad.client.History(context.Background(), "ds1", "Patient", "p1"); err == nil || errors.Is(err, fhirrest.ErrNoHistory) {
		t.Fatalf("wrongly signed history: %v", err)
	}
}

// A server that pages its history: History follows next links (relative and
// absolute on the same endpoint), takes versions from etags and times from
// lastModified when an entry has no resource, and refuses a next link to
// another host.
func TestHistoryFollowsNextLinks(t *testing.T) {
	var srv *httptest.Server
	pages := map[string]string{
		"": `{"resourceType":"Bundle","type":"history","link":[{"relation":"next","url":"Patient/p1/_history?page=2"}],
			"entry":[{"fullUrl":"x","request":{"method":"DELETE","url":"Patient/p1"},"response":{"status":"204","etag":"W/\"3\"","lastModified":"2026-11-21T10:00:02.000Z"}}]}`,
		"2": `{"resourceType":"Bundle","type":"history","link":[{"relation":"next","url":"SRV/datastore/ds1/r4/Patient/p1/_history?page=3"}],
			"entry":[{"resource":{"resourceType":"Patient","id":"p1","meta":{"versionId":"2","lastUpdated":"2026-11-21T10:00:01.000Z"}},"request":{"method":"PUT"}}]}`,
		"3": `{"resourceType":"Bundle","type":"history","entry":[{"fullUrl":"Patient/p1/_history/1","response":{"lastModified":"2026-11-21T10:00:00.000Z"},
			"resource":{"resourceType":"Patient","id":"p1"}}]}`,
		"evil": `{"resourceType":"Bundle","type":"history","link":[{"relation":"next","url":"https://elsewhere.example/datastore/ds1/r4/Patient/p1/_history"}],"entry":[]}`,
	}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		page := r.URL.Query().Get("page")
		if strings.Contains(r.URL.Path, "/evil/") {
			page = "evil"
		}
		w.Header().Set("Content-Type", "application/fhir+json")
		_, _ = w.Write([]byte(strings.ReplaceAll(pages[page], "SRV", srv.URL)))
	}))
	defer srv.Close()
	c, err := fhirrest.New(fhirrest.Options{Endpoint: srv.URL, Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.History(context.Background(), "ds1", "Patient", "p1")
	if err != nil {
		t.Fatal(err)
	}
	want := []fhirrest.HistoryEntry{
		{VersionID: "3", LastUpdated: "2026-11-21T10:00:02.000Z", Deleted: true, ResourceType: "Patient", ID: "p1"},
		{VersionID: "2", LastUpdated: "2026-11-21T10:00:01.000Z", ResourceType: "Patient", ID: "p1"},
		{VersionID: "1", LastUpdated: "2026-11-21T10:00:00.000Z", ResourceType: "Patient", ID: "p1"},
	}
	if len(got) != len(want) {
		t.Fatalf("history = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := c.History(context.Background(), "ds1", "Patient", "evil"); err == nil || !strings.Contains(err.Error(), "leaves the HealthLake endpoint") {
		t.Errorf("next link to another host: %v", err)
	}
}

func TestHistoryRefusesWhatIsNotAHistoryBundle(t *testing.T) {
	for name, body := range map[string]string{
		"not json":               `{`,
		"searchset":              `{"resourceType":"Bundle","type":"searchset","entry":[]}`,
		"no version":             `{"resourceType":"Bundle","type":"history","entry":[{"request":{"method":"DELETE"},"response":{"lastModified":"2026-11-21T10:00:00Z"}}]}`,
		"no time":                `{"resourceType":"Bundle","type":"history","entry":[{"resource":{"resourceType":"Patient","meta":{"versionId":"1"}}}]}`,
		"resource not an object": `{"resourceType":"Bundle","type":"history","entry":[{"resource":"secret-id","response":{"etag":"W/\\"1\\"","lastModified":"2026-11-21T10:00:00Z"}}]}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(body)) }))
		c, err := fhirrest.New(fhirrest.Options{Endpoint: srv.URL, Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.History(context.Background(), "ds1", "Patient", "secret-id"); err == nil || strings.Contains(err.Error(), "secret-id") {
			t.Errorf("%s: err = %v", name, err)
		}
		srv.Close()
	}
}

// TestAnAnswerCutPartWayIsAskedAgain: a connection that closes while an
// answer's body is on its way (the client reads "unexpected EOF") is a
// transport error like any other: the read is sent again, and the caller
// gets the whole answer, never a part of it.
func TestAnAnswerCutPartWayIsAskedAgain(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	for _, body := range []string{`{"resourceType":"Patient","id":"p1"}`, `{"resourceType":"Patient","id":"p1","active":true}`} {
		if _, err := ds.Load("Patient", "p1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	var calls atomic.Int32
	f.env.Gateway.SetBodyCuts(func(service, _ string, _ *http.Request) (float64, bool) {
		return 0.5, service == localaws.ServiceHealthLake && calls.Add(1) == 1
	})
	defer f.env.Gateway.SetBodyCuts(nil)
	got, err := f.client.History(context.Background(), "ds1", "Patient", "p1")
	if err != nil || len(got) != 2 || got[0].VersionID != "2" || got[1].VersionID != "1" {
		t.Fatalf("history after a cut answer = %+v, %v", got, err)
	}
	if f.env.Gateway.BodyCutsMade() != 1 || calls.Load() != 2 {
		t.Fatalf("cuts made %d over %d calls, want the first of two cut", f.env.Gateway.BodyCutsMade(), calls.Load())
	}
}
