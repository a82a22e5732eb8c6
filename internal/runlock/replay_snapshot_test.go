package runlock

import (
	"context"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// TestReplayToASnapshot: a replay with Snapshot moves the checkpoint to the
// beginning, so the next window is a snapshot one (the whole store); it
// takes no time besides, and a replay with neither is refused.
func TestReplayToASnapshot(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	a := f.start(t, "run-1")
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Replay(ctx, ReplayRequest{}); err == nil {
		t.Fatal("a replay with no time and no snapshot was accepted")
	}
	if _, err := f.store.Replay(ctx, ReplayRequest{Since: t0.Add(-time.Hour), Snapshot: true}); err == nil {
		t.Fatal("a replay with a time and a snapshot was accepted")
	}
	res, err := f.store.Replay(ctx, ReplayRequest{Snapshot: true, Actor: "ops"})
	if err != nil || !envelope.IsSnapshotSince(res.Record.To) || !res.Record.From.Equal(a.Window.Until) {
		t.Fatalf("snapshot replay: %+v, %v", res, err)
	}
	f.clock.Advance(5 * time.Minute)
	b := f.start(t, "run-2")
	if !envelope.IsSnapshotSince(b.Window.Since) || b.Continues || !b.Window.Until.Equal(f.clock.Now().Add(-DefaultSafetyLag)) {
		t.Fatalf("the window after a snapshot replay: %+v", b)
	}
}
