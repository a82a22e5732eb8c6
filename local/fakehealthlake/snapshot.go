package fakehealthlake

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// snapshotLine is one line of a data store snapshot: one version of one
// resource. Resource holds the stored bytes verbatim and is absent for a
// deletion.
type snapshotLine struct {
	ResourceType string          `json:"resourceType"`
	ID           string          `json:"id"`
	VersionID    string          `json:"versionId"`
	LastUpdated  string          `json:"lastUpdated"`
	Deleted      bool            `json:"deleted"`
	Resource     json.RawMessage `json:"resource,omitempty"`
}

// Snapshot writes the data store's whole state to w as NDJSON, one line per
// version of every resource:
//
//	{"resourceType":"Patient","id":"p1","versionId":"2","lastUpdated":"…","deleted":false,"resource":{…}}
//
// Resources come sorted by type, then id; each resource's versions in order,
// deletion markers included (`"deleted":true`, no `resource`). `resource` is
// the stored bytes verbatim. Restore reads it back.
func (d *Datastore) Snapshot(w io.Writer) error {
	// Versions never change once stored, so copying the lists under the lock
	// gives a consistent snapshot that is written without holding it.
	d.e.mu.Lock()
	write := d.snapshotLocked()
	d.e.mu.Unlock()
	return write(w)
}

// snapshotEntry is one resource: its key and newest version.
type snapshotEntry struct {
	key  string
	last int32
}

// snapshotLocked copies the resource list (the caller holds e.mu) and
// returns a func that writes it as Snapshot does, without the lock: stored
// versions never change, and the log and the bodies only grow.
func (d *Datastore) snapshotLocked() func(io.Writer) error {
	entries := make([]snapshotEntry, 0, len(d.res))
	for _, r := range d.res {
		if !r.gone {
			entries = append(entries, snapshotEntry{key: r.key, last: r.last})
		}
	}
	vers, bodies := d.vers, d.bodies.reader()
	return func(w io.Writer) error { return d.writeSnapshot(w, entries, vers, bodies) }
}

