package fakehealthlake

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HistoryConsistencyHeader is the request header choosing the consistency
// of a history read (HealthLake "FHIR Search Consistency Levels"): strong
// or eventual (the default).
const HistoryConsistencyHeader = "x-amz-fhir-history-consistency-level"

// typeLog is the versions of one resource type, as indices of the data
// store's log in log (so lastUpdated) order. Versions of hard-deleted
// resources stay until compact drops them; gone counts them. live counts,
// by position in vers, the current live versions (search.go); block
// caches the id order of one millisecond of vers.
type typeLog struct {
	vers  []int32
	gone  int
	live  fenwick
	block *idBlock
}

// typeLogOf returns (creating) the log of typ.
func (d *Datastore) typeLogOf(typ string) *typeLog {
	tl, ok := d.byType[typ]
	if !ok {
		tl = &typeLog{}
		d.byType[typ] = tl
	}
	return tl
}

// compact drops the versions of hard-deleted resources, in place.
func (tl *typeLog) compact(d *Datastore) {
	kept := tl.vers[:0]
	for _, vi := range tl.vers {
		if !d.res[d.vers[vi].res].gone {
			kept = append(kept, vi)
		}
	}
	tl.vers, tl.gone = kept, 0
	tl.rebuildLive(d)
}

// rebuildTypeLogs lists every version under its type again (after Restore
// reorders the log).
func (d *Datastore) rebuildTypeLogs() {
	d.byType = map[string]*typeLog{}
	for i := range d.vers {
		r := &d.res[d.vers[i].res]
		tl := d.typeLogOf(typeOf(r.key))
		tl.vers = append(tl.vers, int32(i))
		if r.gone {
			tl.gone++
		}
	}
	for _, tl := range d.byType {
		tl.rebuildLive(d)
	}
}

// typeSet is a set of resource types.
func typeSet(types []string) map[string]bool {
	m := make(map[string]bool, len(types))
	for _, t := range types {
		m[t] = true
	}
	return m
}

// SetHistoryLag changes Options.HistoryLag for reads from now on.
func (e *Emulator) SetHistoryLag(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.HistoryLag = d
}

// SetHistoryOptOut replaces Options.HistoryOptOut: the resource types whose
// history reads see only the current, not deleted, version of each resource.
func (e *Emulator) SetHistoryOptOut(types ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.HistoryOptOut = append([]string(nil), types...)
	e.noHistory = typeSet(types)
}

// historyQuery is a history read's parameters.
type historyQuery struct {
	// count is the page size: `_count` or HistoryMaxCount, whichever is lower.
	count int
	// since (Unix ms, rounded up) keeps versions with lastUpdated at or
	// after it; math.MinInt64 without `_since`.
	since    int64
	sinceRaw string
	// cutoff is the newest lastUpdated an eventual read sees (hasCutoff).
	cutoff    int64
	hasCutoff bool
	// before, from `_page_token`, keeps only versions earlier in the log
	// than index before (hasBefore): where the previous page ended.
	before    int32
	hasBefore bool
	// noHistory: the type is opted out of history.
	noHistory bool
}

// historyParams reads `_count`, `_since`, `_page_token` and the consistency
// header, answering 400 for a bad one. The caller holds e.mu.
func (e *Emulator) historyParams(w http.ResponseWriter, r *http.Request) (historyQuery, bool) {
	q := r.URL.Query()
	p := historyQuery{count: e.opts.HistoryMaxCount, since: minMs}
	if c := q.Get("_count"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			writeOutcome(w, http.StatusBadRequest, "invalid", "_count must be a positive integer")
			return p, false
		}
		p.count = min(n, e.opts.HistoryMaxCount)
	}
	if s := q.Get("_since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeOutcome(w, http.StatusBadRequest, "invalid", "_since is not a FHIR instant")
			return p, false
		}
		p.since, p.sinceRaw = t.UnixMilli(), s
		if t.After(time.UnixMilli(p.since)) {
			p.since++ // sub-millisecond: versions are stamped to the millisecond
		}
	}
	if q.Has("_at") {
		writeOutcome(w, http.StatusBadRequest, "not-supported", "_at is not emulated")
		return p, false
	}
	if tok := q.Get("_page_token"); tok != "" {
		n, err := strconv.ParseInt(tok, 10, 32)
		if err != nil || n < 0 {
			writeOutcome(w, http.StatusBadRequest, "invalid", "_page_token is not a page token of this data store")
			return p, false
		}
		p.before, p.hasBefore = int32(n), true
	}
	switch level := r.Header.Get(HistoryConsistencyHeader); {
	case level == "" || strings.EqualFold(level, "eventual"):
		if lag := e.opts.HistoryLag; lag > 0 {
			p.cutoff, p.hasCutoff = e.opts.Now().Add(-lag).UnixMilli(), true
		}
	case strings.EqualFold(level, "strong"):
	default:
		writeOutcome(w, http.StatusBadRequest, "invalid", HistoryConsistencyHeader+" must be strong or eventual")
		return p, false
	}
	return p, true
}

// minMs stands for no `_since`.
const minMs = -1 << 63

// matches reports whether version vi is in the read: visible at its
// consistency level, not older than `_since`, before the page token; for a
// type opted out of history, only a resource's current, not deleted,
// version.
func (d *Datastore) matches(p *historyQuery, vi int32) bool {
	v := &d.vers[vi]
	if (p.hasCutoff && v.ms > p.cutoff) || v.ms < p.since || (p.hasBefore && vi >= p.before) {
		return false
	}
	return !p.noHistory || (d.res[v.res].last == vi && !v.deleted())
}

