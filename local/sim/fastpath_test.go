package sim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// A dropped version counts as the latest when no later version was visible
// to the export of the window covering it (written after its read less the
// visibility lag); a deletion always counts, and so does a version no
// committed window covers.
func TestDroppedIsLatestAgainstTheWindowsExport(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) int64 { return t0.Add(time.Duration(s * float64(time.Second))).UnixNano() }
	win := committedWindow{since: t0, until: t0.Add(3 * time.Minute), readAt: t0.Add(6 * time.Minute)}
	in := fastPathInputs{
		windows:       []committedWindow{win},
		visibilityLag: 30 * time.Second,
		stamps: map[string][]stamp{
			"Patient/a": {{vid: 1, at: at(10)}, {vid: 2, at: at(200)}},                // v2 visible to the read at 6 min
			"Patient/b": {{vid: 1, at: at(10)}, {vid: 2, at: at(331)}},                // v2 after 6 min − 30 s
			"Patient/c": {{vid: 1, at: at(10)}, {vid: 2, deleted: true, at: at(100)}}, // deleted in the window it was created
			"Patient/d": {{vid: 1, at: at(400)}, {vid: 2, at: at(401)}},               // no committed window covers v1
		},
	}
	for id, want := range map[string]bool{
		"Patient/a/_history/1": false, "Patient/a/_history/2": true,
		"Patient/b/_history/1": true,
		"Patient/c/_history/1": false, "Patient/c/_history/2": true,
		"Patient/d/_history/1": true,
	} {
		if got := droppedIsLatest(id, in); got != want {
			t.Errorf("droppedIsLatest(%s) = %v, want %v", id, got, want)
		}
	}
	if !createdInWindow("Patient/c/_history/2", in) || createdInWindow("Patient/a/_history/2", in) {
		t.Error("createdInWindow: want only c's deletion, in the window that created c")
	}
}

// The fastPath field maps onto the emulator's model (absent: its
// defaults; "0s": none) and is checked.
func TestFastPathWorkloadFieldMapsAndIsChecked(t *testing.T) {
	w, err := Parse([]byte(`{"name": "x", "streams": [{"resourceType": "Observation", "createsPerDay": 1}],
		"initial": {"resources": 1, "types": ["Patient"]},
		"fastPath": {"on": true, "activationDelay": "0s", "notificationDelay": "3s", "dropRate": 0.1, "delayRate": 0.5, "extraDelay": "10m"}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := w.FastPath.subscriptionOptions(1)
	if o.ActivationDelay >= 0 || o.NotificationDelay != 3*time.Second || o.NotificationJitter != 0 || o.ExtraDelay != 10*time.Minute || o.DropRate != 0.1 || o.Seed == 0 {
		t.Errorf("subscription options %+v", o)
	}
	if got := w.FastPath.maxNotificationDelay(); got != 3*time.Second+time.Second+10*time.Minute {
		t.Errorf("maxNotificationDelay = %v", got)
	}
	if got := strings.Join(w.fastPathTypes(), ","); got != "Patient,Observation" {
		t.Errorf("fastPathTypes = %s, want the initial load's and the streams' types", got)
	}
	for _, bad := range []string{`{"on": true, "payload": "partial"}`, `{"on": true, "dropRate": 2}`, `{"on": true, "extraDelay": "-1s"}`} {
		if _, err := Parse([]byte(`{"name": "x", "fastPath": ` + bad + `}`)); err == nil {
			t.Errorf("fastPath %s accepted", bad)
		}
	}
}

// A fast-path delivery (export.jobId "Subscription/…") repeated by the fast
// path is a fastPath duplicate, one from each path a crossPath duplicate;
// the log keeps each path's first delivery.
func TestObserverTellsThePathsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		o := newObserver(start)
		o.fp = newFastPathLog()
		r := envelope.Resource{ResourceType: "Patient", ID: "a", VersionID: "1", LastUpdated: envelope.FormatTime(start), Raw: []byte(`{"resourceType":"Patient"}`)}
		deliver := func(job string, w envelope.Window) {
			time.Sleep(time.Second)
			d := envelope.AppendDetail(nil, r, w, envelope.ExportRef{DatastoreID: "ds", JobID: job}, nil)
			if err := o.Deliver(context.Background(), "bus", sink.Event{Detail: d}); err != nil {
				t.Fatal(err)
			}
		}
		instant := envelope.Window{Since: start.Add(-time.Millisecond), Until: start}
		deliver("Subscription/s1", instant)
		deliver("Subscription/s1", instant)
		deliver("job-1", envelope.Window{Since: start.Add(-time.Minute), Until: start.Add(time.Minute)})
		_, dup, _, _ := o.summary()
		if want := (Duplicates{Total: 2, FastPath: 1, CrossPath: 1}); dup != want {
			t.Errorf("duplicates %+v, want %+v", dup, want)
		}
		v := o.fp.versions[envelope.EventID("Patient", "a", "1")]
		if v.firstFast != start.Add(time.Second).UnixNano() || v.firstExport != start.Add(3*time.Second).UnixNano() || v.exports != 1 || len(o.windows) != 1 {
			t.Errorf("log %+v, %d windows numbered: want the fast path first at 1 s, one export delivery at 3 s, only its window numbered", v, len(o.windows))
		}
	})
}
