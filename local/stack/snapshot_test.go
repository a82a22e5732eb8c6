package stack

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// A fresh deployment with no initial checkpoint configured takes a snapshot:
// its first run exports the whole store without _since and publishes every
// resource once, as an upsert; the next run continues incrementally from the
// first run's until and delivers only what changed.
func TestFreshStackWithoutCheckpointSnapshotsThenContinues(t *testing.T) {
	st := startStack(t, func(o *Options) {
		// As deployed with no InitialCheckpoint: the Lambda's default.
		o.LambdaEnv = map[string]string{"CDC_INITIAL_CHECKPOINT": ""}
	})
	first := runWindow(t, st)
	if first.Status != "SUCCEEDED" || first.Outcome != report.OutcomeCommitted || first.Window == nil {
		t.Fatalf("first window = %+v", first)
	}
	if first.Window.Since != envelope.FormatTime(envelope.SnapshotSince) {
		t.Errorf("first window since %s, want the snapshot since %s", first.Window.Since, envelope.FormatTime(envelope.SnapshotSince))
	}
	starts := st.HealthLake.RequestsFor("StartExport")
	if len(starts) != 1 {
		t.Fatalf("%d exports started by the first run", len(starts))
	}
	if q, _ := url.ParseQuery(starts[0].Query); q.Has("_since") {
		t.Errorf("snapshot export has _since: ?%s", starts[0].Query)
	}
	ids := st.Delivered.EventIDs()
	if st.Seeded() != 24 || len(ids) != st.Seeded() {
		t.Fatalf("%d distinct events for %d seeded resources", len(ids), st.Seeded())
	}
	var someID, someType string
	for _, d := range st.Delivered.Deliveries() {
		det := decodeDetail(t, d)
		if ids[det.EventID] != 1 || !strings.HasSuffix(det.EventID, "/_history/1") || len(det.Resource) == 0 {
			t.Errorf("%s delivered %d times (resource %d bytes)", det.EventID, ids[det.EventID], len(det.Resource))
		}
		var op struct{ Operation string }
		if err := json.Unmarshal(d.Event.Detail, &op); err != nil || op.Operation != envelope.OperationUpsert {
			t.Errorf("%s: operation %q, want upsert", det.EventID, op.Operation)
		}
		someType, someID = det.ResourceType, det.ResourceID
	}
	cp, err := st.Checkpoint(context.Background())
	if err != nil || envelope.FormatTime(cp) != first.Window.Until {
		t.Fatalf("checkpoint after the snapshot = %v (%v), want the window's until %s", cp, err, first.Window.Until)
	}

	// Changes after the snapshot: one update, one new resource.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cur, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ok {
		t.Fatal("no data store")
	}
	body, ok := cur.Read(someType, someID)
	if !ok {
		t.Fatalf("seeded resource not readable")
	}
	v2, err := st.PutResource(ctx, someType, someID, body)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := st.PutResource(ctx, "Patient", "after-snapshot", []byte(`{"resourceType":"Patient","id":"after-snapshot"}`))
	if err != nil {
		t.Fatal(err)
	}
	before := len(st.Delivered.Deliveries())
	second := runWindow(t, st)
	if second.Status != "SUCCEEDED" || second.Window == nil || second.Window.Since != first.Window.Until {
		t.Fatalf("second window = %+v, want it to start at %s", second, first.Window.Until)
	}
	starts = st.HealthLake.RequestsFor("StartExport")
	if q, _ := url.ParseQuery(starts[len(starts)-1].Query); !q.Has("_since") {
		t.Errorf("incremental export without _since: ?%s", starts[len(starts)-1].Query)
	}
	var got []string
	for _, d := range st.Delivered.Deliveries()[before:] {
		got = append(got, decodeDetail(t, d).EventID)
	}
	want := map[string]bool{envelope.EventID(someType, someID, v2): true, envelope.EventID("Patient", "after-snapshot", v1): true}
	if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
		t.Errorf("second window delivered %v, want only %v", got, want)
	}
}
