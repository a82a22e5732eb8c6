package fakehealthlake

import (
	"cmp"
	"encoding/base64"
	"math"
	"math/bits"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// FHIR R4 search of one type (HealthLake "FHIR R4 search parameters for
// HealthLake"), by `_lastUpdated` only: what a reconciliation counts and
// lists.
//
// Each type's log (typeLog.vers, lastUpdated order) carries a Fenwick tree
// over its positions holding 1 where the version is the current, live
// (neither deleted nor erased) version of its resource. A `_lastUpdated`
// range is two binary searches of the log; its count, two prefix sums: a
// count costs O(log n) whatever the range. A page walks the live positions
// from its start with the tree's select, O(page × log n). The results are
// ordered by (lastUpdated, id): versions sharing a millisecond are sorted
// by id (a block of a millisecond, once sorted, is kept while it only grows).

// fenwick is a Fenwick (binary indexed) tree of counts over positions
// 0…len−1; element i−1 of the slice is node i.
type fenwick []int32

// push appends a position holding x.
func (f *fenwick) push(x int32) {
	t := *f
	i := len(t) + 1
	s := x
	for j := i - 1; j > i-(i&-i); j -= j & -j {
		s += t[j-1]
	}
	*f = append(t, s)
}

// add adds x at position p.
func (f fenwick) add(p int, x int32) {
	for i := p + 1; i <= len(f); i += i & -i {
		f[i-1] += x
	}
}

// prefix is the sum over positions [0, p).
func (f fenwick) prefix(p int) int {
	s := 0
	for i := p; i > 0; i -= i & -i {
		s += int(f[i-1])
	}
	return s
}

// find returns the position of the k-th (from 1) counted position, or
// len(f) when there are fewer than k.
func (f fenwick) find(k int) int {
	if k < 1 || len(f) == 0 {
		return 0
	}
	pos := 0
	for step := 1 << (bits.Len(uint(len(f))) - 1); step > 0; step >>= 1 {
		if pos+step <= len(f) && int(f[pos+step-1]) < k {
			pos += step
			k -= int(f[pos-1])
		}
	}
	return pos
}

// build makes the tree of the given 0/1 values in O(n).
func buildFenwick(n int, one func(p int) bool) fenwick {
	f := make(fenwick, n)
	for p := range f {
		if one(p) {
			f[p]++
		}
	}
	for i := 1; i <= n; i++ {
		if j := i + i&-i; j <= n {
			f[j-1] += f[i-1]
		}
	}
	return f
}

// searchable reports whether version vi is its resource's current, live
// version: what search finds.
func (d *Datastore) searchable(vi int32) bool {
	v := &d.vers[vi]
	r := &d.res[v.res]
	return !r.gone && r.last == vi && !v.deleted()
}

// rebuildLive remakes the type's tree and drops its block cache (after
// compaction or Restore).
func (tl *typeLog) rebuildLive(d *Datastore) {
	tl.live = buildFenwick(len(tl.vers), func(p int) bool { return d.searchable(tl.vers[p]) })
	tl.block = nil
}

// unlive clears the position of version vi (it stops being its resource's
// current live version).
func (tl *typeLog) unlive(vi int32) {
	p := sort.Search(len(tl.vers), func(i int) bool { return tl.vers[i] >= vi })
	if p < len(tl.vers) && tl.vers[p] == vi {
		tl.live.add(p, -1)
	}
}

// idBlock caches the positions [start, end) of a type's log, all of one
// millisecond, sorted by resource id.
type idBlock struct {
	start, end int
	byID       []int32
}

// minCachedBlock is the smallest millisecond block whose id order is cached.
const minCachedBlock = 64

// blockByID returns the positions [start, end) (one millisecond) sorted by
// id. Only the log's last millisecond can grow, so a cached block that
// grew is merged with its sorted new part.
func (d *Datastore) blockByID(tl *typeLog, start, end int) []int32 {
	byKey := func(a, b int32) int {
		return strings.Compare(d.res[d.vers[tl.vers[a]].res].key, d.res[d.vers[tl.vers[b]].res].key)
	}
	if end-start < minCachedBlock {
		s := make([]int32, 0, end-start)
		for p := start; p < end; p++ {
			s = append(s, int32(p))
		}
		slices.SortFunc(s, byKey)
		return s
	}
	c := tl.block
	if c != nil && c.start == start && c.end == end {
		return c.byID
	}
	if c == nil || c.start != start || c.end > end {
		c = &idBlock{start: start, end: start}
	}
	add := make([]int32, 0, end-c.end)
	for p := c.end; p < end; p++ {
		add = append(add, int32(p))
	}
	slices.SortFunc(add, byKey)
	merged := make([]int32, 0, end-start)
	i, j := 0, 0
	for i < len(c.byID) && j < len(add) {
		if byKey(c.byID[i], add[j]) <= 0 {
			merged = append(merged, c.byID[i])
			i++
		} else {
			merged = append(merged, add[j])
			j++
		}
	}
	merged = append(append(merged, c.byID[i:]...), add[j:]...)
	tl.block = &idBlock{start: start, end: end, byID: merged}
	return merged
}

// searchQuery is a search's parameters.
type searchQuery struct {
	// lo and hi bound lastUpdated (Unix ms) to [lo, hi).
	lo, hi int64
	// lastUpdated are the `_lastUpdated` values, repeated in next links.
	lastUpdated []string
	// countOnly: `_summary=count` (or `_count=0`): total, no entries.
	countOnly bool
	// count is the page size.
	count int
	// noTotal: `_total=none`.
	noTotal  bool
	total    string
	sortRaw  string
	hasAfter bool
	// afterMs and afterKey, from `_page_token`: the page starts after
	// (lastUpdated, "Type/id").
	afterMs  int64
	afterKey string
	// cutoff is the newest lastUpdated an eventual search sees (hasCutoff).
	cutoff    int64
	hasCutoff bool
}

// searchParams are the search parameters the emulator knows.
var searchParams = map[string]bool{"_lastUpdated": true, "_summary": true, "_count": true, "_page_token": true, "_total": true, "_sort": true}

// strictHandling reports whether the request carries `Prefer: handling=strict`.
func strictHandling(r *http.Request) bool {
	for _, h := range r.Header.Values("Prefer") {
		for _, p := range strings.FieldsFunc(h, func(c rune) bool { return c == ',' || c == ';' }) {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(strings.TrimSpace(k), "handling") && strings.EqualFold(strings.Trim(strings.TrimSpace(v), `"`), "strict") {
				return true
			}
		}
	}
	return false
}

// searchValues returns the parameters of a search: the query string, or
// for `POST {Type}/_search` with a body the form body (HealthLake takes
// the parameters of a POST in the URL or in the body, not both).
func searchValues(r *http.Request, body []byte) (url.Values, error) {
	q := r.URL.Query()
	if r.Method != http.MethodPost || len(body) == 0 {
		return q, nil
	}
	if r.URL.RawQuery != "" {
		return nil, badRequest{"POST _search takes its parameters in the URL or in the body, not both"}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, badRequest{"POST _search needs a Content-Type application/x-www-form-urlencoded body"}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, badRequest{"the _search body is not form-encoded"}
	}
	return form, nil
}

// searchParamsOf reads a search's parameters and consistency header. The
// caller holds e.mu.
func (e *Emulator) searchParamsOf(r *http.Request, body []byte) (searchQuery, error) {
	p := searchQuery{lo: math.MinInt64, hi: math.MaxInt64, count: e.opts.SearchMaxCount}
	q, err := searchValues(r, body)
	if err != nil {
		return p, err
	}
	strict := strictHandling(r)
	for name, vs := range q {
		if !searchParams[name] && strict {
			return p, badRequest{"unknown search parameter " + name + " (Prefer: handling=strict)"}
		}
		for _, v := range vs {
			if v == "" {
				continue // FHIR: an empty parameter is ignored
			}
			if err := p.set(name, v, e.opts.SearchMaxCount); err != nil {
				return p, err
			}
		}
	}
	switch level := r.Header.Get(HistoryConsistencyHeader); {
	case level == "" || strings.EqualFold(level, "eventual"):
		if lag := e.opts.HistoryLag; lag > 0 {
			p.cutoff, p.hasCutoff = e.opts.Now().Add(-lag).UnixMilli(), true
		}
	case strings.EqualFold(level, "strong"):
	default:
		return p, badRequest{HistoryConsistencyHeader + " must be strong or eventual"}
	}
	return p, nil
}

// set applies one value of a known parameter (unknown ones are ignored).
func (p *searchQuery) set(name, v string, maxCount int) error {
	switch name {
	case "_lastUpdated":
		v = strings.ReplaceAll(v, " ", "+") // an unescaped + of an offset
		if strings.Contains(v, ",") {
			return badRequest{"_lastUpdated: several values in one parameter (OR) are not emulated"}
		}
		lo, hi, err := dateBounds(v)
		if err != nil {
			return err
		}
		p.lo, p.hi = max(p.lo, lo), min(p.hi, hi)
		p.lastUpdated = append(p.lastUpdated, v)
	case "_summary":
		switch v {
		case "count":
			p.countOnly = true
		case "false":
		default:
			return badRequest{"_summary=" + v + " is not emulated (count and false are)"}
		}
	case "_count":
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return badRequest{"_count must be a non-negative integer"}
		}
		if n == 0 {
			p.countOnly = true
		}
		p.count = min(n, maxCount)
	case "_total":
		switch v {
		case "none":
			p.noTotal = true
		case "estimate", "accurate":
		default:
			return badRequest{"_total must be none, estimate or accurate"}
		}
		p.total = v
	case "_sort":
		if v != "_lastUpdated" {
			return badRequest{"_sort=" + v + " is not emulated (results are in _lastUpdated order)"}
		}
		p.sortRaw = v
	case "_page_token":
		ms, key, ok := parsePageToken(v)
		if !ok {
			return badRequest{"_page_token is not a page token of this data store"}
		}
		p.afterMs, p.afterKey, p.hasAfter = ms, key, true
	}
	return nil
}

