// Package replica keeps a local copy of a HealthLake data store from
// healthlake-cdc events: one JSON file per resource, holding the resource
// exactly as exported. It applies the consumer rules of the event contract
// (docs/EVENTS.md): a delete removes; a later upsert of the same id with a
// higher version wins; an older version never overwrites a newer one; a
// duplicate changes nothing. It has no AWS dependency: claim-checked
// resources come through a cdcevent.ObjectGetter.
//
// Layout under the replica's directory:
//
//	resources/{resourceType}/{id}.json   the resource, byte for byte
//	versions/{resourceType}/{id}.json    the newest state applied (Version), tombstones included
//
// Every file is written atomically (a temporary file in the same directory,
// synced, renamed over the old one). The resource file is written before its
// version, so a crash between the two leaves an older version on record and
// the redelivered event is applied again, harmlessly.
package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// Subdirectories of a replica.
const (
	ResourcesDir = "resources"
	VersionsDir  = "versions"
)

// tempPrefix starts the names of files being written; Open removes leftovers.
const tempPrefix = ".tmp-"

var (
	typePattern = regexp.MustCompile(`^[A-Z][A-Za-z]{0,63}$`)
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9.-]{1,64}$`)
)

// ErrInvalid is wrapped when an event cannot be applied as it is (ids
// outside the FHIR patterns, a bad lastUpdated, a resource whose type or id
// differs from the event's): redelivering it will not help.
var ErrInvalid = errors.New("replica: event cannot be applied")

// Outcome is what Apply did with an event.
type Outcome int

// Outcomes of Apply.
const (
	// Upserted: the resource was written.
	Upserted Outcome = iota + 1
	// Deleted: the resource was removed (a tombstone records the delete).
	Deleted
	// Duplicate: the event is the state already applied (same eventId).
	Duplicate
	// Stale: a newer state of the resource was applied before.
	Stale
)

func (o Outcome) String() string {
	switch o {
	case Upserted:
		return "upserted"
	case Deleted:
		return "deleted"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Replica is a replica directory. Its methods are safe for concurrent use;
// one process should own a directory.
type Replica struct {
	dir string
	mu  sync.Mutex
}

// Open opens (creating it if needed) the replica in dir and removes
// temporary files a crash left behind.
func Open(dir string) (*Replica, error) {
	if dir == "" {
		return nil, errors.New("replica: no directory")
	}
	for _, sub := range []string{ResourcesDir, VersionsDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("replica: %w", err)
		}
	}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasPrefix(e.Name(), tempPrefix) {
			return os.Remove(path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("replica: clean temporary files: %w", err)
	}
	return &Replica{dir: dir}, nil
}

// Dir returns the replica's directory.
func (r *Replica) Dir() string { return r.dir }

// Apply applies one event. An upsert newer than the state on record is
// resolved through objects (only then: a duplicate or stale claim-check is
// never fetched) and written; a delete newer than it removes the resource
// and records a tombstone, so that an older upsert delivered later (a replay)
// cannot bring it back. An event not newer is a Duplicate (same eventId) or
// Stale and changes nothing. Errors leave the replica as it was; those
// wrapping ErrInvalid or cdcevent's errors will not go away on redelivery.
func (r *Replica) Apply(ctx context.Context, objects cdcevent.ObjectGetter, d *cdcevent.Detail) (Outcome, error) {
	if d == nil {
		return 0, fmt.Errorf("%w: no detail", ErrInvalid)
	}
	if !typePattern.MatchString(d.ResourceType) || !idPattern.MatchString(d.ResourceID) {
		return 0, fmt.Errorf("%w: resourceType or resourceId outside the FHIR patterns", ErrInvalid)
	}
	lu, err := d.LastUpdatedTime()
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	in := Version{EventID: d.EventID, VersionID: d.VersionID, LastUpdated: lu, Deleted: d.IsDelete()}

	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok, err := r.version(d.ResourceType, d.ResourceID)
	if err != nil {
		return 0, err
	}
	if ok && in.Compare(cur) <= 0 {
		if in.EventID == cur.EventID {
			return Duplicate, nil
		}
		return Stale, nil
	}
	resPath := r.path(ResourcesDir, d.ResourceType, d.ResourceID)
	outcome := Deleted
	if in.Deleted {
		if err := os.Remove(resPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("replica: remove resource: %w", err)
		}
	} else {
		body, err := cdcevent.Resolve(ctx, objects, d)
		if err != nil {
			return 0, err
		}
		if err := checkIdentity(body, d.ResourceType, d.ResourceID); err != nil {
			return 0, err
		}
		if err := writeAtomic(resPath, body); err != nil {
			return 0, fmt.Errorf("replica: write resource: %w", err)
		}
		outcome = Upserted
	}
	rec, err := json.Marshal(in)
	if err != nil {
		return 0, fmt.Errorf("replica: version record: %w", err)
	}
	if err := writeAtomic(r.path(VersionsDir, d.ResourceType, d.ResourceID), rec); err != nil {
		return 0, fmt.Errorf("replica: write version: %w", err)
	}
	return outcome, nil
}

// Version returns the state on record for a resource (false when none).
func (r *Replica) Version(resourceType, id string) (Version, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version(resourceType, id)
}

func (r *Replica) version(resourceType, id string) (Version, bool, error) {
	if !typePattern.MatchString(resourceType) || !idPattern.MatchString(id) {
		return Version{}, false, fmt.Errorf("%w: resourceType or resourceId outside the FHIR patterns", ErrInvalid)
	}
	b, err := os.ReadFile(r.path(VersionsDir, resourceType, id))
	if errors.Is(err, fs.ErrNotExist) {
		return Version{}, false, nil
	}
	if err != nil {
		return Version{}, false, fmt.Errorf("replica: read version: %w", err)
	}
	var v Version
	if err := json.Unmarshal(b, &v); err != nil {
		return Version{}, false, fmt.Errorf("replica: version record of %d bytes is corrupt: %w", len(b), err)
	}
	return v, true, nil
}

// Walk calls fn for every resource in the replica, by type then id, with
// its bytes.
func (r *Replica) Walk(fn func(resourceType, id string, body []byte) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	root := filepath.Join(r.dir, ResourcesDir)
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		return fn(filepath.Base(filepath.Dir(path)), strings.TrimSuffix(name, ".json"), body)
	})
}

func (r *Replica) path(sub, resourceType, id string) string {
	return filepath.Join(r.dir, sub, resourceType, id+".json")
}

// checkIdentity makes sure a resolved resource is the one the event names.
func checkIdentity(body []byte, resourceType, id string) error {
	var top struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&top); err != nil {
		return fmt.Errorf("%w: the resource is not a JSON object", ErrInvalid)
	}
	if top.ResourceType != resourceType || top.ID != id {
		return fmt.Errorf("%w: the resource's type or id differs from the event's", ErrInvalid)
	}
	return nil
}

// writeAtomic replaces path with b: a synced temporary file in the same
// directory renamed over it, then the directory synced.
func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
