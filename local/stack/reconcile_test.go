package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// The end-to-end tests of deletes and the reconciliation (docs/RECONCILE.md,
// issue 12 item 4): the whole stack, both state machines, real SDK clients,
// IAM enforced.

// change is one delivered event's detail, upsert or delete.
type change struct {
	EventID      string `json:"eventId"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resourceType"`
	ResourceID   string `json:"resourceId"`
	VersionID    string `json:"versionId"`
	LastUpdated  string `json:"lastUpdated"`
}

func changesOf(t *testing.T, ds []sink.Delivery) []change {
	t.Helper()
	out := make([]change, 0, len(ds))
	for _, d := range ds {
		var c change
		if err := json.Unmarshal(d.Event.Detail, &c); err != nil {
			t.Fatalf("detail of %s: %v", d.Event.ID, err)
		}
		out = append(out, c)
	}
	return out
}

// of returns the changes of one resource, in delivery order.
func of(cs []change, typ, id string) []change {
	var out []change
	for _, c := range cs {
		if c.ResourceType == typ && c.ResourceID == id {
			out = append(out, c)
		}
	}
	return out
}

func ops(cs []change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Operation + " " + c.VersionID
	}
	return out
}

// putPatient writes a small Patient and returns its version.
func putPatient(t *testing.T, st *Stack, id string) string {
	t.Helper()
	v, err := st.PutResource(context.Background(), "Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deleteResource deletes through the FHIR API, as a client of HealthLake
// would, and waits until the clock has passed the deletion's time.
func deleteResource(t *testing.T, st *Stack, typ, id string) {
	t.Helper()
	resp, err := st.FHIR(context.Background(), http.MethodDelete, typ+"/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE %s/%s: HTTP %d", typ, id, resp.StatusCode)
	}
	time.Sleep(5 * time.Millisecond)
}

// reconcileNow runs one reconciliation and requires that it finished.
func reconcileNow(t *testing.T, st *Stack) Reconciliation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := st.Reconcile(ctx)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if !r.Finished() {
		t.Fatalf("reconciliation did not finish: %+v (denied %v)", r, st.IAM.DeniedKeys())
	}
	return r
}

func committed(t *testing.T, st *Stack) report.Window {
	t.Helper()
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" {
		t.Fatalf("window = %+v", w)
	}
	return w
}

// reconcileStack is a small stack for the reconciliation tests.
func reconcileStack(t *testing.T, mutate func(*Options)) *Stack {
	return startStack(t, func(o *Options) {
		o.SampleSize = 8
		o.LambdaEnv = map[string]string{"CDC_RECONCILE_PARTITIONS": "4"}
		if mutate != nil {
			mutate(o)
		}
	})
}

// TestReconcileDeleteInALaterWindow: a resource created in one window and
// deleted before a later one gets exactly one delete event from the next
// reconciliation, with the DELETE's version from the instance history and
// a version above every upsert; a second reconciliation sends nothing.
func TestReconcileDeleteInALaterWindow(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	v1 := putPatient(t, st, "rec-later")
	committed(t, st)
	deleteResource(t, st, "Patient", "rec-later")
	committed(t, st) // the run sees no trace of the deletion
	before := st.Delivered.Len()
	r := reconcileNow(t, st)
	got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-later")
	if len(got) != 1 || got[0].Operation != events.OperationDelete {
		t.Fatalf("reconciliation delivered %v for the deleted resource, want one delete", ops(got))
	}
	if got[0].VersionID == v1 || got[0].EventID != events.EventID("Patient", "rec-later", got[0].VersionID) {
		t.Errorf("delete event %+v: want the DELETE's own version (not %s) in its eventId", got[0], v1)
	}
	if r.Last.Counts.Deletes != 1 || r.Last.Counts.Repairs != 0 {
		t.Errorf("counts = %+v, want 1 delete, 0 repairs", r.Last.Counts)
	}
	before = st.Delivered.Len()
	r2 := reconcileNow(t, st)
	if n := st.Delivered.Len() - before; n != 0 || r2.Last.Counts.Deletes != 0 {
		t.Errorf("second reconciliation delivered %d events, counts %+v", n, r2.Last.Counts)
	}
}
