package exportjob_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// When Step Functions retries WaitForExport (its sqs:sendMessage failed with
// SQS.SdkClientException although the message was in fact queued), the
// retry sends a second start message with a NEW task token and the first
// token is dead. The run now waits on the second token only: start-export
// must move the polling to it (not drop the message as a duplicate), and
// the first token's re-check chain must stop without cancelling the export
// the run still waits for.
func TestStartMessageWithANewTokenMovesThePollingToIt(t *testing.T) {
	w := newWorld(t, nil)
	w.loadPatients(2)
	ctx := context.Background()
	token1, r1 := w.startedRun("run-retry")
	// The attempt that sent token1 failed: its token is gone.
	if _, err := w.sfnClient.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{TaskToken: aws.String(token1), Error: aws.String("SQS.SdkClientException")}); err != nil {
		t.Fatal(err)
	}
	token2 := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	h := w.startHandler()
	if resp := w.invoke(h.Handle, record("m2", w.startMessage("run-retry", token2))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	if n := len(w.hl.RequestsFor("StartExport")); n != 1 {
		t.Fatalf("StartExport requests = %d, want 1", n)
	}
	r2, _ := w.oneRecheck()
	if r2.TaskToken != token2 || r2.JobID != r1.JobID || r2.StartedAt != r1.StartedAt || r2.Attempt != 1 {
		t.Fatalf("re-check for the new token = %+v (first chain %+v)", r2, r1)
	}
	if o := w.outcome(token2); o.Status != "PENDING" || o.Heartbeats != 1 {
		t.Errorf("new token = %+v, want PENDING with one heartbeat", o)
	}
	// The same start messages again change nothing.
	if resp := w.invoke(h.Handle, record("m2", w.startMessage("run-retry", token2)), record("m1", w.startMessage("run-retry", token1))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if msgs := w.newMessages(); len(msgs) != 0 {
		t.Fatalf("duplicates queued %d more re-checks", len(msgs))
	}

	// The first chain's check finds its token dead; the export still runs.
	if err := w.hl.SetJobStatus(r1.JobID, fhirrest.StatusInProgress, ""); err != nil {
		t.Fatal(err)
	}
	if resp := w.invoke(w.checkHandler().Handle, record("c1", r1)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 0 {
		t.Fatalf("the superseded chain cancelled the export the run waits for (%d cancels)", n)
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("the superseded chain kept polling")
	}

	// The new chain sees the export through.
	if err := w.hl.RunJobs(ctx); err != nil {
		t.Fatal(err)
	}
	if resp := w.invoke(w.checkHandler().Handle, record("c2", r2)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if o := w.outcome(token2); o.Status != "SUCCEEDED" {
		t.Fatalf("new token = %+v, want SUCCEEDED; logs %s", o, w.logs)
	}
}

// start-export's own first heartbeat can meet the dead token too (the retry's
// start message came first): it must not cancel the export either.
func TestStartWithADeadTokenAfterTheRetryKeepsTheExport(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	token1 := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	token2 := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	if _, err := w.sfnClient.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{TaskToken: aws.String(token1), Error: aws.String("SQS.SdkClientException")}); err != nil {
		t.Fatal(err)
	}
	h := w.startHandler()
	// SQS delivers the retry's message first, then the first attempt's.
	if resp := w.invoke(h.Handle, record("m2", w.startMessage("run-late", token2))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	r2, _ := w.oneRecheck()
	if resp := w.invoke(h.Handle, record("m1", w.startMessage("run-late", token1))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 0 {
		t.Fatalf("a late start message with a dead token cancelled the run's export")
	}
	if msgs := w.newMessages(); len(msgs) != 0 {
		t.Fatalf("a dead token got a re-check chain")
	}
	if job, _ := w.hl.Job(r2.JobID); !fhirrest.Running(job.Status) {
		t.Fatalf("job = %s", job.Status)
	}
}
