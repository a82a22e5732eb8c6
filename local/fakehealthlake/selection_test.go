package fakehealthlake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// exportedVersions runs an export and returns "Type/id/versionId" of every
// line it wrote, sorted.
func exportedVersions(t *testing.T, f *fx, query string) []string {
	t.Helper()
	j := startExport(t, f, query, "sel")
	if err := f.emu.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	job, _ := f.emu.Job(j)
	if job.Status != fakehealthlake.StatusCompleted {
		t.Fatalf("export %s: %s %s", query, job.Status, job.Message)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(readAll(t, f, job.Output)), "\n") {
		if l == "" {
			continue
		}
		var r struct {
			ResourceType, ID string
			Meta             struct{ VersionID string }
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, r.ResourceType+"/"+r.ID+"/"+r.Meta.VersionID)
	}
	sort.Strings(out)
	return out
}

// A `_since` export sees, per resource, the newest version visible at the
// read time minus VisibilityLag, and only when it is not older than since
// and not a deletion — also after a restore, whose log comes back in
// lastUpdated order.
func TestSinceExportSeesTheNewestVisibleVersion(t *testing.T) {
	eachStore(t, testSinceExportSeesTheNewestVisibleVersion)
}

func testSinceExportSeesTheNewestVisibleVersion(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.VisibilityLag = 30 * time.Second })
	ds, _ := f.emu.Datastore("ds1")
	at := func(d time.Duration) { f.clk.Set(t0.Add(d)) }
	load := func(id string) { mustLoad(t, ds, "Patient", id, `{"resourceType":"Patient"}`) }
	at(0)
	load("before")    // never changes again: left out
	load("lateWrite") // v2 after since, not yet visible: v1 is older than since
	load("deleted")   // deleted after since: left out
	load("updated")   // v2 after since, visible
	load("hard")      // v2 after since, then hard deleted
	at(time.Minute)
	since := f.clk.Now()
	load("updated")
	load("new")
	load("hard")
	if !ds.HardDelete("Patient", "hard") {
		t.Fatal("hard delete")
	}
	if _, ok := ds.Delete("Patient", "deleted"); !ok {
		t.Fatal("delete")
	}
	mustLoad(t, ds, "Encounter", "enc", `{"resourceType":"Encounter","status":"finished","class":{}}`)
	at(2 * time.Minute)
	load("lateWrite")
	at(2*time.Minute + 10*time.Second) // the lateWrite v2 is 10 s old: not visible
	q := "?_since=" + since.Format(fakehealthlake.InstantLayout)
	want := "Encounter/enc/1 Patient/new/1 Patient/updated/2"
	if got := strings.Join(exportedVersions(t, f, q), " "); got != want {
		t.Errorf("since export = %s, want %s", got, want)
	}
	if got := strings.Join(exportedVersions(t, f, q+"&_type=Patient"), " "); got != "Patient/new/1 Patient/updated/2" {
		t.Errorf("since export of Patient = %s", got)
	}
	all := "Encounter/enc/1 Patient/before/1 Patient/lateWrite/1 Patient/new/1 Patient/updated/2"
	if got := strings.Join(exportedVersions(t, f, ""), " "); got != all {
		t.Errorf("full export = %s, want %s", got, all)
	}

	// A restored copy answers the same, and a later write lands after since.
	var snap bytes.Buffer
	if err := ds.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	g := setup(t, func(o *fakehealthlake.Options) { o.VisibilityLag = 30 * time.Second })
	g.clk.Set(f.clk.Now())
	gds, _ := g.emu.Datastore("ds1")
	if err := gds.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(exportedVersions(t, g, q), " "); got != want {
		t.Errorf("since export after restore = %s, want %s", got, want)
	}
	g.clk.Set(t0.Add(5 * time.Minute))
	if got := strings.Join(exportedVersions(t, g, q), " "); got != "Encounter/enc/1 Patient/lateWrite/2 Patient/new/1 Patient/updated/2" {
		t.Errorf("since export after restore, lag passed = %s", got)
	}
	mustLoad(t, gds, "Patient", "before", `{"resourceType":"Patient"}`)
	g.clk.Set(t0.Add(6 * time.Minute))
	late := "?_since=" + t0.Add(5*time.Minute).Format(fakehealthlake.InstantLayout)
	if got := strings.Join(exportedVersions(t, g, late), " "); got != "Patient/before/2" {
		t.Errorf("since export of a write after restore = %s", got)
	}
}
