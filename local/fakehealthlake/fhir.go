package fakehealthlake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// InstantLayout is the layout of meta.lastUpdated (millisecond UTC instants).
const InstantLayout = "2006-01-02T15:04:05.000Z"

// Datastore is one FHIR R4 data store of the emulator.
//
// Every version ever stored is one entry of vers, in lastUpdated order
// (stamps never go back, so writes append in order; Restore sorts): the
// log a `_since` export binary-searches. A resource is an entry of res
// (found by "Type/id" through index) naming its newest version; each
// version names the one before it. Bodies live in a bodyStore. byType
// lists each type's versions in log order: what type-level history and
// $bulk-delete binary-search.
type Datastore struct {
	e       *Emulator
	id      string
	created time.Time
	index   keyIndex // "Type/id" → res index, for resources not hard deleted
	res     []resEntry
	vers    []version
	byType  map[string]*typeLog
	bodies  bodyStore

	// compact and out are put's scratch buffers (the body store copies).
	compact bytes.Buffer
	out     []byte
}

// resEntry is one resource.
type resEntry struct {
	key  string // "Type/id"
	last int32  // vers index of the newest version
	gone bool   // hard deleted
}

// version is one stored version, 32 bytes.
type version struct {
	ms   int64  // lastUpdated, Unix milliseconds
	off  int64  // where the body is in the body store
	n    uint32 // body length; 0 for a deletion
	vid  uint32
	prev int32 // vers index of the resource's previous version, -1 for none
	res  int32 // res index
}

func (v *version) deleted() bool { return v.n == 0 }

func (v *version) lastUpdated() time.Time { return time.UnixMilli(v.ms).UTC() }

// typeOf is the resource type of a "Type/id" key.
func typeOf(key string) string {
	t, _, _ := strings.Cut(key, "/")
	return t
}

// idOf is the id of a "Type/id" key.
func idOf(key string) string {
	_, id, _ := strings.Cut(key, "/")
	return id
}

func newDatastore(e *Emulator, id string) *Datastore {
	created := e.opts.DatastoreCreatedAt
	if created.IsZero() {
		created = e.opts.Now()
	}
	return &Datastore{e: e, id: id, created: created, index: newKeyIndex(), byType: map[string]*typeLog{}, bodies: e.newBodyStore()}
}

// ID returns the data store id.
func (d *Datastore) ID() string { return d.id }

// CreatedAt returns when the data store was created (its CreatedAt in
// DescribeFHIRDatastore).
func (d *Datastore) CreatedAt() time.Time { return d.created }

// badRequest is a client error answered with a 400 OperationOutcome.
type badRequest struct{ msg string }

func (b badRequest) Error() string { return b.msg }

// lookup returns the res index of a resource (deleted or not) that was
// stored and not hard deleted.
func (d *Datastore) lookup(typ, id string) (int32, bool) {
	return d.index.find(d.res, typ+"/"+id)
}

// current is the newest version of a resource.
func (d *Datastore) current(ri int32) *version { return &d.vers[d.res[ri].last] }

// body reads a version's stored bytes (nil for a deletion).
func (d *Datastore) body(v *version) ([]byte, error) {
	if v.deleted() {
		return nil, nil
	}
	return d.bodies.read(v.off, v.n)
}

// Load stores a resource under its type and id, keeping the id, as a FHIR
// update would: it gets the next versionId and a new lastUpdated. It checks
// that body is a JSON object of the given resourceType (and validates it
// with golang-fhir-models when Options.ValidateOnLoad is set). It returns
// the stored bytes' version id.
func (d *Datastore) Load(resourceType, id string, body []byte) (versionID string, err error) {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	v, _, err := d.put(resourceType, id, body, d.e.opts.ValidateOnLoad)
	if err != nil {
		return "", fmt.Errorf("load %s/%s: %w", resourceType, id, err)
	}
	return strconv.Itoa(int(v.vid)), nil
}

