package stack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// TestSpillDirKeepsTheBulkOnDiskAndChangesNothingVisible: with SpillDir the
// export files, the archive and the data store's bodies go to files there —
// and a window delivers the same events, each carrying the stored bytes;
// Close removes the files.
func TestSpillDirKeepsTheBulkOnDiskAndChangesNothingVisible(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := startStack(t, func(o *Options) { o.SpillDir = dir; o.SampleSize = 900 })
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" || w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window = %+v", w)
	}
	ids := st.Delivered.EventIDs()
	if len(ids) != st.Seeded() || w.Events != int64(st.Seeded()) {
		t.Fatalf("%d distinct events (window: %d) for %d seeded resources", len(ids), w.Events, st.Seeded())
	}
	ds, _ := st.HealthLake.Datastore(st.Res.DatastoreID)
	for _, d := range st.Delivered.Deliveries() {
		det := decodeDetail(t, d)
		body, ok := ds.Read(det.ResourceType, det.ResourceID)
		if !ok || string(body) != string(det.Resource) {
			t.Fatalf("%s: the event's resource differs from the stored bytes", det.EventID)
		}
	}
	kinds := map[string]int64{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		switch {
		case strings.HasPrefix(base, "local-s3-"):
			kinds["s3"] += fi.Size()
		case strings.HasPrefix(base, "local-eventbridge-archive-"):
			kinds["archive"] += fi.Size()
		default:
			kinds["other: "+base] += fi.Size()
		}
	}
	if kinds["s3"] < 64<<10 || kinds["archive"] == 0 || len(kinds) != 3 {
		t.Errorf("spill files by kind %v: want S3 bodies (≥ 64 KiB), the archive and the data store's bodies", kinds)
	}
	st.Close()
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
}
