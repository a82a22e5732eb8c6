package runctl

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// exportWorld is a run-lock handler whose canceller is the real
// exportjob.Canceller over the HealthLake emulator and the export ledger.
type exportWorld struct {
	*fixture
	hl     *fakehealthlake.Emulator
	client *fhirrest.Client
	ledger *exportjob.Ledger
	table  string
}

func newExportWorld(t *testing.T) *exportWorld {
	t.Helper()
	ctx := context.Background()
	env := localawstest.Start(t)
	awsCfg := env.Config()
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Fatal(err)
	}
	hl := fakehealthlake.New(fakehealthlake.Options{S3: s3c, Datastores: []string{"ds1"}, Manual: true, Region: env.Region, AccountID: env.AccountID})
	env.Gateway.Handle(localaws.ServiceHealthLake, hl)
	db := dynamodb.NewFromConfig(awsCfg)
	table := fmt.Sprintf("runctl-exp-%d", tableSeq.Add(1))
	if err := runlock.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	w := &exportWorld{fixture: &fixture{owners: &owners{m: map[string]string{}}, results: &fakeResults{}}, hl: hl, table: table}
	w.logs, w.emf = &bytes.Buffer{}, &bytes.Buffer{}
	st, err := runlock.New(db, runlock.Config{Table: table, InitialCheckpoint: t0.Add(-time.Hour),
		Now: func() time.Time { return t0 }, Owners: w.owners})
	if err != nil {
		t.Fatal(err)
	}
	ecfg := exportjob.Config{Table: table, Bucket: "artifacts", DatastoreID: "ds1", HealthLakeEndpoint: env.URL}
	deps, err := exportjob.NewDeps(awsCfg, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	deps.Logger = slog.New(slog.NewJSONHandler(w.logs, nil))
	canceller, err := exportjob.NewCanceller(ecfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	w.client, err = fhirrest.NewFromConfig(awsCfg, env.URL)
	if err != nil {
		t.Fatal(err)
	}
	w.ledger = exportjob.NewLedger(db, table, time.Hour, nil)
	w.store = st
	w.h = &Handler{Lock: st, Results: w.results, Exports: canceller, Logger: slog.New(slog.NewJSONHandler(w.logs, nil)),
		Metrics: metrics.New(w.emf, "test"), Now: func() time.Time { return t0 }}
	return w
}

// startExport starts run's export in HealthLake and records it in the
// ledger, as start-export does, and returns the job id.
func (w *exportWorld) startExport(t *testing.T, runID string) string {
	t.Helper()
	ctx := context.Background()
	out, err := w.client.StartExport(ctx, fhirrest.StartExportInput{DatastoreID: "ds1", JobName: exportjob.JobName(runID),
		Since: t0.Add(-time.Hour), S3URI: "s3://artifacts/exports/", DataAccessRoleARN: "arn:aws:iam::000000000000:role/export"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := w.ledger.Claim(ctx, runID, "msg-"+runID, time.Minute); err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	if err := w.ledger.RecordJob(ctx, runID, "msg-"+runID, out.JobID, exportjob.JobName(runID), out.JobStatus, t0); err != nil {
		t.Fatal(err)
	}
	if err := w.hl.Advance(ctx); err != nil { // SUBMITTED → IN_PROGRESS
		t.Fatal(err)
	}
	if j, _ := w.hl.Job(out.JobID); j.Status != fhirrest.StatusInProgress {
		t.Fatalf("job %s is %s, want IN_PROGRESS", out.JobID, j.Status)
	}
	return out.JobID
}

// A run that dies without its failure handler (execution timeout, abort,
// a failed HandleFailure) leaves its export running. The run that takes its
// lock over must stop that export before it starts its own: never two
// exports at once.
func TestTakeOverCancelsTheAbandonedRunsExport(t *testing.T) {
	w := newExportWorld(t)
	w.owners.set(arn("run-1"), "RUNNING")
	if _, err := w.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	job := w.startExport(t, "run-1")
	w.owners.set(arn("run-1"), "TIMED_OUT") // execution timeout: no HandleFailure ran

	w.owners.set(arn("run-2"), "RUNNING")
	got, err := w.invoke(t, acquirePayload("run-2"))
	if err != nil || got["acquired"] != true {
		t.Fatalf("take-over = %v, %v", got, err)
	}
	if j, _ := w.hl.Job(job); fhirrest.Running(j.Status) {
		t.Fatalf("the abandoned run's export %s is still %s after run-2 took the lock", job, j.Status)
	}
	// A retried acquire (lost Lambda response) is harmless: nothing more to cancel.
	if got, err := w.invoke(t, acquirePayload("run-2")); err != nil || got["acquired"] != true {
		t.Fatalf("repeated acquire = %v, %v", got, err)
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 1 {
		t.Errorf("%d cancel requests, want 1", n)
	}
}

// A failed run whose HandleFailure could not cancel its export (the cancel
// is best effort: HealthLake throttled or unreachable), or whose lock an operator released with `cdcctl
// unlock`, also leaves an export behind; the next run cancels it.
func TestNextRunCancelsTheExportAFailedOrUnlockedRunLeftRunning(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, w *exportWorld)
	}{
		{"failed without reaching HealthLake", func(t *testing.T, w *exportWorld) {
			exports := w.h.Exports
			w.h.Exports = nil // HandleFailure's best-effort cancel did not happen
			defer func() { w.h.Exports = exports }()
			if _, err := w.invoke(t, `{"action":"fail","executionId":"`+arn("run-1")+`","executionName":"run-1","error":"States.Timeout"}`); err != nil {
				t.Fatal(err)
			}
		}},
		{"unlocked", func(t *testing.T, w *exportWorld) {
			w.owners.set(arn("run-1"), "ABORTED")
			if _, err := w.store.Unlock(context.Background(), runlock.UnlockRequest{Actor: "ops"}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newExportWorld(t)
			w.owners.set(arn("run-1"), "RUNNING")
			if _, err := w.invoke(t, acquirePayload("run-1")); err != nil {
				t.Fatal(err)
			}
			job := w.startExport(t, "run-1")
			tc.end(t, w)
			if j, _ := w.hl.Job(job); !fhirrest.Running(j.Status) {
				t.Fatalf("setup: job is %s, want it still running", j.Status)
			}
			w.owners.set(arn("run-2"), "RUNNING")
			if got, err := w.invoke(t, acquirePayload("run-2")); err != nil || got["acquired"] != true {
				t.Fatalf("acquire = %v, %v", got, err)
			}
			if j, _ := w.hl.Job(job); fhirrest.Running(j.Status) {
				t.Fatalf("run-1's export %s is still %s after run-2 acquired", job, j.Status)
			}
		})
	}
}
