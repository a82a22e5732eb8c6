package prepare_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

// fastPathRecord writes one fast-path record object (what internal/fastpath
// writes after publishing) holding versions, at written.
func fastPathRecord(t *testing.T, r *rig, written time.Time, name string, versions ...delivered.Entry) {
	t.Helper()
	var buf bytes.Buffer
	w := delivered.NewWriter(&buf, false)
	for _, e := range versions {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r.put(t, delivered.FastPathKey(written, name), buf.Bytes())
}

// TestWindowSkipsWhatTheFastPathDelivered: with the fast path on, a
// window that continues the committed one publishes only the versions the
// fast path's record objects do not hold — counted as fastPathMissed — and
// skips the rest (fastPathSkipped), recording them in its delivered index;
// a version the fast path delivered in an older version only is still
// published; after a replay (continues false) everything is published
// again on purpose and nothing counts as missed; with the fast path off the
// objects are not read.
func TestWindowSkipsWhatTheFastPathDelivered(t *testing.T) {
	r := newRig(t, 0)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(5 * time.Minute)
	now := t1.Add(3 * time.Minute)
	at := func(t time.Time) string { return events.FormatTime(t) }
	on := func(c *prepare.Config) { c.FastPath, c.Now = true, func() time.Time { return now } }

	// The fast path delivered a/2 and b/1 (b's record written in the
	// previous hour's folder would not matter: these are inside the span),
	// and c/1 where the export now carries c/2.
	fastPathRecord(t, r, t0.Add(2*time.Minute), "req-1",
		delivered.Entry{Type: "Patient", ID: "a", VersionID: "2", LastUpdated: at(t0.Add(time.Minute))},
		delivered.Entry{Type: "Patient", ID: "c", VersionID: "1", LastUpdated: at(t0.Add(time.Minute))})
	fastPathRecord(t, r, t0.Add(4*time.Minute), "req-2",
		delivered.Entry{Type: "Patient", ID: "b", VersionID: "1", LastUpdated: at(t0.Add(3 * time.Minute))})
	// An object written before the window's export since: not read.
	fastPathRecord(t, r, t0.Add(-3*time.Minute), "req-0",
		delivered.Entry{Type: "Patient", ID: "d", VersionID: "1", LastUpdated: at(t0.Add(2 * time.Minute))})

	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-fp.ndjson"
	body := patient("a", "2", at(t0.Add(time.Minute)), 0) + "\n" + patient("b", "1", at(t0.Add(3*time.Minute)), 0) + "\n" +
		patient("c", "2", at(t0.Add(4*time.Minute)), 0) + "\n" + patient("d", "1", at(t0.Add(2*time.Minute)), 0) + "\n"
	r.put(t, k, []byte(body))

	out, err := invoke(t, r.handler(t, on), windowInput("run-1", k, t0, t1, true))
	if err != nil {
		t.Fatal(err)
	}
	if got := eventIDs(t, r.sink); !slices.Equal(got, []string{"Patient/c/_history/2", "Patient/d/_history/1"}) {
		t.Errorf("published %v; want only the versions the fast path did not deliver", got)
	}
	if out.FastPathSkipped != 2 || out.FastPathMissed != 2 || out.Events != 2 || out.Lines != 4 {
		t.Errorf("summary %+v: want 4 lines = 2 events (both missed by the fast path) + 2 fastPathSkipped", out)
	}
	var recorded []string
	for _, key := range r.list(t, delivered.DeliveredPrefix) {
		_ = delivered.ReadAll(bytes.NewReader(r.get(t, key)), nil, func(e delivered.Entry) error {
			recorded = append(recorded, e.Type+"/"+e.ID+"/_history/"+e.VersionID)
			return nil
		})
	}
	slices.Sort(recorded)
	if want := []string{"Patient/a/_history/2", "Patient/b/_history/1", "Patient/c/_history/2", "Patient/d/_history/1"}; !slices.Equal(recorded, want) {
		t.Errorf("delivered index %v, want every version consumers have (the fast path's too): %v", recorded, want)
	}

	// After a replay: everything again, nothing missed.
	r.sink.Reset()
	out, err = invoke(t, r.handler(t, on), windowInput("run-2", k, t0, t1, false))
	if err != nil || out.Events != 4 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("after a replay: %+v, %v; want all 4 published, none skipped or missed", out, err)
	}

	// Fast path off: the objects are not consulted.
	r.sink.Reset()
	out, err = invoke(t, r.handler(t, nil), windowInput("run-3", k, t0, t1, true))
	if err != nil || out.Events != 4 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("fast path off: %+v, %v", out, err)
	}
}

// TestLongWindowDoesNotReadTheFastPath: a window longer than
// FastPathMaxSpan (a catch-up) publishes what it exports without reading
// the fast path's objects: duplicates with the same eventIds, never a loss.
func TestLongWindowDoesNotReadTheFastPath(t *testing.T) {
	r := newRig(t, 0)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(prepare.FastPathMaxSpan + time.Hour)
	at := events.FormatTime
	fastPathRecord(t, r, t1.Add(-time.Minute), "req-1", delivered.Entry{Type: "Patient", ID: "a", VersionID: "1", LastUpdated: at(t1.Add(-2 * time.Minute))})
	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-long.ndjson"
	r.put(t, k, []byte(patient("a", "1", at(t1.Add(-2*time.Minute)), 0)+"\n"))
	h := r.handler(t, func(c *prepare.Config) { c.FastPath, c.Now = true, func() time.Time { return t1.Add(3 * time.Minute) } })
	out, err := invoke(t, h, windowInput("run-1", k, t0, t1, true))
	if err != nil || out.Events != 1 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("%+v, %v; want the version published and the fast path not consulted", out, err)
	}
}
