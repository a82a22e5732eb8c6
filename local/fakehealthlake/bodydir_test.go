package fakehealthlake_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// heapPerResource loads n resources shaped like the simulator's (ids
// "sim-…", a small body) and returns the heap they add, in bytes per
// resource, measured after a GC.
func heapPerResource(t testing.TB, n int, bodyDir string) float64 {
	e, ds, _ := benchEmulator(t, func(o *fakehealthlake.Options) { o.BodyDir = bodyDir })
	defer func() { _ = e.Close() }()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := []byte(`{"resourceType":"Patient","id":"sim-00000","active":true,"gender":"female","birthDate":"1970-01-01"}`)
	for i := 0; i < n; i++ {
		id := "sim-" + strconv.FormatInt(int64(i), 36)
		b := []byte(strings.Replace(string(body), "sim-00000", id, 1))
		if _, err := ds.Load("Patient", id, b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(ds)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// With BodyDir, a resource with one version costs about 100 bytes of heap
// (index entry, key, resource entry, version record), whatever its body.
func TestBodyDirHeapPerResource(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 200,000 resources")
	}
	const n = 200_000
	mem := heapPerResource(t, n, "")
	disk := heapPerResource(t, n, t.TempDir())
	t.Logf("heap per resource: %.0f B in memory, %.0f B with BodyDir", mem, disk)
	if disk > 120 {
		t.Errorf("heap per resource with BodyDir = %.0f B, want at most 120", disk)
	}
	if disk >= mem {
		t.Errorf("BodyDir (%.0f B) saves nothing over memory (%.0f B)", disk, mem)
	}
}

// bodyFiles lists the files of dir.
func bodyFiles(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// With BodyDir the bodies go to one file of the directory (not to the
// heap), and Close removes it.
func TestBodyDirKeepsBodiesInOneFileRemovedOnClose(t *testing.T) {
	dir := t.TempDir()
	f := setup(t, func(o *fakehealthlake.Options) { o.BodyDir = dir })
	ds, _ := f.emu.Datastore("ds1")
	if n := len(bodyFiles(t, dir)); n != 0 {
		t.Fatalf("%d files before the first write", n)
	}
	big := strings.Repeat("x", 300_000) // three fill most of the 1 MiB write buffer
	for i := 0; i < 5; i++ {
		mustLoad(t, ds, "Patient", "p"+strconv.Itoa(i), `{"resourceType":"Patient","name":[{"text":"`+big+`"}]}`)
	}
	fs := bodyFiles(t, dir)
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Name(), "healthlake-bodies-") {
		t.Fatalf("files in BodyDir = %v, want one body file", fs)
	}
	if info, err := fs[0].Info(); err != nil || info.Size() < 3*300_000 || info.Size() > 4*300_000 {
		t.Errorf("body file size = %v (%v), want the first three bodies written out", info, err)
	}
	for i := 0; i < 5; i++ { // from the file and from the write buffer
		if b, ok := ds.Read("Patient", "p"+strconv.Itoa(i)); !ok || !strings.Contains(string(b), big) {
			t.Errorf("read p%d = %v", i, ok)
		}
	}
	if err := f.emu.Close(); err != nil {
		t.Fatal(err)
	}
	if fs := bodyFiles(t, dir); len(fs) != 0 {
		t.Errorf("files after Close = %v", fs)
	}
	if _, err := ds.Load("Patient", "late", []byte(`{"resourceType":"Patient"}`)); err == nil {
		t.Error("load after Close succeeded")
	}
	if _, ok := ds.Read("Patient", "p0"); ok {
		t.Error("read after Close succeeded")
	}
}

// A body that cannot be read back fails the request that needs it with a
// 500 (never a panic), fails an export and a snapshot; nothing else breaks.
func TestBodyDirReadErrorsAnswer500(t *testing.T) {
	dir := t.TempDir()
	f := setup(t, func(o *fakehealthlake.Options) { o.BodyDir = dir })
	ds, _ := f.emu.Datastore("ds1")
	mustLoad(t, ds, "Patient", "p1", `{"resourceType":"Patient"}`)
	mustLoad(t, ds, "Patient", "p1", `{"resourceType":"Patient","active":true}`)
	if err := ds.Snapshot(io.Discard); err != nil { // writes the buffer out
		t.Fatal(err)
	}
	fs := bodyFiles(t, dir)
	if len(fs) != 1 {
		t.Fatalf("files = %v", fs)
	}
	if err := os.Truncate(filepath.Join(dir, fs[0].Name()), 0); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"Patient/p1", "Patient", "Patient/p1/_history", "Patient/p1/_history/1"} {
		if st, body := f.raw(t, http.MethodGet, path, ""); st != http.StatusInternalServerError || !strings.Contains(body, "OperationOutcome") {
			t.Errorf("GET %s = %d %s, want 500 OperationOutcome", path, st, body)
		}
	}
	if _, ok := ds.Read("Patient", "p1"); ok {
		t.Error("Read succeeded")
	}
	if err := ds.Snapshot(io.Discard); err == nil {
		t.Error("Snapshot succeeded")
	}
	j := startExport(t, f, "", "broken")
	if err := f.emu.RunJobs(context.Background()); err == nil {
		t.Error("RunJobs reported no error")
	}
	if job, _ := f.emu.Job(j); job.Status != fakehealthlake.StatusFailed || job.Message != "Export could not read the data store." {
		t.Errorf("export = %s %q, want FAILED", job.Status, job.Message)
	}
	if ds.Count() != 1 {
		t.Errorf("count = %d", ds.Count())
	}
	// New writes still work and read back (from the write buffer).
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p2", "")
}

// A body that cannot be written fails the write: Load returns the error, a
// PUT answers 500, and nothing is stored.
func TestBodyDirWriteErrorsFailTheWrite(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.BodyDir = filepath.Join(t.TempDir(), "missing") })
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient"}`)); err == nil || !strings.Contains(err.Error(), "body file") {
		t.Errorf("load = %v, want the body file error", err)
	}
	if st, body := f.raw(t, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`); st != http.StatusInternalServerError {
		t.Errorf("PUT = %d %s, want 500", st, body)
	}
	if st, _ := f.raw(t, http.MethodGet, "Patient/p1", ""); st != http.StatusNotFound || ds.Count() != 0 {
		t.Errorf("after failed writes: GET = %d, count %d; want nothing stored", st, ds.Count())
	}
}

// BenchmarkHeapPerResource reports the heap a one-version resource costs,
// in memory and with BodyDir (100,000 resources an op).
func BenchmarkHeapPerResource(b *testing.B) {
	for _, mode := range []string{"memory", "bodydir"} {
		b.Run(mode, func(b *testing.B) {
			dir := ""
			if mode == "bodydir" {
				dir = b.TempDir()
			}
			var per float64
			for i := 0; i < b.N; i++ {
				per = heapPerResource(b, 100_000, dir)
			}
			b.ReportMetric(per, "heapB/resource")
		})
	}
}
