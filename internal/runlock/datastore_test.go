package runlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// storeFor is a second Store over f's table, configured for datastoreID:
// the same RUN record after the stack's DatastoreId changed.
func (f *fixture) storeFor(t *testing.T, datastoreID string) *Store {
	t.Helper()
	cfg := f.store.Config()
	cfg.DatastoreID = datastoreID
	s, err := New(f.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTheCheckpointBelongsToItsDatastore: the RUN record keeps the data
// store its checkpoint belongs to. A pipeline configured for another one
// (its DatastoreId changed on a deployed stack) starts no run — going on
// would deliver the new store only from the old store's checkpoint — and
// says how to go on; a replay that names the new store moves the record to
// it, from the time it gives; the time of the move becomes the origin, so
// the reconciliation never compares the old store's delivered versions
// with the new store.
func TestTheCheckpointBelongsToItsDatastore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, func(c *Config) { c.DatastoreID = "store-a" })
	a := f.start(t, "run-1")
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t); st.Datastore != "store-a" || st.DatastoreChanged != nil {
		t.Fatalf("after the first run: data store %q, changed %v", st.Datastore, st.DatastoreChanged)
	}

	b := f.storeFor(t, "store-b")
	f.clock.Advance(10 * time.Minute)
	f.owners.set(arn("run-2"), StatusRunning)
	_, err := b.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()})
	var dc *DatastoreChangedError
	if !errors.As(err, &dc) || dc.Bound != "store-a" || dc.Configured != "store-b" ||
		!strings.Contains(err.Error(), "cdcctl replay --since T --datastore store-b") {
		t.Fatalf("acquire for another data store: %v, want a DatastoreChangedError saying how to go on", err)
	}
	st, err := b.Status(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lock != nil || !st.Checkpoint.Equal(a.Window.Until) || st.DatastoreChanged == nil || len(st.History) != 1 {
		t.Fatalf("the refused acquire changed the record, or status does not say why runs stop: %+v", st)
	}
	if _, err := b.Replay(ctx, ReplayRequest{Since: a.Window.Since, Actor: "ops"}); !errors.As(err, &dc) {
		t.Fatalf("a replay that does not name the data store: %v, want the DatastoreChangedError", err)
	}
	if _, err := b.Replay(ctx, ReplayRequest{Since: a.Window.Since, Datastore: "store-c"}); err == nil || !strings.Contains(err.Error(), "not the pipeline's data store store-b") {
		t.Fatalf("a replay to a data store the pipeline is not configured for: %v", err)
	}

	// The new store from a time after the old store's checkpoint.
	since := f.clock.Now().Add(-time.Minute)
	res, err := b.Replay(ctx, ReplayRequest{Since: since, Datastore: "store-b", Actor: "ops", Reason: "new data store"})
	if err != nil {
		t.Fatalf("replay to the new data store: %v", err)
	}
	if res.Record.Datastore != "store-b" || res.Record.FromDatastore != "store-a" || !res.Record.From.Equal(a.Window.Until) {
		t.Fatalf("replay record = %+v", res.Record)
	}
	cp, ok, err := ReadCheckpoints(ctx, f.db, f.table)
	if err != nil || !ok || !cp.Checkpoint.Equal(since) || !cp.Origin.Equal(f.clock.Now()) || cp.Datastore != "store-b" {
		t.Fatalf("checkpoints after the move = %+v, %v, %v; want checkpoint %v, origin %v (the move), store-b", cp, ok, err, since, f.clock.Now())
	}
	if cp.BelongsTo("store-b") != nil || cp.BelongsTo("store-a") == nil {
		t.Fatalf("BelongsTo after the move: %+v", cp)
	}
	rs, err := b.Replays(ctx, 5)
	if err != nil || len(rs) != 1 || rs[0].Datastore != "store-b" || rs[0].FromDatastore != "store-a" {
		t.Fatalf("replay audit = %+v, %v", rs, err)
	}
	got, err := b.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()})
	if err != nil || !got.Acquired || !got.Window.Since.Equal(since) || got.Continues {
		t.Fatalf("acquire after the move: %+v, %v; want the window from %v, skipping nothing", got, err, since)
	}
	if _, err := b.Commit(ctx, CommitRequest{Owner: arn("run-2"), RunID: "run-2"}); err != nil {
		t.Fatal(err)
	}
	// The pipeline configured for the old store is the one refused now.
	f.owners.set(arn("run-3"), StatusRunning)
	if _, err := f.store.Acquire(ctx, AcquireRequest{Owner: arn("run-3"), RunID: "run-3", StartTime: f.clock.Now()}); !errors.As(err, &dc) || dc.Bound != "store-b" {
		t.Fatalf("acquire for the old data store after the move: %v", err)
	}
}

// TestARecordFromBeforeTheBindingAdoptsItsDatastore: a RUN record written
// before it kept its data store takes the configured one at the next run,
// and a fresh record created by a replay takes the replay's.
func TestARecordFromBeforeTheBindingAdoptsItsDatastore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	f.start(t, "run-1")
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t); st.Datastore != "" {
		t.Fatalf("a store without a data store bound the record to %q", st.Datastore)
	}
	a := f.storeFor(t, "store-a")
	f.clock.Advance(5 * time.Minute)
	f.owners.set(arn("run-2"), StatusRunning)
	if _, err := a.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()}); err != nil {
		t.Fatalf("acquire on a record from before the binding: %v", err)
	}
	if st := f.status(t); st.Datastore != "store-a" {
		t.Fatalf("the record did not adopt the data store: %q", st.Datastore)
	}

	g := newFixture(t, func(c *Config) { c.DatastoreID = "store-a" })
	if _, err := g.store.Replay(ctx, ReplayRequest{Since: t0.Add(-2 * time.Hour), Datastore: "store-a"}); err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := ReadCheckpoints(ctx, g.db, g.table); err != nil || !ok || cp.Datastore != "store-a" {
		t.Fatalf("a record created by a replay: %+v, %v, %v", cp, ok, err)
	}
}

// TestInitialCheckpointIsReadOnlyOnAFreshTable: CDC_INITIAL_CHECKPOINT is
// read when the first run creates the RUN record; changing it on a deployed
// stack changes nothing (docs/DEPLOY.md: move the checkpoint with a replay).
func TestInitialCheckpointIsReadOnlyOnAFreshTable(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	a := f.start(t, "run-1")
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	cfg := f.store.Config()
	cfg.InitialCheckpoint, cfg.InitialNow = time.Time{}, true
	later, err := New(f.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	f.owners.set(arn("run-2"), StatusRunning)
	b, err := later.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()})
	if err != nil || !b.Window.Since.Equal(a.Window.Until) {
		t.Fatalf("acquire with another initial checkpoint: %+v, %v; want the window from the checkpoint %v", b, err, a.Window.Until)
	}
}
