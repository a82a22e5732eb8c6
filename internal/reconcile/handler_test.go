package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	bucket = "artifacts"
	table  = "runs"
	bus    = "cdc-bus"
	dsID   = "ds1"
)

// rig is the reconcile Lambda over real SDK clients against the emulators:
// S3 and DynamoDB (localaws), EventBridge and HealthLake (ours). The full
// export is written the way HealthLake writes it: the data store's current
// resources as NDJSON, with the manifest parts check-export writes.
type rig struct {
	t    *testing.T
	s3   *s3.Client
	sink *fakeeventbridge.MemorySink
	ds   *fakehealthlake.Datastore
	h    *reconcile.Handler
	db   *dynamodb.Client
	// gw is the gateway in front of the emulators (its PeakRates).
	gw  *localaws.Gateway
	hl  *fakehealthlake.Emulator
	seq int
	ids []string // resource ids in the data store, also deleted ones
	// diffCtx, when set, gives each compare child its context (a Lambda's
	// deadline).
	diffCtx func() (context.Context, context.CancelFunc)
	// refined counts the count loop's answers asking for the refine step.
	refined int
	// before, when set, runs before the first call of the count or list
	// step, by action.
	before map[string]func()
}

func newRig(t *testing.T, partitions int) *rig {
	return newRigWith(t, partitions, nil)
}

func newRigWith(t *testing.T, partitions int, mutate func(*reconcile.Config)) *rig {
	t.Helper()
	return newRigClock(t, partitions, mutate, nil)
}

// newRigClock is newRigWith whose data store stamps writes with now
// (default time.Now).
func newRigClock(t *testing.T, partitions int, mutate func(*reconcile.Config), now func() time.Time) *rig {
	t.Helper()
	return newRigHealthLake(t, partitions, mutate, func(o *fakehealthlake.Options) { o.Now = now })
}

// newRigHealthLake is newRigWith whose HealthLake emulator takes the
// options hlMutate sets.
func newRigHealthLake(t *testing.T, partitions int, mutate func(*reconcile.Config), hlMutate func(*fakehealthlake.Options)) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	env.Gateway.Handle(localaws.ServiceEventBridge, fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink}))
	hlOpts := fakehealthlake.Options{Region: env.Region, AccountID: env.AccountID, Datastores: []string{dsID}}
	if hlMutate != nil {
		hlMutate(&hlOpts)
	}
	hl := fakehealthlake.New(hlOpts)
	env.Gateway.Handle(localaws.ServiceHealthLake, hl)
	ds, _ := hl.Datastore(dsID)
	cfg := env.Config()
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	ctx := context.Background()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	if err := runlock.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	hc, err := fhirrest.NewFromConfig(cfg, env.URL)
	if err != nil {
		t.Fatal(err)
	}
	rc := reconcile.Config{
		Bucket: bucket, Table: table, DatastoreID: dsID, Partitions: partitions,
		Publish: publish.Config{EventBus: bus},
	}
	if mutate != nil {
		mutate(&rc)
	}
	h, err := reconcile.New(s3c, db, hc, eventbridge.NewFromConfig(cfg), rc)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, s3: s3c, sink: sink, ds: ds, h: h, db: db, gw: env.Gateway, hl: hl}
}

