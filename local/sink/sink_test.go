package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

func sample(id string) Event {
	return Event{
		Version: "0", ID: "e-" + id, DetailType: "FHIR Resource Changed", Source: "healthlake.cdc",
		Account: "000000000000", Time: "2026-11-21T10:00:00Z", Region: "us-east-1",
		Resources: []string{}, Detail: json.RawMessage(`{"eventId":"Patient/` + id + `/_history/1","runId":"r1"}`),
	}
}

// wantKeys are the keys a rule target receives, no more and no fewer.
var wantKeys = []string{"account", "detail", "detail-type", "id", "region", "resources", "source", "time", "version"}

func keysOf(t *testing.T, line []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("line %q is not a JSON object: %v", line, err)
	}
	var ks []string
	for _, k := range wantKeys {
		if _, ok := m[k]; ok {
			ks = append(ks, k)
		}
	}
	if len(m) != len(wantKeys) {
		t.Errorf("line has %d keys, want %d", len(m), len(wantKeys))
	}
	return ks
}

func TestWriterWritesOneTargetShapedLinePerEvent(t *testing.T) {
	var buf bytes.Buffer
	s, err := Parse("stdout", &buf)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"1", "2"} {
		if err := s.Deliver(ctx, "healthlake.cdc", sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	sc := bufio.NewScanner(&buf)
	var n int
	for sc.Scan() {
		n++
		if got := keysOf(t, sc.Bytes()); !reflect.DeepEqual(got, wantKeys) {
			t.Errorf("keys = %v", got)
		}
		var ev Event
		_ = json.Unmarshal(sc.Bytes(), &ev)
		if string(ev.Detail) != string(sample(ev.ID[2:]).Detail) {
			t.Errorf("detail not verbatim: %s", ev.Detail)
		}
	}
	if n != 2 {
		t.Errorf("lines = %d, want 2", n)
	}
}

func TestFileSinkAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.ndjson")
	for round := 0; round < 2; round++ {
		s, err := Parse("file:"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Deliver(context.Background(), "b", sample("x")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(b, []byte("\n")); got != 2 {
		t.Errorf("file has %d lines, want 2", got)
	}
}

func TestHTTPSinkPostsEachEventAndReportsBadStatus(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		bodies = append(bodies, b)
	}))
	defer srv.Close()
	s, err := Parse(srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Deliver(ctx, "b", sample("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Deliver(ctx, "b", sample("2")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(bodies) != 2 {
		t.Fatalf("posts = %d, want 2", len(bodies))
	}
	if got := keysOf(t, bodies[0]); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("keys = %v", got)
	}
	fail = true
	mu.Unlock()
	if err := s.Deliver(ctx, "b", sample("3")); err == nil {
		t.Error("a 503 was not reported")
	}
}

func TestParseRejectsUnknownSpecs(t *testing.T) {
	for _, spec := range []string{"ftp://x", "file:", "stderr"} {
		if _, err := Parse(spec, io.Discard); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

func TestRecorderIndexesByEventIDAndWaits(t *testing.T) {
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Wait(ctx, func(r *Recorder) bool { return r.Len() >= 3 }) }()
	tee := Tee{r, &Counter{}}
	for _, id := range []string{"1", "2", "1"} {
		if err := tee.Deliver(ctx, "b", sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r.Count("Patient/1/_history/1") != 2 || len(r.EventIDs()) != 2 {
		t.Errorf("ids = %v", r.EventIDs())
	}
	if d, n := r.Counts(); d != 2 || n != 3 {
		t.Errorf("Counts() = %d distinct, %d deliveries; want 2, 3", d, n)
	}
	if got := r.Since(2); len(got) != 1 || got[0].RunID != "r1" {
		t.Errorf("since(2) = %+v", got)
	}
	if c := tee[1].(*Counter); c.Count() != 3 {
		t.Errorf("counter = %d", c.Count())
	}
}

func TestEventIDWithoutDecoding(t *testing.T) {
	for detail, want := range map[string]string{
		`{"schemaVersion":"1","eventId":"Patient/1/_history/2","resource":{"x":"\"eventId\":\"no\""}}`: "Patient/1/_history/2",
		`{"resource":{"a":1},"eventId":"Obs/a\u002fb/_history/1"}`:                                     "Obs/a/b/_history/1",
		`{"eventId":"A/b\"c/_history/1"}`:                                                              `A/b"c/_history/1`,
		`{}`:                                                                                           "",
	} {
		if got := EventID([]byte(detail)); got != want {
			t.Errorf("EventID(%s) = %q, want %q", detail, got, want)
		}
	}
	r := NewIDRecorder()
	_ = r.Deliver(context.Background(), "b", sample("7"))
	_ = r.Deliver(context.Background(), "c", sample("8"))
	if r.Count("Patient/7/_history/1") != 1 || r.Deliveries()[0].Event.ID != "" {
		t.Errorf("id recorder kept %+v", r.Deliveries())
	}
	if got := r.Since(1); r.Len() != 2 || len(got) != 1 || got[0].Bus != "c" || got[0].EventID != "Patient/8/_history/1" {
		t.Errorf("id recorder: Len %d, Since(1) = %+v", r.Len(), got)
	}
	if d, n := r.Counts(); d != 2 || n != 2 {
		t.Errorf("id recorder Counts() = %d, %d", d, n)
	}
}
