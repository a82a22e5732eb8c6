package fakehealthlake_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// historyBundle is the part of a history Bundle the tests read.
type historyBundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        int    `json:"total"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		FullURL  string          `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
		Request  struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"request"`
		Response struct {
			Status       string `json:"status"`
			Etag         string `json:"etag"`
			LastModified string `json:"lastModified"`
		} `json:"response"`
	} `json:"entry"`
}

func history(t *testing.T, f *fx, path string) historyBundle {
	t.Helper()
	var b historyBundle
	if err := json.Unmarshal([]byte(mustStatus(t, f, http.StatusOK, http.MethodGet, path, "")), &b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceType != "Bundle" || b.Type != "history" {
		t.Fatalf("%s: not a history Bundle: %+v", path, b)
	}
	return b
}

// A FHIR delete is a new version: a history entry with request.method DELETE
// and no resource, its etag the deletion's version and lastModified its time;
// reads answer 410 Gone, exports leave the resource out, and a later PUT
// re-creates it with a higher version.
func TestDeleteIsAVersionInTheHistory(t *testing.T) { eachStore(t, testDeleteIsAVersionInTheHistory) }

func testDeleteIsAVersionInTheHistory(t *testing.T) {
	f := setup(t, nil)
	step := func() { f.clk.Set(f.clk.Now().Add(time.Second)) }
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	step()
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":false}`)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	step()
	if got := exportAll(t, f); len(got["Patient"]) != 2 {
		t.Fatalf("export before delete: %v", got)
	}
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")

	mustStatus(t, f, http.StatusGone, http.MethodGet, "Patient/p1", "")
	mustStatus(t, f, http.StatusGone, http.MethodGet, "Patient/p1/_history/3", "")
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p1/_history/2", "")
	h := history(t, f, "Patient/p1/_history")
	if h.Total != 3 || len(h.Entry) != 3 {
		t.Fatalf("history has %d of %d entries, want 3", len(h.Entry), h.Total)
	}
	del := h.Entry[0]
	if del.Request.Method != http.MethodDelete || del.Request.URL != "Patient/p1" || len(del.Resource) != 0 ||
		del.Response.Etag != `W/"3"` || del.Response.LastModified != "2026-11-21T10:00:02.000Z" {
		t.Errorf("deletion entry = %+v", del)
	}
	for i, want := range []string{`W/"3"`, `W/"2"`, `W/"1"`} {
		if h.Entry[i].Response.Etag != want {
			t.Errorf("entry %d etag %s, want %s (newest first)", i, h.Entry[i].Response.Etag, want)
		}
	}
	if h.Entry[1].Request.Method != http.MethodPut || !bytes.Contains(h.Entry[1].Resource, []byte(`"versionId":"2"`)) ||
		h.Entry[1].Response.LastModified != "2026-11-21T10:00:01.000Z" || h.Entry[2].Response.Status != "201 Created" {
		t.Errorf("update entries = %+v", h.Entry[1:])
	}
	if got := exportAll(t, f); len(got["Patient"]) != 1 || !strings.Contains(got["Patient"][0], `"id":"p2"`) {
		t.Errorf("export after delete carries the deleted resource: %v", got)
	}
	// Deleting again changes nothing.
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")
	if h := history(t, f, "Patient/p1/_history"); h.Total != 3 {
		t.Errorf("second delete added a version: %d", h.Total)
	}

	step()
	st, res := f.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	if v, lu := meta(res); st != http.StatusCreated || v != "4" || lu != "2026-11-21T10:00:03.000Z" {
		t.Errorf("re-create = %d version %s at %s, want 201 version 4", st, v, lu)
	}
	h = history(t, f, "Patient/p1/_history")
	if h.Total != 4 || h.Entry[0].Response.Status != "201 Created" || h.Entry[1].Request.Method != http.MethodDelete {
		t.Errorf("history after re-creation = %+v", h)
	}
	if got := exportAll(t, f); len(got["Patient"]) != 2 || !strings.Contains(strings.Join(got["Patient"], ""), `"versionId":"4"`) {
		t.Errorf("export after re-creation: %v", got)
	}
}

// `_count` pages the history, newest first, with a next link while more remain.
func TestHistoryPages(t *testing.T) { eachStore(t, testHistoryPages) }