func (r *rig) write(id string) {
	r.t.Helper()
	body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"active":true}`, id)
	if _, err := r.ds.Load("Patient", id, []byte(body)); err != nil {
		r.t.Fatal(err)
	}
	r.ids = append(r.ids, id)
}

// deliveredThenErased writes n Patients (ids prefix00, prefix01, …), has
// run-1 deliver them, then hard-deletes them all: deletions without history,
// which only the reconciliation can find.
func (r *rig) deliveredThenErased(prefix string, n int) {
	r.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%s%02d", prefix, i)
		r.write(id)
		ids = append(ids, id)
	}
	r.deliver("run-1", ids...)
	for _, id := range ids {
		r.ds.HardDelete("Patient", id)
	}
	time.Sleep(2 * time.Millisecond)
}

// deliver records what a run published for ids, as prepare-change does (D4).
func (r *rig) deliver(runID string, ids ...string) {
	r.t.Helper()
	var buf bytes.Buffer
	w := delivered.NewWriter(&buf, false)
	for _, id := range ids {
		body, ok := r.ds.Read("Patient", id)
		if !ok {
			r.t.Fatalf("deliver %s: not in the store", id)
		}
		var res struct {
			Meta struct{ VersionID, LastUpdated string } `json:"meta"`
		}
		_ = json.Unmarshal(body, &res)
		if err := w.Write(delivered.Entry{Type: "Patient", ID: id, VersionID: res.Meta.VersionID, LastUpdated: res.Meta.LastUpdated}); err != nil {
			r.t.Fatal(err)
		}
	}
	_ = w.Close()
	r.put(delivered.DeliveredKey(time.Now(), runID, "exports/"+runID+"/Patient-1.ndjson"), buf.Bytes())
}

func (r *rig) put(key string, body []byte) {
	r.t.Helper()
	if _, err := r.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		r.t.Fatal(err)
	}
}

func invoke[T any](t *testing.T, h *reconcile.Handler, in reconcile.Input) (T, error) {
	t.Helper()
	payload, _ := json.Marshal(in)
	raw, err := lambda.NewHandler(h.Handle).Invoke(context.Background(), payload)
	var out T
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return out, nil
}

// setCheckpoint writes RUN/STATE as the runs leave it: the checkpoint and
// the origin (the first checkpoint; SnapshotSince after a snapshot start).
func (r *rig) setCheckpoint(checkpoint, origin time.Time) {
	r.t.Helper()
	_, err := r.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "RUN"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "STATE"},
		"lastRunTime": &ddbtypes.AttributeValueMemberS{Value: envelope.FormatTime(checkpoint)},
		"origin":      &ddbtypes.AttributeValueMemberS{Value: envelope.FormatTime(origin)},
	}})
	if err != nil {
		r.t.Fatal(err)
	}
}

// reconcile runs the state machine's steps: plan, fold every partition,
// count and list until done, compare every partition, finish; with
// crashAfter ≥ 0 it stops after that many compared partitions (no finish).
func (r *rig) reconcile(runID string, checkpoint time.Time, crashAfter int) reconcile.Result {
	r.t.Helper()
	return r.reconcileFrom(runID, envelope.SnapshotSince, checkpoint, crashAfter)
}

// reconcileFrom is reconcile for a pipeline whose first checkpoint was origin.
func (r *rig) reconcileFrom(runID string, origin, checkpoint time.Time, crashAfter int) reconcile.Result {
	r.t.Helper()
	r.seq++
	r.setCheckpoint(checkpoint, origin)
	plan, err := invoke[reconcile.Plan](r.t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: runID,
		StartTime: envelope.FormatTime(time.Now().Add(time.Duration(r.seq) * time.Second))})
	if err != nil {
		r.t.Fatalf("plan: %v", err)
	}
	for _, p := range plan.PartitionList {
		if _, err := invoke[reconcile.Result](r.t, r.h, reconcile.Input{Action: reconcile.ActionFold, RunID: runID, Partition: p, Plan: &plan}); err != nil {
			r.t.Fatalf("fold partition %d: %v", p, err)
		}
	}
	for _, action := range []string{reconcile.ActionCount, reconcile.ActionList} {
		if f := r.before[action]; f != nil {
			f()
		}
		for i := 0; ; i++ {
			d, err := invoke[reconcile.Done](r.t, r.h, reconcile.Input{Action: action, RunID: runID, Plan: &plan})
			if err != nil {
				r.t.Fatalf("%s: %v", action, err)
			}
			if d.Done {
				break
			}
			if d.Refine {
				r.refined++
				for _, p := range plan.PartitionList {
					if _, err := invoke[reconcile.Result](r.t, r.h, reconcile.Input{Action: reconcile.ActionRefine, RunID: runID, Partition: p, Plan: &plan}); err != nil {
						r.t.Fatalf("refine partition %d: %v", p, err)
					}
				}
			}
			if i > 100 {
				r.t.Fatalf("%s is not done after 100 calls", action)
			}
		}
	}
	for _, p := range plan.PartitionList {
		if crashAfter >= 0 && p >= crashAfter {
			return reconcile.Result{}
		}
		if r.diffCtx != nil {
			ctx, cancel := r.diffCtx()
			_, err := r.h.Handle(ctx, reconcile.Input{Action: reconcile.ActionDiff, RunID: runID, Partition: p, Plan: &plan})
			cancel()
			if err != nil {
				r.t.Fatalf("diff partition %d: %v", p, err)
			}
			continue
		}
		if _, err := invoke[reconcile.Result](r.t, r.h, reconcile.Input{Action: reconcile.ActionDiff, RunID: runID, Partition: p, Plan: &plan}); err != nil {
			r.t.Fatalf("diff partition %d: %v", p, err)
		}
	}
	sum, err := invoke[reconcile.Result](r.t, r.h, reconcile.Input{Action: reconcile.ActionFinish, RunID: runID, Plan: &plan})
	if err != nil {
		r.t.Fatalf("finish: %v", err)
	}
	return sum
}

// published returns the operation and eventId of every event so far, sorted.
func (r *rig) published() []string {
	r.t.Helper()
	var out []string
	for _, ev := range r.sink.Events() {
		var d struct{ EventID, Operation, LastUpdated string }
		if err := json.Unmarshal(ev.Event.Detail, &d); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, d.Operation+" "+d.EventID)
	}
	sort.Strings(out)
	return out
}

func TestReconcileDeletesRepairsAndHardDeletes(t *testing.T) {
	r := newRig(t, 4)
	for _, id := range []string{"keep", "soft", "hard", "dropped", "late"} {
		r.write(id)
	}
	r.deliver("run-1", "keep", "soft", "hard", "late") // "dropped" was never delivered
	r.ds.Delete("Patient", "soft")
	r.ds.HardDelete("Patient", "hard")
	time.Sleep(2 * time.Millisecond)
	sum := r.reconcile("rec-1", time.Now(), -1)

	got := r.published()
	want := []string{"delete Patient/hard/_history/1-deleted", "delete Patient/soft/_history/2", "upsert Patient/dropped/_history/1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("published:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if sum.Repairs != 1 || sum.Deletes != 2 || sum.HardDeletes != 1 || sum.Store != 3 || sum.Unchanged != 2 {
		t.Fatalf("counts %+v", sum.Stats)
	}
	last, err := reconcile.Last(context.Background(), r.db, table)
	if err != nil || last == nil || last.RunID != "rec-1" || last.Counts.Repairs != 1 {
		t.Fatalf("RECONCILE/STATE = %+v, %v", last, err)
	}

	// The next reconciliation repeats no delete and no repair; a new
	// version before the checkpoint that no run delivered is repaired,
	// although the type's count did not change (it moved the resource to a
	// recent hour: the recent range's counts differ).
	time.Sleep(2 * time.Millisecond)
	r.write("late") // version 2
	time.Sleep(2 * time.Millisecond)
	sum = r.reconcile("rec-2", time.Now(), -1)
	if sum.Deletes != 0 || sum.Repairs != 1 {
		t.Fatalf("second reconciliation counts %+v", sum.Stats)
	}
	if got := r.published(); len(got) != 4 || got[3] != "upsert Patient/late/_history/2" {
		t.Fatalf("published after the second reconciliation: %v", got)
	}
}

func TestReconcileCrashAndRerunPublishesNoNewDelete(t *testing.T) {
	r := newRig(t, 8)
	var ids []string
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("p%02d", i)
		r.write(id)
		ids = append(ids, id)
	}
	r.deliver("run-1", ids...)
	for _, id := range ids[:20] {
		r.ds.Delete("Patient", id)
	}
	time.Sleep(2 * time.Millisecond)
	checkpoint := time.Now()
	r.reconcile("rec-1", checkpoint, 3) // crashes after 3 of 8 partitions, before finish
	first := r.published()
	if len(first) == 0 || len(first) >= 20 {
		t.Fatalf("the crashed reconciliation published %d deletes, want some of 20", len(first))
	}
	sum := r.reconcile("rec-2", checkpoint, -1) // the rerun
	got := r.published()
	distinct := map[string]int{}
	for _, e := range got {
		distinct[e]++
	}
	if len(distinct) != 20 {
		t.Fatalf("%d distinct delete events after the rerun, want 20", len(distinct))
	}
	for e, n := range distinct {
		if n != 1 {
			t.Errorf("%s published %d times: the rerun repeated a delete the crashed run had recorded", e, n)
		}
	}
	if sum.Deletes+sum.Gone != 20 || sum.Deletes != int64(20-len(first)) {
		t.Fatalf("rerun counts %+v after %d deletes of the crashed run", sum.Stats, len(first))
	}
}

func TestReconcileRefusesBeforeTheFirstCheckpoint(t *testing.T) {
	r := newRig(t, 2)
	r.write("a")
	_, err := invoke[reconcile.Plan](t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: "rec-x", StartTime: envelope.FormatTime(time.Now())})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("plan without a checkpoint: %v", err)
	}
}

// TestReconcileCountsOnlyWhereTheyDiffer: with everything delivered the
// reconciliation asks HealthLake two counts per type (the old and the
// recent range) and lists nothing; one delivered resource erased without
// history makes its range differ, and only that range is listed.
func TestReconcileCountsOnlyWhereTheyDiffer(t *testing.T) {
	r := newRig(t, 4)
	var ids []string
	for i := 0; i < 30; i++ {
		id := fmt.Sprintf("c%02d", i)
		r.write(id)
		ids = append(ids, id)
	}
	r.deliver("run-1", ids...)
	time.Sleep(2 * time.Millisecond)
	sum := r.reconcile("rec-1", time.Now(), -1)
	if sum.Leaves != 0 || sum.Listed != 0 || sum.Deletes+sum.Repairs != 0 {
		t.Fatalf("a store equal to what was delivered: %+v", sum)
	}
	if types := int64(len(r.h.Types())); sum.Queries > 2*types || sum.Queries < types {
		t.Fatalf("%d count queries for %d types, want one or two each", sum.Queries, types)
	}
	if sum.DeliveredLive != 30 {
		t.Fatalf("checked %d live delivered versions, want the 30 delivered", sum.DeliveredLive)
	}
	r.ds.HardDelete("Patient", "c07")
	time.Sleep(2 * time.Millisecond)
	sum = r.reconcile("rec-2", time.Now(), -1)
	if sum.Leaves != 1 || sum.Deletes != 1 || sum.HardDeletes != 1 || sum.Listed != 29 {
		t.Fatalf("after an erase: %+v", sum)
	}
	if got := r.published(); len(got) != 1 || got[0] != "delete Patient/c07/_history/1-deleted" {
		t.Fatalf("published %v", got)
	}
}

// TestReconcileRefinesABusyHour: an hour holding more resources than a
// leaf may (LeafMax) cannot be cut by the hour histograms; the count loop
// asks for the refine step once, cuts the hour by the minute, and lists only
// the minutes around the one difference — not the whole hour.
func TestReconcileRefinesABusyHour(t *testing.T) {
	r := busyHourRig(t)
	sum := r.reconcile("rec-1", time.Now(), -1)
	if sum.Deletes != 1 || sum.HardDeletes != 1 || sum.Repairs != 0 {
		t.Fatalf("after an erase in a busy hour: %+v", sum)
	}
	if got := r.published(); len(got) != 1 || got[0] != "delete Patient/b061/_history/1-deleted" {
		t.Fatalf("published %v", got)
	}
	if r.refined != 1 || sum.Refined != 1 {
		t.Errorf("the count loop asked for the refine step %d times and refined %d hours, want one each", r.refined, sum.Refined)
	}
	t.Logf("listed %d in %d leaves, %d queries", sum.Listed, sum.Leaves, sum.Queries)
	if sum.Listed > 10 || sum.Listed == 0 {
		t.Errorf("listed %d resources, want the minutes around the difference (at most LeafMax = 10), not the hour's 119", sum.Listed)
	}
}

// busyHourRig holds 120 resources written two a minute for an hour, three
// hours ago, all delivered, one of them (b061) since erased without
// history; leaves hold at most 10 resources.
func busyHourRig(t *testing.T) *rig {
	t.Helper()
	var mu sync.Mutex
	at := time.Now().Add(-3 * time.Hour)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	r := newRigClock(t, 4, func(c *reconcile.Config) { c.LeafMax = 10 }, clock)
	var ids []string
	for i := 0; i < 120; i++ {
		id := fmt.Sprintf("b%03d", i)
		r.write(id)
		ids = append(ids, id)
		mu.Lock()
		at = at.Add(30 * time.Second)
		mu.Unlock()
	}
	r.deliver("run-1", ids...)
	r.ds.HardDelete("Patient", "b061")
	mu.Lock()
	at = time.Now()
	mu.Unlock()
	return r
}

// TestReconcileCountWaitsForTheRefineStep: called again before the refine
// step ran (its answer lost, say), the count loop asks for it again, up to
// three times in all, and then fails; once the refine step ran it goes on.
func TestReconcileCountWaitsForTheRefineStep(t *testing.T) {
	r := busyHourRig(t)
	r.setCheckpoint(time.Now(), envelope.SnapshotSince)
	plan, err := invoke[reconcile.Plan](t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: "rec-w", StartTime: envelope.FormatTime(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.PartitionList {
		if _, err := invoke[reconcile.Result](t, r.h, reconcile.Input{Action: reconcile.ActionFold, RunID: "rec-w", Partition: p, Plan: &plan}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() (reconcile.Done, error) {
		return invoke[reconcile.Done](t, r.h, reconcile.Input{Action: reconcile.ActionCount, RunID: "rec-w", Plan: &plan})
	}
	for i := 1; i <= 3; i++ {
		d, err := count()
		if err != nil || d.Done || !d.Refine {
			t.Fatalf("call %d without the refine step: %+v %v, want a refine answer", i, d, err)
		}
	}
	if _, err := count(); err == nil || !strings.Contains(err.Error(), "refined histogram") {
		t.Fatalf("a fourth call without the refine step: %v, want it to fail", err)
	}
	for _, p := range plan.PartitionList {
		if _, err := invoke[reconcile.Result](t, r.h, reconcile.Input{Action: reconcile.ActionRefine, RunID: "rec-w", Partition: p, Plan: &plan}); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := count(); err != nil || !d.Done || d.Refine {
		t.Fatalf("after the refine step: %+v %v, want done", d, err)
	}
}

// TestReconcileFinishesTheHourPassBeforeRefining: refine candidates found
// before a deadline cut the hour pass short do not make the next call ask
// for the refine step: it counts the rest of the frontier first.
func TestReconcileFinishesTheHourPassBeforeRefining(t *testing.T) {
	r := busyHourRig(t)
	r.setCheckpoint(time.Now(), envelope.SnapshotSince)
	const runID = "rec-d"
	plan, err := invoke[reconcile.Plan](t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: runID, StartTime: envelope.FormatTime(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plan.PartitionList {
		if _, err := invoke[reconcile.Result](t, r.h, reconcile.Input{Action: reconcile.ActionFold, RunID: runID, Partition: p, Plan: &plan}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() reconcile.Done {
		d, err := invoke[reconcile.Done](t, r.h, reconcile.Input{Action: reconcile.ActionCount, RunID: runID, Plan: &plan})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := count(); !d.Refine {
		t.Fatalf("the busy hour: %+v, want a refine answer", d)
	}
	// Make the saved state one a deadline left: a range still to count,
	// the refine step not asked for yet.
	key := reconcile.Prefix + runID + "/count.json"
	st := map[string]any{}
	obj, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(obj.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	_ = obj.Body.Close()
	st["refineAsked"] = 0
	st["frontier"] = []reconcile.Range{{Type: "Observation", After: plan.Window.Since, Until: plan.Window.Until}}
	b, _ := json.Marshal(st)
	r.put(key, b)

	if d := count(); !d.Refine || d.Done {
		t.Fatalf("after the rest of the hour pass: %+v, want a refine answer", d)
	}
	obj, err = r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var after struct {
		Frontier    []reconcile.Range `json:"frontier"`
		RefineAsked int               `json:"refineAsked"`
	}
	if err := json.NewDecoder(obj.Body).Decode(&after); err != nil {
		t.Fatal(err)
	}
	_ = obj.Body.Close()
	if len(after.Frontier) != 0 || after.RefineAsked != 1 {
		t.Errorf("state after the call: %d ranges left, refine asked %d times; want the frontier counted, asked once", len(after.Frontier), after.RefineAsked)
	}
}

// TestReconcileStartsAtTheOrigin: a pipeline started at "now" (or a time)
// was never to publish what the store held before: the reconciliation
// repairs nothing older than RUN/STATE's origin, and repairs a version after
// it that no run delivered.
func TestReconcileStartsAtTheOrigin(t *testing.T) {
	r := newRig(t, 4)
	for i := 0; i < 20; i++ {
		r.write(fmt.Sprintf("old%02d", i)) // before the pipeline started
	}
	time.Sleep(2 * time.Millisecond)
	origin := time.Now()
	time.Sleep(2 * time.Millisecond)
	r.write("new-delivered")
	r.write("new-missed")
	r.deliver("run-1", "new-delivered")
	time.Sleep(2 * time.Millisecond)
	sum := r.reconcileFrom("rec-1", origin, time.Now(), -1)
	if got := r.published(); len(got) != 1 || got[0] != "upsert Patient/new-missed/_history/1" {
		t.Fatalf("published %v, want only the repair of the version after the origin", got)
	}
	if sum.Repairs != 1 || sum.Deletes != 0 {
		t.Fatalf("counts %+v", sum)
	}
}

// TestAMovedRecordComparesNothingOfTheOldStore: after `cdcctl replay
// --datastore` the origin is the time of the move. The old store's
// versions in the delivered index are all older, so resources the new
// store lacks (here: erased, no history) are not published as hard
// deletes; with the origin before them they would be.
func TestAMovedRecordComparesNothingOfTheOldStore(t *testing.T) {
	r := newRig(t, 4)
	r.write("old-a")
	r.write("old-b")
	r.deliver("run-1", "old-a", "old-b")
	before := time.Now()
	time.Sleep(2 * time.Millisecond)
	r.ds.HardDelete("Patient", "old-a") // absent from "the new store", no history
	r.ds.HardDelete("Patient", "old-b")
	moved := time.Now()
	time.Sleep(2 * time.Millisecond)
	r.write("new-1")
	r.deliver("run-2", "new-1")
	time.Sleep(2 * time.Millisecond)
	sum := r.reconcileFrom("rec-1", moved, time.Now(), -1)
	if got := r.published(); len(got) != 0 || sum.Deletes+sum.HardDeletes+sum.Repairs != 0 {
		t.Fatalf("after the move: published %v, counts %+v; want nothing about the old store", got, sum)
	}
	// The same index with the origin before the old versions: each is
	// taken for an erased resource of this store.
	sum = r.reconcileFrom("rec-2", before.Add(-time.Minute), time.Now(), -1)
	if sum.HardDeletes != 2 {
		t.Fatalf("with the origin before the old versions: %+v, want the two taken for hard deletes", sum)
	}
}

