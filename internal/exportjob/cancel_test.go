package exportjob_test

import (
	"context"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

func (w *world) canceller() *exportjob.Canceller {
	w.t.Helper()
	c, err := exportjob.NewCanceller(w.cfg, w.deps)
	if err != nil {
		w.t.Fatal(err)
	}
	return c
}

func TestCancelRunExportCancelsARunningJob(t *testing.T) {
	w := newWorld(t, nil)
	_, m := w.startedRun("run-c1")
	if err := w.canceller().CancelRunExport(context.Background(), "run-c1"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	cancels := w.hl.RequestsFor("CancelExport")
	if len(cancels) != 1 || cancels[0].Method != "DELETE" || cancels[0].Path != "/datastore/ds1/r4/export/"+m.JobID {
		t.Errorf("cancels = %+v", cancels)
	}
	if job, _ := w.hl.Job(m.JobID); job.Status != "CANCEL_SUBMITTED" {
		t.Errorf("job status = %s", job.Status)
	}
	if led := w.ledger("run-c1"); led["status"] != "CANCEL_SUBMITTED" {
		t.Errorf("ledger = %v", led)
	}
}

func TestCancelRunExportLeavesFinishedJobsAlone(t *testing.T) {
	w := newWorld(t, nil)
	_, m := w.startedRun("run-c2")
	if err := w.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.canceller().CancelRunExport(context.Background(), "run-c2"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 0 {
		t.Errorf("DELETE sent for a finished job (%d)", n)
	}
	if d := w.hl.RequestsFor("DescribeExport"); len(d) != 1 || d[0].Path != "/datastore/ds1/r4/export/"+m.JobID {
		t.Errorf("describes = %+v", d)
	}
	if led := w.ledger("run-c2"); led["status"] != "COMPLETED" {
		t.Errorf("ledger = %v", led)
	}
}

func TestCancelRunExportWithoutLedgerDoesNothing(t *testing.T) {
	w := newWorld(t, nil)
	if err := w.canceller().CancelRunExport(context.Background(), "never-started"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if n := len(w.hl.Requests()); n != 0 {
		t.Errorf("HealthLake requests = %d, want none", n)
	}
}

func TestCancelRunExportFindsAnUnrecordedJobByName(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	putLedger(t, w, "run-c3", map[string]string{"status": "CLAIMED", "claimant": "m1", "claimedAt": "2026-11-21T10:04:00.000Z"})
	out, err := w.deps.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID: dsID, JobName: exportjob.JobName("run-c3"), S3URI: "s3://artifacts/exports/", DataAccessRoleARN: "arn:aws:iam::0:role/r",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.canceller().CancelRunExport(ctx, "run-c3"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if job, _ := w.hl.Job(out.JobID); job.Status != "CANCEL_SUBMITTED" {
		t.Errorf("job status = %s", job.Status)
	}
	if l := w.hl.RequestsFor("ListFHIRExportJobs"); len(l) != 1 {
		t.Errorf("list requests = %d", len(l))
	}
}

func TestCancelRunExportReportsHealthLakeErrors(t *testing.T) {
	w := newWorld(t, nil)
	w.startedRun("run-c4")
	w.hl.FailNextCalls(10, 500)
	err := w.canceller().CancelRunExport(context.Background(), "run-c4")
	if err == nil || !contains(err.Error(), "run run-c4", "HTTP 500") {
		t.Errorf("err = %v", err)
	}
}

func TestConstructorsNameWhatIsMissing(t *testing.T) {
	w := newWorld(t, nil)
	cfg := w.cfg
	cfg.RecheckQueueURL, cfg.ExportRoleARN = "", ""
	if _, err := exportjob.NewStartHandler(cfg, w.deps); err == nil || !contains(err.Error(), "CDC_EXPORT_ROLE_ARN", "CDC_RECHECK_QUEUE_URL") {
		t.Errorf("start: %v", err)
	}
	d := w.deps
	d.S3 = nil
	if _, err := exportjob.NewCheckHandler(w.cfg, d); err == nil {
		t.Errorf("check handler built without S3")
	}
	if _, err := exportjob.NewCanceller(exportjob.Config{}, w.deps); err == nil || !contains(err.Error(), "CDC_TABLE", "CDC_DATASTORE_ID") {
		t.Errorf("canceller: %v", err)
	}
}