// dateBounds turns a `_lastUpdated` value (FHIR date search: an optional
// prefix eq, gt, ge, lt, le, then a date or instant) into the range
// [lo, hi) of lastUpdated (Unix ms) it matches. The value stands for the
// interval its precision implies, [S, E): eq matches S ≤ t < E, ge t ≥ S,
// gt t ≥ E, lt t < S, le t < E (FHIR R4 search, date).
func dateBounds(v string) (int64, int64, error) {
	prefix := "eq"
	if len(v) >= 2 && v[0] >= 'a' && v[0] <= 'z' {
		prefix, v = v[:2], v[2:]
	}
	s, e, ok := dateRange(v)
	if !ok {
		return 0, 0, badRequest{"_lastUpdated: " + strconv.Quote(v) + " is not a FHIR date or instant"}
	}
	switch prefix {
	case "eq":
		return s, e, nil
	case "ge":
		return s, math.MaxInt64, nil
	case "gt":
		return e, math.MaxInt64, nil
	case "lt":
		return math.MinInt64, s, nil
	case "le":
		return math.MinInt64, e, nil
	}
	return 0, 0, badRequest{"_lastUpdated: prefix " + prefix + " is not emulated (eq, ge, gt, le, lt are)"}
}

// dateRange is the interval [S, E) (Unix ms, rounded up) a FHIR date
// (YYYY, YYYY-MM, YYYY-MM-DD, UTC) or instant (with seconds, optional
// fraction, Z or an offset) stands for.
func dateRange(v string) (int64, int64, bool) {
	for _, d := range []struct {
		layout     string
		y, m, days int
	}{{"2006", 1, 0, 0}, {"2006-01", 0, 1, 0}, {"2006-01-02", 0, 0, 1}} {
		if len(v) == len(d.layout) {
			t, err := time.Parse(d.layout, v)
			if err != nil {
				return 0, 0, false
			}
			return t.UnixMilli(), t.AddDate(d.y, d.m, d.days).UnixMilli(), true
		}
	}
	if len(v) < len("2006-01-02T15:04:05Z") || v[10] != 'T' {
		return 0, 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, 0, false
	}
	unit := int64(time.Second)
	if rest := v[19:]; rest[0] == '.' {
		digits := 1
		for digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9' {
			digits++
		}
		unit = 1
		for k := digits - 1; k < 9; k++ {
			unit *= 10
		}
	}
	sec, ns := t.Unix(), int64(t.Nanosecond())
	ceilMs := func(ns int64) int64 { return (ns + int64(time.Millisecond) - 1) / int64(time.Millisecond) }
	return sec*1000 + ceilMs(ns), sec*1000 + ceilMs(ns+unit), true
}

