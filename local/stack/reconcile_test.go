package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
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

// eraseResource removes a resource and its history with HealthLake's
// `$erase`, as a client would.
func eraseResource(t *testing.T, st *Stack, typ, id string) {
	t.Helper()
	resp, err := st.FHIR(context.Background(), http.MethodPost, typ+"/"+id+"/$erase", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("$erase %s/%s: HTTP %d", typ, id, resp.StatusCode)
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

func committed(t *testing.T, st *Stack) report.Run {
	t.Helper()
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" {
		t.Fatalf("window = %+v", w)
	}
	return w
}

// dropDeliveredIndex deletes the delivered-index objects the window runID
// wrote (as if it had never recorded what it published) and returns how
// many there were.
func dropDeliveredIndex(t *testing.T, st *Stack, runID string) int {
	t.Helper()
	ctx := context.Background()
	out, err := st.s3c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(st.Res.Bucket), Prefix: aws.String(delivered.DayPrefix(time.Now()) + runID + "/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if _, err := st.s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(st.Res.Bucket), Key: o.Key}); err != nil {
			t.Fatal(err)
		}
	}
	return len(out.Contents)
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

// TestDeleteReachesConsumersFromItsOwnWindow: a delete is published by the
// window it happens in (its delete scan reads the type's history), with the
// DELETE's own version in its eventId, before that window's checkpoint
// commits; the reconciliation after it finds it delivered and sends nothing.
func TestDeleteReachesConsumersFromItsOwnWindow(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	v1 := putPatient(t, st, "rec-later")
	committed(t, st)
	before := st.Delivered.Len()
	deleteResource(t, st, "Patient", "rec-later")
	committed(t, st)
	got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-later")
	if len(got) != 1 || got[0].Operation != envelope.OperationDelete {
		t.Fatalf("the window delivered %v for the deleted resource, want one delete", ops(got))
	}
	if got[0].VersionID == v1 || got[0].EventID != envelope.EventID("Patient", "rec-later", got[0].VersionID) {
		t.Errorf("delete event %+v: want the DELETE's own version (not %s) in its eventId", got[0], v1)
	}
	before = st.Delivered.Len()
	r := reconcileNow(t, st)
	if n := st.Delivered.Len() - before; n != 0 || r.Last.Counts.Deletes != 0 || r.Last.Counts.Repairs != 0 {
		t.Errorf("the reconciliation delivered %d events, counts %+v; want none", n, r.Last.Counts)
	}
}

// TestReconcileCreateThenDeleteInOneWindow: a resource created and deleted
// before any window saw it is never announced, so nothing is to be removed:
// neither the run nor the reconciliation sends anything for it.
func TestReconcileCreateThenDeleteInOneWindow(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	before := st.Delivered.Len()
	putPatient(t, st, "rec-brief")
	deleteResource(t, st, "Patient", "rec-brief")
	committed(t, st)
	r := reconcileNow(t, st)
	if got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-brief"); len(got) != 0 {
		t.Errorf("delivered %v for a resource no window saw", ops(got))
	}
	if r.Last.Counts.Deletes != 0 || r.Last.Counts.Repairs != 0 {
		t.Errorf("counts = %+v", r.Last.Counts)
	}
}

// TestReconcileCreateAndDeleteBetweenReconciliations: after a first
// reconciliation, a resource delivered by a run and then deleted gets its
// delete from the window of the deletion, and the next reconciliation sends
// nothing more; one created and deleted with no window in between is never
// announced and gets nothing from either.
func TestReconcileCreateAndDeleteBetweenReconciliations(t *testing.T) {
	t.Parallel()
	st := reconcileStack(t, nil)
	committed(t, st)
	reconcileNow(t, st)
	before := st.Delivered.Len()
	putPatient(t, st, "rec-between")
	committed(t, st)
	deleteResource(t, st, "Patient", "rec-between")
	putPatient(t, st, "rec-unseen")
	deleteResource(t, st, "Patient", "rec-unseen")
	committed(t, st)
	r := reconcileNow(t, st)
	all := changesOf(t, st.Delivered.Since(before))
	if got := of(all, "Patient", "rec-between"); len(got) != 2 || got[0].Operation != envelope.OperationUpsert || got[1].Operation != envelope.OperationDelete {
		t.Errorf("rec-between: %v, want upsert then delete", ops(got))
	}
	if got := of(all, "Patient", "rec-unseen"); len(got) != 0 {
		t.Errorf("rec-unseen: %v, want nothing", ops(got))
	}
	if r.Last.Counts.Deletes != 0 {
		t.Errorf("counts = %+v, want no delete left for the reconciliation", r.Last.Counts)
	}
}

