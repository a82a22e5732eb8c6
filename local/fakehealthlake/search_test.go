package fakehealthlake_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// searchBundle is the part of a searchset Bundle the tests read.
type searchBundle struct {
	ResourceType string `json:"resourceType"`
	Type         string `json:"type"`
	Total        *int   `json:"total"`
	Link         []struct {
		Relation string `json:"relation"`
		URL      string `json:"url"`
	} `json:"link"`
	Entry []struct {
		FullURL  string          `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
		Search   struct {
			Mode string `json:"mode"`
		} `json:"search"`
	} `json:"entry"`
}

// searchRaw sends GET {path} (relative to the data store base).
func searchRaw(t *testing.T, f *fx, path string, hdr map[string]string) (int, []byte) {
	t.Helper()
	return f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/"+path, nil, hdr)
}

// search sends a search and decodes its searchset Bundle.
func search(t *testing.T, f *fx, path string, hdr map[string]string) searchBundle {
	t.Helper()
	st, out := searchRaw(t, f, path, hdr)
	if st != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, st, out)
	}
	var b searchBundle
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		t.Fatalf("%s: not a searchset Bundle: %s", path, out)
	}
	return b
}

// countOf is the total of a `_summary=count` search with the query q.
func countOf(t *testing.T, f *fx, typ, q string, hdr map[string]string) int {
	t.Helper()
	path := typ + "?_summary=count"
	if q != "" {
		path += "&" + q
	}
	b := search(t, f, path, hdr)
	if b.Total == nil || len(b.Entry) != 0 {
		t.Fatalf("%s: count answer with total %v and %d entries", path, b.Total, len(b.Entry))
	}
	return *b.Total
}

// searchNext is a page's next link ("" on the last page).
func searchNext(b searchBundle) string {
	for _, l := range b.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	return ""
}

// ids lists a page's resources as "id/versionId".
func ids(t *testing.T, b searchBundle) []string {
	t.Helper()
	var out []string
	for _, e := range b.Entry {
		var r struct {
			ID   string `json:"id"`
			Meta struct {
				VersionID string `json:"versionId"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(e.Resource, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.ID+"/"+r.Meta.VersionID)
	}
	return out
}

// searchAll follows next links from path, calling between (if set) after
// each page but the last, and returns every resource as "id/versionId".
func searchAll(t *testing.T, f *fx, path string, hdr map[string]string, between func(page int)) ([]string, int) {
	t.Helper()
	var out []string
	pages := 0
	for ; path != ""; pages++ {
		if pages > 1000 {
			t.Fatal("next links do not end")
		}
		b := search(t, f, path, hdr)
		out = append(out, ids(t, b)...)
		path = searchNext(b)
		if path != "" && between != nil {
			between(pages)
		}
	}
	return out, pages
}

// writeFive writes Patient/p1…p5 a second apart from 10:00:00 and one
// Observation at 10:00:05.
func writeFive(t *testing.T, f *fx) {
	t.Helper()
	for i := 1; i <= 5; i++ {
		mustStatus(t, f, http.StatusCreated, http.MethodPut, fmt.Sprintf("Patient/p%d", i), fmt.Sprintf(`{"resourceType":"Patient","id":"p%d"}`, i))
		f.clk.Set(f.clk.Now().Add(time.Second))
	}
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o1", `{"resourceType":"Observation","id":"o1","status":"final","code":{}}`)
}

// `_lastUpdated` with each prefix, its value's precision, offsets and
// fractions, two bounds as an AND; the entries.
func TestSearchLastUpdated(t *testing.T) { eachStore(t, testSearchLastUpdated) }

