package runlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// exportOf is the export wait's output for the first part of an export of
// len(partFiles) parts started by run over w.
func exportOf(run string, w envelope.Window, partFiles ...int) *manifest.Export {
	return &manifest.Export{Bucket: "cdc-bucket", ManifestKey: manifest.PartKey(run, 0), ManifestRunID: run,
		Part: 0, Parts: len(partFiles), PartFiles: partFiles, FileCount: partFiles[0], BatchCount: 1,
		JobID: "job-" + run, DatastoreID: "ds", Window: w}
}

func (f *fixture) commit(t *testing.T, name string, exp *manifest.Export) Result {
	t.Helper()
	r, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn(name), RunID: name, Export: exp})
	if err != nil {
		t.Fatalf("commit %s: %v", name, err)
	}
	return r
}

func sameWindow(a, b envelope.Window) bool { return a.Since.Equal(b.Since) && a.Until.Equal(b.Until) }

// Issue 11.4: with no time cap a window ends at now − lag, however long the
// backlog.
func TestWindowEndsAtNowMinusLagByDefault(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.InitialCheckpoint = t0.Add(-30 * 24 * time.Hour) })
	a := f.start(t, "run-1")
	want := envelope.Window{Since: t0.Add(-30 * 24 * time.Hour), Until: t0.Add(-DefaultSafetyLag)}
	if !sameWindow(a.Window, want) {
		t.Fatalf("window = %s, want %s (no cap by default)", a.Window, want)
	}
}

// Issue 11.5: the export window reaches back by the overlap; the checkpoint
// window does not.
func TestExportWindowReachesBackByTheOverlap(t *testing.T) {
	for _, c := range []struct {
		name    string
		mutate  func(*Config)
		overlap time.Duration
	}{
		{"default", nil, DefaultOverlap},
		{"configured", func(c *Config) { c.Overlap = 20 * time.Minute }, 20 * time.Minute},
		{"zero", func(c *Config) { c.OverlapSet = true }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.mutate)
			a := f.start(t, "run-1")
			want := envelope.Window{Since: a.Window.Since.Add(-c.overlap), Until: a.Window.Until}
			if !sameWindow(a.ExportWindow, want) {
				t.Fatalf("export window = %s, want %s", a.ExportWindow, want)
			}
			again := f.start(t, "run-1")
			if !sameWindow(again.ExportWindow, want) {
				t.Fatalf("retried acquire: export window = %s, want %s", again.ExportWindow, want)
			}
			f.commit(t, "run-1", nil)
			h := f.status(t).History[0]
			if !sameWindow(h.ExportWindow, want) || !sameWindow(h.Window, a.Window) {
				t.Fatalf("history windows = %s / %s, want %s / %s", h.Window, h.ExportWindow, a.Window, want)
			}
			if got := f.status(t).Checkpoint; !got.Equal(a.Window.Until) {
				t.Fatalf("checkpoint = %v, want the window's until %v", got, a.Window.Until)
			}
		})
	}
}

func TestOverlapFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"", DefaultOverlap}, {"0s", 0}, {"15m", 15 * time.Minute}} {
		cfg, err := ConfigFromEnv(func(k string) string {
			return map[string]string{stackconfig.EnvTable: "t", stackconfig.EnvOverlap: c.env}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		st, err := New(fakeDB{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Config().Overlap != c.want {
			t.Errorf("CDC_OVERLAP=%q: overlap %v, want %v", c.env, st.Config().Overlap, c.want)
		}
	}
	if _, err := ConfigFromEnv(func(k string) string {
		return map[string]string{stackconfig.EnvTable: "t", stackconfig.EnvOverlap: "-1m"}[k]
	}); err == nil {
		t.Error("a negative overlap was accepted")
	}
}

// Issue 11.4: the parts of one export are delivered by consecutive runs
// over the same window; only the last part's commit moves the checkpoint.
func TestMultiPartExportIsDeliveredByConsecutiveRuns(t *testing.T) {
	f := newFixture(t, nil)
	a1 := f.start(t, "run-1")
	if a1.Reuse != nil {
		t.Fatalf("first run got reuse %+v", a1.Reuse)
	}
	cp := a1.Window.Since
	exp := exportOf("run-1", a1.ExportWindow, 4, 5, 2)
	r := f.commit(t, "run-1", exp)
	if r.Outcome != OutcomePartial || !r.Checkpoint.Equal(cp) {
		t.Fatalf("commit of part 0 = %s checkpoint %v, want PARTIAL at %v", r.Outcome, r.Checkpoint, cp)
	}
	st := f.status(t)
	if st.Lock != nil || st.Pending == nil || st.Pending.Next.Part != 1 || !st.Checkpoint.Equal(cp) {
		t.Fatalf("status after part 0: lock %+v pending %+v checkpoint %v", st.Lock, st.Pending, st.Checkpoint)
	}

	f.clock.Advance(5 * time.Minute) // a later tick must not widen the window
	for part, name := range []string{"run-2", "run-3"} {
		part++
		a := f.start(t, name)
		if !a.Acquired || !sameWindow(a.Window, a1.Window) || !sameWindow(a.ExportWindow, a1.ExportWindow) {
			t.Fatalf("%s: window %s export %s, want %s export %s", name, a.Window, a.ExportWindow, a1.Window, a1.ExportWindow)
		}
		want := manifest.Export{Bucket: "cdc-bucket", ManifestKey: manifest.PartKey("run-1", part), ManifestRunID: "run-1",
			Part: part, Parts: 3, PartFiles: []int{4, 5, 2}, FileCount: exp.PartFiles[part], JobID: "job-run-1",
			DatastoreID: "ds", Window: a1.ExportWindow}
		if a.Reuse == nil || a.Reuse.ManifestKey != want.ManifestKey || a.Reuse.Part != part || a.Reuse.FileCount != want.FileCount ||
			a.Reuse.JobID != want.JobID || a.Reuse.Bucket != want.Bucket || !sameWindow(a.Reuse.Window, want.Window) {
			t.Fatalf("%s: reuse = %+v, want %+v", name, a.Reuse, want)
		}
		if again := f.start(t, name); again.Reuse == nil || again.Reuse.Part != part {
			t.Fatalf("%s: retried acquire lost the reuse: %+v", name, again.Reuse)
		}
		// run-2 commits the reuse it was given; run-3 commits without part
		// information (the part it was given is known).
		var given *manifest.Export
		if name == "run-2" {
			given = a.Reuse
		}
		r := f.commit(t, name, given)
		if part < 2 && (r.Outcome != OutcomePartial || !r.Checkpoint.Equal(cp)) {
			t.Fatalf("%s: %s at %v, want PARTIAL at %v", name, r.Outcome, r.Checkpoint, cp)
		}
		if part == 2 && (r.Outcome != OutcomeSucceeded || !r.Checkpoint.Equal(a1.Window.Until)) {
			t.Fatalf("%s: %s at %v, want SUCCEEDED at %v", name, r.Outcome, r.Checkpoint, a1.Window.Until)
		}
	}
	st = f.status(t)
	if st.Pending != nil || !st.Checkpoint.Equal(a1.Window.Until) {
		t.Fatalf("after the last part: pending %+v checkpoint %v", st.Pending, st.Checkpoint)
	}
	if h := st.History[0]; h.Part != 2 || h.Parts != 3 || h.ExportJobID != "job-run-1" {
		t.Fatalf("history of the last part = %+v", h)
	}
	a4 := f.start(t, "run-4")
	if a4.Reuse != nil || !a4.Window.Since.Equal(a1.Window.Until) || !a4.Window.Until.Equal(f.clock.Now().Add(-DefaultSafetyLag)) {
		t.Fatalf("run after the export: window %s reuse %+v", a4.Window, a4.Reuse)
	}
}

// pendingAfterPart0 leaves a 3-part export pending after run-1's part 0 and
// returns run-1's acquisition.
func pendingAfterPart0(t *testing.T, f *fixture) Acquisition {
	t.Helper()
	a := f.start(t, "run-1")
	f.commit(t, "run-1", exportOf("run-1", a.ExportWindow, 1, 1, 1))
	return a
}

func TestFailClearsThePendingExport(t *testing.T) {
	f := newFixture(t, nil)
	a1 := pendingAfterPart0(t, f)
	if a := f.start(t, "run-2"); a.Reuse == nil {
		t.Fatal("run-2 got no reuse")
	}
	if _, err := f.store.Fail(context.Background(), FailRequest{Owner: arn("run-2"), RunID: "run-2", Reason: "States.TaskFailed"}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t); st.Pending != nil || !st.Checkpoint.Equal(a1.Window.Since) {
		t.Fatalf("after fail: pending %+v checkpoint %v", st.Pending, st.Checkpoint)
	}
	f.clock.Advance(time.Minute)
	a3 := f.start(t, "run-3")
	if a3.Reuse != nil || !a3.Window.Since.Equal(a1.Window.Since) || !a3.Window.Until.After(a1.Window.Until) {
		t.Fatalf("after a failed part the next run must export again: window %s reuse %+v", a3.Window, a3.Reuse)
	}
}

func TestReplayClearsThePendingExport(t *testing.T) {
	f := newFixture(t, nil)
	a1 := pendingAfterPart0(t, f)
	if _, err := f.store.Replay(context.Background(), ReplayRequest{Since: a1.Window.Since.Add(-time.Hour), Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t); st.Pending != nil {
		t.Fatalf("replay kept the pending export %+v", st.Pending)
	}
	if a := f.start(t, "run-2"); a.Reuse != nil || !a.Window.Since.Equal(a1.Window.Since.Add(-time.Hour)) {
		t.Fatalf("after replay: window %s reuse %+v", a.Window, a.Reuse)
	}
}

// Decision: a take-over (and an operator unlock) keeps the pending export:
// the next run delivers the part the dead run was given, from the same export.
func TestTakeOverAndUnlockKeepThePendingExport(t *testing.T) {
	f := newFixture(t, nil)
	a1 := pendingAfterPart0(t, f)
	f.start(t, "run-2")
	f.owners.set(arn("run-2"), "TIMED_OUT")
	a3 := f.start(t, "run-3")
	if a3.TookOverFrom != arn("run-2") || a3.Reuse == nil || a3.Reuse.Part != 1 || !sameWindow(a3.Window, a1.Window) {
		t.Fatalf("take-over: %+v", a3)
	}
	f.owners.set(arn("run-3"), "ABORTED")
	if _, err := f.store.Unlock(context.Background(), UnlockRequest{Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	a4 := f.start(t, "run-4")
	if a4.Reuse == nil || a4.Reuse.Part != 1 {
		t.Fatalf("after unlock: reuse %+v, want part 1 again", a4.Reuse)
	}
	if r := f.commit(t, "run-4", a4.Reuse); r.Outcome != OutcomePartial {
		t.Fatalf("commit = %s", r.Outcome)
	}
}

func TestCommitOfAnotherPartIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	a := f.start(t, "run-1")
	skip := exportOf("run-1", a.ExportWindow, 1, 1)
	skip.Part, skip.ManifestKey, skip.FileCount = 1, manifest.PartKey("run-1", 1), 1
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", Export: skip}); !errors.Is(err, ErrPartMismatch) {
		t.Fatalf("part 1 of a new export: err = %v, want ErrPartMismatch", err)
	}
	other := exportOf("run-1", envelope.Window{Since: a.Window.Since, Until: a.Window.Until}, 1, 1)
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", Export: other}); !errors.Is(err, ErrWindowMismatch) {
		t.Fatalf("export over another window: err = %v, want ErrWindowMismatch", err)
	}
	f.commit(t, "run-1", exportOf("run-1", a.ExportWindow, 1, 1, 1))
	b := f.start(t, "run-2")
	wrong := *b.Reuse
	wrong.Part, wrong.ManifestKey, wrong.FileCount = 2, manifest.PartKey("run-1", 2), 1
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-2"), RunID: "run-2", Export: &wrong}); !errors.Is(err, ErrPartMismatch) {
		t.Fatalf("part 2 when given part 1: err = %v, want ErrPartMismatch", err)
	}
	if st := f.status(t); st.Lock == nil || st.Pending == nil || st.Pending.Next.Part != 1 {
		t.Fatalf("a refused commit changed the record: lock %+v pending %+v", st.Lock, st.Pending)
	}
}

// Issue 11.7: the lease must outlive the run.
func TestLeaseMustBeLongerThanTheRunTimeout(t *testing.T) {
	if _, err := New(fakeDB{}, Config{Table: "t", RunTimeout: 25 * time.Hour, Lease: 25 * time.Hour}); err == nil {
		t.Fatal("a lease equal to the run timeout was accepted")
	}
	if _, err := New(fakeDB{}, Config{Table: "t", RunTimeout: 30 * time.Hour}); err != nil {
		t.Fatalf("derived lease: %v", err)
	}
	st, _ := New(fakeDB{}, Config{Table: "t", RunTimeout: 30 * time.Hour})
	if st.Config().Lease != 31*time.Hour {
		t.Fatalf("derived lease = %v, want run timeout + 1h", st.Config().Lease)
	}
	cfg, err := ConfigFromEnv(func(k string) string {
		return map[string]string{stackconfig.EnvTable: "t", stackconfig.EnvRunTimeout: "24h", stackconfig.EnvLockLease: "20h"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(fakeDB{}, cfg); err == nil {
		t.Fatal("CDC_LOCK_LEASE=20h under CDC_RUN_TIMEOUT=24h was accepted")
	}
}

// fakeDB satisfies DynamoAPI for tests that never reach DynamoDB.
type fakeDB struct{ DynamoAPI }
