package replica_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/replica"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

const base = "2026-11-21T10:00:0"

// resource is the exported line of version v of Patient/id.
func resource(id, v string, sec int) string {
	return fmt.Sprintf(`{"resourceType":"Patient","id":%q,"meta":{"versionId":%q,"lastUpdated":"%s%d.000Z"},"name":[{"family":"V%s"}]}`, id, v, base, sec, v)
}

func upsert(t *testing.T, id, v string, sec int) *cdcevent.Detail {
	t.Helper()
	return decode(t, fmt.Sprintf(`{"schemaVersion":"1","eventId":"Patient/%s/_history/%s","operation":"upsert","resourceType":"Patient","resourceId":%q,"versionId":%q,"lastUpdated":"%s%d.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T11:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"},"resource":%s}`,
		id, v, id, v, base, sec, resource(id, v, sec)))
}

func deletion(t *testing.T, id, v string, sec int) *cdcevent.Detail {
	t.Helper()
	return decode(t, fmt.Sprintf(`{"schemaVersion":"1","eventId":"Patient/%s/_history/%s","operation":"delete","resourceType":"Patient","resourceId":%q,"versionId":%q,"lastUpdated":"%s%d.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T11:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"}}`,
		id, v, id, v, base, sec))
}

// claimChecked is the upsert with its resource in objects instead of inline.
func claimChecked(t *testing.T, objects *store, id, v string, sec int) *cdcevent.Detail {
	t.Helper()
	body := resource(id, v, sec)
	sum := sha256.Sum256([]byte(body))
	key := "claim-check/Patient/" + hex.EncodeToString(sum[:]) + ".json"
	objects.objs[key] = []byte(body)
	return decode(t, fmt.Sprintf(`{"schemaVersion":"1","eventId":"Patient/%s/_history/%s","operation":"upsert","resourceType":"Patient","resourceId":%q,"versionId":%q,"lastUpdated":"%s%d.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T11:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"},"resourceRef":{"bucket":"b","key":%q,"size":%d,"sha256":%q}}`,
		id, v, id, v, base, sec, key, len(body), hex.EncodeToString(sum[:])))
}

func decode(t *testing.T, detail string) *cdcevent.Detail {
	t.Helper()
	d, err := cdcevent.DecodeDetail([]byte(detail))
	if err != nil {
		t.Fatalf("decode %s: %v", detail, err)
	}
	return d
}

// store is an in-memory object store that counts its reads.
type store struct {
	objs  map[string][]byte
	reads int
}

func newStore() *store { return &store{objs: map[string][]byte{}} }