// TestReconcileTypeFilterChange: a type dropped from the filter is no
// longer compared (nothing is deleted for it); a type added is compared
// from the next reconciliation, and its versions no run delivered are
// repairs (docs/RECONCILE.md, "What it compares").
func TestReconcileTypeFilterChange(t *testing.T) {
	only := func(types ...string) func(*reconcile.Config) {
		return func(c *reconcile.Config) { c.Filter.Include = types }
	}
	r := newRigWith(t, 2, only("Observation"))
	r.write("p1")
	r.deliver("run-1") // nothing of Patient delivered: it was filtered out
	time.Sleep(2 * time.Millisecond)
	sum := r.reconcile("rec-1", time.Now(), -1)
	if len(r.published()) != 0 || sum.Queries != 2 {
		t.Fatalf("with Patient filtered out: published %v, %d queries (want 2: Observation's two ranges)", r.published(), sum.Queries)
	}
	r2 := newRigWith(t, 2, only("Observation", "Patient"))
	r2.write("p1")
	time.Sleep(2 * time.Millisecond)
	sum = r2.reconcile("rec-2", time.Now(), -1)
	if got := r2.published(); len(got) != 1 || got[0] != "upsert Patient/p1/_history/1" || sum.Repairs != 1 {
		t.Fatalf("with Patient added: published %v, counts %+v; want its resource repaired", got, sum)
	}
}