func testHistoryPages(t *testing.T) {
	f := setup(t, nil)
	for i := 0; i < 4; i++ {
		mustStatus(t, f, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[i == 0], http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	}
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")
	var etags []string
	path := "Patient/p1/_history?_count=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("next links do not end")
		}
		h := history(t, f, path)
		if h.Total != 5 || len(h.Entry) > 2 {
			t.Fatalf("page %s: total %d, %d entries", path, h.Total, len(h.Entry))
		}
		for _, e := range h.Entry {
			etags = append(etags, e.Response.Etag)
		}
		path = ""
		for _, l := range h.Link {
			if l.Relation == "next" {
				path = l.URL
			}
		}
	}
	if got := strings.Join(etags, " "); got != `W/"5" W/"4" W/"3" W/"2" W/"1"` {
		t.Errorf("paged history %s", got)
	}
	mustStatus(t, f, http.StatusBadRequest, http.MethodGet, "Patient/p1/_history?_count=0", "")
}

// A hard delete removes the history too: reads and history answer 404, the
// snapshot and exports leave the resource out, and the id starts again.
func TestHardDeleteRemovesHistory(t *testing.T) { eachStore(t, testHardDeleteRemovesHistory) }

func testHardDeleteRemovesHistory(t *testing.T) {
	f := setup(t, nil)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p3", `{"resourceType":"Patient","id":"p3"}`)
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p3", "")
	ds, _ := f.emu.Datastore("ds1")
	if !ds.HardDelete("Patient", "p1") || !ds.HardDelete("Patient", "p3") {
		t.Fatal("HardDelete of stored resources reported absent")
	}
	if ds.HardDelete("Patient", "p1") || ds.HardDelete("Observation", "p2") {
		t.Error("HardDelete of absent resources reported present")
	}
	for _, path := range []string{"Patient/p1", "Patient/p1/_history", "Patient/p1/_history/1", "Patient/p3", "Patient/p3/_history"} {
		mustStatus(t, f, http.StatusNotFound, http.MethodGet, path, "")
	}
	if snap := string(snapshot(t, ds)); strings.Contains(snap, `"id":"p1"`) || strings.Contains(snap, `"id":"p3"`) || !strings.Contains(snap, `"id":"p2"`) {
		t.Errorf("snapshot after hard delete:\n%s", snap)
	}
	if got := exportAll(t, f); len(got["Patient"]) != 1 || !strings.Contains(got["Patient"][0], `"id":"p2"`) {
		t.Errorf("export after hard delete: %v", got)
	}
	if ds.Count() != 1 {
		t.Errorf("count %d, want 1", ds.Count())
	}
	st, res := f.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	if v, _ := meta(res); st != http.StatusCreated || v != "1" {
		t.Errorf("re-create after hard delete = %d version %s, want 201 version 1", st, v)
	}
}

// Snapshot and Restore keep deletions: the restored store answers 410 and
// the same history (deletion entry included), and exports leave it out.
func TestRestoreKeepsDeletions(t *testing.T) { eachStore(t, testRestoreKeepsDeletions) }

func testRestoreKeepsDeletions(t *testing.T) {
	f := setup(t, nil)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	f.clk.Set(f.clk.Now().Add(time.Second))
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	src, _ := f.emu.Datastore("ds1")

	g := setup(t, nil)
	dst, _ := g.emu.Datastore("ds1")
	if err := dst.Restore(bytes.NewReader(snapshot(t, src))); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, g, http.StatusGone, http.MethodGet, "Patient/p1", "")
	if want, got := mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p1/_history", ""),
		mustStatus(t, g, http.StatusOK, http.MethodGet, "Patient/p1/_history", ""); got != want {
		t.Errorf("restored history\n%s\nwant\n%s", got, want)
	}
	h := history(t, g, "Patient/p1/_history")
	if h.Entry[0].Request.Method != http.MethodDelete || h.Entry[0].Response.LastModified != "2026-11-21T10:00:01.000Z" {
		t.Errorf("restored deletion entry %+v", h.Entry[0])
	}
	if got := exportAll(t, g); len(got["Patient"]) != 1 || !strings.Contains(got["Patient"][0], `"id":"p2"`) {
		t.Errorf("export of the restored store: %v", got)
	}
	st, res := g.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	if v, _ := meta(res); st != http.StatusCreated || v != "3" {
		t.Errorf("re-create after restore = %d version %s, want 201 version 3", st, v)
	}
}