// pageToken is the opaque `_page_token` of the page after (ms, key).
func pageToken(ms int64, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ms, 10) + " " + key))
}

func parsePageToken(s string) (int64, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return 0, "", false
	}
	msRaw, key, ok := strings.Cut(string(b), " ")
	ms, err := strconv.ParseInt(msRaw, 10, 64)
	return ms, key, ok && err == nil && strings.Contains(key, "/")
}

// hit is one search result: version vi, with its order key.
type hit struct {
	ms  int64
	key string
	vi  int32
}

func (a hit) compare(b hit) int {
	if c := cmp.Compare(a.ms, b.ms); c != 0 {
		return c
	}
	return strings.Compare(a.key, b.key)
}

// searchRun is one search over a type's log.
type searchRun struct {
	d  *Datastore
	tl *typeLog
	p  *searchQuery
	// [lo, hi) are the log positions of current versions a search may see:
	// lastUpdated in the range and, eventual, not after the cutoff.
	lo, hi int
	// extra are the versions an eventual search sees instead of a current
	// version younger than the cutoff, in the range, in order.
	extra []hit
}

// newSearchRun finds the search's bounds in the type's log.
func (d *Datastore) newSearchRun(tl *typeLog, p *searchQuery) *searchRun {
	s := &searchRun{d: d, tl: tl, p: p}
	if p.lo >= p.hi {
		return s
	}
	vers := tl.vers
	posOf := func(ms int64) int { // the first position at or after ms
		return sort.Search(len(vers), func(i int) bool { return d.vers[vers[i]].ms >= ms })
	}
	hiMs := p.hi
	if p.hasCutoff && p.cutoff < math.MaxInt64 {
		hiMs = min(hiMs, p.cutoff+1)
	}
	s.lo, s.hi = posOf(p.lo), posOf(hiMs)
	s.hi = max(s.hi, s.lo)
	if !p.hasCutoff {
		return s
	}
	// Resources whose current version is younger than the cutoff: the
	// search sees their newest version at or before it (if any).
	for _, vi := range vers[posOf(p.cutoff+1):] {
		v := &d.vers[vi]
		r := &d.res[v.res]
		if r.gone || r.last != vi {
			continue
		}
		k := v.prev
		for k >= 0 && d.vers[k].ms > p.cutoff {
			k = d.vers[k].prev
		}
		if k < 0 || d.vers[k].deleted() || d.vers[k].ms < p.lo || d.vers[k].ms >= p.hi {
			continue
		}
		s.extra = append(s.extra, hit{ms: d.vers[k].ms, key: r.key, vi: k})
	}
	slices.SortFunc(s.extra, hit.compare)
	return s
}