func testSearchLastUpdated(t *testing.T) {
	f := setup(t, nil)
	writeFive(t, f) // p1 10:00:00 … p5 10:00:04
	for q, want := range map[string]int{
		"": 5,
		"_lastUpdated=ge2026-11-21T10:00:01.000Z&_lastUpdated=lt2026-11-21T10:00:03.000Z":         2,
		"_lastUpdated=gt2026-11-21T10:00:01.000Z":                                                 3,
		"_lastUpdated=gt2026-11-21T10:00:00.999Z":                                                 4,
		"_lastUpdated=gt2026-11-21T10:00:01Z":                                                     3, // after the whole second
		"_lastUpdated=ge2026-11-21T10:00:01Z":                                                     4,
		"_lastUpdated=le2026-11-21T10:00:01.000Z":                                                 2,
		"_lastUpdated=le2026-11-21T10:00:00.999Z":                                                 1,
		"_lastUpdated=lt2026-11-21T10:00:01Z":                                                     1,
		"_lastUpdated=eq2026-11-21T10:00:02Z":                                                     1,
		"_lastUpdated=2026-11-21T10:00:02.000Z":                                                   1,
		"_lastUpdated=eq2026-11-21":                                                               5,
		"_lastUpdated=2026-11":                                                                    5,
		"_lastUpdated=eq2026-11-20":                                                               0,
		"_lastUpdated=lt2026":                                                                     0,
		"_lastUpdated=ge2026-11-21T12:00:02%2B02:00":                                              3,
		"_lastUpdated=ge2026-11-21T12:00:02+02:00":                                                3, // an unescaped +
		"_lastUpdated=ge2026-11-21T05:00:02.000-05:00":                                            3,
		"_lastUpdated=ge2026-11-21T10:00:01.5Z":                                                   3,
		"_lastUpdated=le2026-11-21T10:00:01.5Z":                                                   2,
		"_lastUpdated=ge2026-11-21T10:00:03.000000Z":                                              2,
		"_lastUpdated=ge2026-11-21T10:00:03Z&_lastUpdated=lt2026-11-21T10:00:01Z":                 0,
		"_lastUpdated=ge2026-11-21T10:00:01Z&_lastUpdated=le2026-11-21T10:00:03Z&_lastUpdated=ne": -1,
	} {
		if want < 0 {
			continue
		}
		if got := countOf(t, f, "Patient", q, nil); got != want {
			t.Errorf("count %q = %d, want %d", q, got, want)
		}
		// The same without _summary: every entry, total included.
		got, _ := searchAll(t, f, "Patient?_count=2&"+q, nil, nil)
		if len(got) != want {
			t.Errorf("list %q = %v, want %d", q, got, want)
		}
	}
	if got := countOf(t, f, "Observation", "", nil); got != 1 {
		t.Errorf("Observation count = %d", got)
	}
	if got := countOf(t, f, "Encounter", "", nil); got != 0 {
		t.Errorf("Encounter count = %d", got)
	}

	b := search(t, f, "Patient?_lastUpdated=ge2026-11-21T10:00:01.000Z&_lastUpdated=lt2026-11-21T10:00:03.000Z", nil)
	if b.Total == nil || *b.Total != 2 || len(b.Entry) != 2 || searchNext(b) != "" {
		t.Fatalf("page: total %v, %d entries, next %q", b.Total, len(b.Entry), searchNext(b))
	}
	if e := b.Entry[0]; e.FullURL != "https://healthlake.us-east-1.amazonaws.com/datastore/ds1/r4/Patient/p2" || e.Search.Mode != "match" ||
		!strings.Contains(string(e.Resource), `"lastUpdated":"2026-11-21T10:00:01.000Z"`) {
		t.Errorf("entry %s %s %s", e.FullURL, e.Search.Mode, e.Resource)
	}
	ds, _ := f.emu.Datastore("ds1")
	if stored, _ := ds.Read("Patient", "p3"); !bytes.Equal(stored, b.Entry[1].Resource) {
		t.Errorf("entry resource %s, stored %s", b.Entry[1].Resource, stored)
	}

	for _, q := range []string{
		"_lastUpdated=ne2026-11-21T10:00:00Z", "_lastUpdated=ap2026-11-21", "_lastUpdated=2026-13-01",
		"_lastUpdated=ge2026-11-21T10:00:00", "_lastUpdated=yesterday", "_lastUpdated=ge2026-11-21T10:00Z",
		"_lastUpdated=ge2026-11-21T10:00:00Z,lt2026-11-22T00:00:00Z", "_count=-1", "_count=x",
		"_summary=text", "_page_token=%21%21", "_page_token=bm9wZQ", "_sort=-_lastUpdated", "_total=maybe",
	} {
		st, out := searchRaw(t, f, "Patient?"+q, nil)
		if st != http.StatusBadRequest || !strings.Contains(string(out), `"OperationOutcome"`) {
			t.Errorf("%s = %d %s, want 400 OperationOutcome", q, st, out)
		}
	}
}