// With a read rate, a compare child confirms deletions no faster than it
// allows: the data store's read quota is shared with its other clients
// (ReconcileReadRate, docs/DEPLOY.md). Without one, the same confirmations
// arrive at once.
func TestReconcileConfirmsDeletionsAtItsReadRate(t *testing.T) {
	const deletes = 20
	// The most history reads and resource reads within one second.
	type peaks struct{ history, read int }
	run := func(rate float64) (p peaks, took time.Duration, sum reconcile.Result) {
		// One type: the changes since the checkpoint are one history page.
		r := newRigWith(t, 1, func(c *reconcile.Config) {
			c.ReadRate = rate
			c.Filter = change.Filter{Include: []string{"Patient"}}
		})
		r.deliveredThenErased("p", deletes)
		start := time.Now()
		sum = r.reconcile("rec-1", time.Now(), -1)
		rates := r.gw.PeakRates()
		return peaks{rates["healthlake:ReadHistory"], rates["healthlake:ReadResource"]}, time.Since(start), sum
	}
	// Each hard delete costs a history read and a resource read; the
	// type's history page is one more: 41 reads, 4 s at 10 a second.
	p, took, sum := run(10)
	if sum.HardDeletes != deletes || sum.Deferred != 0 {
		t.Fatalf("paced: %+v; want the %d hard deletes", sum, deletes)
	}
	if p.history > 11 || p.read > 11 || took < 3500*time.Millisecond {
		t.Errorf("at 10 reads/s: %+v within one second, 41 reads in %v; want at most 10 of each (and the slot in flight), and about 4 s", p, took)
	}
	p, _, sum = run(0)
	if sum.HardDeletes != deletes || p.history < deletes || p.read < deletes {
		t.Errorf("unpaced: %+v, %+v within one second; want the %d of each at once", sum, p, deletes)
	}
}

