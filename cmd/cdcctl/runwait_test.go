package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// cliResult is what one cdcctl invocation printed and returned.
type cliResult struct {
	code      int
	out, errs string
}

// startWaiting runs `cdcctl run --wait --name name` (and extra flags) in the
// background and returns the execution's ARN once it exists, and the
// channel the command's result arrives on.
func (s *ctlStack) startWaiting(t *testing.T, sm, name string, extra ...string) (string, <-chan cliResult) {
	t.Helper()
	ch := make(chan cliResult, 1)
	go func() {
		code, out, errs := s.cdcctl(t, append([]string{"run", "--state-machine-arn", sm, "--name", name, "--wait"}, extra...)...)
		ch <- cliResult{code, out, errs}
	}()
	arn := s.env.ARN("states", "execution:cdc:"+name)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, x := range s.sfn.Executions("cdc") {
			if x.Name == name {
				return arn, ch
			}
		}
	}
	t.Fatalf("cdcctl run --wait started no execution %s in 10 s", name)
	return "", nil
}

func receive(t *testing.T, ch <-chan cliResult) cliResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("cdcctl run --wait did not return 30 s after the execution ended")
		return cliResult{}
	}
}

// TestRunWaitSaysHowTheRunEnded: `cdcctl run --wait` waits for the
// execution it started and reports its run record: committed, with its
// window and counts; skipped (no record: another run held the lock); or an
// execution that failed. Only a committed run exits 0.
func TestRunWaitSaysHowTheRunEnded(t *testing.T) {
	s := newCtlStack(t)
	sm := s.sfn.Machine(t, "cdc")
	ctx := context.Background()

	// Committed: the outcome, window and counts of its run record.
	arn, done := s.startWaiting(t, sm, "wait-ok")
	_, a := s.acquire(t, "wait-ok")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn, RunID: "wait-ok", ExportJobID: "job-1",
		Counts: runlock.Counts{Files: 2, Events: 7, Quarantined: 1}}); err != nil {
		t.Fatal(err)
	}
	s.sfn.Set(t, arn, "SUCCEEDED")
	r := receive(t, done)
	want := "run wait-ok SUCCEEDED: window " + a.Window.String() + ", 2 files, 7 events, 0 deletes, 1 quarantined"
	if r.code != exitOK || !strings.Contains(r.out, "started "+arn) || !strings.Contains(r.out, want) {
		t.Fatalf("committed run: exit %d, want a line %q\n%s%s", r.code, want, r.out, r.errs)
	}

	// Skipped: the execution succeeded without a run record.
	arn, done = s.startWaiting(t, sm, "wait-skipped", "--json")
	s.sfn.Set(t, arn, "SUCCEEDED")
	r = receive(t, done)
	var v runView
	decodeJSON(t, r.out, &v)
	if r.code != exitFailure || !v.Skipped || v.Status != "SUCCEEDED" || v.Run != nil || v.ExecutionARN != arn {
		t.Fatalf("skipped run: exit %d, %+v", r.code, v)
	}
	arn, done = s.startWaiting(t, sm, "wait-skipped-text")
	s.sfn.Set(t, arn, "SUCCEEDED")
	if r = receive(t, done); r.code != exitFailure || !strings.Contains(r.out, "skipped: wait-skipped-text took no lock") {
		t.Fatalf("skipped run (text): exit %d\n%s%s", r.code, r.out, r.errs)
	}

	// Failed: the execution's error name, and the record it left.
	arn, done = s.startWaiting(t, sm, "wait-failed", "--json")
	s.acquire(t, "wait-failed")
	s.sfn.Set(t, arn, "FAILED")
	r = receive(t, done)
	v = runView{}
	decodeJSON(t, r.out, &v)
	if r.code != exitFailure || v.Status != "FAILED" || v.Error != "sfntest.Failed" || v.Skipped ||
		v.Run == nil || v.Run.RunID != "wait-failed" || v.Run.Outcome != runlock.OutcomeRunning {
		t.Fatalf("failed run: exit %d, %+v", r.code, v)
	}

	// Waiting longer than --timeout gives up; the execution goes on.
	_, done = s.startWaiting(t, sm, "wait-long", "--timeout", "1ms")
	if r = receive(t, done); r.code != exitFailure || !strings.Contains(r.errs, "the execution goes on") {
		t.Fatalf("--timeout: exit %d\n%s%s", r.code, r.out, r.errs)
	}
}