// A count follows writes: an update moves a resource out of (or into) a
// range, a deletion or an erasure leaves every count, a re-creation comes
// back; a restored data store counts the same.
func TestSearchCountAfterWrites(t *testing.T) { eachStore(t, testSearchCountAfterWrites) }

func testSearchCountAfterWrites(t *testing.T) {
	f := setup(t, nil)
	writeFive(t, f) // p1 10:00:00 … p5 10:00:04; now 10:00:05
	const first3 = "_lastUpdated=lt2026-11-21T10:00:03Z"
	counts := func() (int, int, int) {
		return countOf(t, f, "Patient", first3, nil), countOf(t, f, "Patient", "_lastUpdated=ge2026-11-21T10:00:05Z", nil), countOf(t, f, "Patient", "", nil)
	}
	check := func(step string, a, b, all int) {
		t.Helper()
		if x, y, z := counts(); x != a || y != b || z != all {
			t.Errorf("%s: counts %d %d %d, want %d %d %d", step, x, y, z, a, b, all)
		}
	}
	check("start", 3, 0, 5)
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	check("p1 updated out of the range", 2, 1, 5)
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p2", "")
	check("p2 deleted", 1, 1, 4) // its deletion version is no resource either
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")
	check("p1 deleted", 1, 0, 3)
	f.clk.Set(f.clk.Now().Add(time.Second))
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	check("p2 re-created", 1, 1, 4)
	ds, _ := f.emu.Datastore("ds1")
	ds.HardDelete("Patient", "p3")
	check("p3 erased", 0, 1, 3)
	ds.HardDelete("Patient", "p4") // compacts Patient's log
	check("p4 erased", 0, 1, 2)
	got, _ := searchAll(t, f, "Patient?_count=1", nil, nil)
	if strings.Join(got, " ") != "p5/1 p2/3" {
		t.Errorf("list: %v", got)
	}

	g := setup(t, nil)
	dst, _ := g.emu.Datastore("ds1")
	if err := dst.Restore(bytes.NewReader(snapshot(t, ds))); err != nil {
		t.Fatal(err)
	}
	if got, _ := searchAll(t, g, "Patient?_count=1", nil, nil); strings.Join(got, " ") != "p5/1 p2/3" {
		t.Errorf("restored list: %v", got)
	}
	if n := countOf(t, g, "Patient", "_lastUpdated=ge2026-11-21T10:00:05Z", nil); n != 1 {
		t.Errorf("restored count = %d", n)
	}
}

// Pages in (lastUpdated, id) order, ids breaking ties of a millisecond;
// writes between pages neither repeat nor drop an unchanged resource.
func TestSearchPagingWhileWriting(t *testing.T) { eachStore(t, testSearchPagingWhileWriting) }