// TestReconcileSlowsDownWhenHealthLakeThrottles: on a data store created
// before 21 August 2023 (100 reads a second), an unpaced reconciliation's
// confirmations are throttled; they slow down instead of failing the
// reconciliation, every hard delete is published or deferred, and most
// reads are served at the first attempt.
func TestReconcileSlowsDownWhenHealthLakeThrottles(t *testing.T) {
	const deletes = 100
	// The emulator's clock runs at a quarter of real time: its 100 reads a
	// second are 25 a real second, well below what this machine sends.
	began := time.Now()
	slow := func() time.Time { return began.Add(time.Since(began) / 4) }
	r := newRigHealthLake(t, 1, func(c *reconcile.Config) {
		c.Filter = change.Filter{Include: []string{"Patient"}}
	}, func(o *fakehealthlake.Options) {
		o.Quotas = true
		o.Now = slow
		o.DatastoreCreatedAt = fakehealthlake.LegacyBefore.AddDate(0, -1, 0)
	})
	r.deliveredThenErased("t", deletes)
	sum := r.reconcile("rec-1", time.Now(), -1)
	throttled := r.hl.QuotaThrottles()["GET requests per data store"]
	t.Logf("rec-1: %+v; %d reads throttled", sum, throttled)
	if throttled == 0 {
		t.Fatal("no read was throttled: the test does not exercise the quota")
	}
	if sum.HardDeletes+sum.Deferred != deletes || sum.HardDeletes < deletes/2 || int64(len(r.published())) != sum.HardDeletes {
		t.Fatalf("rec-1: %+v, published %d; want all %d hard deletes published or deferred, most published", sum, len(r.published()), deletes)
	}
	// What a throttle deferred, the next reconciliation publishes; nothing
	// twice.
	for i := 2; sum.Deferred > 0 && i <= 4; i++ {
		sum = r.reconcile(fmt.Sprintf("rec-%d", i), time.Now(), -1)
	}
	if got := r.published(); len(got) != deletes || sum.Deferred != 0 {
		t.Errorf("after the next reconciliations: %d deletes published (%+v), want each of the %d once", len(got), sum, deletes)
	}
}