// TestReconcileHardDelete: a resource removed with its whole history still
// gets one delete event, with the documented eventId rule
// ({last delivered version}-deleted), counted as a hard delete.
func TestReconcileHardDelete(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	v := putPatient(t, st, "rec-hard")
	committed(t, st)
	ds, _ := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ds.HardDelete("Patient", "rec-hard") {
		t.Fatal("hard delete: no such resource")
	}
	before := st.Delivered.Len()
	r := reconcileNow(t, st)
	got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-hard")
	want := envelope.HardDeleteVersion(v)
	if len(got) != 1 || got[0].Operation != envelope.OperationDelete || got[0].VersionID != want ||
		got[0].EventID != envelope.EventID("Patient", "rec-hard", want) {
		t.Fatalf("hard delete delivered %v, want one delete %s", ops(got), want)
	}
	if r.Last.Counts.Deletes != 1 || r.Last.Counts.HardDeletes != 1 {
		t.Errorf("counts = %+v", r.Last.Counts)
	}
	// The next reconciliation knows it is gone.
	before = st.Delivered.Len()
	reconcileNow(t, st)
	if n := st.Delivered.Len() - before; n != 0 {
		t.Errorf("second reconciliation delivered %d events", n)
	}
}

// TestReconcileRepairsADroppedEvent: a window delivers one resource; its
// delivered-index record is then removed, which is what the reconciliation
// sees of an event that never reached the bus. The next reconciliation
// re-publishes that version with its normal eventId, counts it and emits
// ReconcileRepairs (the alarm's metric); the one after repairs nothing.
func TestReconcileRepairsADroppedEvent(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	reconcileNow(t, st)
	v := putPatient(t, st, "rec-dropped")
	w := committed(t, st)
	if w.Events != 1 {
		t.Fatalf("window delivered %d events, want the one change", w.Events)
	}
	if removed := dropDeliveredIndex(t, st, w.RunID); removed != 1 {
		t.Fatalf("the window wrote %d delivered-index objects, want 1", removed)
	}
	repairsBefore := st.Metrics.Totals()[metrics.ReconcileRepairs]
	before := st.Delivered.Len()
	r := reconcileNow(t, st)
	got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-dropped")
	if len(got) != 1 || got[0].Operation != envelope.OperationUpsert || got[0].EventID != envelope.EventID("Patient", "rec-dropped", v) {
		t.Fatalf("repair delivered %v, want the upsert of version %s", ops(got), v)
	}
	if n := st.Delivered.Len() - before; n != 1 {
		t.Errorf("reconciliation delivered %d events, want only the repair", n)
	}
	if r.Last.Counts.Repairs != 1 || st.Metrics.Totals()[metrics.ReconcileRepairs]-repairsBefore != 1 {
		t.Errorf("counts %+v, ReconcileRepairs metric %v → %v", r.Last.Counts, repairsBefore, st.Metrics.Totals()[metrics.ReconcileRepairs])
	}
	before = st.Delivered.Len()
	r2 := reconcileNow(t, st)
	if n := st.Delivered.Len() - before; n != 0 || r2.Last.Counts.Repairs != 0 {
		t.Errorf("the next reconciliation delivered %d events, counts %+v", n, r2.Last.Counts)
	}
}