// Read returns the current bytes of a resource (false when absent or
// deleted, or when its stored bytes cannot be read back from BodyDir).
func (d *Datastore) Read(resourceType, id string) ([]byte, bool) {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	ri, ok := d.lookup(resourceType, id)
	if !ok || d.current(ri).deleted() {
		return nil, false
	}
	b, err := d.body(d.current(ri))
	if err != nil {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

// Delete deletes a resource as the FHIR delete interaction does: a new
// version marking the deletion, with its own lastUpdated, kept in the history.
// It returns the deletion's versionId, or false when the resource is absent or
// already deleted (nothing changes then).
func (d *Datastore) Delete(resourceType, id string) (versionID string, ok bool) {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	v := d.deleteLocked(resourceType, id)
	if v == nil {
		return "", false
	}
	return strconv.Itoa(int(v.vid)), true
}

// deleteLocked appends a deletion to a current resource; the caller holds e.mu.
func (d *Datastore) deleteLocked(typ, id string) *version {
	ri, ok := d.lookup(typ, id)
	if !ok || d.current(ri).deleted() {
		return nil
	}
	cur := d.current(ri)
	v := d.appendVersion(ri, version{ms: d.e.stamp(cur.ms), vid: cur.vid + 1, prev: d.res[ri].last, res: ri})
	d.e.subsWritten(d, ri, v, nil, false)
	return v
}

// appendVersion adds v to the log as ri's newest version; the caller holds e.mu.
func (d *Datastore) appendVersion(ri int32, v version) *version {
	d.vers = append(d.vers, v)
	vi := int32(len(d.vers) - 1)
	d.res[ri].last = vi
	tl := d.typeLogOf(typeOf(d.res[ri].key))
	if v.prev >= 0 && !d.vers[v.prev].deleted() {
		tl.unlive(v.prev) // no longer the current version
	}
	tl.vers = append(tl.vers, vi)
	live := int32(1)
	if v.deleted() {
		live = 0
	}
	tl.live.push(live)
	return &d.vers[vi]
}

// Count returns the number of resources whose current version is not deleted.
func (d *Datastore) Count() int {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	n := 0
	for i := range d.res {
		if !d.res[i].gone && !d.vers[d.res[i].last].deleted() {
			n++
		}
	}
	return n
}

// put stores a new version; the caller holds e.mu.
func (d *Datastore) put(typ, id string, body []byte, validate bool) (*version, bool, error) {
	if !validID(id) {
		return nil, false, badRequest{"invalid resource id"}
	}
	if _, ok := validators[typ]; !ok {
		return nil, false, badRequest{"unsupported resource type " + typ}
	}
	// One pass checks the syntax and drops the insignificant spaces; the
	// members are then split without decoding anything.
	d.compact.Reset()
	if err := json.Compact(&d.compact, body); err != nil {
		return nil, false, badRequest{"resource is not a JSON object: " + err.Error()}
	}
	var buf [64]member
	ms, err := splitObject(d.compact.Bytes(), buf[:0])
	if err != nil {
		return nil, false, badRequest{"resource is not a JSON object: " + err.Error()}
	}
	if raw, ok := find(ms, "resourceType"); !ok || !stringIs(raw, typ) {
		return nil, false, badRequest{"resourceType in the body does not match " + typ}
	}
	if raw, ok := find(ms, "id"); ok && !stringIs(raw, id) {
		return nil, false, badRequest{"resource id in the body does not match the URL"}
	}
	if validate {
		if err := validators[typ](body); err != nil {
			return nil, false, badRequest{"invalid " + typ + ": " + err.Error()}
		}
		if err := d.e.checkSubscriptionWrite(d, typ, id, ms); err != nil {
			return nil, false, err
		}
	}
	if len(d.vers) >= math.MaxInt32 || len(d.res) >= math.MaxInt32 {
		return nil, false, errors.New("data store is full")
	}
	ri, exists := d.lookup(typ, id)
	vid, prev, prevMs := uint32(1), int32(-1), int64(math.MinInt64)
	if exists {
		vid, prev, prevMs = d.current(ri).vid+1, d.res[ri].last, d.current(ri).ms
	}
	stamp := d.e.nextStamp(prevMs)
	out, err := appendStored(d.out[:0], ms, typ, id, vid, stamp)
	if err != nil {
		return nil, false, err
	}
	d.out = out
	off, err := d.bodies.add(out)
	if err != nil {
		return nil, false, fmt.Errorf("store body: %w", err)
	}
	d.e.commitStamp(stamp)
	created := !exists || d.current(ri).deleted()
	if !exists {
		key := typ + "/" + id
		ri = int32(len(d.res))
		d.res = append(d.res, resEntry{key: key})
		d.index.insert(d.res, ri)
	}
	v := d.appendVersion(ri, version{ms: stamp, off: off, n: uint32(len(out)), vid: vid, prev: prev, res: ri})
	d.e.subsWritten(d, ri, v, out, created)
	return v, created, nil
}

// newID returns a server-assigned resource id.
func (e *Emulator) newID() string {
	const hexd = "0123456789abcdef"
	b := make([]byte, 36)
	for i := range b {
		switch i {
		case 8, 13, 18, 23:
			b[i] = '-'
		default:
			b[i] = hexd[e.rng.IntN(16)]
		}
	}
	return string(b)
}

// serveFHIR handles /datastore/{id}/r4/{Type}[/{id}[/_history[/{vid}]]],
// {Type}/_history, {Type}/$bulk-delete and {Type}/{id}/$erase.
func (e *Emulator) serveFHIR(w http.ResponseWriter, r *http.Request, ds *Datastore, parts []string, body []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Erase and bulk-delete jobs that are due run before the request is
	// served, so it sees them done.
	e.advanceDeletes(false)
	typ := parts[0]
	if _, ok := validators[typ]; !ok {
		writeOutcome(w, http.StatusBadRequest, "not-supported", "unsupported resource type "+typ)
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodPost:
		id := e.newID()
		v, _, err := ds.put(typ, id, body, true)
		if err != nil {
			writeErr(w, err)
			return
		}
		ds.writeResource(w, http.StatusCreated, typ, id, v)
	case len(parts) == 1 && r.Method == http.MethodGet:
		ds.search(w, r, typ, body)
	case len(parts) == 2 && parts[1] == "_search" && r.Method == http.MethodPost:
		ds.search(w, r, typ, body)
	case len(parts) == 1:
		// FHIR R4 has no interaction at [base]/[type] but search (GET) and
		// create (POST): an update needs the id in the URL.
		w.Header().Set("Allow", "GET, POST")
		writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", r.Method+" "+typ+": an update needs the resource id in the URL ([type]/[id]); a create is POST [type]")
	case len(parts) == 2 && parts[1] == "_history":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "history is read with GET")
			return
		}
		p, ok := e.historyParams(w, r)
		if !ok {
			return
		}
		ds.typeHistory(w, r, typ, p)
	case len(parts) == 2 && parts[1] == "$bulk-delete":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "$bulk-delete is started with POST")
			return
		}
		e.startBulkDelete(w, r, ds, typ)
	case len(parts) == 2 && r.Method == http.MethodPut:
		v, created, err := ds.put(typ, parts[1], body, true)
		if err != nil {
			writeErr(w, err)
			return
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
		}
		ds.writeResource(w, status, typ, parts[1], v)
	case len(parts) == 2 && r.Method == http.MethodGet:
		ri, ok := ds.lookup(typ, parts[1])
		switch {
		case !ok:
			writeOutcome(w, http.StatusNotFound, "not-found", "resource "+typ+"/"+parts[1]+" not found")
		case ds.current(ri).deleted():
			writeOutcome(w, http.StatusGone, "deleted", "resource "+typ+"/"+parts[1]+" was deleted")
		default:
			ds.writeResource(w, http.StatusOK, typ, parts[1], ds.current(ri))
		}
	case len(parts) == 2 && r.Method == http.MethodDelete:
		ds.deleteLocked(typ, parts[1])
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && r.Method == http.MethodPost:
		// A create names no id (the server assigns it): POST [type]/[id] is
		// no FHIR R4 interaction.
		w.Header().Set("Allow", "GET, PUT, DELETE")
		msg := "POST " + typ + "/[id]: a create is POST " + typ + " (server-assigned id); to choose the id, update with PUT " + typ + "/[id]"
		writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", msg)
	case len(parts) == 3 && parts[2] == "$erase":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "$erase is started with POST")
			return
		}
		e.startErase(w, r, ds, typ, parts[1])
	case len(parts) == 3 && parts[2] == "_history" && r.Method == http.MethodGet:
		ri, ok := ds.lookup(typ, parts[1])
		if !ok {
			writeOutcome(w, http.StatusNotFound, "not-found", "resource "+typ+"/"+parts[1]+" not found")
			return
		}
		p, ok := e.historyParams(w, r)
		if !ok {
			return
		}
		ds.history(w, r, ri, p)
	case len(parts) == 4 && parts[2] == "_history" && r.Method == http.MethodGet:
		ri, ok := ds.lookup(typ, parts[1])
		n, err := strconv.Atoi(parts[3])
		if !ok || err != nil || n < 1 || n > int(ds.current(ri).vid) {
			writeOutcome(w, http.StatusNotFound, "not-found", "version not found")
			return
		}
		v := ds.current(ri)
		for int(v.vid) != n {
			v = &ds.vers[v.prev]
		}
		if v.deleted() {
			writeOutcome(w, http.StatusGone, "deleted", "version "+parts[3]+" is a deletion")
			return
		}
		ds.writeResource(w, http.StatusOK, typ, parts[1], v)
	case len(parts) == 5 && parts[2] == "_history" && parts[4] == "$erase":
		writeOutcome(w, http.StatusBadRequest, "not-supported", "version-level $erase is not emulated; erase the whole resource with [type]/[id]/$erase")
	default:
		writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "unsupported FHIR interaction")
	}
}