// total counts the search's results.
func (s *searchRun) total() int {
	return s.tl.live.prefix(s.hi) - s.tl.live.prefix(s.lo) + len(s.extra)
}

// page returns up to n results after the page token, in order, and whether
// more remain.
func (s *searchRun) page(n int) ([]hit, bool) {
	d, tl, p := s.d, s.tl, s.p
	var out []hit
	extra := s.extra
	if p.hasAfter {
		after := hit{ms: p.afterMs, key: p.afterKey}
		i := sort.Search(len(extra), func(i int) bool { return extra[i].compare(after) > 0 })
		extra = extra[i:]
	}
	// take adds h, or reports that the page is full (h remains).
	take := func(h hit) bool {
		for len(extra) > 0 && extra[0].compare(h) < 0 {
			if len(out) == n {
				return false
			}
			out, extra = append(out, extra[0]), extra[1:]
		}
		if len(out) == n {
			return false
		}
		out = append(out, h)
		return true
	}
	vers := tl.vers
	pos := s.lo
	if p.hasAfter {
		pos = max(pos, sort.Search(len(vers), func(i int) bool { return d.vers[vers[i]].ms >= p.afterMs }))
	}
	for pos < s.hi {
		// The next live position, then its whole millisecond.
		q := tl.live.find(tl.live.prefix(pos) + 1)
		if q >= s.hi {
			break
		}
		ms := d.vers[vers[q]].ms
		start := sort.Search(q+1, func(i int) bool { return d.vers[vers[i]].ms >= ms })
		end := q + sort.Search(s.hi-q, func(i int) bool { return d.vers[vers[q+i]].ms > ms })
		block := d.blockByID(tl, start, end)
		if p.hasAfter && ms == p.afterMs {
			i := sort.Search(len(block), func(i int) bool { return d.res[d.vers[vers[block[i]]].res].key > p.afterKey })
			block = block[i:]
		}
		for _, bp := range block {
			vi := vers[bp]
			if !d.searchable(vi) {
				continue
			}
			if !take(hit{ms: ms, key: d.res[d.vers[vi].res].key, vi: vi}) {
				return out, true
			}
		}
		pos = end
	}
	for len(extra) > 0 {
		if len(out) == n {
			return out, true
		}
		out, extra = append(out, extra[0]), extra[1:]
	}
	return out, false
}

