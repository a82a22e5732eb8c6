package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas/lambdastest"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// statusStack starts a whole local stack for `cdcctl status` and points
// cdcctl at it as an operator's shell would.
func statusStack(t *testing.T, mutate func(*stack.Options)) *stack.Stack {
	t.Helper()
	o := stack.Options{
		Addr:              "127.0.0.1:0",
		Name:              fmt.Sprintf("st%d", time.Now().UnixNano()%1e9),
		SampleSize:        3,
		Every:             time.Hour,
		VisibilityTimeout: time.Second,
		RecheckDelay:      time.Second,
		LambdaEnv:         map[string]string{"CDC_RECONCILE_PARTITIONS": "4"},
	}
	if mutate != nil {
		mutate(&o)
	}
	st, err := stack.Start(context.Background(), o)
	if err != nil {
		t.Fatalf("start the local stack: %v", err)
	}
	t.Cleanup(st.Close)
	setRunbookEnv(t, st)
	return st
}

func runWindow(t *testing.T, st *stack.Stack) report.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := st.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func cdcctlStatus(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb strings.Builder
	if code := run(context.Background(), append([]string{"status"}, args...), strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("cdcctl status %v: exit %d\n%s", args, code, errb.String())
	}
	return out.String()
}

// After a reconciliation that published a delete, `cdcctl status` shows
// that reconciliation — its outcome and counts — not only the last run
// (EMPTY: the window saw nothing of a deletion without history).
func TestStatusShowsTheLastReconciliationsOutcome(t *testing.T) {
	st := statusStack(t, func(o *stack.Options) { o.HistoryOptOut = []string{"Patient"} })
	ctx := context.Background()
	if _, err := st.PutResource(ctx, "Patient", "status-gone", []byte(`{"resourceType":"Patient","id":"status-gone"}`)); err != nil {
		t.Fatal(err)
	}
	if w := runWindow(t, st); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("first window %+v", w)
	}
	resp, err := st.FHIR(ctx, http.MethodDelete, "Patient/status-gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(5 * time.Millisecond)
	w := runWindow(t, st)
	r, err := st.Reconcile(ctx)
	if err != nil || !r.Finished() || r.Last.Counts.Deletes != 1 {
		t.Fatalf("reconciliation %+v (%v): want finished with 1 delete", r, err)
	}
	out := cdcctlStatus(t)
	if !strings.Contains(out, "last run     "+w.RunID) {
		t.Errorf("status does not show the last run %s:\n%s", w.RunID, out)
	}
	line := lineWith(out, "reconciliation ")
	for _, want := range []string{r.RunID, "SUCCEEDED", "1 deletes", "0 repairs", "0 unconfirmed"} {
		if !strings.Contains(line, want) {
			t.Errorf("reconciliation line %q lacks %q:\n%s", line, want, out)
		}
	}
	var v statusView
	decodeJSON(t, cdcctlStatus(t, "--json"), &v)
	if rc := v.Reconciliation; rc == nil || rc.Outcome != "SUCCEEDED" || rc.Last == nil || rc.Last.RunID != r.RunID || rc.Last.Deletes != 1 || rc.Last.HardDeletes != 1 {
		t.Errorf("status --json reconciliation = %+v", rc)
	} else if rc.Last.DeliveredLive < 1 || !strings.Contains(line, fmt.Sprintf(": %d delivered versions checked, ", rc.Last.DeliveredLive)) {
		// What it checked: the live versions delivered in its window (the
		// seeded sample and the deleted Patient's version, before the erase
		// was found).
		t.Errorf("reconciliation checked %d delivered versions; line %q", rc.Last.DeliveredLive, line)
	}

	// A reconciliation that failed after it shows as failed, with the last
	// finished one still named.
	if _, err := st.SFN.StartExecution(ctx, st.Res.ReconcileStateMachineARN, "reconcile-doomed", `{}`); err != nil {
		t.Fatal(err)
	}
	if err := st.SFN.StopExecution(st.SFN.ExecutionARN(st.Options().Name+"-reconcile", "reconcile-doomed"), "Operator", "stopped by the test"); err != nil {
		t.Fatal(err)
	}
	line = lineWith(cdcctlStatus(t), "reconciliation ")
	if !strings.Contains(line, "reconcile-doomed ABORTED") || !strings.Contains(line, r.RunID) {
		t.Errorf("after a stopped reconciliation: %q", line)
	}
}

// Under faults `cdcctl status` and cdc-local's window line agree: a run
// that committed before its execution failed is SUCCEEDED in both, and
// both say the execution failed afterwards; an execution that failed
// before taking the lock has no run record, and status lists it anyway.
func TestStatusAgreesWithTheWindowLineUnderFaults(t *testing.T) {
	st := statusStack(t, nil)
	// run-lock: acquire (1), commit (2): a crash after the commit, and
	// after each of the state machine's two retries of it.
	st.Lambdas.SetFaults(&lambdastest.Crash{Function: stack.FnRunLock, From: 2, Times: 3, After: true})
	committed := runWindow(t, st)
	if committed.Status != "FAILED" || committed.Outcome != report.OutcomeCommitted {
		t.Fatalf("window %+v: want a committed run whose execution FAILED", committed)
	}
	st.Lambdas.SetFaults(&lambdastest.Crash{Function: stack.FnRunLock, From: 1, Times: 3}) // the acquire and its two retries
	lockless := runWindow(t, st)
	if lockless.Status != "FAILED" || lockless.Outcome != report.OutcomeFailed {
		t.Fatalf("window %+v: want failed before the lock", lockless)
	}
	st.Lambdas.SetFaults(nil)

	out := cdcctlStatus(t)
	row := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "20") && strings.Contains(l, " "+committed.RunID+" ") {
			row = l
		}
	}
	if !strings.Contains(row, " SUCCEEDED ") {
		t.Errorf("the committed run is not SUCCEEDED in the run table:\n%s", out)
	}
	note := noteLine(out, committed.RunID)
	if !strings.Contains(note, "FAILED") || !strings.Contains(note, "after the run committed") {
		t.Errorf("status does not say %s's execution FAILED after the run committed:\n%s", committed.RunID, out)
	}
	note = noteLine(out, lockless.RunID)
	if !strings.Contains(note, "FAILED") || !strings.Contains(note, "before taking the lock") {
		t.Errorf("status does not list %s, failed before taking the lock:\n%s", lockless.RunID, out)
	}

	var v statusView
	decodeJSON(t, cdcctlStatus(t, "--json"), &v)
	got := map[string]executionNote{}
	for _, e := range v.Executions {
		got[e.RunID] = e
	}
	if e := got[committed.RunID]; e.Status != "FAILED" || e.RunOutcome != "SUCCEEDED" || e.Error != "Runtime.ExitError" {
		t.Errorf("executions[%s] = %+v", committed.RunID, e)
	}
	if e := got[lockless.RunID]; e.Status != "FAILED" || e.RunOutcome != "" || e.Error != "Runtime.ExitError" {
		t.Errorf("executions[%s] = %+v", lockless.RunID, e)
	}
}

// noteLine is the line of status's executions section about runID.
func noteLine(text, runID string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "  "+runID+" ") {
			return l
		}
	}
	return ""
}

func lineWith(text, part string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, part) {
			return l
		}
	}
	return ""
}