// TestReconcileCrashAndRerun: a reconciliation stopped once it has
// published a delete (an abort: no failure handler) leaves RECONCILE/STATE
// alone; the next one completes the deletes; each erased resource has one
// delete eventId (a re-sent one is the same id), and a third reconciliation
// sends nothing.
func TestReconcileCrashAndRerun(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("rec-crash-%d", i)
		putPatient(t, st, id)
		ids = append(ids, id)
	}
	committed(t, st)
	for _, id := range ids {
		eraseResource(t, st, "Patient", id) // no history: the reconciliation's
	}
	committed(t, st)
	before := st.Delivered.Len()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	arn, err := st.StartReconciliation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a first delete", func() bool {
		for _, c := range changesOf(t, st.Delivered.Since(before)) {
			if c.Operation == envelope.OperationDelete {
				return true
			}
		}
		return false
	})
	if err := st.SFN.StopExecution(arn, "Test.Crash", "stopped mid-reconciliation"); err != nil {
		t.Fatal(err)
	}
	r := reconcileNow(t, st)
	all := changesOf(t, st.Delivered.Since(before))
	for _, id := range ids {
		got := of(all, "Patient", id)
		distinct := map[string]bool{}
		for _, c := range got {
			if c.Operation != envelope.OperationDelete {
				t.Errorf("%s: %s after its deletion", id, c.Operation)
			}
			distinct[c.EventID] = true
		}
		if len(distinct) != 1 {
			t.Errorf("%s: delete eventIds %v, want exactly one", id, distinct)
		}
	}
	if r.RunID == "" || r.Last.RunID != r.RunID {
		t.Errorf("RECONCILE/STATE %+v does not name the rerun %s", r.Last, r.RunID)
	}
	before = st.Delivered.Len()
	reconcileNow(t, st)
	if n := st.Delivered.Len() - before; n != 0 {
		t.Errorf("third reconciliation delivered %d events", n)
	}
	if n := st.IAM.DeniedTotal(); n != 0 {
		t.Errorf("%d calls denied: %v", n, st.IAM.Denials())
	}
}

// startRunHoldingTheLock starts a window run and returns once its export
// exists (the run holds the lock): its execution ARN and the deliveries
// before it.
func startRunHoldingTheLock(ctx context.Context, t *testing.T, st *Stack) (arn string, before int) {
	t.Helper()
	jobs := len(st.HealthLake.Jobs())
	before = st.Delivered.Len()
	arn, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run's export", func() bool { return len(st.HealthLake.Jobs()) > jobs })
	return arn, before
}

// TestReplayAfterDeletesDoesNotResurrect: a resource updated, deleted and
// reconciled; replaying the windows that delivered its upserts re-exports
// only what the store holds, so nothing of it is published again. A
// consumer that applies "the higher version wins" to everything it ever
// received (including an archive replay of the old upserts) keeps it
// deleted: the delete's version is above every upsert's.
func TestReplayAfterDeletesDoesNotResurrect(t *testing.T) {
	t.Parallel()
	st := reconcileStack(t, nil)
	first := committed(t, st)
	putPatient(t, st, "rec-replay")
	committed(t, st)
	putPatient(t, st, "rec-replay") // version 2
	committed(t, st)
	deleteResource(t, st, "Patient", "rec-replay")
	committed(t, st)
	reconcileNow(t, st)
	history := of(changesOf(t, st.Delivered.Deliveries()), "Patient", "rec-replay")
	if len(history) != 3 || history[2].Operation != envelope.OperationDelete {
		t.Fatalf("history %v, want two upserts and a delete", ops(history))
	}
	del, _ := strconv.Atoi(history[2].VersionID)
	for _, c := range history[:2] {
		if v, err := strconv.Atoi(c.VersionID); err != nil || v >= del {
			t.Errorf("upsert version %s is not below the delete's %s", c.VersionID, history[2].VersionID)
		}
	}

	cdcctl(t, st, "replay", "--since", first.Window.Since, "--reason", "replay after deletes")
	before := st.Delivered.Len()
	if w := runWindow(t, st); w.Status != "SUCCEEDED" {
		t.Fatalf("replayed window %+v", w)
	}
	if got := of(changesOf(t, st.Delivered.Since(before)), "Patient", "rec-replay"); len(got) != 0 {
		t.Errorf("the replay re-published %v of a deleted resource", ops(got))
	}
	// Every delivery ever, old upserts first again (as an archive replay
	// would add them), folded by the consumer rule.
	all := append(changesOf(t, st.Delivered.Deliveries()), history[:2]...)
	state := map[string]change{}
	for _, c := range all {
		k := c.ResourceType + "/" + c.ResourceID
		cur, ok := state[k]
		cv, _ := strconv.Atoi(cur.VersionID)
		nv, _ := strconv.Atoi(c.VersionID)
		if !ok || nv > cv {
			state[k] = c
		}
	}
	if c := state["Patient/rec-replay"]; c.Operation != envelope.OperationDelete {
		t.Errorf("consumer state of the deleted resource = %+v, want deleted", c)
	}
}

