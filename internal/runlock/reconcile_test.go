package runlock

import (
	"context"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

func (f *fixture) reconcile(t *testing.T, name string) Acquisition {
	t.Helper()
	f.owners.set(arn(name), StatusRunning)
	a, err := f.store.Acquire(context.Background(), AcquireRequest{Owner: arn(name), RunID: name, StartTime: f.clock.Now(), Reconcile: true})
	if err != nil {
		t.Fatalf("acquire %s for a reconciliation: %v", name, err)
	}
	return a
}

func TestReconcileSharesTheLockAndLeavesTheCheckpoint(t *testing.T) {
	f := newFixture(t, nil)
	if a := f.reconcile(t, "rec-0"); a.Acquired || a.Refusal != RefusalNoCheckpoint {
		t.Fatalf("a reconciliation before the first run committed = %+v, want refused with %s", a, RefusalNoCheckpoint)
	}
	f.start(t, "run-1")
	if _, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	cp := f.status(t).Checkpoint
	f.clock.Advance(5 * time.Minute)
	a := f.reconcile(t, "rec-1")
	if !a.Acquired || !a.Empty || !a.Window.Since.Equal(cp) || !a.Window.Until.Equal(cp) {
		t.Fatalf("reconciliation acquire = %+v, want an empty window at %s", a, cp)
	}
	if !events.IsSnapshotSince(a.ExportWindow.Since) || !a.ExportWindow.Until.Equal(cp) {
		t.Fatalf("export window %s, want the whole store up to the checkpoint", a.ExportWindow)
	}
	if again := f.reconcile(t, "rec-1"); !events.IsSnapshotSince(again.ExportWindow.Since) || !again.Acquired {
		t.Fatalf("a retried acquire changed the export window: %+v", again)
	}
	if b := f.start(t, "run-2"); b.Acquired || b.Refusal != RefusalLockHeld {
		t.Fatalf("a run while the reconciliation held the lock = %+v, want refused with %s", b, RefusalLockHeld)
	}
	res, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("rec-1"), RunID: "rec-1", Window: &a.Window})
	if err != nil || res.Outcome != OutcomeEmpty || !res.Checkpoint.Equal(cp) {
		t.Fatalf("reconciliation commit = %+v, %v; want EMPTY at the same checkpoint", res, err)
	}
	if b := f.start(t, "run-3"); !b.Acquired || !b.Window.Since.Equal(cp) {
		t.Fatalf("the run after the reconciliation = %+v, want its window from %s", b, cp)
	}
}

// The refusal is machine-readable: a reconciliation waits and retries only
// on RefusalLockHeld (statemachine/reconcile.asl.json), so a run holding the
// lock and a multi-part export being delivered must be told apart.
func TestReconcileRefusalsSayWhy(t *testing.T) {
	f := newFixture(t, nil)
	f.start(t, "run-1")
	f.commit(t, "run-1", nil)
	f.clock.Advance(5 * time.Minute)
	run := f.start(t, "run-2")
	if a := f.reconcile(t, "rec-1"); a.Acquired || a.Refusal != RefusalLockHeld || a.Holder != arn("run-2") {
		t.Fatalf("reconciliation while run-2 holds the lock = %+v, want refused with %s", a, RefusalLockHeld)
	}
	// run-2 delivers the first of two parts: the rest is pending.
	if r := f.commit(t, "run-2", exportOf("run-2", run.ExportWindow, 1, 1)); r.Outcome != OutcomePartial {
		t.Fatalf("commit of part 1 of 2 = %+v, want PARTIAL", r)
	}
	f.clock.Advance(5 * time.Minute)
	if a := f.reconcile(t, "rec-2"); a.Acquired || a.Refusal != RefusalPendingExport {
		t.Fatalf("reconciliation with a pending part = %+v, want refused with %s", a, RefusalPendingExport)
	}
	if a := f.start(t, "run-3"); !a.Acquired || a.Refusal != "" {
		t.Fatalf("the run delivering the pending part = %+v, want acquired with no refusal", a)
	}
}
