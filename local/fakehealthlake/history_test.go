package fakehealthlake_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// hist sends a history read with the given headers and decodes the Bundle.
func hist(t *testing.T, f *fx, path string, hdr map[string]string) historyBundle {
	t.Helper()
	st, out := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/"+path, nil, hdr)
	if st != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, st, out)
	}
	var b historyBundle
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceType != "Bundle" || b.Type != "history" {
		t.Fatalf("%s: not a history Bundle: %s", path, out)
	}
	return b
}

// nextOf is the next link of a page ("" on the last page).
func nextOf(b historyBundle) string {
	for _, l := range b.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

// summary lists a page's entries as "METHOD fullUrl".
func summary(b historyBundle) string {
	var s []string
	for _, e := range b.Entry {
		s = append(s, e.Request.Method+" "+e.FullURL)
	}
	return strings.Join(s, ", ")
}

// allPages follows next links from path and returns every entry's summary.
func allPages(t *testing.T, f *fx, path string, hdr map[string]string) (string, int) {
	t.Helper()
	var s []string
	pages := 0
	for ; path != ""; pages++ {
		if pages > 20 {
			t.Fatal("next links do not end")
		}
		b := hist(t, f, path, hdr)
		if x := summary(b); x != "" {
			s = append(s, x)
		}
		path = nextOf(b)
	}
	return strings.Join(s, ", "), pages
}

// writeTypeHistory writes, a second apart from 10:00:00: Patient/p1 v1,
// Patient/p2 v1, Observation/o1 v1, Patient/p1 v2, Patient/p2 deleted (v2),
// Patient/p2 re-created (v3), Patient/p3 (hard deleted afterwards).
func writeTypeHistory(t *testing.T, f *fx) {
	t.Helper()
	step := func() { f.clk.Set(f.clk.Now().Add(time.Second)) }
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	step()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	step()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{}}`)
	step()
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	step()
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p2", "")
	step()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2","active":true}`)
	step()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p3", `{"resourceType":"Patient","id":"p3"}`)
	ds, _ := f.emu.Datastore("ds1")
	if !ds.HardDelete("Patient", "p3") {
		t.Fatal("hard delete p3")
	}
}

// Type-level history: every version of every resource of the type, newest
// first, deletions as DELETE entries, creations as POST; pages of `_count`
// or the data store's maximum, whichever is lower; `_since`; bad
// parameters 400.
func TestTypeHistory(t *testing.T) { eachStore(t, testTypeHistory) }