// TestPlanReadsAThrottledHistoryPageAgain: a history page HealthLake still
// throttles after the client's retries is read again at the slower pace
// (ThrottledPageRounds), not a failed plan; the reconciliation then
// publishes every hard delete.
func TestPlanReadsAThrottledHistoryPageAgain(t *testing.T) {
	const deletes = 5
	r := newRigHealthLake(t, 1, func(c *reconcile.Config) {
		c.Filter = change.Filter{Include: []string{"Patient"}}
	}, nil)
	r.deliveredThenErased("p", deletes)
	// The plan's first HealthLake call is the history page: throttled at
	// each of the client's 5 attempts, and at the first of the next round.
	r.hl.ThrottleNext(6)
	sum := r.reconcile("rec-1", time.Now(), -1)
	if sum.HardDeletes != deletes || len(r.published()) != deletes {
		t.Fatalf("%+v, published %d; want the %d hard deletes", sum, len(r.published()), deletes)
	}
}

// TestCountAndListSearchAgainWhenThrottled: a count or a search page
// HealthLake still throttles after the client's retries is made again at
// the slower pace within the step's call, not a failed step.
func TestCountAndListSearchAgainWhenThrottled(t *testing.T) {
	const deletes = 5
	r := newRigHealthLake(t, 1, func(c *reconcile.Config) {
		c.Filter = change.Filter{Include: []string{"Patient"}}
	}, nil)
	r.deliveredThenErased("s", deletes)
	// Each step's first search: throttled at each of the client's 5
	// attempts, and at the first of the next round.
	r.before = map[string]func(){
		reconcile.ActionCount: func() { r.hl.ThrottleNext(6) },
		reconcile.ActionList:  func() { r.hl.ThrottleNext(6) },
	}
	sum := r.reconcile("rec-1", time.Now(), -1)
	if sum.HardDeletes != deletes || len(r.published()) != deletes {
		t.Fatalf("%+v, published %d; want the %d hard deletes", sum, len(r.published()), deletes)
	}
}

// TestReconcileDefersWhatItCannotConfirmInTime: a compare child stops
// confirming deletions PublishReserve (and the margin) before its deadline;
// the candidates it did not reach stay as delivered (deferred, nothing
// published for them, no failure) and the next reconciliation publishes
// them.
func TestReconcileDefersWhatItCannotConfirmInTime(t *testing.T) {
	r := newRig(t, 2)
	r.deliveredThenErased("d", 10)
	// A deadline already inside the reserve: no time to confirm anything.
	r.diffCtx = func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), reconcile.DefaultDeadlineMargin+reconcile.PublishReserve-time.Second)
	}
	sum := r.reconcile("rec-1", time.Now(), -1)
	if sum.Deferred != 10 || sum.Deletes != 0 || len(r.published()) != 0 {
		t.Fatalf("with no time to confirm: %+v, published %v; want 10 deferred, nothing published", sum, r.published())
	}
	r.diffCtx = nil
	sum = r.reconcile("rec-2", time.Now(), -1)
	if sum.Deletes != 10 || sum.HardDeletes != 10 || sum.Deferred != 0 || len(r.published()) != 10 {
		t.Fatalf("the next reconciliation: %+v, published %d; want the 10 deletes", sum, len(r.published()))
	}
}