func writeErr(w http.ResponseWriter, err error) {
	var br badRequest
	if errors.As(err, &br) {
		writeOutcome(w, http.StatusBadRequest, "invalid", br.msg)
		return
	}
	writeOutcome(w, http.StatusInternalServerError, "exception", err.Error())
}

// writeResource answers with a stored version (500 when its bytes cannot
// be read back).
func (d *Datastore) writeResource(w http.ResponseWriter, status int, typ, id string, v *version) {
	body, err := d.body(v)
	if err != nil {
		writeStoreError(w)
		return
	}
	vid := strconv.Itoa(int(v.vid))
	w.Header().Set("ETag", `W/"`+vid+`"`)
	w.Header().Set("Last-Modified", v.lastUpdated().Format(http.TimeFormat))
	if status == http.StatusCreated {
		w.Header().Set("Location", typ+"/"+id+"/_history/"+vid)
	}
	writeRaw(w, status, "application/fhir+json", body)
}

// writeStoreError answers 500 for stored bytes that cannot be read back.
func writeStoreError(w http.ResponseWriter) {
	writeOutcome(w, http.StatusInternalServerError, "exception", "the stored resource could not be read")
}

type bundleEntry struct {
	FullURL  string          `json:"fullUrl,omitempty"`
	Resource json.RawMessage `json:"resource,omitempty"`
	Request  *entryRequest   `json:"request,omitempty"`
	Response *entryResponse  `json:"response,omitempty"`
	Search   *entrySearch    `json:"search,omitempty"`
}

