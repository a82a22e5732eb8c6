package stack

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas/lambdastest"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// A window whose run committed and whose execution failed afterwards (a
// crash of run-lock after its commit: HandleFailure cannot undo a commit)
// is committed, as its run record says: the log and `cdcctl status`
// agree. The execution's failure is kept as a note.
func TestAWindowThatFailsAfterItsCommitIsCommitted(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 3 })
	// run-lock is invoked for acquire (1) and commit (2); the state machine
	// tries a run-lock failure twice more, and each attempt crashes.
	st.Lambdas.SetFaults(&lambdastest.Crash{Function: FnRunLock, From: 2, Times: 3, After: true})
	w := runWindow(t, st)
	if w.Status != "FAILED" {
		t.Fatalf("execution status %s, want FAILED (the crash after the commit)", w.Status)
	}
	if w.Outcome != report.OutcomeCommitted || w.Events != 3 || w.Window == nil {
		t.Errorf("window = %+v; want committed with its 3 events, as the run record says", w)
	}
	if !strings.Contains(w.Note, "FAILED after the run committed") {
		t.Errorf("note %q does not say the execution failed after the commit", w.Note)
	}
	rec, ok := st.history(context.Background(), w.RunID)
	if !ok || rec.Outcome != runlock.OutcomeSucceeded {
		t.Fatalf("run record %+v (%v)", rec, ok)
	}
	if r := st.Report.Snapshot(); r.Outcomes[report.OutcomeCommitted] != 1 || r.Outcomes[report.OutcomeFailed] != 0 {
		t.Errorf("report outcomes %v", r.Outcomes)
	}
}

// A window whose execution failed before it took the lock has no run
// record: it failed, and says why nothing in the run history shows it.
func TestAWindowThatFailsBeforeTheLockSaysSo(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 3 })
	st.Lambdas.SetFaults(&lambdastest.Crash{Function: FnRunLock, From: 1, Times: 3}) // the acquire and its two retries
	w := runWindow(t, st)
	if w.Status != "FAILED" || w.Outcome != report.OutcomeFailed || w.Window != nil {
		t.Fatalf("window = %+v; want failed without a window", w)
	}
	if !strings.Contains(w.Note, "before taking the lock") {
		t.Errorf("note %q does not say it failed before taking the lock", w.Note)
	}
}

// Executions started by hand (cdcctl run, aws stepfunctions
// start-execution) while Run keeps the schedule are followed like the
// scheduled ones: OnWindow reports them and the report counts them.
// Reconciliations started by hand reach OnReconciliation.
func TestRunReportsExecutionsStartedByHand(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 2; o.Every = time.Hour })
	var mu sync.Mutex
	windows := map[string]report.Run{}
	recs := map[string]Reconciliation{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.RunWith(ctx, RunOptions{
			ReconcileEvery: -1,
			OnWindow: func(w report.Run, err error) {
				if err != nil {
					t.Errorf("window: %v", err)
				}
				mu.Lock()
				windows[w.RunID] = w
				mu.Unlock()
			},
			OnReconciliation: func(r Reconciliation, err error) {
				if err != nil {
					t.Errorf("reconciliation: %v", err)
				}
				mu.Lock()
				recs[r.RunID] = r
				mu.Unlock()
			},
		})
	}()
	// The first scheduled window runs at once.
	waitFor(t, "the first scheduled window", func() bool { mu.Lock(); defer mu.Unlock(); return len(windows) == 1 })
	sfnc := sfnapi.NewFromConfig(st.Config)
	if _, err := sfnc.StartExecution(context.Background(), &sfnapi.StartExecutionInput{
		StateMachineArn: aws.String(st.Res.StateMachineARN), Name: aws.String("manual-by-hand")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the window started by hand", func() bool { mu.Lock(); defer mu.Unlock(); _, ok := windows["manual-by-hand"]; return ok })
	if _, err := sfnc.StartExecution(context.Background(), &sfnapi.StartExecutionInput{
		StateMachineArn: aws.String(st.Res.ReconcileStateMachineARN), Name: aws.String("reconcile-by-hand")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reconciliation started by hand", func() bool { mu.Lock(); defer mu.Unlock(); _, ok := recs["reconcile-by-hand"]; return ok })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if w := windows["manual-by-hand"]; w.Status != "SUCCEEDED" || (w.Outcome != report.OutcomeEmpty && w.Outcome != report.OutcomeCommitted) || w.Window == nil {
		t.Errorf("window started by hand = %+v", w)
	}
	if r := recs["reconcile-by-hand"]; !r.Finished() {
		t.Errorf("reconciliation started by hand = %+v", r)
	}
	if len(windows) != 2 || len(recs) != 1 {
		t.Errorf("%d windows and %d reconciliations reported, want 2 and 1 (each once)", len(windows), len(recs))
	}
	if r := st.Report.Snapshot(); r.WindowsRun != 2 {
		t.Errorf("report windowsRun %d, want 2", r.WindowsRun)
	}
}
