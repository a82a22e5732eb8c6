package fakehealthlake_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"
)

// lastUpdatedOf reads meta.lastUpdated of a resource's current version.
func lastUpdatedOf(t *testing.T, f *fx, typ, id string) string {
	t.Helper()
	ds, _ := f.emu.Datastore("ds1")
	b, ok := ds.Read(typ, id)
	if !ok {
		t.Fatalf("read %s/%s: absent", typ, id)
	}
	var r struct{ Meta struct{ LastUpdated string } }
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Meta.LastUpdated
}

// Distinct resources written in the same millisecond share lastUpdated (as
// in HealthLake); a resource's own versions strictly increase; stamps never
// go back. So a burst of writes does not run ahead of the clock.
func TestLastUpdatedIsPerResourceStrictGlobalNonDecreasing(t *testing.T) {
	eachStore(t, testLastUpdatedIsPerResourceStrictGlobalNonDecreasing)
}

func testLastUpdatedIsPerResourceStrictGlobalNonDecreasing(t *testing.T) {
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	f.clk.Set(t0)
	for i := 0; i < 1000; i++ {
		mustLoad(t, ds, "Patient", "p"+strconv.Itoa(i), `{"resourceType":"Patient"}`)
	}
	if a, b := lastUpdatedOf(t, f, "Patient", "p0"), lastUpdatedOf(t, f, "Patient", "p999"); a != "2026-11-21T10:00:00.000Z" || b != a {
		t.Errorf("1000 resources in one millisecond: first %s, last %s; want both at the clock", a, b)
	}
	mustLoad(t, ds, "Patient", "p0", `{"resourceType":"Patient","active":true}`)
	if got := lastUpdatedOf(t, f, "Patient", "p0"); got != "2026-11-21T10:00:00.001Z" {
		t.Errorf("second version in the same millisecond = %s, want 1 ms after the first", got)
	}
	mustLoad(t, ds, "Patient", "other", `{"resourceType":"Patient"}`)
	if got := lastUpdatedOf(t, f, "Patient", "other"); got != "2026-11-21T10:00:00.001Z" {
		t.Errorf("a write after the bumped one = %s, want no earlier than it", got)
	}
	if _, ok := ds.Delete("Patient", "other"); !ok {
		t.Fatal("delete")
	}
	mustLoad(t, ds, "Patient", "other", `{"resourceType":"Patient"}`) // version 3, after the deletion's .002
	if got := lastUpdatedOf(t, f, "Patient", "other"); got != "2026-11-21T10:00:00.003Z" {
		t.Errorf("re-creation after a deletion in the same millisecond = %s, want .003", got)
	}
	f.clk.Set(t0.Add(10 * time.Millisecond))
	mustLoad(t, ds, "Patient", "p1", `{"resourceType":"Patient","active":true}`)
	if got := lastUpdatedOf(t, f, "Patient", "p1"); got != "2026-11-21T10:00:00.010Z" {
		t.Errorf("write when the clock has moved on = %s, want the clock", got)
	}
}