func testSearchPagingWhileWriting(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.SearchMaxCount = 4 })
	put := func(id string, status int) {
		mustStatus(t, f, status, http.MethodPut, "Patient/"+id, `{"resourceType":"Patient","id":"`+id+`"}`)
	}
	// 10:00:00: c, a, b (one millisecond); 10:00:01: f, e, d; 10:00:02: g,
	// h, i, j one each.
	for _, id := range []string{"c", "a", "b"} {
		put(id, http.StatusCreated)
	}
	f.clk.Set(f.clk.Now().Add(time.Second))
	for _, id := range []string{"f", "e", "d"} {
		put(id, http.StatusCreated)
	}
	for _, id := range []string{"g", "h", "i", "j"} {
		f.clk.Set(f.clk.Now().Add(time.Second))
		put(id, http.StatusCreated)
	}
	const want = "a/1 b/1 c/1 d/1 e/1 f/1 g/1 h/1 i/1 j/1"
	for _, q := range []string{"Patient", "Patient?_count=3", "Patient?_count=1", "Patient?_count=50"} {
		got, pages := searchAll(t, f, q, nil, nil)
		if strings.Join(got, " ") != want {
			t.Errorf("%s: %v", q, got)
		}
		if wantPages := map[string]int{"Patient": 3, "Patient?_count=3": 4, "Patient?_count=1": 10, "Patient?_count=50": 3}[q]; pages != wantPages {
			t.Errorf("%s: %d pages, want %d", q, pages, wantPages)
		}
	}
	b := search(t, f, "Patient?_count=3&_lastUpdated=lt2026-11-21T10:00:06Z", nil)
	next := searchNext(b)
	if b.Total == nil || *b.Total != 10 || !strings.HasPrefix(next, "Patient?") || !strings.Contains(next, "_page_token=") ||
		!strings.Contains(next, "_lastUpdated=lt2026-11-21T10%3A00%3A06Z") || !strings.Contains(next, "_count=3") {
		t.Errorf("first page: total %v, next %q", b.Total, next)
	}

	// Between pages: new resources (out of the range), an update of a
	// resource not listed yet (out of the range now), a deletion of another.
	f.clk.Set(time.Date(2026, 11, 21, 10, 0, 10, 0, time.UTC))
	between := func(page int) {
		switch page {
		case 0:
			put("zz", http.StatusCreated)
			put("e", http.StatusOK)
			mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/h", "")
		case 1:
			put("aa", http.StatusCreated)
		}
	}
	got, _ := searchAll(t, f, "Patient?_count=3&_lastUpdated=lt2026-11-21T10:00:06Z", nil, between)
	if strings.Join(got, " ") != "a/1 b/1 c/1 d/1 f/1 g/1 i/1 j/1" {
		t.Errorf("bounded range, writes between pages: %v", got)
	}
	// Without an upper bound the new versions come at the end, in order.
	got, _ = searchAll(t, f, "Patient?_count=2", nil, func(page int) {
		if page == 0 {
			put("a", http.StatusOK) // listed already: listed again, as its new version
		}
	})
	if strings.Join(got, " ") != "a/1 b/1 c/1 d/1 f/1 g/1 i/1 j/1 a/2 aa/1 e/2 zz/1" {
		t.Errorf("open range: %v", got)
	}
}

// Paging through a millisecond shared by many resources (its id order is
// cached) while more are written in it: each resource there from the
// start is listed once, in id order.
func TestSearchPagingOneMillisecond(t *testing.T) {
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	load := func(id string) {
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := 0; i < 150; i++ {
		id := fmt.Sprintf("m%03d", (i*37)%150)
		load(id)
		want = append(want, id+"/1")
	}
	sort.Strings(want)
	got, pages := searchAll(t, f, "Patient?_count=7", nil, func(page int) {
		load(fmt.Sprintf("m%03d-new", page*11%150)) // sorts just after an old id
		load(fmt.Sprintf("a%03d", page))            // sorts before every old id
		if page == 3 {
			ds.Delete("Patient", "m140")
		}
	})
	var old []string
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g] {
			t.Errorf("%s listed twice", g)
		}
		seen[g] = true
		if !strings.Contains(g, "-new") && !strings.HasPrefix(g, "a") {
			old = append(old, g)
		}
	}
	want = append(want[:140], want[141:]...)
	if strings.Join(old, " ") != strings.Join(want, " ") {
		t.Errorf("%d pages: %v\nwant %v", pages, old, want)
	}
	// The deletion (a new version of m140 in the same millisecond) took
	// the next millisecond: what was written after it comes last.
	idOf := func(s string) string { return strings.Split(s, "/")[0] }
	first := slices.Index(got, "m149/1") + 1
	if !sort.SliceIsSorted(got[:first], func(i, j int) bool { return idOf(got[i]) < idOf(got[j]) }) ||
		!sort.SliceIsSorted(got[first:], func(i, j int) bool { return idOf(got[first+i]) < idOf(got[first+j]) }) ||
		!slices.Contains(got[first:], "a004/1") || !slices.Contains(got[:first], "m022-new/1") {
		t.Errorf("not in (lastUpdated, id) order: %v", got)
	}
}