// entrySearch is Bundle.entry.search.
type entrySearch struct {
	Mode string `json:"mode"`
}

// search answers `GET {Type}?…` and `POST {Type}/_search` (FHIR R4 search,
// by `_lastUpdated`): a searchset Bundle of the type's live resources as
// their current versions (as of the consistency cutoff for an eventual
// search), ordered by (lastUpdated, id), a page at a time. The caller holds
// e.mu.
func (d *Datastore) search(w http.ResponseWriter, r *http.Request, typ string, body []byte) {
	p, err := d.e.searchParamsOf(r, body)
	if err != nil {
		writeErr(w, err)
		return
	}
	tl, ok := d.byType[typ]
	if !ok {
		tl = &typeLog{} // never written: nothing found
	}
	run := d.newSearchRun(tl, &p)
	b := bundle{ResourceType: "Bundle", Type: "searchset", Entry: []bundleEntry{}}
	if !p.noTotal || p.countOnly {
		total := run.total()
		b.Total = &total
	}
	self := url.URL{Path: typ}
	if r.Method == http.MethodGet {
		self.RawQuery = r.URL.RawQuery
	}
	b.Link = []bundleLink{{Relation: "self", URL: self.String()}}
	if p.countOnly {
		writeBundle(w, &b)
		return
	}
	hits, more := run.page(p.count)
	base := strings.TrimSuffix(d.e.opts.Endpoint, "/") + "/datastore/" + d.id + "/r4/"
	for _, h := range hits {
		res, err := d.body(&d.vers[h.vi])
		if err != nil {
			writeStoreError(w)
			return
		}
		b.Entry = append(b.Entry, bundleEntry{FullURL: base + h.key, Resource: res, Search: &entrySearch{Mode: "match"}})
	}
	if more && len(hits) > 0 {
		last := hits[len(hits)-1]
		v := url.Values{}
		v["_lastUpdated"] = p.lastUpdated
		v.Set("_count", strconv.Itoa(p.count))
		if p.total != "" {
			v.Set("_total", p.total)
		}
		if p.sortRaw != "" {
			v.Set("_sort", p.sortRaw)
		}
		v.Set("_page_token", pageToken(last.ms, last.key))
		b.Link = append(b.Link, bundleLink{Relation: "next", URL: typ + "?" + v.Encode()})
	}
	writeBundle(w, &b)
}