func testTypeHistory(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.HistoryMaxCount = 3 })
	writeTypeHistory(t, f)

	const all = "POST Patient/p2/_history/3, DELETE Patient/p2/_history/2, PUT Patient/p1/_history/2, " +
		"POST Patient/p2/_history/1, POST Patient/p1/_history/1"
	b := hist(t, f, "Patient/_history", nil)
	if len(b.Entry) != 3 || nextOf(b) == "" {
		t.Fatalf("first page (maximum 3): %s, next %q", summary(b), nextOf(b))
	}
	del := b.Entry[1]
	if del.Request.URL != "Patient/p2" || len(del.Resource) != 0 || del.Response.Etag != `W/"2"` ||
		del.Response.LastModified != "2026-11-21T10:00:04.000Z" || del.Response.Status != "204 No Content" {
		t.Errorf("deletion entry %+v", del)
	}
	if e := b.Entry[0]; e.Request.URL != "Patient" || e.Response.Status != "201 Created" || !strings.Contains(string(e.Resource), `"versionId":"3"`) {
		t.Errorf("re-creation entry %+v", e)
	}
	if e := b.Entry[2]; e.Request.URL != "Patient/p1" || e.Response.LastModified != "2026-11-21T10:00:03.000Z" || e.Response.Etag != `W/"2"` {
		t.Errorf("update entry %+v", e)
	}
	for _, path := range []string{"Patient/_history", "Patient/_history?_count=50", "Patient/_history?_count=2"} {
		got, pages := allPages(t, f, path, nil)
		if got != all {
			t.Errorf("%s: %s\nwant %s", path, got, all)
		}
		if want := map[bool]int{true: 3, false: 2}[strings.HasSuffix(path, "=2")]; pages != want {
			t.Errorf("%s: %d pages, want %d", path, pages, want)
		}
	}
	if got, _ := allPages(t, f, "Patient/_history?_since=2026-11-21T10:00:03Z", nil); got != "POST Patient/p2/_history/3, DELETE Patient/p2/_history/2, PUT Patient/p1/_history/2" {
		t.Errorf("_since: %s", got)
	}
	if got, _ := allPages(t, f, "Patient/_history?_since=2026-11-21T10:00:02.500Z", nil); !strings.HasSuffix(got, "PUT Patient/p1/_history/2") {
		t.Errorf("_since between versions: %s", got)
	}
	if got, _ := allPages(t, f, "Observation/_history", nil); got != "POST Observation/o1/_history/1" {
		t.Errorf("Observation history: %s", got)
	}
	if b := hist(t, f, "Encounter/_history", nil); len(b.Entry) != 0 || nextOf(b) != "" {
		t.Errorf("history of a type never written: %+v", b)
	}

	// A write between two pages does not shift the second.
	b = hist(t, f, "Patient/_history?_count=2", nil)
	f.clk.Set(f.clk.Now().Add(time.Second))
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	if got := summary(hist(t, f, nextOf(b), nil)); got != "PUT Patient/p1/_history/2, POST Patient/p2/_history/1" {
		t.Errorf("second page after a write: %s", got)
	}

	// Instance history honours _since too.
	h := hist(t, f, "Patient/p2/_history?_since=2026-11-21T10:00:04Z", nil)
	if summary(h) != "POST Patient/p2/_history/3, DELETE Patient/p2/_history/2" || h.Total != 2 {
		t.Errorf("instance history since: %s (total %d)", summary(h), h.Total)
	}
	if got, pages := allPages(t, f, "Patient/p1/_history?_count=1", nil); pages != 3 || got != "PUT Patient/p1/_history/3, PUT Patient/p1/_history/2, POST Patient/p1/_history/1" {
		t.Errorf("instance pages: %d %s", pages, got)
	}

	for _, q := range []string{"_count=0", "_count=x", "_since=yesterday", "_page_token=x", "_at=2026-11-21"} {
		for _, path := range []string{"Patient/_history?" + q, "Patient/p1/_history?" + q} {
			st, out := f.raw(t, http.MethodGet, path, "")
			if st != http.StatusBadRequest || !strings.Contains(out, `"OperationOutcome"`) {
				t.Errorf("%s = %d %s", path, st, out)
			}
		}
	}
	mustStatus(t, f, http.StatusMethodNotAllowed, http.MethodPost, "Patient/_history", "")
}

// x-amz-fhir-history-consistency-level: eventual (the default) leaves out
// versions younger than the history lag, strong includes them; anything
// else is 400.
func TestHistoryConsistencyLevels(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.HistoryLag = 10 * time.Second })
	t0 := f.clk.Now()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	f.clk.Set(t0.Add(5 * time.Second))
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	f.clk.Set(t0.Add(12 * time.Second))
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)

	strong := map[string]string{fakehealthlake.HistoryConsistencyHeader: "strong"}
	eventual := map[string]string{fakehealthlake.HistoryConsistencyHeader: "eventual"}
	for name, c := range map[string]struct {
		hdr            map[string]string
		instance, typ_ string
	}{
		"default":  {nil, "POST Patient/p1/_history/1", "POST Patient/p1/_history/1"},
		"eventual": {eventual, "POST Patient/p1/_history/1", "POST Patient/p1/_history/1"},
		"strong":   {strong, "PUT Patient/p1/_history/2, POST Patient/p1/_history/1", "POST Patient/p2/_history/1, PUT Patient/p1/_history/2, POST Patient/p1/_history/1"},
	} {
		if got := summary(hist(t, f, "Patient/p1/_history", c.hdr)); got != c.instance {
			t.Errorf("%s instance history: %s, want %s", name, got, c.instance)
		}
		if got, _ := allPages(t, f, "Patient/_history", c.hdr); got != c.typ_ {
			t.Errorf("%s type history: %s, want %s", name, got, c.typ_)
		}
	}
	// A resource all of whose versions are younger than the lag has no
	// eventual history yet.
	if st, _ := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/Patient/p2/_history", nil, eventual); st != http.StatusNotFound {
		t.Errorf("eventual history of a new resource = %d, want 404", st)
	}
	hist(t, f, "Patient/p2/_history", strong)
	f.clk.Set(t0.Add(23 * time.Second))
	if got := summary(hist(t, f, "Patient/p2/_history", nil)); got != "POST Patient/p2/_history/1" {
		t.Errorf("after the lag: %s", got)
	}
	f.emu.SetHistoryLag(0)
	f.clk.Set(t0.Add(24 * time.Second))
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2","active":true}`)
	if got := summary(hist(t, f, "Patient/p2/_history", nil)); got != "PUT Patient/p2/_history/2, POST Patient/p2/_history/1" {
		t.Errorf("without a lag: %s", got)
	}
	for _, path := range []string{"/datastore/ds1/r4/Patient/p1/_history", "/datastore/ds1/r4/Patient/_history"} {
		st, out := f.do(t, localaws.SecretAccessKey, http.MethodGet, path, nil, map[string]string{fakehealthlake.HistoryConsistencyHeader: "immediate"})
		if st != http.StatusBadRequest || !strings.Contains(string(out), "OperationOutcome") {
			t.Errorf("bad consistency level on %s = %d %s", path, st, out)
		}
	}
}