// Eventual searches do not see versions younger than the history lag (the
// previous version instead); strong ones see everything; other levels 400.
func TestSearchConsistency(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.HistoryLag = time.Second })
	put := func(id, body string, status int) {
		mustStatus(t, f, status, http.MethodPut, "Patient/"+id, `{"resourceType":"Patient","id":"`+id+`"`+body+`}`)
	}
	put("p1", "", http.StatusCreated)
	put("p3", "", http.StatusCreated)
	f.clk.Set(f.clk.Now().Add(5 * time.Second)) // 10:00:05
	put("p1", `,"active":true`, http.StatusOK)
	put("p2", "", http.StatusCreated)
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p3", "")

	strong := map[string]string{fakehealthlake.HistoryConsistencyHeader: "strong"}
	eventual := map[string]string{fakehealthlake.HistoryConsistencyHeader: "EVENTUAL"}
	const old = "_lastUpdated=lt2026-11-21T10:00:01Z"
	for _, c := range []struct {
		hdr       map[string]string
		list      string
		all, olds int
	}{
		{nil, "p1/1 p3/1", 2, 2},
		{eventual, "p1/1 p3/1", 2, 2},
		{strong, "p1/2 p2/1", 2, 0}, // one millisecond: in id order
	} {
		got, _ := searchAll(t, f, "Patient?_count=1", c.hdr, nil)
		if strings.Join(got, " ") != c.list {
			t.Errorf("%v: %v, want %s", c.hdr, got, c.list)
		}
		if n := countOf(t, f, "Patient", "", c.hdr); n != c.all {
			t.Errorf("%v: count %d, want %d", c.hdr, n, c.all)
		}
		if n := countOf(t, f, "Patient", old, c.hdr); n != c.olds {
			t.Errorf("%v: old count %d, want %d", c.hdr, n, c.olds)
		}
	}
	f.clk.Set(f.clk.Now().Add(time.Second))
	if got, _ := searchAll(t, f, "Patient", nil, nil); strings.Join(got, " ") != "p1/2 p2/1" {
		t.Errorf("after the lag: %v", got)
	}
	st, out := searchRaw(t, f, "Patient?_summary=count", map[string]string{fakehealthlake.HistoryConsistencyHeader: "quorum"})
	if st != http.StatusBadRequest || !strings.Contains(string(out), "OperationOutcome") {
		t.Errorf("bad level = %d %s", st, out)
	}
}

// Unknown parameters are ignored unless Prefer: handling=strict; POST
// _search takes the parameters as a form body.
func TestSearchHandlingAndPost(t *testing.T) {
	f := setup(t, nil)
	writeFive(t, f)
	if n := countOf(t, f, "Patient", "name=smith&_lastUpdated=ge2026-11-21T10:00:03Z", nil); n != 2 {
		t.Errorf("lenient count = %d", n)
	}
	if n := countOf(t, f, "Patient", "_lastUpdated=ge2026-11-21T10:00:03Z", map[string]string{"Prefer": "handling=strict"}); n != 2 {
		t.Errorf("strict count without unknown parameters = %d", n)
	}
	for _, prefer := range []string{"handling=strict", "return=minimal, handling=strict"} {
		st, out := searchRaw(t, f, "Patient?name=smith&_summary=count", map[string]string{"Prefer": prefer})
		if st != http.StatusBadRequest || !strings.Contains(string(out), "name") {
			t.Errorf("strict %q = %d %s", prefer, st, out)
		}
	}
	if n := countOf(t, f, "Patient", "name=smith", map[string]string{"Prefer": "handling=lenient"}); n != 5 {
		t.Errorf("lenient = %d", n)
	}

	form := url.Values{"_lastUpdated": {"ge2026-11-21T10:00:01Z", "lt2026-11-21T10:00:04Z"}, "_count": {"2"}}
	st, out := f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/Patient/_search", []byte(form.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	var b searchBundle
	if err := json.Unmarshal(out, &b); st != http.StatusOK || err != nil {
		t.Fatalf("POST _search = %d %s", st, out)
	}
	if got := ids(t, b); strings.Join(got, " ") != "p2/1 p3/1" || b.Total == nil || *b.Total != 3 {
		t.Errorf("POST _search page: %v total %v", got, b.Total)
	}
	rest, _ := searchAll(t, f, searchNext(b), nil, nil)
	if strings.Join(rest, " ") != "p4/1" {
		t.Errorf("POST _search next pages: %v", rest)
	}
	st, out = f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/Patient/_search", []byte("_summary=count&_lastUpdated=ge2026-11-21T10:00:04Z"),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
	if st != http.StatusOK || !strings.Contains(string(out), `"total":1`) {
		t.Errorf("POST _search count = %d %s", st, out)
	}
	st, out = f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/Patient/_search?_summary=count&_lastUpdated=ge2026-11-21T10:00:03Z", nil, nil)
	if st != http.StatusOK || !strings.Contains(string(out), `"total":2`) {
		t.Errorf("POST _search with the parameters in the URL = %d %s", st, out)
	}
	st, out = f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/Patient/_search?_summary=count", []byte("_lastUpdated=ge2026-11-21T10:00:04Z"),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if st != http.StatusBadRequest {
		t.Errorf("POST _search with parameters in the URL and the body = %d %s", st, out)
	}
	st, out = f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/Patient/_search", []byte(`{}`), nil)
	if st != http.StatusBadRequest {
		t.Errorf("POST _search with a JSON body = %d %s", st, out)
	}
}