// entryRequest is Bundle.entry.request: the interaction that made a version.
type entryRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
}

// entryResponse is Bundle.entry.response: its outcome, version and time.
type entryResponse struct {
	Status       string `json:"status"`
	Etag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
}

type bundleLink struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

type bundle struct {
	ResourceType string        `json:"resourceType"`
	Type         string        `json:"type"`
	Total        *int          `json:"total,omitempty"`
	Link         []bundleLink  `json:"link,omitempty"`
	Entry        []bundleEntry `json:"entry"`
}

// writeBundle answers 200 with b. The entries' resources are stored JSON
// and are written as they are; encoding/json would scan every one of them
// again to compact it.
func writeBundle(w http.ResponseWriter, b *bundle) {
	out, err := b.appendJSON(make([]byte, 0, 4096))
	if err != nil {
		http.Error(w, fmt.Sprintf("encode answer: %v", err), http.StatusInternalServerError)
		return
	}
	writeRaw(w, http.StatusOK, "application/fhir+json", out)
}

// appendJSON appends b's JSON text to dst, members in the order of the
// struct's fields.
func (b *bundle) appendJSON(dst []byte) ([]byte, error) {
	head := *b
	head.Entry = nil
	h, err := json.Marshal(struct {
		ResourceType string       `json:"resourceType"`
		Type         string       `json:"type"`
		Total        *int         `json:"total,omitempty"`
		Link         []bundleLink `json:"link,omitempty"`
	}{head.ResourceType, head.Type, head.Total, head.Link})
	if err != nil {
		return dst, err
	}
	dst = append(dst, h[:len(h)-1]...)
	dst = append(dst, `,"entry":[`...)
	for i := range b.Entry {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = b.Entry[i].appendJSON(dst); err != nil {
			return dst, err
		}
	}
	return append(dst, "]}"...), nil
}

