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
	if a := f.reconcile(t, "rec-0"); a.Acquired {
		t.Fatalf("a reconciliation before the first run committed was let in: %+v", a)
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
	if b := f.start(t, "run-2"); b.Acquired {
		t.Fatal("a run took the lock while the reconciliation held it")
	}
	res, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("rec-1"), RunID: "rec-1", Window: &a.Window})
	if err != nil || res.Outcome != OutcomeEmpty || !res.Checkpoint.Equal(cp) {
		t.Fatalf("reconciliation commit = %+v, %v; want EMPTY at the same checkpoint", res, err)
	}
	if b := f.start(t, "run-3"); !b.Acquired || !b.Window.Since.Equal(cp) {
		t.Fatalf("the run after the reconciliation = %+v, want its window from %s", b, cp)
	}
}
