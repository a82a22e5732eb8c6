package fakehealthlake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// raw sends a FHIR request and returns the status and the body verbatim.
func (f *fx) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	st, out := f.do(t, localaws.SecretAccessKey, method, "/datastore/ds1/r4/"+path, b, nil)
	return st, string(out)
}

func mustStatus(t *testing.T, f *fx, want int, method, path, body string) string {
	t.Helper()
	st, out := f.raw(t, method, path, body)
	if st != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, st, out, want)
	}
	return out
}

// exportAll runs an export of everything and returns each type's exported
// lines, sorted.
func exportAll(t *testing.T, f *fx) map[string][]string {
	t.Helper()
	ctx := context.Background()
	jobID := startExport(t, f, "", "snap")
	if err := f.emu.RunJobs(ctx); err != nil {
		t.Fatal(err)
	}
	full, p := describe(t, f, jobID)
	if p["jobStatus"] != "COMPLETED" {
		t.Fatalf("export %v", p)
	}
	out := map[string][]string{}
	list, _ := full["output"].([]any)
	for _, o := range list {
		m := o.(map[string]any)
		key := strings.TrimPrefix(m["url"].(string), "s3://art/")
		obj, err := f.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("art"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		b, _ := io.ReadAll(obj.Body)
		_ = obj.Body.Close()
		typ := m["type"].(string)
		out[typ] = append(out[typ], strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	for _, ls := range out {
		sort.Strings(ls)
	}
	return out
}

func snapshot(t *testing.T, ds *fakehealthlake.Datastore) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ds.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotRestoreKeepsEveryVersionByteForByte(t *testing.T) {
	eachStore(t, testSnapshotRestoreKeepsEveryVersionByteForByte)
}

func testSnapshotRestoreKeepsEveryVersionByteForByte(t *testing.T) {
	f := setup(t, nil)
	step := func() { f.clk.Set(f.clk.Now().Add(time.Second)) }
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	step()
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":false}`)
	step()
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p1", "")
	step()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","meta":{"source":"s"},"name":[{"text":"A <b> & \u00e9"}]}`)
	// Characters json.Marshal would escape must come back unescaped.
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2","name":[{"text":"<x>&"}]}`)
	created := mustStatus(t, f, http.StatusCreated, http.MethodPost, "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"c"}}`)
	var obs struct{ ID string }
	_ = json.Unmarshal([]byte(created), &obs)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Encounter/e1", `{"resourceType":"Encounter","id":"e1","status":"finished","class":{}}`)
	step()
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Encounter/e1", "")

	src, _ := f.emu.Datastore("ds1")
	snap := snapshot(t, src)
	lines := strings.Split(strings.TrimSpace(string(snap)), "\n")
	var order []string
	for _, l := range lines {
		var h struct{ ResourceType, ID, VersionID string }
		if err := json.Unmarshal([]byte(l), &h); err != nil {
			t.Fatalf("snapshot line %q: %v", l, err)
		}
		order = append(order, h.ResourceType+"/"+h.ID+"/"+h.VersionID)
	}
	want := []string{"Encounter/e1/1", "Encounter/e1/2", "Observation/" + obs.ID + "/1",
		"Patient/p1/1", "Patient/p1/2", "Patient/p1/3", "Patient/p1/4", "Patient/p2/1"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("snapshot order %v, want %v", order, want)
	}
	if !bytes.Equal(snap, snapshot(t, src)) {
		t.Error("two snapshots of an unchanged data store differ")
	}

	// A fresh emulator whose clock is behind every restored instant.
	g := setup(t, nil)
	dst, _ := g.emu.Datastore("ds1")
	if err := dst.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got := snapshot(t, dst); !bytes.Equal(got, snap) {
		t.Errorf("snapshot after restore differs:\n%s\nwant\n%s", got, snap)
	}
	if dst.Count() != src.Count() || dst.Count() != 3 {
		t.Errorf("restored count %d, original %d, want 3", dst.Count(), src.Count())
	}
	for _, path := range []string{
		"Patient/p1", "Patient/p1/_history", "Patient/p1/_history/1", "Patient/p1/_history/2",
		"Patient/p1/_history/3", "Patient/p1/_history/4", "Patient/p1/_history/5", "Patient/p2",
		"Observation/" + obs.ID, "Encounter/e1", "Encounter/e1/_history", "Encounter/e1/_history/1",
		"Patient", "Encounter",
	} {
		ws, wb := f.raw(t, http.MethodGet, path, "")
		gs, gb := g.raw(t, http.MethodGet, path, "")
		if ws != gs || wb != gb {
			t.Errorf("GET %s: restored %d %s, original %d %s", path, gs, gb, ws, wb)
		}
	}
	if _, p2 := g.raw(t, http.MethodGet, "Patient/p2", ""); !strings.Contains(p2, `"<x>&"`) {
		t.Errorf("Patient/p2 bytes changed: %s", p2)
	}
	if we, ge := exportAll(t, f), exportAll(t, g); mustJSONs(we) != mustJSONs(ge) || len(ge["Patient"]) != 2 {
		t.Errorf("export after restore %v, original %v", ge, we)
	}

	// Later writes: the next version, never before a restored instant, and
	// strictly after the resource's own last version.
	newest, lastOf := time.Time{}, map[string]time.Time{}
	for _, l := range lines {
		var h struct{ ResourceType, ID, LastUpdated string }
		_ = json.Unmarshal([]byte(l), &h)
		lu, err := time.Parse(fakehealthlake.InstantLayout, h.LastUpdated)
		if err != nil {
			t.Fatal(err)
		}
		if lu.After(newest) {
			newest = lu
		}
		lastOf[h.ResourceType+"/"+h.ID] = lu
	}
	if !lastOf["Encounter/e1"].Equal(newest) {
		t.Fatalf("the Encounter deletion should be the newest restored version")
	}
	for _, w := range []struct{ path, version string }{{"Patient/p1", "5"}, {"Encounter/e1", "3"}, {"Patient/p3", "1"}} {
		id := strings.TrimPrefix(w.path, "Patient/")
		body := `{"resourceType":"Patient","id":"` + id + `"}`
		if strings.HasPrefix(w.path, "Encounter/") {
			body = `{"resourceType":"Encounter","id":"e1","status":"finished","class":{}}`
		}
		st, res := g.fhir(t, http.MethodPut, w.path, body)
		v, lu := meta(res)
		stamp, err := time.Parse(fakehealthlake.InstantLayout, lu)
		if (st != http.StatusOK && st != http.StatusCreated) || v != w.version || err != nil || stamp.Before(newest) || !stamp.After(lastOf[w.path]) {
			t.Errorf("PUT %s after restore = %d version %s at %s; want version %s, not before %s, after its last %s", w.path, st, v, lu, w.version,
				newest.Format(fakehealthlake.InstantLayout), lastOf[w.path].Format(fakehealthlake.InstantLayout))
		}
		newest = stamp // and stamps never go back
	}
}

func TestRestoreRefusesCorruptSnapshots(t *testing.T) {
	line := func(typ, id, vid, lu string, deleted bool, res string) string {
		l := `{"resourceType":"` + typ + `","id":"` + id + `","versionId":"` + vid + `","lastUpdated":"` + lu + `","deleted":`
		if deleted {
			return l + `true}`
		}
		return l + `false,"resource":` + res + `}`
	}
	p := func(vid, lu string) string {
		return line("Patient", "p1", vid, lu, false,
			`{"resourceType":"Patient","id":"p1","meta":{"versionId":"`+vid+`","lastUpdated":"`+lu+`"}}`)
	}
	const t1, t2, t3 = "2026-11-21T10:00:00.000Z", "2026-11-21T10:00:01.000Z", "2026-11-21T10:00:02.000Z"
	cases := []struct {
		name, snap, want string
	}{
		{"gap", p("1", t1) + "\n" + p("3", t3), "line 2: Patient/p1: version 3 where version 2 was expected"},
		{"out of order", p("2", t2) + "\n" + p("1", t1), "line 1: Patient/p1: version 2 where version 1 was expected"},
		{"repeated version", p("1", t1) + "\n" + p("1", t2), "line 2: Patient/p1: version 1 where version 2"},
		{"time going back", p("1", t2) + "\n" + p("2", t1), "line 2: Patient/p1/_history/2: lastUpdated"},
		{"not JSON", p("1", t1) + "\n{oops", "line 2: not a snapshot line"},
		{"unknown field", `{"resourceType":"Patient","id":"p1","versionId":"1","lastUpdated":"` + t1 + `","deleted":false,"extra":1}`, "line 1: not a snapshot line"},
		{"bad instant", p("1", "2026-11-21T10:00:00Z"), "line 1: Patient/p1/_history/1: lastUpdated"},
		{"bad version", p("0", t1), "line 1: Patient/p1: versionId \"0\""},
		{"unsupported type", line("Spaceship", "s1", "1", t1, false, `{}`), "line 1: unsupported resource type"},
		{"meta disagrees", line("Patient", "p1", "1", t1, false, `{"resourceType":"Patient","id":"p1","meta":{"versionId":"2","lastUpdated":"`+t1+`"}}`), "line 1: Patient/p1/_history/1: resource's meta"},
		{"id disagrees", line("Patient", "p1", "1", t1, false, `{"resourceType":"Patient","id":"p2","meta":{"versionId":"1","lastUpdated":"`+t1+`"}}`), "line 1: Patient/p1/_history/1: resource's resourceType or id"},
		{"no resource", line("Patient", "p1", "1", t1, false, `null`), "line 1: Patient/p1/_history/1: no resource"},
		{"deletion first", line("Patient", "p1", "1", t1, true, ""), "line 1: Patient/p1/_history/1: deletion of a resource that does not exist"},
		{"deletion twice", p("1", t1) + "\n" + line("Patient", "p1", "2", t2, true, "") + "\n" + line("Patient", "p1", "3", t3, true, ""), "line 3: Patient/p1/_history/3: deletion"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"ds1"}})
			ds, _ := e.Datastore("ds1")
			err := ds.Restore(strings.NewReader(c.snap + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore error %v, want one containing %q", err, c.want)
			}
			if ds.Count() != 0 || len(snapshot(t, ds)) != 0 {
				t.Error("a refused snapshot changed the data store")
			}
		})
	}

	t.Run("not empty", func(t *testing.T) {
		e := fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"ds1"}})
		ds, _ := e.Datastore("ds1")
		mustLoad(t, ds, "Patient", "x", `{"resourceType":"Patient"}`)
		before := snapshot(t, ds)
		if err := ds.Restore(strings.NewReader(p("1", t1))); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Errorf("restore into a non-empty data store: %v", err)
		}
		if !bytes.Equal(before, snapshot(t, ds)) {
			t.Error("a refused restore changed the data store")
		}
	})
	t.Run("valid and empty", func(t *testing.T) {
		e := fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"ds1"}})
		ds, _ := e.Datastore("ds1")
		if err := ds.Restore(strings.NewReader("")); err != nil || ds.Count() != 0 {
			t.Errorf("empty snapshot: %v", err)
		}
		if err := ds.Restore(strings.NewReader(p("1", t1) + "\n\n" + p("2", t2))); err != nil || ds.Count() != 1 {
			t.Errorf("two versions without a final newline: %v", err)
		}
	})
}