// TestCdcctlReconcileWithEndpointAlone: `cdcctl reconcile --wait --endpoint
// URL` with nothing else in its environment finds the reconciliation's state
// machine and the table through /_local/config, runs one and prints its
// counts; `reconcile status` shows it.
func TestCdcctlReconcileWithEndpointAlone(t *testing.T) {
	st := reconcileStack(t, nil)
	committed(t, st)
	putPatient(t, st, "rec-ctl")
	committed(t, st)
	eraseResource(t, st, "Patient", "rec-ctl") // no history: the reconciliation's to find
	committed(t, st)
	out := cdcctlWithEnv(t, st, nil, "reconcile", "--wait")
	for _, want := range []string{"ended SUCCEEDED", "deletes              1 (hard deletes 1)", "repairs              0"} {
		if !strings.Contains(out, want) {
			t.Errorf("cdcctl reconcile --wait lacks %q:\n%s", want, out)
		}
	}
	if out := cdcctlWithEnv(t, st, nil, "reconcile", "status"); !strings.Contains(out, "deletes              1") {
		t.Errorf("cdcctl reconcile status:\n%s", out)
	}
}

// TestDeletesWithoutHistoryComeFromTheReconciliation: a type opted out of
// history and a resource removed with `$erase` leave nothing for the window's
// delete scan; the next reconciliation finds each gone from the store,
// confirms it by reading it (410 / 404), and publishes its delete. A live
// resource of the opted-out type (its history says nothing of a deletion)
// is never reported deleted.
func TestDeletesWithoutHistoryComeFromTheReconciliation(t *testing.T) {
	st := reconcileStack(t, func(o *Options) { o.HistoryOptOut = []string{"Patient"} })
	committed(t, st)
	putPatient(t, st, "opted-out-gone")
	putPatient(t, st, "opted-out-live")
	obs := `{"resourceType":"Observation","id":"erased","status":"final","code":{"text":"x"}}`
	vObs, err := st.PutResource(context.Background(), "Observation", "erased", []byte(obs))
	if err != nil {
		t.Fatal(err)
	}
	committed(t, st)
	deleteResource(t, st, "Patient", "opted-out-gone")
	eraseResource(t, st, "Observation", "erased")
	before := st.Delivered.Len()
	committed(t, st)
	if got := changesOf(t, st.Delivered.Since(before)); len(of(got, "Patient", "opted-out-gone")) != 0 || len(of(got, "Observation", "erased")) != 0 {
		t.Fatalf("the window published %v: a deletion without history cannot be seen there", ops(got))
	}
	before = st.Delivered.Len()
	r := reconcileNow(t, st)
	all := changesOf(t, st.Delivered.Since(before))
	if got := of(all, "Patient", "opted-out-gone"); len(got) != 1 || got[0].Operation != envelope.OperationDelete {
		t.Errorf("opted-out deletion: %v, want one delete", ops(got))
	}
	if got := of(all, "Observation", "erased"); len(got) != 1 || got[0].Operation != envelope.OperationDelete || got[0].VersionID != envelope.HardDeleteVersion(vObs) {
		t.Errorf("erased: %v, want one delete %s", ops(got), envelope.HardDeleteVersion(vObs))
	}
	if got := of(all, "Patient", "opted-out-live"); len(got) != 0 {
		t.Errorf("a live resource of the opted-out type got %v", ops(got))
	}
	if r.Last.Counts.Deletes != 2 {
		t.Errorf("counts = %+v, want 2 deletes", r.Last.Counts)
	}
}
