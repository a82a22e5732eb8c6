package prepare_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

// windowInput is one batch of a run whose checkpoint window is (cpSince,
// cpUntil] and whose export window reaches one minute further back.
func windowInput(runID, key string, cpSince, cpUntil time.Time, continues bool) prepare.Input {
	in := input(key)
	in.RunID = runID
	cp := envelope.Window{Since: cpSince, Until: cpUntil}
	in.Checkpoint = &cp
	in.Window = envelope.Window{Since: cpSince.Add(-time.Minute), Until: cpUntil}
	in.Continues = continues
	return in
}

// overlapObjects returns the entries of every overlap object of the windows
// ending at until.
func overlapObjects(t *testing.T, r *rig, until time.Time) []string {
	t.Helper()
	out, err := r.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(delivered.OverlapDir(until))})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out.Contents {
		err := delivered.ReadAll(strings.NewReader(string(r.get(t, aws.ToString(o.Key)))), nil, func(e delivered.Entry) error {
			got = append(got, e.Type+"/"+e.ID+"/_history/"+e.VersionID)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	return got
}

// TestOverlapRepeatsAreSkipped follows three windows through one resource
// set: a version the previous window published is not published again by
// the next window's overlap (counted as overlapSkipped), a version in the
// overlap that the previous window did not publish (visible late) is, and
// after a replay (continues false) every version in the overlap is
// published again on purpose.
func TestOverlapRepeatsAreSkipped(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1, t2 := t0.Add(5*time.Minute), t0.Add(10*time.Minute)
	at := func(t time.Time) string { return envelope.FormatTime(t) }

	// Window 1 (t0, t1]: a at t1−30 s (in the next window's overlap), b at t1−2 min (not).
	k1 := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-w1.ndjson"
	r.put(t, k1, []byte(patient("a", "1", at(t1.Add(-30*time.Second)), 0)+"\n"+patient("b", "1", at(t1.Add(-2*time.Minute)), 0)+"\n"))
	out, err := invoke(t, h, windowInput("run-1", k1, t0, t1, true))
	if err != nil || out.Events != 2 || out.OverlapSkipped != 0 {
		t.Fatalf("window 1: %+v, %v", out, err)
	}
	if got := overlapObjects(t, r, t1); !slices.Equal(got, []string{"Patient/a/_history/1"}) {
		t.Fatalf("window 1's overlap object holds %v, want only the version of its last minute", got)
	}

	// Window 2 (t1, t2], export from t1−1 min: a/1 again (a repeat), c/1 at
	// t1−10 s that window 1's export did not see (late), d/2 at t2−5 s.
	r.sink.Reset()
	k2 := "exports/ds1-FHIR_EXPORT-job2/Patient/Patient-w2.ndjson"
	body := patient("a", "1", at(t1.Add(-30*time.Second)), 0) + "\n" + patient("c", "1", at(t1.Add(-10*time.Second)), 0) + "\n" +
		patient("d", "2", at(t2.Add(-5*time.Second)), 0) + "\n"
	r.put(t, k2, []byte(body))
	out, err = invoke(t, h, windowInput("run-2", k2, t1, t2, true))
	if err != nil {
		t.Fatal(err)
	}
	if got := eventIDs(t, r.sink); !slices.Equal(got, []string{"Patient/c/_history/1", "Patient/d/_history/2"}) {
		t.Errorf("window 2 published %v, want the late version and the new one, not the repeat", got)
	}
	for _, ev := range r.sink.Events() {
		var d struct {
			Window struct{ Since, Until string } `json:"window"`
		}
		_ = json.Unmarshal(ev.Event.Detail, &d)
		if d.Window.Since != at(t1) || d.Window.Until != at(t2) {
			t.Errorf("an event of window 2 carries window %+v, want the checkpoint window (%s, %s]", d.Window, at(t1), at(t2))
		}
	}
	if out.OverlapSkipped != 1 || out.Events != 2 || out.Lines != 3 {
		t.Errorf("window 2 summary %+v: want 3 lines = 2 events + 1 overlapSkipped", out)
	}
	if got := overlapObjects(t, r, t2); !slices.Equal(got, []string{"Patient/d/_history/2"}) {
		t.Errorf("window 2's overlap object holds %v", got)
	}

	// The same window after a replay: nothing is skipped.
	r.sink.Reset()
	out, err = invoke(t, h, windowInput("run-3", k2, t1, t2, false))
	if err != nil || out.Events != 3 || out.OverlapSkipped != 0 {
		t.Fatalf("window 2 after a replay: %+v, %v; want every version published again", out, err)
	}

	// A window shorter than the overlap: its repeat also lies in the next
	// window's overlap, so it stays in the tail.
	t3 := t2.Add(30 * time.Second)
	k3 := "exports/ds1-FHIR_EXPORT-job3/Patient/Patient-w3.ndjson"
	r.put(t, k3, []byte(patient("d", "2", at(t2.Add(-5*time.Second)), 0)+"\n"))
	out, err = invoke(t, h, windowInput("run-4", k3, t2, t3, true))
	if err != nil || out.OverlapSkipped != 1 || out.Events != 0 {
		t.Fatalf("short window: %+v, %v", out, err)
	}
	if got := overlapObjects(t, r, t3); !slices.Equal(got, []string{"Patient/d/_history/2"}) {
		t.Errorf("short window's overlap object holds %v; the skipped repeat is still in the next overlap", got)
	}
}

// TestOverlapReadFailureFailsTheBatch: when the previous window's overlap
// objects cannot be read, the batch fails as ReadFailed (Step Functions
// retries it) rather than publishing the overlap's repeats unannounced.
func TestOverlapReadFailureFailsTheBatch(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	r.put(t, delivered.OverlapDir(t0)+"run-0/x.tsv.gz", []byte("not\tan index line with enough fields? no"))
	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-x.ndjson"
	r.put(t, k, []byte(patient("a", "1", envelope.FormatTime(t0.Add(time.Minute)), 0)+"\n"))
	_, err := invoke(t, h, windowInput("run-1", k, t0, t0.Add(5*time.Minute), true))
	if err == nil || !strings.Contains(err.Error(), "overlap") || r.sink.Len() != 0 {
		t.Fatalf("err %v, %d published; want a read failure naming the overlap objects and nothing published", err, r.sink.Len())
	}
}

// TestCheckpointMustEndTheExportWindow: a payload whose checkpoint window
// does not end the export window is refused before anything is read.
func TestCheckpointMustEndTheExportWindow(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	in := windowInput("run-1", exportKey, since, until, true)
	in.Checkpoint.Until = until.Add(time.Minute)
	if _, err := invoke(t, h, in); err == nil || !strings.Contains(err.Error(), "checkpoint window") {
		t.Fatalf("err = %v", err)
	}
}