func (s *store) GetObject(_ context.Context, bucket, key string) (io.ReadCloser, error) {
	s.reads++
	b, ok := s.objs[key]
	if !ok || bucket != "b" {
		return nil, fmt.Errorf("no object")
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func open(t *testing.T, dir string) *replica.Replica {
	t.Helper()
	r, err := replica.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// files returns the replica's resources as "Type/id" → bytes.
func files(t *testing.T, r *replica.Replica) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := r.Walk(func(typ, id string, body []byte) error {
		out[typ+"/"+id] = string(body)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestApplyFollowsTheConsumerRules(t *testing.T) {
	ctx := context.Background()
	r := open(t, t.TempDir())
	steps := []struct {
		name string
		d    *cdcevent.Detail
		want replica.Outcome
		file string // the file's content afterwards; "" = absent
	}{
		{"first version", upsert(t, "p1", "1", 1), replica.Upserted, resource("p1", "1", 1)},
		{"the same again", upsert(t, "p1", "1", 1), replica.Duplicate, resource("p1", "1", 1)},
		{"a newer version", upsert(t, "p1", "3", 3), replica.Upserted, resource("p1", "3", 3)},
		{"an older version arriving late", upsert(t, "p1", "2", 2), replica.Stale, resource("p1", "3", 3)},
		{"the delete", deletion(t, "p1", "4", 4), replica.Deleted, ""},
		{"the delete again", deletion(t, "p1", "4", 4), replica.Duplicate, ""},
		{"an upsert older than the delete (a replay)", upsert(t, "p1", "3", 3), replica.Stale, ""},
		{"the re-creation", upsert(t, "p1", "5", 5), replica.Upserted, resource("p1", "5", 5)},
		{"the delete after the re-creation", deletion(t, "p1", "4", 4), replica.Stale, resource("p1", "5", 5)},
		{"a delete of a resource never seen", deletion(t, "p2", "2", 2), replica.Deleted, ""},
		{"its older upsert after it", upsert(t, "p2", "1", 1), replica.Stale, ""},
	}
	for _, s := range steps {
		got, err := r.Apply(ctx, nil, s.d)
		if err != nil || got != s.want {
			t.Fatalf("%s: %v, %v; want %v", s.name, got, err, s.want)
		}
		key := "Patient/" + s.d.ResourceID
		if f, ok := files(t, r)[key]; f != s.file || ok != (s.file != "") {
			t.Fatalf("%s: file %q present=%v, want %q", s.name, f, ok, s.file)
		}
	}
	v, ok, err := r.Version("Patient", "p2")
	if err != nil || !ok || !v.Deleted || v.VersionID != "2" {
		t.Fatalf("tombstone = %+v %v %v", v, ok, err)
	}
}

func TestStateSurvivesReopening(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := open(t, dir).Apply(ctx, nil, upsert(t, "p1", "2", 2)); err != nil {
		t.Fatal(err)
	}
	// A crash mid-write leaves a temporary file; reopening removes it.
	leftover := filepath.Join(dir, replica.ResourcesDir, "Patient", ".tmp-123")
	if err := os.WriteFile(leftover, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temporary file: %v", err)
	}
	for _, d := range []*cdcevent.Detail{upsert(t, "p1", "2", 2), upsert(t, "p1", "1", 1)} {
		if got, err := r.Apply(ctx, nil, d); err != nil || got == replica.Upserted {
			t.Fatalf("after reopening %s: %v %v", d.EventID, got, err)
		}
	}
	if f := files(t, r); len(f) != 1 || f["Patient/p1"] != resource("p1", "2", 2) {
		t.Fatalf("files = %v", f)
	}
}

func TestClaimChecksAreFetchedOnlyWhenNewerAndVerified(t *testing.T) {
	ctx := context.Background()
	r := open(t, t.TempDir())
	objects := newStore()
	big := claimChecked(t, objects, "p1", "2", 2)
	if got, err := r.Apply(ctx, objects, big); err != nil || got != replica.Upserted || objects.reads != 1 {
		t.Fatalf("claim-checked upsert: %v %v, %d reads", got, err, objects.reads)
	}
	if f := files(t, r)["Patient/p1"]; f != resource("p1", "2", 2) {
		t.Fatalf("file = %q", f)
	}
	// A duplicate and an older claim-check are not fetched at all.
	older := claimChecked(t, objects, "p1", "1", 1)
	for _, d := range []*cdcevent.Detail{big, older} {
		if _, err := r.Apply(ctx, objects, d); err != nil || objects.reads != 1 {
			t.Fatalf("%s: %v, %d reads", d.EventID, err, objects.reads)
		}
	}
	// A tampered object is refused and leaves the replica as it was.
	newer := claimChecked(t, objects, "p1", "3", 3)
	obj := objects.objs[newer.ResourceRef.Key]
	obj[len(obj)-3] ^= 1
	if _, err := r.Apply(ctx, objects, newer); !errors.Is(err, cdcevent.ErrChecksumMismatch) {
		t.Fatalf("tampered: %v", err)
	}
	if v, _, _ := r.Version("Patient", "p1"); v.VersionID != "2" || files(t, r)["Patient/p1"] != resource("p1", "2", 2) {
		t.Fatalf("a refused event changed the replica: %+v", v)
	}
}

func TestApplyRefusesWhatItCannotApply(t *testing.T) {
	ctx := context.Background()
	r := open(t, t.TempDir())
	good := resource("p1", "1", 1)
	cases := map[string]string{
		"resource of another id":   strings.Replace(good, `"id":"p1"`, `"id":"p9"`, 1),
		"resource of another type": strings.Replace(good, `"resourceType":"Patient"`, `"resourceType":"Group"`, 1),
		"resource not an object":   `[1,2]`,
	}
	for name, res := range cases {
		d := upsert(t, "p1", "1", 1)
		d.Resource = []byte(res)
		if _, err := r.Apply(ctx, nil, d); !errors.Is(err, replica.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := upsert(t, "p1", "1", 1)
	bad.ResourceID = "../../etc"
	if _, err := r.Apply(ctx, nil, bad); !errors.Is(err, replica.ErrInvalid) {
		t.Errorf("path in the id: %v", err)
	}
	late := upsert(t, "p1", "1", 1)
	late.LastUpdated = "yesterday"
	if _, err := r.Apply(ctx, nil, late); !errors.Is(err, replica.ErrInvalid) {
		t.Errorf("bad lastUpdated: %v", err)
	}
	if _, err := r.Apply(ctx, nil, nil); !errors.Is(err, replica.ErrInvalid) {
		t.Errorf("nil: %v", err)
	}
	if f := files(t, r); len(f) != 0 {
		t.Fatalf("refused events wrote %v", f)
	}
}

// Whatever order deliveries arrive in, with duplicates, the replica ends in
// the same state: the newest of every resource, deleted ones absent.
func TestAnyDeliveryOrderConverges(t *testing.T) {
	ctx := context.Background()
	var all []*cdcevent.Detail
	want := map[string]string{}
	for i := range 6 {
		id := fmt.Sprintf("p%d", i)
		for v := 1; v <= 3; v++ {
			all = append(all, upsert(t, id, fmt.Sprint(v), v))
		}
		switch i % 3 {
		case 0: // deleted
			all = append(all, deletion(t, id, "4", 4))
		case 1: // deleted, then re-created
			all = append(all, deletion(t, id, "4", 4), upsert(t, id, "5", 5))
			want["Patient/"+id] = resource(id, "5", 5)
		default:
			want["Patient/"+id] = resource(id, "3", 3)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		deliveries := append(append([]*cdcevent.Detail(nil), all...), all[:len(all)/2]...)
		rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
		r := open(t, t.TempDir())
		for _, d := range deliveries {
			if _, err := r.Apply(ctx, nil, d); err != nil {
				t.Fatal(err)
			}
		}
		got := files(t, r)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: replica %v, want %v", round, got, want)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Millisecond)
	cases := []struct {
		a, b replica.Version
		want int
	}{
		{replica.Version{VersionID: "9", LastUpdated: t0}, replica.Version{VersionID: "2", LastUpdated: t1}, -1},
		{replica.Version{VersionID: "10", LastUpdated: t0}, replica.Version{VersionID: "9", LastUpdated: t0}, 1},
		{replica.Version{VersionID: "7", LastUpdated: t0}, replica.Version{VersionID: "7", LastUpdated: t0}, 0},
		{replica.Version{VersionID: "7-deleted", LastUpdated: t0, Deleted: true}, replica.Version{VersionID: "7", LastUpdated: t0}, 1},
		{replica.Version{VersionID: "7-deleted", LastUpdated: t0}, replica.Version{VersionID: "7", LastUpdated: t0}, 1},
		{replica.Version{VersionID: "1", LastUpdated: t1}, replica.Version{VersionID: "7-deleted", LastUpdated: t0, Deleted: true}, 1},
		{replica.Version{VersionID: "h-aa", LastUpdated: t0}, replica.Version{VersionID: "h-bb", LastUpdated: t0}, -1},
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%+v vs %+v = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.Compare(c.a); got != -c.want {
			t.Errorf("%+v vs %+v = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}
