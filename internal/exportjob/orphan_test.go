package exportjob_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// A POST $export that HealthLake accepted but answered with a 5xx, retried
// and then refused with a 4xx: the run fails START_FAILED, and the job the
// first attempt started — which nobody will poll — is found by the run's
// job name and cancelled.
func TestStartRefusedAfterAnAmbiguousAttemptCancelsTheOrphan(t *testing.T) {
	w := newWorld(t, nil)
	w.hl.AcceptThenFailNext(1, http.StatusBadGateway)
	w.hl.RefuseNextStarts(1, http.StatusBadRequest, "a refusal after the retry")
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-orphan", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	if o := w.outcome(token); o.Status != "FAILED" || o.Error != "ExportStartFailed" {
		t.Errorf("outcome = %+v", o)
	}
	if led := w.ledger("run-orphan"); led["status"] != "START_FAILED" {
		t.Errorf("ledger = %v", led)
	}
	jobs := w.hl.Jobs()
	if len(jobs) != 1 || jobs[0].JobName != exportjob.JobName("run-orphan") {
		t.Fatalf("jobs = %+v, want the one the first attempt started", jobs)
	}
	if jobs[0].Status != "CANCEL_SUBMITTED" {
		t.Errorf("orphaned job is %s, want CANCEL_SUBMITTED", jobs[0].Status)
	}
}

// A refusal without an ambiguous attempt lists nothing: HealthLake proved it
// started no job.
func TestStartPlainRefusalListsNoJobs(t *testing.T) {
	w := newWorld(t, nil)
	w.hl.RefuseNextStarts(1, http.StatusBadRequest, "refused")
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-refused", token)))
	if n := len(w.hl.RequestsFor("ListFHIRExportJobs")); n != 0 {
		t.Errorf("list requests = %d, want 0", n)
	}
}

// The run-failure path cancels a job with the run's name whatever the
// ledger says, START_FAILED included.
func TestCancelRunExportCancelsByNameEvenAfterStartFailed(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	putLedger(t, w, "run-sf", map[string]string{"status": "START_FAILED", "claimant": "m1", "claimedAt": "2026-11-21T10:04:00.000Z"})
	out, err := w.deps.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID: dsID, JobName: exportjob.JobName("run-sf"), S3URI: "s3://artifacts/exports/", DataAccessRoleARN: "arn:aws:iam::000000000000:role/r",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.canceller().CancelRunExport(ctx, "run-sf"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if job, _ := w.hl.Job(out.JobID); job.Status != "CANCEL_SUBMITTED" {
		t.Errorf("job status = %s, want CANCEL_SUBMITTED", job.Status)
	}
}

// A recorded job and another running job with the run's name (an ambiguous
// attempt's) are both cancelled.
func TestCancelRunExportCancelsTheRecordedJobAndItsSiblings(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	_, m := w.startedRun("run-two")
	other, err := w.deps.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID: dsID, JobName: exportjob.JobName("run-two"), S3URI: "s3://artifacts/exports/", DataAccessRoleARN: "arn:aws:iam::000000000000:role/r",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.canceller().CancelRunExport(ctx, "run-two"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	for _, id := range []string{m.JobID, other.JobID} {
		if job, _ := w.hl.Job(id); job.Status != "CANCEL_SUBMITTED" {
			t.Errorf("job %s is %s, want CANCEL_SUBMITTED", id, job.Status)
		}
	}
	if led := w.ledger("run-two"); led["status"] != "CANCEL_SUBMITTED" {
		t.Errorf("ledger = %v", led)
	}
}