// A random mix of creates, updates, deletes and erasures, many sharing a
// millisecond, against a model: every count and every paged listing of
// random ranges.
func TestSearchAgainstModel(t *testing.T) {
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	rng := rand.New(rand.NewPCG(7, 8))
	start := f.clk.Now()
	for i := 0; i < 600; i++ {
		if rng.IntN(4) == 0 {
			f.clk.Set(f.clk.Now().Add(time.Duration(rng.IntN(3)) * time.Millisecond))
		}
		id := fmt.Sprintf("r%d", rng.IntN(120))
		switch n := rng.IntN(10); {
		case n < 7:
			if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
				t.Fatal(err)
			}
		case n < 9:
			ds.Delete("Patient", id)
		default:
			ds.HardDelete("Patient", id)
		}
	}
	// The model: each live resource's current lastUpdated.
	type live struct {
		ms  int64
		key string
	}
	var all []live
	for k := 0; k < 120; k++ {
		id := fmt.Sprintf("r%d", k)
		body, ok := ds.Read("Patient", id)
		if !ok {
			continue
		}
		var r struct {
			Meta struct {
				VersionID   string `json:"versionId"`
				LastUpdated string `json:"lastUpdated"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		lu, _ := time.Parse(time.RFC3339Nano, r.Meta.LastUpdated)
		all = append(all, live{lu.UnixMilli(), id + "/" + r.Meta.VersionID})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].ms != all[j].ms {
			return all[i].ms < all[j].ms
		}
		return "Patient/"+strings.Split(all[i].key, "/")[0] < "Patient/"+strings.Split(all[j].key, "/")[0]
	})
	end := f.clk.Now()
	span := end.Sub(start).Milliseconds() + 2
	for q := 0; q < 40; q++ {
		a := start.Add(time.Duration(rng.Int64N(span)) * time.Millisecond)
		b := a.Add(time.Duration(rng.Int64N(span)) * time.Millisecond)
		var want []string
		for _, l := range all {
			if l.ms >= a.UnixMilli() && l.ms <= b.UnixMilli() {
				want = append(want, l.key)
			}
		}
		qs := "_lastUpdated=ge" + a.Format(fakehealthlake.InstantLayout) + "&_lastUpdated=le" + b.Format(fakehealthlake.InstantLayout)
		if n := countOf(t, f, "Patient", qs, nil); n != len(want) {
			t.Errorf("%s: count %d, want %d", qs, n, len(want))
		}
		got, _ := searchAll(t, f, fmt.Sprintf("Patient?_count=%d&%s", 1+rng.IntN(7), qs), nil, nil)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s:\n got %v\nwant %v", qs, got, want)
		}
	}
}