// appendJSON appends the entry's JSON text to dst.
func (en *bundleEntry) appendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	member := func(key string, v any) error {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, key...)
		dst = append(dst, `":`...)
		if raw, ok := v.(json.RawMessage); ok {
			dst = append(dst, raw...)
			return nil
		}
		x, err := json.Marshal(v)
		dst = append(dst, x...)
		return err
	}
	var err error
	if en.FullURL != "" {
		err = errors.Join(err, member("fullUrl", en.FullURL))
	}
	if len(en.Resource) > 0 {
		err = errors.Join(err, member("resource", en.Resource))
	}
	if en.Request != nil {
		err = errors.Join(err, member("request", en.Request))
	}
	if en.Response != nil {
		err = errors.Join(err, member("response", en.Response))
	}
	if en.Search != nil {
		err = errors.Join(err, member("search", en.Search))
	}
	return append(dst, '}'), err
}

// HardDelete removes a resource and its whole history, as if it had never
// been stored: reads and history answer 404 afterwards, exports leave it
// out, and a later write of the same id starts again at version 1. It
// reports whether the resource existed. It is what a COMPLETED `$erase`
// does, at once and without a job (Go only).
func (d *Datastore) HardDelete(resourceType, id string) bool {
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	ri, ok := d.lookup(resourceType, id)
	if !ok {
		return false
	}
	d.eraseLocked(ri)
	return true
}

// eraseLocked removes a resource and its whole history (HardDelete,
// $erase, a hard $bulk-delete): its versions stay in the log, marked by
// the entry's gone, until its type's log is compacted. The caller holds e.mu.
func (d *Datastore) eraseLocked(ri int32) {
	d.e.subsErased(d, ri)
	d.res[ri].gone = true
	d.index.forget()
	n := 0
	for k := d.res[ri].last; k >= 0; k = d.vers[k].prev {
		n++
	}
	tl := d.typeLogOf(typeOf(d.res[ri].key))
	if !d.current(ri).deleted() {
		tl.unlive(d.res[ri].last)
	}
	tl.gone += n
	if tl.gone*2 > len(tl.vers) {
		tl.compact(d)
	}
}

// splitDatastorePath splits a FHIR REST path, /datastore/{id}/r4/…, into
// the data store id and the rest; false for another path.
func splitDatastorePath(path string) (dsID, fhirPath string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/datastore/")
	if !ok {
		return "", "", false
	}
	dsID, fhirPath, ok = strings.Cut(rest, "/r4")
	return dsID, fhirPath, ok && dsID != ""
}

// serveREST routes FHIR REST paths.
func (e *Emulator) serveREST(w http.ResponseWriter, r *http.Request, body []byte) {
	dsID, fhirPath, ok := splitDatastorePath(r.URL.Path)
	if !ok {
		writeOutcome(w, http.StatusNotFound, "not-found", "unknown path")
		return
	}
	e.mu.Lock()
	ds, ok := e.datastores[dsID]
	e.mu.Unlock()
	if !ok {
		e.mu.Lock()
		e.record(r, body, http.StatusNotFound)
		e.mu.Unlock()
		writeOutcome(w, http.StatusNotFound, "not-found", "data store "+dsID+" not found")
		return
	}
	parts := strings.Split(strings.Trim(fhirPath, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] == "$export":
		e.startExport(w, r, ds, body)
	case len(parts) == 2 && parts[0] == "export":
		switch r.Method {
		case http.MethodGet:
			e.describeExport(w, r, ds, parts[1])
		case http.MethodDelete:
			e.cancelExport(w, r, ds, parts[1])
		default:
			writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "unsupported method")
		}
	case len(parts) == 2 && (parts[0] == "$erase" || parts[0] == "$bulk-delete"):
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			writeOutcome(w, http.StatusMethodNotAllowed, "not-supported", "unsupported method")
			return
		}
		e.describeDeleteJob(w, ds, parts[0], parts[1])
	case len(parts) >= 1 && len(parts) <= 5 && parts[0] != "":
		e.serveFHIR(w, r, ds, parts, body)
	default:
		writeOutcome(w, http.StatusNotFound, "not-found", "unknown path")
	}
}