// OnExportFinish hands over a snapshot that already holds every version the
// export carries, taken before the export's files exist (so before the job
// can complete).
func TestOnExportFinishSnapshotsBeforeTheExportCompletes(t *testing.T) {
	eachStore(t, testOnExportFinishSnapshotsBeforeTheExportCompletes)
}

func testOnExportFinishSnapshotsBeforeTheExportCompletes(t *testing.T) {
	var got []byte
	filesAtHook := -1
	var f *fx
	f = setup(t, func(o *fakehealthlake.Options) {
		o.OnExportFinish = func(datastoreID string, snap func(io.Writer) error) {
			var b bytes.Buffer
			if err := snap(&b); err != nil {
				t.Errorf("snapshot: %v", err)
			}
			got = b.Bytes()
			// S3 is not the emulator: asking it does not need the emulator's lock.
			out, err := f.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("art")})
			if err == nil {
				filesAtHook = len(out.Contents)
			}
			if datastoreID != "ds1" {
				t.Errorf("datastore %q", datastoreID)
			}
		}
	})
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	exported := exportAll(t, f)
	if filesAtHook != 0 {
		t.Errorf("the hook ran with %d export objects already written, want 0", filesAtHook)
	}
	ds, _ := f.emu.Datastore("ds1")
	if !bytes.Equal(got, snapshot(t, ds)) {
		t.Errorf("hook snapshot differs from Snapshot:\n%s\nwant\n%s", got, snapshot(t, ds))
	}
	if len(exported["Patient"]) != 1 || !strings.Contains(string(got), `"versionId":"2"`) || !strings.Contains(string(got), exported["Patient"][0]) {
		t.Errorf("the exported version is not in the hook's snapshot:\n%s\nexported %v", got, exported)
	}
}