// writeSnapshot writes copied entries in the Snapshot format.
func (d *Datastore) writeSnapshot(w io.Writer, entries []snapshotEntry, vers []version, bodies bodyReader) error {
	// "Type/id" keys sort as (type, id): types are letters only and '/'
	// sorts before every letter.
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	bw := bufio.NewWriter(w)
	var chain []int32
	var head []byte
	for _, en := range entries {
		typ, id := typeOf(en.key), idOf(en.key)
		chain = chain[:0]
		for k := en.last; k >= 0; k = vers[k].prev {
			chain = append(chain, k)
		}
		for _, k := range slices.Backward(chain) {
			v := &vers[k]
			var err error
			head, err = json.Marshal(snapshotLine{
				ResourceType: typ, ID: id, VersionID: strconv.Itoa(int(v.vid)),
				LastUpdated: v.lastUpdated().Format(InstantLayout), Deleted: v.deleted(),
			})
			if err != nil {
				return fmt.Errorf("snapshot %s %s: %w", d.id, en.key, err)
			}
			// The resource bytes are appended by hand: json.Marshal would
			// re-encode them (HTML escaping), and Restore promises them verbatim.
			if !v.deleted() {
				body, err := bodies.read(v.off, v.n)
				if err != nil {
					return fmt.Errorf("snapshot %s %s/_history/%d: %w", d.id, en.key, v.vid, err)
				}
				if bytes.IndexByte(body, '\n') >= 0 {
					return fmt.Errorf("snapshot %s %s/_history/%d: stored bytes span lines", d.id, en.key, v.vid)
				}
				head = append(head[:len(head)-1], `,"resource":`...)
				head = append(head, body...)
				head = append(head, '}')
			}
			head = append(head, '\n')
			if _, err := bw.Write(head); err != nil {
				return fmt.Errorf("snapshot %s: write: %w", d.id, err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("snapshot %s: write: %w", d.id, err)
	}
	return nil
}

// Restore reads a snapshot written by Snapshot into this data store, which
// must be empty. Every version comes back exactly: its versionId, its bytes,
// its lastUpdated and whether it is a deletion. A snapshot whose versions of
// a resource do not count 1, 2, 3… in order with strictly increasing
// lastUpdated, or whose resource bytes disagree with the line (type, id,
// meta.versionId, meta.lastUpdated), is refused with an error naming the
// line, and the data store is left unchanged. Afterwards the emulator's
// lastUpdated clock stands at the newest restored instant, so the next write
// gets a lastUpdated no earlier than any restored one (strictly later than
// its resource's last version) and, for a restored resource, the version
// after its last one.
func (d *Datastore) Restore(r io.Reader) error {
	nd := newDatastore(d.e, d.id)
	nd.bodies = d.e.newBodyStore()
	var newest int64
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			_ = nd.bodies.close()
			return fmt.Errorf("restore %s: read line %d: %w", d.id, n, err)
		}
		if line := bytes.TrimSpace(raw); len(line) > 0 {
			ms, err := nd.restoreLine(line)
			if err != nil {
				_ = nd.bodies.close()
				return fmt.Errorf("restore %s: snapshot line %d: %w", d.id, n, err)
			}
			newest = max(newest, ms)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	nd.sortLog()
	nd.rebuildTypeLogs()
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	if d.index.live > 0 {
		_ = nd.bodies.close()
		return fmt.Errorf("restore %s: the data store is not empty (%d resources)", d.id, d.index.live)
	}
	old := d.bodies
	d.index, d.res, d.vers, d.byType, d.bodies = nd.index, nd.res, nd.vers, nd.byType, nd.bodies
	d.e.commitStamp(newest)
	d.e.subsReset(d.id)
	if err := old.close(); err != nil {
		return fmt.Errorf("restore %s: close the empty body store: %w", d.id, err)
	}
	return nil
}

// sortLog puts the versions in lastUpdated order (a snapshot lists them by
// resource), renumbering the links.
func (d *Datastore) sortLog() {
	order := make([]int32, len(d.vers))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(d.vers[a].ms, d.vers[b].ms) })
	newIndex := make([]int32, len(d.vers))
	for to, from := range order {
		newIndex[from] = int32(to)
	}
	vers := make([]version, len(d.vers))
	for to, from := range order {
		v := d.vers[from]
		if v.prev >= 0 {
			v.prev = newIndex[v.prev]
		}
		vers[to] = v
	}
	for i := range d.res {
		d.res[i].last = newIndex[d.res[i].last]
	}
	d.vers = vers
}

// restoreLine checks one snapshot line against the versions restored so far
// and adds its version (to this data store, not yet shared); it returns the
// version's lastUpdated.
func (d *Datastore) restoreLine(line []byte) (int64, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var sl snapshotLine
	if err := dec.Decode(&sl); err != nil {
		return 0, fmt.Errorf("not a snapshot line: %w", err)
	}
	if dec.More() {
		return 0, errors.New("not a snapshot line: trailing data")
	}
	if _, ok := validators[sl.ResourceType]; !ok {
		return 0, fmt.Errorf("unsupported resource type %q", sl.ResourceType)
	}
	if !validID(sl.ID) {
		return 0, fmt.Errorf("invalid resource id %q", sl.ID)
	}
	name := sl.ResourceType + "/" + sl.ID
	vid, err := strconv.Atoi(sl.VersionID)
	if err != nil || vid < 1 || vid > math.MaxInt32 || strconv.Itoa(vid) != sl.VersionID {
		return 0, fmt.Errorf("%s: versionId %q is not a positive integer", name, sl.VersionID)
	}
	lu, err := time.Parse(InstantLayout, sl.LastUpdated)
	if err != nil {
		return 0, fmt.Errorf("%s/_history/%d: lastUpdated %q is not an instant like %s", name, vid, sl.LastUpdated, InstantLayout)
	}
	ri, exists := d.index.find(d.res, name)
	var prev *version
	if exists {
		prev = d.current(ri)
	}
	want := 1
	if prev != nil {
		want = int(prev.vid) + 1
	}
	if vid != want {
		return 0, fmt.Errorf("%s: version %d where version %d was expected (gap or out of order)", name, vid, want)
	}
	if prev != nil && lu.UnixMilli() <= prev.ms {
		return 0, fmt.Errorf("%s/_history/%d: lastUpdated %s is not after version %d's %s", name, vid, sl.LastUpdated, prev.vid, prev.lastUpdated().Format(InstantLayout))
	}
	v := version{ms: lu.UnixMilli(), vid: uint32(vid), prev: -1}
	if sl.Deleted {
		if len(sl.Resource) > 0 && string(sl.Resource) != "null" {
			return 0, fmt.Errorf("%s/_history/%d: a deletion carries a resource", name, vid)
		}
		if prev == nil || prev.deleted() {
			return 0, fmt.Errorf("%s/_history/%d: deletion of a resource that does not exist", name, vid)
		}
	} else {
		if err := checkStored(sl.Resource, sl.ResourceType, sl.ID, sl.VersionID, sl.LastUpdated); err != nil {
			return 0, fmt.Errorf("%s/_history/%d: %w", name, vid, err)
		}
		off, err := d.bodies.add(sl.Resource)
		if err != nil {
			return 0, fmt.Errorf("%s/_history/%d: store body: %w", name, vid, err)
		}
		v.off, v.n = off, uint32(len(sl.Resource))
	}
	if len(d.vers) >= math.MaxInt32 || len(d.res) >= math.MaxInt32 {
		return 0, errors.New("data store is full")
	}
	if !exists {
		ri = int32(len(d.res))
		d.res = append(d.res, resEntry{key: name, last: -1})
		d.index.insert(d.res, ri)
	}
	v.res, v.prev = ri, d.res[ri].last
	d.appendVersion(ri, v)
	return v.ms, nil
}

// checkStored checks that body is a stored resource of the given type, id,
// meta.versionId and meta.lastUpdated.
func checkStored(body []byte, typ, id, vid, lastUpdated string) error {
	if len(body) == 0 || string(body) == "null" {
		return errors.New("no resource")
	}
	var c bytes.Buffer
	if err := json.Compact(&c, body); err != nil {
		return fmt.Errorf("resource is not a JSON object: %w", err)
	}
	var buf [64]member
	fields, err := splitObject(c.Bytes(), buf[:0])
	if err != nil {
		return fmt.Errorf("resource is not a JSON object: %w", err)
	}
	is := func(ms []member, key, want string) bool {
		raw, ok := find(ms, key)
		return ok && stringIs(raw, want)
	}
	if !is(fields, "resourceType", typ) || !is(fields, "id", id) {
		return errors.New("resource's resourceType or id differ from the line's")
	}
	rawMeta, ok := find(fields, "meta")
	if !ok {
		return errors.New("resource has no meta")
	}
	meta, err := splitObject(rawMeta, nil)
	if err != nil {
		return fmt.Errorf("resource meta is not a JSON object: %w", err)
	}
	if !is(meta, "versionId", vid) || !is(meta, "lastUpdated", lastUpdated) {
		return errors.New("resource's meta.versionId or meta.lastUpdated differ from the line's")
	}
	return nil
}
