package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/internal/healthlake"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
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
	seq  int
	ids  []string // resource ids in the data store, also deleted ones
}

func newRig(t *testing.T, partitions int) *rig {
	t.Helper()
	env := localaws.StartTest(t)
	sink := &fakeeventbridge.MemorySink{}
	env.Gateway.Handle(localaws.ServiceEventBridge, fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink}))
	hl := fakehealthlake.New(fakehealthlake.Options{Region: env.Region, AccountID: env.AccountID, Datastores: []string{dsID}})
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
	hc, err := healthlake.NewFromConfig(cfg, env.URL)
	if err != nil {
		t.Fatal(err)
	}
	h, err := reconcile.New(s3c, db, hc, eventbridge.NewFromConfig(cfg), reconcile.Config{
		Bucket: bucket, Table: table, DatastoreID: dsID, Partitions: partitions,
		Publish: publish.Config{EventBus: bus},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, s3: s3c, sink: sink, ds: ds, h: h, db: db}
}

func (r *rig) write(id string) {
	r.t.Helper()
	body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"active":true}`, id)
	if _, err := r.ds.Load("Patient", id, []byte(body)); err != nil {
		r.t.Fatal(err)
	}
	r.ids = append(r.ids, id)
}

// deliver records what a run published for ids, as prepare-change does (D4).
func (r *rig) deliver(runID string, ids ...string) {
	r.t.Helper()
	var buf bytes.Buffer
	w := reconcile.NewWriter(&buf, false)
	for _, id := range ids {
		body, ok := r.ds.Read("Patient", id)
		if !ok {
			r.t.Fatalf("deliver %s: not in the store", id)
		}
		var res struct {
			Meta struct{ VersionID, LastUpdated string } `json:"meta"`
		}
		_ = json.Unmarshal(body, &res)
		if err := w.Write(reconcile.Entry{Type: "Patient", ID: id, VersionID: res.Meta.VersionID, LastUpdated: res.Meta.LastUpdated}); err != nil {
			r.t.Fatal(err)
		}
	}
	_ = w.Close()
	r.put(reconcile.DeliveredKey(runID, "exports/"+runID+"/Patient-1.ndjson"), buf.Bytes())
}

func (r *rig) put(key string, body []byte) {
	r.t.Helper()
	if _, err := r.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		r.t.Fatal(err)
	}
}

// export writes the store's current resources as a full export in two
// files and one manifest part, and returns the export wait's output.
func (r *rig) export(runID string) manifest.Export {
	r.t.Helper()
	var files [2]strings.Builder
	n := 0
	for _, id := range r.ids {
		if body, ok := r.ds.Read("Patient", id); ok {
			files[n%2].Write(body)
			files[n%2].WriteByte('\n')
			n++
		}
	}
	var batch manifest.Batch
	for i, f := range files {
		key := fmt.Sprintf("exports/%s-FHIR_EXPORT-%s/Patient/Patient-%d.ndjson", dsID, runID, i)
		r.put(key, []byte(f.String()))
		batch.Files = append(batch.Files, manifest.File{Bucket: bucket, Key: key, ResourceType: "Patient", Bytes: int64(f.Len())})
	}
	part, _ := json.Marshal([]manifest.Batch{batch})
	r.put(manifest.PartKey(runID, 0), part)
	return manifest.Export{Bucket: bucket, ManifestKey: manifest.PartKey(runID, 0), ManifestRunID: runID, Parts: 1,
		PartFiles: []int{2}, FileCount: 2, BatchCount: 1, JobID: "job-" + runID, DatastoreID: dsID}
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

// reconcile runs the state machine's steps after the export wait; with
// crashAfter ≥ 0 it stops after that many partitions (no finish).
func (r *rig) reconcile(runID string, checkpoint time.Time, crashAfter int) reconcile.Result {
	r.t.Helper()
	r.seq++
	exp := r.export(runID)
	w := events.Window{Since: events.SnapshotSince, Until: checkpoint}
	plan, err := invoke[reconcile.Plan](r.t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: runID, Window: &w, Export: &exp,
		StartTime: events.FormatTime(time.Now().Add(time.Duration(r.seq) * time.Second))})
	if err != nil {
		r.t.Fatalf("plan: %v", err)
	}
	var batches []manifest.Batch
	obj, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(plan.BatchesKey)})
	if err != nil {
		r.t.Fatal(err)
	}
	_ = json.NewDecoder(obj.Body).Decode(&batches)
	obj.Body.Close()
	for i, b := range batches {
		if _, err := invoke[reconcile.Result](r.t, r.h, reconcile.Input{Action: reconcile.ActionIndex, RunID: runID, Files: b.Files, Batch: i, Plan: &plan}); err != nil {
			r.t.Fatalf("index batch %d: %v", i, err)
		}
	}
	for _, p := range plan.PartitionList {
		if crashAfter >= 0 && p >= crashAfter {
			return reconcile.Result{}
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
	checkpoint := time.Now().Add(time.Hour)
	sum := r.reconcile("rec-1", checkpoint, -1)

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
	// version before the checkpoint that no run delivered is repaired.
	r.write("late") // version 2
	sum = r.reconcile("rec-2", checkpoint, -1)
	if sum.Deletes != 0 || sum.Gone != 2 || sum.Repairs != 1 || sum.Unchanged != 2 {
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
	checkpoint := time.Now().Add(time.Hour)
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

func TestReconcileRefusesAnExportWithErrors(t *testing.T) {
	r := newRig(t, 2)
	r.write("a")
	exp := r.export("rec-x")
	exp.CompletedWithErrors = true
	w := events.Window{Since: events.SnapshotSince, Until: time.Now()}
	_, err := invoke[reconcile.Plan](t, r.h, reconcile.Input{Action: reconcile.ActionPlan, RunID: "rec-x", Window: &w, Export: &exp, StartTime: events.FormatTime(time.Now())})
	if err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("plan of an export with errors: %v", err)
	}
}