// A type opted out of history: instance history is the current version
// only (404 once deleted), type history the current live versions only.
func TestHistoryOptOut(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.HistoryOptOut = []string{"Observation"} })
	step := func() { f.clk.Set(f.clk.Now().Add(time.Second)) }
	obs := `{"resourceType":"Observation","id":"ID","status":"final","code":{}}`
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o1", strings.Replace(obs, "ID", "o1", 1))
	step()
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Observation/o1", strings.Replace(obs, "ID", "o1", 1))
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o2", strings.Replace(obs, "ID", "o2", 1))
	step()
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Observation/o2", "")
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	step()
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")

	if h := hist(t, f, "Observation/o1/_history", nil); summary(h) != "PUT Observation/o1/_history/2" || h.Total != 1 {
		t.Errorf("opted-out instance history: %s total %d", summary(h), h.Total)
	}
	mustStatus(t, f, http.StatusNotFound, http.MethodGet, "Observation/o2/_history", "")
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Observation/o1/_history/1", "") // vread is not history
	if got, _ := allPages(t, f, "Observation/_history?_count=1", nil); got != "PUT Observation/o1/_history/2" {
		t.Errorf("opted-out type history: %s", got)
	}
	if got, _ := allPages(t, f, "Patient/_history", nil); got != "DELETE Patient/p1/_history/2, POST Patient/p1/_history/1" {
		t.Errorf("Patient keeps its history: %s", got)
	}
	f.emu.SetHistoryOptOut()
	if got, _ := allPages(t, f, "Observation/_history", nil); got != "DELETE Observation/o2/_history/2, POST Observation/o2/_history/1, PUT Observation/o1/_history/2, POST Observation/o1/_history/1" {
		t.Errorf("after opting back in: %s", got)
	}
}

// PUT [type] (no id) and POST [type]/[id] are no FHIR interaction: 405
// OperationOutcomes, nothing stored.
func TestUpdateWithoutIDAndCreateWithID(t *testing.T) {
	f := setup(t, nil)
	for _, c := range []struct{ method, path string }{
		{http.MethodPut, "Patient"},
		{http.MethodPost, "Patient/p1"},
	} {
		st, out := f.raw(t, c.method, c.path, `{"resourceType":"Patient","id":"p1"}`)
		var oo struct {
			ResourceType string
			Issue        []struct{ Code, Diagnostics string }
		}
		_ = json.Unmarshal([]byte(out), &oo)
		if st != http.StatusMethodNotAllowed || oo.ResourceType != "OperationOutcome" || len(oo.Issue) != 1 || oo.Issue[0].Code != "not-supported" {
			t.Errorf("%s %s = %d %s", c.method, c.path, st, out)
		}
	}
	if ds, _ := f.emu.Datastore("ds1"); ds.Count() != 0 {
		t.Error("a refused request stored a resource")
	}
	mustStatus(t, f, http.StatusNotFound, http.MethodGet, "Patient/p1", "")
}

// A restored data store answers the same type history.
func TestTypeHistoryAfterRestore(t *testing.T) {
	f := setup(t, nil)
	writeTypeHistory(t, f)
	src, _ := f.emu.Datastore("ds1")
	g := setup(t, nil)
	dst, _ := g.emu.Datastore("ds1")
	if err := dst.Restore(bytes.NewReader(snapshot(t, src))); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"Patient/_history", "Observation/_history?_count=1", "Patient/_history?_since=2026-11-21T10:00:03Z"} {
		want, _ := allPages(t, f, path, nil)
		if got, _ := allPages(t, g, path, nil); got != want || got == "" {
			t.Errorf("%s restored: %s\nwant %s", path, got, want)
		}
	}
}
