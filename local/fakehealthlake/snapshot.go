package fakehealthlake

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// snapshotEntry is one resource's versions, copied for a snapshot.
type snapshotEntry struct {
	typ, id  string
	versions []*version
}

// snapshotLocked copies the version lists (the caller holds e.mu) and
// returns a func that writes them as Snapshot does, without the lock.
func (d *Datastore) snapshotLocked() func(io.Writer) error {
	entries := make([]snapshotEntry, 0, len(d.resources))
	for _, r := range d.resources {
		entries = append(entries, snapshotEntry{typ: r.typ, id: r.id, versions: append([]*version(nil), r.versions...)})
	}
	return func(w io.Writer) error { return d.writeSnapshot(w, entries) }
}

// writeSnapshot writes copied entries in the Snapshot format.
func (d *Datastore) writeSnapshot(w io.Writer, entries []snapshotEntry) error {
	sort.Slice(entries, func(i, j int) bool {
		if entries[i].typ != entries[j].typ {
			return entries[i].typ < entries[j].typ
		}
		return entries[i].id < entries[j].id
	})
	bw := bufio.NewWriter(w)
	for _, en := range entries {
		for _, v := range en.versions {
			head, err := json.Marshal(snapshotLine{
				ResourceType: en.typ, ID: en.id, VersionID: strconv.Itoa(v.vid),
				LastUpdated: v.lastUpdated.UTC().Format(InstantLayout), Deleted: v.deleted,
			})
			if err != nil {
				return fmt.Errorf("snapshot %s %s/%s: %w", d.id, en.typ, en.id, err)
			}
			// The resource bytes are appended by hand: json.Marshal would
			// re-encode them (HTML escaping), and Restore promises them verbatim.
			if !v.deleted {
				if bytes.IndexByte(v.body, '\n') >= 0 {
					return fmt.Errorf("snapshot %s %s/%s/_history/%d: stored bytes span lines", d.id, en.typ, en.id, v.vid)
				}
				head = append(head[:len(head)-1], `,"resource":`...)
				head = append(head, v.body...)
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
// gets a strictly later lastUpdated and, for a restored resource, the
// version after its last one.
func (d *Datastore) Restore(r io.Reader) error {
	restored := map[string]*resource{}
	var newest time.Time
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("restore %s: read line %d: %w", d.id, n, err)
		}
		if line := bytes.TrimSpace(raw); len(line) > 0 {
			v, key, err := restoreLine(line, restored)
			if err != nil {
				return fmt.Errorf("restore %s: snapshot line %d: %w", d.id, n, err)
			}
			restored[key].versions = append(restored[key].versions, v)
			if v.lastUpdated.After(newest) {
				newest = v.lastUpdated
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	d.e.mu.Lock()
	defer d.e.mu.Unlock()
	if len(d.resources) > 0 {
		return fmt.Errorf("restore %s: the data store is not empty (%d resources)", d.id, len(d.resources))
	}
	d.resources = restored
	if newest.After(d.e.lastStamp) {
		d.e.lastStamp = newest
	}
	return nil
}

// restoreLine checks one snapshot line against the versions restored so far
// and returns its version and its resource's key (the resource is added to
// restored when new).
func restoreLine(line []byte, restored map[string]*resource) (*version, string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var sl snapshotLine
	if err := dec.Decode(&sl); err != nil {
		return nil, "", fmt.Errorf("not a snapshot line: %w", err)
	}
	if dec.More() {
		return nil, "", errors.New("not a snapshot line: trailing data")
	}
	if _, ok := validators[sl.ResourceType]; !ok {
		return nil, "", fmt.Errorf("unsupported resource type %q", sl.ResourceType)
	}
	if !idPattern.MatchString(sl.ID) {
		return nil, "", fmt.Errorf("invalid resource id %q", sl.ID)
	}
	name := sl.ResourceType + "/" + sl.ID
	vid, err := strconv.Atoi(sl.VersionID)
	if err != nil || vid < 1 || strconv.Itoa(vid) != sl.VersionID {
		return nil, "", fmt.Errorf("%s: versionId %q is not a positive integer", name, sl.VersionID)
	}
	lu, err := time.Parse(InstantLayout, sl.LastUpdated)
	if err != nil {
		return nil, "", fmt.Errorf("%s/_history/%d: lastUpdated %q is not an instant like %s", name, vid, sl.LastUpdated, InstantLayout)
	}
	r := restored[name]
	if r == nil {
		r = &resource{typ: sl.ResourceType, id: sl.ID}
	}
	if want := len(r.versions) + 1; vid != want {
		return nil, "", fmt.Errorf("%s: version %d where version %d was expected (gap or out of order)", name, vid, want)
	}
	if len(r.versions) > 0 {
		prev := r.current()
		if !lu.After(prev.lastUpdated) {
			return nil, "", fmt.Errorf("%s/_history/%d: lastUpdated %s is not after version %d's %s", name, vid, sl.LastUpdated, prev.vid, prev.lastUpdated.Format(InstantLayout))
		}
	}
	v := &version{vid: vid, lastUpdated: lu, deleted: sl.Deleted}
	if sl.Deleted {
		if len(sl.Resource) > 0 && string(sl.Resource) != "null" {
			return nil, "", fmt.Errorf("%s/_history/%d: a deletion carries a resource", name, vid)
		}
		if len(r.versions) == 0 || r.current().deleted {
			return nil, "", fmt.Errorf("%s/_history/%d: deletion of a resource that does not exist", name, vid)
		}
	} else {
		if err := checkStored(sl.Resource, sl.ResourceType, sl.ID, sl.VersionID, sl.LastUpdated); err != nil {
			return nil, "", fmt.Errorf("%s/_history/%d: %w", name, vid, err)
		}
		v.body = append([]byte(nil), sl.Resource...)
	}
	restored[name] = r
	return v, name, nil
}

// checkStored checks that body is a stored resource of the given type, id,
// meta.versionId and meta.lastUpdated.
func checkStored(body []byte, typ, id, vid, lastUpdated string) error {
	if len(body) == 0 || string(body) == "null" {
		return errors.New("no resource")
	}
	fields, err := topLevel(body)
	if err != nil {
		return fmt.Errorf("resource is not a JSON object: %w", err)
	}
	str := func(fl fieldList, key string) string {
		var s string
		if raw, ok := fl.get(key); ok {
			_ = json.Unmarshal(raw, &s)
		}
		return s
	}
	if str(fields, "resourceType") != typ || str(fields, "id") != id {
		return errors.New("resource's resourceType or id differ from the line's")
	}
	rawMeta, ok := fields.get("meta")
	if !ok {
		return errors.New("resource has no meta")
	}
	meta, err := topLevel(rawMeta)
	if err != nil {
		return fmt.Errorf("resource meta is not a JSON object: %w", err)
	}
	if str(meta, "versionId") != vid || str(meta, "lastUpdated") != lastUpdated {
		return errors.New("resource's meta.versionId or meta.lastUpdated differ from the line's")
	}
	return nil
}
