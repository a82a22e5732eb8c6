package prepare_test

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

// TestRangesOfAFilePublishEachLineOnce: an export file larger than a batch
// may be is cut into byte ranges (manifest.Plan), one invocation each. Their
// invocations together publish every change of the file exactly once, with
// the eventIds one invocation of the whole file sends, quarantine its bad
// lines with the file's own line numbers and offsets, and write their
// quarantine and delivered-index objects under names of their own.
func TestRangesOfAFilePublishEachLineOnce(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	var b strings.Builder
	bad := map[int64]bool{7: true, 25: true}
	for n := int64(1); n <= 40; n++ {
		if bad[n] {
			b.WriteString("{oops\n")
			continue
		}
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", n), "1", "2026-11-21T09:30:00Z", int(n%7)*40))
	}
	data := []byte(b.String())
	r.put(t, exportKey, data)

	whole, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("the whole file: %v", err)
	}
	want := sorted(eventIDs(t, r.sink))
	if len(want) != 38 || whole.Quarantined != 2 {
		t.Fatalf("the whole file: %d events, %d quarantined", len(want), whole.Quarantined)
	}
	r.sink.Reset()

	file := manifest.File{Bucket: bucket, Key: exportKey, ResourceType: "Patient", Bytes: int64(len(data))}
	batches := manifest.Plan([]manifest.File{file}, manifest.Limits{MaxFiles: 10, MaxBytes: int64(len(data))/5 + 1})
	if len(batches) != 5 {
		t.Fatalf("planned %d batches, want 5 ranges", len(batches))
	}
	var events, quarantined int64
	var recs []prepare.QuarantineRecord
	for i, out := range invokeRanges(t, h, "run-2", batches) {
		batch := batches[i]
		events += out.Events
		quarantined += out.Quarantined
		for _, k := range out.QuarantineKeys {
			if k != prepare.QuarantineKey("run-2", batch.Files[0].Name()) {
				t.Fatalf("range %d wrote quarantine object %s", i, k)
			}
			recs = append(recs, quarantineRecords(t, r.get(t, k))...)
		}
	}
	got := eventIDs(t, r.sink)
	if events != 38 || quarantined != 2 || len(got) != 38 || fmt.Sprint(sorted(got)) != fmt.Sprint(want) {
		t.Fatalf("the ranges published %d events (%d delivered), quarantined %d; want the whole file's 38 eventIds once and 2 quarantined", events, len(got), quarantined)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Line < recs[j].Line })
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, n := range []int64{7, 25} {
		var offset int64
		for _, l := range lines[:n-1] {
			offset += int64(len(l))
		}
		if len(recs) != 2 || recs[i].File != exportKey || recs[i].Line != n || recs[i].Offset != offset || recs[i].Raw != "{oops" {
			t.Fatalf("quarantine records %+v, want lines 7 and 25 of %s at their offsets", recs, exportKey)
		}
	}
	if keys := r.list(t, delivered.DeliveredPrefix); len(keys) != 1+len(batches) {
		t.Fatalf("%d delivered-index objects, want one for the whole file and one per range: %v", len(keys), keys)
	}

	// A range that starts past LineCountMaxBytes does not read the bytes
	// before it: its records count lines from its first line and say so
	// with lineFrom; with the offsets the file's own, both find the line.
	starts := []int64{0} // the offset of each line, by its number − 1
	for _, l := range lines[:len(lines)-1] {
		starts = append(starts, starts[len(starts)-1]+int64(len(l)))
	}
	h = r.handler(t, func(c *prepare.Config) { c.LineCountMaxBytes = 1 })
	recs = nil
	for _, out := range invokeRanges(t, h, "run-3", batches) {
		for _, k := range out.QuarantineKeys {
			recs = append(recs, quarantineRecords(t, r.get(t, k))...)
		}
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
	if len(recs) != 2 {
		t.Fatalf("quarantine records %+v, want 2", recs)
	}
	for i, n := range []int64{7, 25} {
		rec := recs[i]
		first := int64(sort.Search(len(starts), func(k int) bool { return starts[k] >= rec.LineFrom })) // lines before
		if rec.Offset != starts[n-1] || first+rec.Line != n || n == 25 && rec.LineFrom == 0 {
			t.Fatalf("record %+v: want line %d at offset %d (counted from byte lineFrom when set)", rec, n, starts[n-1])
		}
	}
}

// TestABadRangeIsRefused: a range that reads nothing is a clear input error.
func TestABadRangeIsRefused(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	in := input(exportKey)
	in.Files[0].Start, in.Files[0].End = 10, 10
	if _, err := invoke(t, h, in); err == nil || !strings.Contains(err.Error(), "byte range [10, 10)") {
		t.Fatalf("invoke = %v, want the byte range refused", err)
	}
}

// invokeRanges invokes h once per batch of ranges of exportKey, in run
// runID, and returns their outputs; an invocation's error fails the test.
func invokeRanges(t *testing.T, h *prepare.Handler, runID string, batches []manifest.Batch) []prepare.Output {
	t.Helper()
	outs := make([]prepare.Output, len(batches))
	for i, batch := range batches {
		in := input(exportKey)
		in.RunID, in.Files = runID, batch.Files
		out, err := invoke(t, h, in)
		if err != nil {
			t.Fatalf("range %d: %v", i, err)
		}
		outs[i] = out
	}
	return outs
}
