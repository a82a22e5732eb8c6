package delivered

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestPartitionStableAndSpread(t *testing.T) {
	const n = 16
	counts := make([]int, n)
	for i := 0; i < 16000; i++ {
		id := fmt.Sprintf("id-%d", i)
		p := Partition("Patient", id, n)
		if p != Partition("Patient", id, n) {
			t.Fatal("partition is not a function of type and id")
		}
		counts[p]++
	}
	for p, c := range counts {
		if c < 700 || c > 1300 { // 1000 expected per partition
			t.Errorf("partition %d holds %d of 16000", p, c)
		}
	}
	if Partition("Patient", "x", 1) != 0 || Partition("Patient", "x", 0) != 0 {
		t.Error("one partition must be partition 0")
	}
	// The type is part of the key: the same id of two types may land apart.
	differ := false
	for i := 0; i < 100 && !differ; i++ {
		id := fmt.Sprint(i)
		differ = Partition("Patient", id, n) != Partition("Observation", id, n)
	}
	if !differ {
		t.Error("the resource type does not enter the hash")
	}
}

func TestSortAndReduceKeepNewest(t *testing.T) {
	es := []Entry{
		{Type: "Patient", ID: "b", VersionID: "1", LastUpdated: "2026-01-01T00:00:00.000Z"},
		{Type: "Observation", ID: "z", VersionID: "3", LastUpdated: "2026-01-01T00:00:00.000Z"},
		{Type: "Patient", ID: "b", VersionID: "2", LastUpdated: "2026-01-02T00:00:00.000Z"},
		{Type: "Patient", ID: "a", VersionID: "9", LastUpdated: "2026-01-01T00:00:00.000Z"},
		{Type: "Patient", ID: "a", VersionID: "10", LastUpdated: "2026-01-01T00:00:00.000Z"},
		{Type: "Patient", ID: "c", VersionID: "4", LastUpdated: "2026-01-03T00:00:00+00:00"},
		{Type: "Patient", ID: "c", VersionID: "5", LastUpdated: "2026-01-03T00:00:00.000Z", Deleted: true},
	}
	SortEntries(es)
	got := Reduce(es)
	want := []string{"Observation/z/3", "Patient/a/10", "Patient/b/2", "Patient/c/5D"}
	if len(got) != len(want) {
		t.Fatalf("reduced to %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i, e := range got {
		s := e.Type + "/" + e.ID + "/" + e.VersionID
		if e.Deleted {
			s += "D"
		}
		if s != want[i] {
			t.Errorf("entry %d = %s, want %s", i, s, want[i])
		}
	}
}

func TestNewerRules(t *testing.T) {
	early := Entry{VersionID: "7", LastUpdated: "2026-01-01T00:00:00.000Z"}
	late := Entry{VersionID: "2", LastUpdated: "2026-01-01T00:00:00.001Z"}
	if !Newer(late, early) || Newer(early, late) {
		t.Error("a later lastUpdated must win over a higher version")
	}
	del := early
	del.Deleted = true
	if !Newer(del, early) || Newer(early, del) {
		t.Error("at the same instant a delete must win")
	}
	bad := Entry{VersionID: "99", LastUpdated: "yesterday"}
	if !Newer(early, bad) || Newer(bad, early) {
		t.Error("a readable time must win over an unreadable one")
	}
}

func TestLineRoundTrip(t *testing.T) {
	es := []Entry{
		{Type: "Patient", ID: "p-1", VersionID: "3", LastUpdated: "2026-01-01T00:00:00.000Z"},
		{Type: "Patient", ID: "p-2", VersionID: "4", LastUpdated: "2026-01-01T00:00:00.000Z", Deleted: true},
	}
	for _, loc := range []bool{false, true} {
		var buf bytes.Buffer
		w := NewWriter(&buf, loc)
		if loc {
			if err := w.Files([]FileRef{{Bucket: "b", Key: "exports/x/Patient-1.ndjson"}}); err != nil {
				t.Fatal(err)
			}
		}
		for i, e := range es {
			if loc {
				e.File, e.Offset, e.Length = 0, int64(100*i), 42
			}
			if err := w.Write(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		var files []FileRef
		var got []Entry
		err := ReadAll(&buf, func(f FileRef) { files = append(files, f) }, func(e Entry) error { got = append(got, e); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1] != (Entry{Type: "Patient", ID: "p-2", VersionID: "4", LastUpdated: es[1].LastUpdated, Deleted: true, Offset: map[bool]int64{true: 100}[loc], Length: map[bool]int64{true: 42}[loc]}) {
			t.Errorf("location %v: read back %+v", loc, got)
		}
		if loc && (len(files) != 1 || files[0].Key != "exports/x/Patient-1.ndjson") {
			t.Errorf("file table read back as %+v", files)
		}
	}
}

func TestPlainD4Lines(t *testing.T) {
	in := "Patient\tp-1\t3\t2026-01-01T00:00:00.000Z\nPatient\tp-2\t5\t2026-01-02T00:00:00.000Z\tD\n"
	var got []Entry
	if err := ReadAll(bytes.NewBufferString(in), nil, func(e Entry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Deleted || !got[1].Deleted || got[1].VersionID != "5" {
		t.Fatalf("read %+v", got)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := AppendLine(nil, Entry{Type: "Patient", ID: "a\tb", VersionID: "1"}, false); !errors.Is(err, ErrBadField) {
		t.Errorf("a tab in an id: %v", err)
	}
	for _, line := range []string{"Patient\tp", "Patient\tp\t1\tT\tX", "Patient\tp\t1\tT\t\tx\t0\t0", "\tp\t1\tT"} {
		if _, err := ParseLine(line); err == nil {
			t.Errorf("ParseLine(%q) accepted", line)
		}
	}
	err := ReadAll(bytes.NewBufferString("Patient\tsecret-id\n"), nil, func(Entry) error { return nil })
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("secret-id")) {
		t.Errorf("a bad line: %v (must fail without naming the id)", err)
	}
}

func TestSortLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	es := make([]Entry, 5000)
	for i := range es {
		es[i] = Entry{Type: "Observation", ID: fmt.Sprintf("o-%d", r.IntN(2000)), VersionID: fmt.Sprint(r.IntN(5) + 1),
			LastUpdated: time.Date(2026, 1, 1, 0, 0, r.IntN(60), 0, time.UTC).Format("2006-01-02T15:04:05.000Z")}
	}
	SortEntries(es)
	es = Reduce(es)
	for i := 1; i < len(es); i++ {
		if CompareKey(&es[i-1], &es[i]) >= 0 {
			t.Fatalf("entries %d and %d out of order or duplicate", i-1, i)
		}
	}
}

func TestOverlapKeysAndSet(t *testing.T) {
	until := time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)
	if got, want := OverlapDir(until), "overlap/2026-11-21T10:05:00.000Z/"; got != want {
		t.Errorf("OverlapDir = %q, want %q", got, want)
	}
	k1, k2 := OverlapKey(until, "run-1", "exports/a/Patient-1.ndjson"), OverlapKey(until, "run-1", "exports/a/Observation-1.ndjson")
	if !strings.HasPrefix(k1, OverlapDir(until)+"run-1/") || !strings.HasSuffix(k1, ".tsv.gz") || k1 == k2 {
		t.Errorf("OverlapKey: %q and %q", k1, k2)
	}
	if strings.Contains(k1, "Patient") {
		t.Errorf("OverlapKey %q carries the file name; it must carry only its hash", k1)
	}
	var s Set
	if s.Has(Version{"Patient", "p1", "1"}) || s.Len() != 0 {
		t.Fatal("the zero Set is not empty")
	}
	s.Add(Entry{Type: "Patient", ID: "p1", VersionID: "2", LastUpdated: "2026-11-21T10:04:30.000Z"})
	s.Add(Entry{Type: "Patient", ID: "p1", VersionID: "2", LastUpdated: "2026-11-21T10:04:30.000Z"})
	if !s.Has(Version{"Patient", "p1", "2"}) || s.Has(Version{"Patient", "p1", "1"}) || s.Has(Version{"Observation", "p1", "2"}) || s.Len() != 1 {
		t.Errorf("Set after adding Patient/p1/_history/2 twice: len %d", s.Len())
	}
}
