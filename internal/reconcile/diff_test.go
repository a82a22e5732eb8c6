package reconcile

import (
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

func ent(id, v, t string) delivered.Entry {
	return delivered.Entry{Type: "Patient", ID: id, VersionID: v, LastUpdated: t}
}

func TestDiffDecisions(t *testing.T) {
	const t1, t2, t3 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-04T00:00:00.000Z"
	checkpoint := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	tomb := ent("g", "2", t1)
	tomb.Deleted = true
	tombR := ent("r", "2", t1)
	tombR.Deleted = true
	store := []delivered.Entry{
		ent("a", "1", t1), // delivered: unchanged
		ent("b", "2", t2), // v1 delivered, v2 due: repair
		ent("c", "1", t1), // never delivered, due: repair
		ent("e", "1", t3), // never delivered, after the checkpoint: pending
		ent("f", "1", t1), // delivered v2 is later: ahead
		ent("r", "3", t2), // re-created after a delete: repair
	}
	known := []delivered.Entry{
		ent("a", "1", t1),
		ent("b", "1", t1),
		ent("d", "4", t2), // gone from the store: delete
		ent("f", "2", t2),
		tomb, // deleted and gone: nothing
		tombR,
	}
	got := map[string]Kind{}
	st, err := Diff(store, known, checkpoint, func(d Decision) error {
		e := d.Store
		if e == nil {
			e = d.Known
		}
		got[e.ID] = d.Kind
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Kind{"a": KindUnchanged, "b": KindRepair, "c": KindRepair, "d": KindDelete, "e": KindPending,
		"f": KindAhead, "g": KindGone, "r": KindRepair}
	for id, k := range want {
		if got[id] != k {
			t.Errorf("%s: %v, want %v", id, got[id], k)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d decisions, want %d", len(got), len(want))
	}
	if st != (Stats{Store: 6, Known: 6, Unchanged: 1, Repairs: 3, Deletes: 1, Pending: 1, Ahead: 1, Gone: 1}) {
		t.Errorf("stats %+v", st)
	}
}

func TestDiffEmptySides(t *testing.T) {
	cp := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	st, _ := Diff(nil, []delivered.Entry{ent("a", "1", "2026-01-01T00:00:00.000Z")}, cp, func(Decision) error { return nil })
	if st.Deletes != 1 {
		t.Errorf("an empty store deletes what was delivered: %+v", st)
	}
	st, _ = Diff([]delivered.Entry{ent("a", "1", "2026-01-01T00:00:00.000Z")}, nil, cp, func(Decision) error { return nil })
	if st.Repairs != 1 {
		t.Errorf("nothing delivered repairs what is due: %+v", st)
	}
}