// TestRunWaitReportsAWindowOfTheLocalStack runs a real window of the whole
// local stack with `cdcctl run --wait`: the run record it finds is the
// execution's (its name and start time as the state machine passes them to
// the run lock), with the window's events counted.
func TestRunWaitReportsAWindowOfTheLocalStack(t *testing.T) {
	st := statusStack(t, nil)
	ctx := context.Background()
	if _, err := st.PutResource(ctx, "Patient", "run-wait", []byte(`{"resourceType":"Patient","id":"run-wait"}`)); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := run(ctx, []string{"run", "--wait", "--json", "--name", "operator-check"}, strings.NewReader(""), &out, &errb)
	var v runView
	decodeJSON(t, out.String(), &v)
	if code != exitOK || v.Status != "SUCCEEDED" || v.Run == nil || v.Run.RunID != "operator-check" ||
		v.Run.Outcome != runlock.OutcomeSucceeded || v.Run.Counts.Events < 1 {
		t.Fatalf("exit %d, %+v\n%s", code, v, errb.String())
	}
}

// TestRunWaitCountsTheWindowsDeletes: a window of the local stack that
// publishes a delete says so: `cdcctl run --wait` and `cdcctl status` show
// the delete scan's deletes beside the export's events, from the run record
// the commit wrote (before, a window of deletes only read "0 events").
func TestRunWaitCountsTheWindowsDeletes(t *testing.T) {
	st := statusStack(t, nil)
	ctx := context.Background()
	if _, err := st.PutResource(ctx, "Patient", "soon-gone", []byte(`{"resourceType":"Patient","id":"soon-gone"}`)); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "run", "--wait", "--name", "announce"); code != exitOK || !strings.Contains(out, " events, 0 deletes, ") {
		t.Fatalf("first window: exit %d\n%s%s", code, out, errs)
	}
	resp, err := st.FHIR(ctx, http.MethodDelete, "Patient/soon-gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
	}
	time.Sleep(20 * time.Millisecond) // past the stack's safety lag
	code, out, errs := runCLI(t, "run", "--wait", "--name", "withdraw")
	if code != exitOK || !strings.Contains(out, "run withdraw SUCCEEDED: window ") || !strings.Contains(out, ", 0 events, 1 deletes, 0 quarantined") {
		t.Fatalf("delete window: exit %d, want 0 events and 1 delete\n%s%s", code, out, errs)
	}
	text := cdcctlStatus(t)
	var head, row string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "STARTED") {
			head = l
		}
		if strings.Contains(l, " withdraw ") {
			row = l
		}
	}
	col := strings.Index(head, "DELETES")
	if col < 0 || row == "" || len(row) <= col || !strings.HasPrefix(row[col:], "1 ") {
		t.Fatalf("status: no DELETES column with 1 for the run:\n%s", text)
	}
	var v statusView
	decodeJSON(t, cdcctlStatus(t, "--json"), &v)
	if len(v.History) == 0 || v.History[0].RunID != "withdraw" || v.History[0].Counts.Deletes != 1 || v.History[0].Counts.Events != 0 {
		t.Fatalf("status --json history = %+v", v.History)
	}
}

// TestRunEndNamesThePartAndTheReason: a run that delivered one part of a
// multi-part export says which; a run record's reason is printed with it.
func TestRunEndNamesThePartAndTheReason(t *testing.T) {
	var b strings.Builder
	printRunEnd(&b, runView{ExecutionARN: "arn:aws:states:us-east-1:1:execution:cdc:manual-7", Status: "SUCCEEDED",
		Run: &runlock.HistoryRecord{RunID: "manual-7", Outcome: runlock.OutcomePartial, Part: 0, Parts: 3,
			Counts: runlock.Counts{Files: 40, Events: 900}}})
	if want := ", part 1 of 3, 40 files, 900 events, 0 deletes, 0 quarantined\n"; !strings.HasPrefix(b.String(), "run manual-7 PARTIAL: window ") ||
		!strings.HasSuffix(b.String(), want) {
		t.Errorf("partial run: %q, want the part and the counts (%q)", b.String(), want)
	}
	b.Reset()
	printRunEnd(&b, runView{ExecutionARN: "arn:aws:states:us-east-1:1:execution:cdc:manual-8", Status: "FAILED", Error: "States.Timeout",
		Run: &runlock.HistoryRecord{RunID: "manual-8", Outcome: runlock.OutcomeFailed, Reason: "export job failed"}})
	for _, want := range []string{"run manual-8 FAILED: window ", "; export job failed\n", "execution manual-8 FAILED: error States.Timeout"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("failed run: %q lacks %q", b.String(), want)
		}
	}
}