// nextLink is the relative URL of the page after one that ended before log
// index next.
func nextLink(path string, p *historyQuery, next int32) string {
	v := url.Values{}
	v.Set("_count", strconv.Itoa(p.count))
	if p.sinceRaw != "" {
		v.Set("_since", p.sinceRaw)
	}
	v.Set("_page_token", strconv.Itoa(int(next)))
	return path + "?" + v.Encode()
}

// selfLink is the relative URL of the request.
func selfLink(path string, r *http.Request) string {
	if r.URL.RawQuery == "" {
		return path
	}
	return path + "?" + r.URL.RawQuery
}

// historyEntry is the Bundle entry of version vi (FHIR R4 history Bundle):
// request.method POST for a creation (first version, or the first after a
// deletion; url the type), PUT for an update, DELETE for a deletion (no
// resource); response status, etag W/"{vid}" and lastModified.
func (d *Datastore) historyEntry(vi int32) (bundleEntry, error) {
	v := &d.vers[vi]
	key := d.res[v.res].key
	vid := strconv.Itoa(int(v.vid))
	en := bundleEntry{
		FullURL:  key + "/_history/" + vid,
		Request:  &entryRequest{Method: http.MethodPut, URL: key},
		Response: &entryResponse{Status: "200 OK", Etag: `W/"` + vid + `"`, LastModified: v.lastUpdated().Format(InstantLayout)},
	}
	switch {
	case v.deleted():
		en.Request.Method = http.MethodDelete
		en.Response.Status = "204 No Content"
		return en, nil
	case v.prev < 0 || d.vers[v.prev].deleted():
		en.Request = &entryRequest{Method: http.MethodPost, URL: typeOf(key)}
		en.Response.Status = "201 Created"
	}
	body, err := d.body(v)
	if err != nil {
		return en, err
	}
	en.Resource = body
	return en, nil
}

// history answers GET /{Type}/{id}/_history with a Bundle of type history,
// newest version first, deletions included (FHIR R4 RESTful API, history),
// p.count entries a page with a `next` link while more remain; total
// counts the versions of every page. It answers 404 when the read knows no
// version of the resource: a type opted out of history whose resource is
// deleted, or a resource whose versions are all younger than the history
// lag. The caller holds e.mu.
func (d *Datastore) history(w http.ResponseWriter, r *http.Request, ri int32, p historyQuery) {
	key := d.res[ri].key
	p.noHistory = d.e.noHistory[typeOf(key)]
	last := d.res[ri].last
	first := last
	for d.vers[first].prev >= 0 {
		first = d.vers[first].prev
	}
	known := !p.hasCutoff || d.vers[first].ms <= p.cutoff
	if p.noHistory {
		cur := &d.vers[last]
		known = !cur.deleted() && (!p.hasCutoff || cur.ms <= p.cutoff)
	}
	if !known {
		writeOutcome(w, http.StatusNotFound, "not-found", "the resource has no history")
		return
	}
	all := p
	all.hasBefore = false
	total := 0
	var page []int32
	next := int32(-1)
	for k := last; k >= 0 && d.vers[k].ms >= p.since; k = d.vers[k].prev {
		if !d.matches(&all, k) {
			continue
		}
		total++
		switch {
		case p.hasBefore && k >= p.before: // on an earlier page
		case len(page) < p.count:
			page = append(page, k)
		case next < 0:
			next = page[len(page)-1]
		}
	}
	path := key + "/_history"
	b := bundle{ResourceType: "Bundle", Type: "history", Total: &total, Entry: make([]bundleEntry, 0, len(page))}
	b.Link = []bundleLink{{Relation: "self", URL: selfLink(path, r)}}
	for _, k := range page {
		en, err := d.historyEntry(k)
		if err != nil {
			writeStoreError(w)
			return
		}
		b.Entry = append(b.Entry, en)
	}
	if next >= 0 {
		b.Link = append(b.Link, bundleLink{Relation: "next", URL: nextLink(path, &p, next)})
	}
	writeBundle(w, &b)
}

// typeHistory answers GET /{Type}/_history (FHIR R4 history-type): every
// version of every resource of the type, newest first by lastUpdated,
// p.count a page. It binary-searches the type's log for the page's bounds
// (`_since`, the consistency cutoff, the page token), so a page costs about
// its own size, not the data store's; Bundle.total is left out for that
// reason. The caller holds e.mu.
func (d *Datastore) typeHistory(w http.ResponseWriter, r *http.Request, typ string, p historyQuery) {
	p.noHistory = d.e.noHistory[typ]
	var vers []int32
	if tl, ok := d.byType[typ]; ok {
		vers = tl.vers
	}
	hi := len(vers)
	if p.hasCutoff {
		hi = sort.Search(hi, func(i int) bool { return d.vers[vers[i]].ms > p.cutoff })
	}
	if p.hasBefore {
		hi = sort.Search(hi, func(i int) bool { return vers[i] >= p.before })
	}
	lo := sort.Search(hi, func(i int) bool { return d.vers[vers[i]].ms >= p.since })
	path := typ + "/_history"
	b := bundle{ResourceType: "Bundle", Type: "history", Entry: []bundleEntry{}}
	b.Link = []bundleLink{{Relation: "self", URL: selfLink(path, r)}}
	for i := hi - 1; i >= lo; i-- {
		vi := vers[i]
		if d.res[d.vers[vi].res].gone || !d.matches(&p, vi) {
			continue
		}
		if len(b.Entry) == p.count {
			b.Link = append(b.Link, bundleLink{Relation: "next", URL: nextLink(path, &p, vi+1)})
			break
		}
		en, err := d.historyEntry(vi)
		if err != nil {
			writeStoreError(w)
			return
		}
		b.Entry = append(b.Entry, en)
	}
	writeBundle(w, &b)
}
