package runlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

func TestWindowAt(t *testing.T) {
	cp := t0.Add(-time.Hour)
	cases := []struct {
		name       string
		checkpoint time.Time
		now        time.Time
		max        time.Duration
		want       envelope.Window
	}{
		{"lagged", cp, t0, 24 * time.Hour, envelope.Window{Since: cp, Until: t0.Add(-2 * time.Minute)}},
		{"bounded by max window", t0.Add(-72 * time.Hour), t0, 24 * time.Hour,
			envelope.Window{Since: t0.Add(-72 * time.Hour), Until: t0.Add(-48 * time.Hour)}},
		{"checkpoint inside the lag is empty", t0.Add(-time.Minute), t0, time.Hour,
			envelope.Window{Since: t0.Add(-time.Minute), Until: t0.Add(-time.Minute)}},
		{"sub-millisecond truncated", cp.Add(123456 * time.Nanosecond), t0.Add(999 * time.Microsecond), time.Hour,
			envelope.Window{Since: cp, Until: t0.Add(-2 * time.Minute)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := WindowAt(c.checkpoint, c.now, 2*time.Minute, c.max)
			if !got.Since.Equal(c.want.Since) || !got.Until.Equal(c.want.Until) {
				t.Fatalf("WindowAt = %s, want %s", got, c.want)
			}
		})
	}
}

func TestFreshTableFirstRunCreatesRecordFromInitialCheckpoint(t *testing.T) {
	f := newFixture(t, nil)
	if st := f.status(t); st.Exists || st.Lock != nil {
		t.Fatalf("fresh table status = %+v, want no record", st)
	}
	a := f.start(t, "run-1")
	if !a.Acquired || a.Empty {
		t.Fatalf("acquire = %+v, want acquired, not empty", a)
	}
	want := envelope.Window{Since: t0.Add(-time.Hour), Until: t0.Add(-DefaultSafetyLag)}
	if !a.Window.Since.Equal(want.Since) || !a.Window.Until.Equal(want.Until) {
		t.Fatalf("window = %s, want %s", a.Window, want)
	}
	st := f.status(t)
	if !st.Exists || !st.Checkpoint.Equal(want.Since) || st.Lag != time.Hour {
		t.Fatalf("status = exists %v checkpoint %v lag %v, want checkpoint %v lag 1h", st.Exists, st.Checkpoint, st.Lag, want.Since)
	}
	if st.Lock == nil || st.Lock.Owner != arn("run-1") || st.Lock.RunID != "run-1" || !st.Lock.LeaseUntil.Equal(t0.Add(DefaultLease)) {
		t.Fatalf("lock = %+v, want run-1 with lease until %v", st.Lock, t0.Add(DefaultLease))
	}
	if len(st.History) != 1 || st.History[0].Outcome != OutcomeRunning || st.History[0].RunID != "run-1" {
		t.Fatalf("history = %+v, want one RUNNING item for run-1", st.History)
	}
}

// With no initial checkpoint configured (the default, "snapshot"), the first
// run's window starts at envelope.SnapshotSince, uncapped by MaxWindow, and its
// export window is a full export; the next run continues from its until.
func TestFreshTableDefaultsToSnapshot(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.InitialCheckpoint = time.Time{}; c.MaxWindow = 24 * time.Hour })
	a := f.start(t, "run-1")
	if !a.Acquired || a.Empty {
		t.Fatalf("first acquire = %+v, want acquired, not empty", a)
	}
	until := t0.Add(-DefaultSafetyLag)
	if !a.Window.Since.Equal(envelope.SnapshotSince) || !a.Window.Until.Equal(until) {
		t.Fatalf("snapshot window = %s, want (%s, %s]", a.Window, envelope.FormatTime(envelope.SnapshotSince), envelope.FormatTime(until))
	}
	if !envelope.IsSnapshotSince(a.ExportWindow.Since) || !a.ExportWindow.Since.Equal(envelope.SnapshotSince) || !a.ExportWindow.Until.Equal(until) {
		t.Fatalf("snapshot export window = %s, want a full export up to %s", a.ExportWindow, envelope.FormatTime(until))
	}
	if st := f.status(t); !st.Exists || !st.Checkpoint.Equal(envelope.SnapshotSince) {
		t.Fatalf("status = %+v", st)
	}
	// A retried acquire of the same run gets the same snapshot window.
	if again := f.start(t, "run-1"); !again.Window.Since.Equal(a.Window.Since) || !again.ExportWindow.Since.Equal(envelope.SnapshotSince) {
		t.Fatalf("retried acquire = %+v", again)
	}
	if _, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	b := f.start(t, "run-2")
	if !b.Window.Since.Equal(until) || !b.Window.Until.Equal(until.Add(5*time.Minute)) ||
		!b.ExportWindow.Since.Equal(until.Add(-DefaultOverlap)) {
		t.Fatalf("second window %s export %s, want incremental from %s", b.Window, b.ExportWindow, envelope.FormatTime(until))
	}
}

// CDC_INITIAL_CHECKPOINT=now: the first run starts at its own time (an empty
// window), and the next delivers what changed since.
func TestFreshTableInitialNow(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.InitialNow = true })
	a := f.start(t, "run-1")
	start := t0.Add(-DefaultSafetyLag)
	if !a.Acquired || !a.Empty || !a.Window.Since.Equal(start) {
		t.Fatalf("first acquire = %+v, want an empty window at %s", a, envelope.FormatTime(start))
	}
	if _, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(5 * time.Minute)
	if b := f.start(t, "run-2"); !b.Window.Since.Equal(start) || !b.Window.Until.Equal(start.Add(5*time.Minute)) {
		t.Fatalf("second window %s", b.Window)
	}
}

func TestSecondExecutionIsRefusedLoggedAndCounted(t *testing.T) {
	f := newFixture(t, nil)
	first := f.start(t, "run-1")
	f.clock.Advance(5 * time.Minute)
	second := f.start(t, "run-2")
	if second.Acquired || second.Holder != arn("run-1") || !strings.Contains(second.Reason, "run-1") || second.Refusal != RefusalLockHeld {
		t.Fatalf("second acquire = %+v, want refused (%s) naming run-1", second, RefusalLockHeld)
	}
	st := f.status(t)
	if st.Lock == nil || st.Lock.RunID != "run-1" || !st.Lock.Window.Until.Equal(first.Window.Until) {
		t.Fatalf("lock after refusal = %+v, want run-1's unchanged", st.Lock)
	}
	if st.SkippedRuns != 1 || !st.LastSkippedAt.Equal(f.clock.Now()) {
		t.Fatalf("skipped = %d at %v, want 1 at %v", st.SkippedRuns, st.LastSkippedAt, f.clock.Now())
	}
	if len(st.History) != 1 {
		t.Fatalf("a refused run left history: %+v", st.History)
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"msg":"run lock refused"`) || !strings.Contains(logs, `"runId":"run-2"`) {
		t.Fatalf("refusal not logged: %s", logs)
	}
}

func TestAcquireAgainByTheOwnerReturnsTheSameWindow(t *testing.T) {
	f := newFixture(t, nil)
	a := f.start(t, "run-1")
	f.clock.Advance(time.Minute)
	b := f.start(t, "run-1")
	if !b.Acquired || !b.Window.Until.Equal(a.Window.Until) || !b.Window.Since.Equal(a.Window.Since) {
		t.Fatalf("re-acquire = %+v, want the first window %s", b, a.Window)
	}
}

func TestFiftyExecutionsRaceExactlyOneWins(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			f := newFixture(t, nil)
			if !fresh {
				a := f.start(t, "seed")
				if _, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("seed"), RunID: "seed"}); err != nil || !a.Acquired {
					t.Fatalf("seed run: %v", err)
				}
				f.clock.Advance(5 * time.Minute)
			}
			const n = 50
			for i := range n {
				f.owners.set(arn(fmt.Sprintf("racer-%d", i)), StatusRunning)
			}
			var wg sync.WaitGroup
			results := make([]Acquisition, n)
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					name := fmt.Sprintf("racer-%d", i)
					results[i], errs[i] = f.store.Acquire(context.Background(), AcquireRequest{Owner: arn(name), RunID: name})
				}()
			}
			close(start)
			wg.Wait()
			winners := []string{}
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("racer-%d: %v", i, errs[i])
				}
				if results[i].Acquired {
					winners = append(winners, results[i].RunID)
				}
			}
			if len(winners) != 1 {
				t.Fatalf("winners = %v, want exactly one", winners)
			}
			st := f.status(t)
			if st.Lock == nil || st.Lock.RunID != winners[0] {
				t.Fatalf("lock holder = %+v, want %s", st.Lock, winners[0])
			}
			if st.SkippedRuns != n-1 {
				t.Fatalf("skipped runs = %d, want %d", st.SkippedRuns, n-1)
			}
		})
	}
}

func TestStaleOwnerIsTakenOver(t *testing.T) {
	for _, status := range []string{"FAILED", "TIMED_OUT", "ABORTED", "SUCCEEDED", StatusGone} {
		t.Run(status, func(t *testing.T) {
			f := newFixture(t, nil)
			old := f.start(t, "run-1")
			f.owners.set(arn("run-1"), status)
			f.clock.Advance(5 * time.Minute)
			a := f.start(t, "run-2")
			if !a.Acquired || a.TookOverFrom != arn("run-1") {
				t.Fatalf("acquire = %+v, want a take-over from run-1", a)
			}
			if !a.Window.Since.Equal(old.Window.Since) {
				t.Fatalf("take-over window %s does not restart at the checkpoint %v", a.Window, old.Window.Since)
			}
			st := f.status(t)
			if st.Takeovers != 1 || st.Lock.RunID != "run-2" || st.LastRun == nil || st.LastRun.RunID != "run-1" || st.LastRun.Outcome != OutcomeAbandoned {
				t.Fatalf("status = takeovers %d lock %+v last %+v", st.Takeovers, st.Lock, st.LastRun)
			}
			byRun := map[string]HistoryRecord{}
			for _, h := range st.History {
				byRun[h.RunID] = h
			}
			if byRun["run-1"].Outcome != OutcomeAbandoned || !strings.Contains(byRun["run-1"].Reason, status) {
				t.Fatalf("run-1 history = %+v, want ABANDONED naming %s", byRun["run-1"], status)
			}
			if byRun["run-2"].TookOverFrom != arn("run-1") {
				t.Fatalf("run-2 history = %+v, want tookOverFrom run-1", byRun["run-2"])
			}
			if !strings.Contains(f.logs.String(), `"msg":"run lock taken over"`) {
				t.Fatalf("take-over not logged")
			}
			// The old owner can no longer commit.
			if _, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); !errors.Is(err, ErrNotOwner) {
				t.Fatalf("commit by the stale owner: err = %v, want ErrNotOwner", err)
			}
		})
	}
}

func TestLeaseDecidesWhenTheOwnerLooksAliveOrUnknown(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Lease = time.Hour })
	f.start(t, "run-1")
	f.owners.setErr(errors.New("AccessDenied"))
	f.clock.Advance(30 * time.Minute)
	if a := f.start(t, "run-2"); a.Acquired || !strings.Contains(a.Reason, "unknown") {
		t.Fatalf("acquire with unknown owner status = %+v, want refused (never take over on doubt)", a)
	}
	f.owners.setErr(nil) // run-1 still says RUNNING
	f.clock.Advance(31 * time.Minute)
	a := f.start(t, "run-3")
	if !a.Acquired || a.TookOverFrom != arn("run-1") || !strings.Contains(a.Reason, "lease expired") {
		t.Fatalf("acquire after the lease = %+v, want a take-over for lease expiry", a)
	}
}

func TestTwoExecutionsRacingForAStaleLockOneWins(t *testing.T) {
	f := newFixture(t, nil)
	f.start(t, "dead")
	f.owners.set(arn("dead"), "FAILED")
	const n = 10
	var wg sync.WaitGroup
	won := make(chan string, n)
	for i := range n {
		name := fmt.Sprintf("next-%d", i)
		f.owners.set(arn(name), StatusRunning)
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := f.store.Acquire(context.Background(), AcquireRequest{Owner: arn(name), RunID: name})
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			if a.Acquired {
				won <- name
			}
		}()
	}
	wg.Wait()
	close(won)
	var winners []string
	for w := range won {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
	if st := f.status(t); st.Takeovers != 1 {
		t.Fatalf("takeovers = %d, want 1", st.Takeovers)
	}
}

func TestConditionalWriteOnAStaleReadFails(t *testing.T) {
	f := newFixture(t, nil)
	f.start(t, "run-1")
	ctx := context.Background()
	before, err := f.store.getState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	// A release built from the old read must not apply: version and owner moved on.
	err = f.store.transact(ctx, f.store.releaseWrite(before, t0, OutcomeFailed, "late", before.checkpoint, pendingChange{}))
	if !conditionFailed(err) {
		t.Fatalf("stale release: err = %v, want a conditional check failure", err)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("err %T is not a TransactionCanceledException", err)
	}
	// Same for a plain update with a stale version.
	_, err = f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(f.table), Key: stateKey(),
		UpdateExpression:          aws.String("SET lastRunTime = :t"),
		ConditionExpression:       aws.String("version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": tm(t0), ":v": n(before.version)},
	})
	if !conditionFailed(err) {
		t.Fatalf("stale update: err = %v, want ConditionalCheckFailedException", err)
	}
}

func TestCommitMovesTheCheckpointOnlyForTheOwner(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	a := f.start(t, "run-1")
	f.owners.set(arn("intruder"), StatusRunning)
	_, err := f.store.Commit(ctx, CommitRequest{Owner: arn("intruder"), RunID: "intruder"})
	if !errors.Is(err, ErrNotOwner) {
		t.Fatalf("commit by a non-owner: err = %v, want ErrNotOwner", err)
	}
	if st := f.status(t); !st.Checkpoint.Equal(a.Window.Since) || st.Lock == nil {
		t.Fatalf("non-owner commit changed the record: checkpoint %v lock %+v", st.Checkpoint, st.Lock)
	}
	f.clock.Advance(3 * time.Minute)
	counts := Counts{Files: 2, Lines: 10, Events: 9, Quarantined: 1, Bytes: 4096, OverlapSkipped: 3, FastPathSkipped: 5, FastPathMissed: 1}
	res, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", ExportJobID: "job-1", Counts: counts})
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if res.Outcome != OutcomeSucceeded || !res.Checkpoint.Equal(a.Window.Until) || !res.Released {
		t.Fatalf("commit = %+v, want SUCCEEDED at %v", res, a.Window.Until)
	}
	again, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", ExportJobID: "job-1", Counts: counts})
	if err != nil || again.Outcome != OutcomeSucceeded || !again.Checkpoint.Equal(a.Window.Until) || again.Released {
		t.Fatalf("repeated commit = %+v, %v; want the first answer, not released again", again, err)
	}
	st := f.status(t)
	if st.Lock != nil || !st.Checkpoint.Equal(a.Window.Until) {
		t.Fatalf("after commit: lock %+v checkpoint %v", st.Lock, st.Checkpoint)
	}
	h := st.History[0]
	if h.Outcome != OutcomeSucceeded || h.ExportJobID != "job-1" || h.Counts != counts || !h.EndedAt.Equal(f.clock.Now()) {
		t.Fatalf("history = %+v, want SUCCEEDED with job-1 and %+v", h, counts)
	}
	// The next run starts exactly where this one ended.
	f.clock.Advance(5 * time.Minute)
	b := f.start(t, "run-2")
	if !b.Window.Since.Equal(a.Window.Until) {
		t.Fatalf("next window %s does not start at %v", b.Window, a.Window.Until)
	}
}

func TestFailLeavesTheCheckpointAndRecordsTheReason(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	a := f.start(t, "run-1")
	res, err := f.store.Fail(ctx, FailRequest{Owner: arn("run-1"), RunID: "run-1", ExportJobID: "job-9",
		Reason: "States.Timeout: " + strings.Repeat("x", 5000)})
	if err != nil {
		t.Fatalf("fail: %v", err)
	}
	if res.Outcome != OutcomeFailed || !res.Checkpoint.Equal(a.Window.Since) || !res.Released {
		t.Fatalf("fail = %+v", res)
	}
	st := f.status(t)
	if st.Lock != nil || !st.Checkpoint.Equal(a.Window.Since) || st.LastRun.Outcome != OutcomeFailed {
		t.Fatalf("after fail: %+v", st)
	}
	h := st.History[0]
	if h.Outcome != OutcomeFailed || !strings.HasPrefix(h.Reason, "States.Timeout") || len(h.Reason) > maxReasonBytes+4 || h.ExportJobID != "job-9" {
		t.Fatalf("history = %+v (reason %d bytes)", h, len(h.Reason))
	}
	// The next run retries the same window.
	b := f.start(t, "run-2")
	if !b.Window.Since.Equal(a.Window.Since) {
		t.Fatalf("retry window %s, want since %v", b.Window, a.Window.Since)
	}
	// A late fail of run-1 does not touch run-2's lock.
	res, err = f.store.Fail(ctx, FailRequest{Owner: arn("run-1"), RunID: "run-1", StartTime: t0, Reason: "late"})
	if err != nil || res.Released || res.Outcome != OutcomeFailed {
		t.Fatalf("late fail = %+v, %v", res, err)
	}
	if st := f.status(t); st.Lock == nil || st.Lock.RunID != "run-2" {
		t.Fatalf("late fail released run-2: %+v", st.Lock)
	}
}

func TestEmptyWindowCommitIsACleanNoOp(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.InitialCheckpoint = t0.Add(-time.Minute) })
	a := f.start(t, "run-1")
	if !a.Acquired || !a.Empty {
		t.Fatalf("acquire = %+v, want an empty window", a)
	}
	res, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1"})
	if err != nil || res.Outcome != OutcomeEmpty || !res.Checkpoint.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("commit = %+v, %v; want EMPTY with the checkpoint unchanged", res, err)
	}
	st := f.status(t)
	if st.Lock != nil || st.History[0].Outcome != OutcomeEmpty || !st.History[0].Empty {
		t.Fatalf("status after empty commit: lock %+v history %+v", st.Lock, st.History)
	}
}

func TestLongOutageCatchesUpInBoundedWindows(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.InitialCheckpoint = t0.Add(-50 * time.Hour); c.MaxWindow = 24 * time.Hour })
	ctx := context.Background()
	var got []envelope.Window
	for i := range 4 {
		name := fmt.Sprintf("run-%d", i)
		a := f.start(t, name)
		got = append(got, a.Window)
		if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn(name), RunID: name}); err != nil {
			t.Fatal(err)
		}
	}
	want := []envelope.Window{
		{Since: t0.Add(-50 * time.Hour), Until: t0.Add(-26 * time.Hour)},
		{Since: t0.Add(-26 * time.Hour), Until: t0.Add(-2 * time.Hour)},
		{Since: t0.Add(-2 * time.Hour), Until: t0.Add(-2 * time.Minute)},
		{Since: t0.Add(-2 * time.Minute), Until: t0.Add(-2 * time.Minute)},
	}
	for i := range want {
		if !got[i].Since.Equal(want[i].Since) || !got[i].Until.Equal(want[i].Until) {
			t.Fatalf("window %d = %s, want %s", i, got[i], want[i])
		}
	}
}

func TestReplay(t *testing.T) {
	ctx := context.Background()
	t.Run("refused while a live run holds the lock", func(t *testing.T) {
		f := newFixture(t, nil)
		a := f.start(t, "run-1")
		_, err := f.store.Replay(ctx, ReplayRequest{Since: t0.Add(-5 * time.Hour), Actor: "ops"})
		if !errors.Is(err, ErrLockHeld) || !strings.Contains(err.Error(), "run-1") {
			t.Fatalf("replay err = %v, want ErrLockHeld naming run-1", err)
		}
		if st := f.status(t); !st.Checkpoint.Equal(a.Window.Since) || st.LastReplay != nil {
			t.Fatalf("refused replay changed the record: %+v", st)
		}
	})
	t.Run("refused while a stale run holds the lock", func(t *testing.T) {
		f := newFixture(t, nil)
		f.start(t, "run-1")
		f.owners.set(arn("run-1"), "ABORTED")
		_, err := f.store.Replay(ctx, ReplayRequest{Since: t0.Add(-5 * time.Hour)})
		if !errors.Is(err, ErrStaleLock) || !strings.Contains(err.Error(), "cdcctl unlock") {
			t.Fatalf("replay err = %v, want ErrStaleLock telling to unlock", err)
		}
	})
	t.Run("moves back and is audited", func(t *testing.T) {
		f := newFixture(t, nil)
		a := f.start(t, "run-1")
		if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil {
			t.Fatal(err)
		}
		_, err := f.store.Replay(ctx, ReplayRequest{Since: a.Window.Until.Add(time.Second), Actor: "ops"})
		if !errors.Is(err, ErrNotBackwards) {
			t.Fatalf("forward replay err = %v, want ErrNotBackwards", err)
		}
		to := t0.Add(-5 * time.Hour)
		res, err := f.store.Replay(ctx, ReplayRequest{Since: to, Actor: "arn:aws:iam::1:user/ops", Reason: "consumer lost events"})
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		if !res.Record.From.Equal(a.Window.Until) || !res.Record.To.Equal(to) || res.Created {
			t.Fatalf("replay record = %+v", res)
		}
		st := f.status(t)
		if !st.Checkpoint.Equal(to) || st.LastReplay == nil || st.LastReplay.By != "arn:aws:iam::1:user/ops" ||
			!st.LastReplay.From.Equal(a.Window.Until) || st.LastReplay.Reason != "consumer lost events" {
			t.Fatalf("status after replay: checkpoint %v last replay %+v", st.Checkpoint, st.LastReplay)
		}
		rs, err := f.store.Replays(ctx, 10)
		if err != nil || len(rs) != 1 || !rs[0].To.Equal(to) || !rs[0].At.Equal(t0) {
			t.Fatalf("replay audit = %+v, %v", rs, err)
		}
		b := f.start(t, "run-2")
		if !b.Window.Since.Equal(to) {
			t.Fatalf("window after replay %s, want since %v", b.Window, to)
		}
	})
	t.Run("creates the record on a fresh table", func(t *testing.T) {
		f := newFixture(t, func(c *Config) { c.InitialCheckpoint = time.Time{} })
		res, err := f.store.Replay(ctx, ReplayRequest{Since: t0.Add(-3 * time.Hour), Actor: "ops"})
		if err != nil || !res.Created {
			t.Fatalf("replay on a fresh table = %+v, %v", res, err)
		}
		if a := f.start(t, "run-1"); !a.Window.Since.Equal(t0.Add(-3 * time.Hour)) {
			t.Fatalf("first window %s", a.Window)
		}
	})
}

func TestUnlock(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	if res, err := f.store.Unlock(ctx, UnlockRequest{Actor: "ops"}); err != nil || res.Released || res.Owner != "" {
		t.Fatalf("unlock of a free lock = %+v, %v", res, err)
	}
	a := f.start(t, "run-1")
	res, err := f.store.Unlock(ctx, UnlockRequest{Actor: "ops"})
	if !errors.Is(err, ErrLockHeld) || res.Released || res.RunID != "run-1" || !res.Liveness.Live {
		t.Fatalf("unlock of a live owner = %+v, %v; want refused", res, err)
	}
	f.owners.set(arn("run-1"), "TIMED_OUT")
	res, err = f.store.Unlock(ctx, UnlockRequest{Actor: "ops"})
	if err != nil || !res.Released || res.Liveness.Status != "TIMED_OUT" {
		t.Fatalf("unlock of a timed-out owner = %+v, %v", res, err)
	}
	st := f.status(t)
	if st.Lock != nil || !st.Checkpoint.Equal(a.Window.Since) || st.LastRun.Outcome != OutcomeAbandoned || st.History[0].Outcome != OutcomeAbandoned {
		t.Fatalf("after unlock: %+v", st)
	}
	// --force releases a live owner, whose commit is then refused.
	f.start(t, "run-2")
	res, err = f.store.Unlock(ctx, UnlockRequest{Force: true, Actor: "ops"})
	if err != nil || !res.Released || !res.Liveness.Live {
		t.Fatalf("forced unlock = %+v, %v", res, err)
	}
	if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-2"), RunID: "run-2"}); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("commit after a forced unlock: %v, want ErrNotOwner", err)
	}
	if st := f.status(t); !st.Checkpoint.Equal(a.Window.Since) {
		t.Fatalf("checkpoint moved: %v", st.Checkpoint)
	}
}

func TestStatusShowsTheExportJobReadDefensively(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.start(t, "run-1")
	_, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"pk": str("EXPORT#run-1"), "sk": str("JOB"), "jobId": str("job-42"), "status": str("IN_PROGRESS"),
		"startedAt": n(1795000000), "claim": str("x"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	st := f.status(t)
	if st.ExportJob == nil || st.ExportJob.JobID != "job-42" || st.ExportJob.Status != "IN_PROGRESS" || st.ExportJob.StartedAt != "1795000000" {
		t.Fatalf("export job = %+v", st.ExportJob)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		stackconfig.EnvTable: "cdc", stackconfig.EnvSafetyLag: "90s", stackconfig.EnvMaxWindow: "6h", stackconfig.EnvLockLease: "3h",
		stackconfig.EnvInitialCheckpoint: "2026-11-01T00:00:00Z",
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	for v, wantNow := range map[string]bool{"": false, "snapshot": false, " now ": true} {
		c, err := ConfigFromEnv(func(k string) string {
			return map[string]string{stackconfig.EnvTable: "t", stackconfig.EnvInitialCheckpoint: v}[k]
		})
		if err != nil || c.InitialNow != wantNow || !c.InitialCheckpoint.IsZero() {
			t.Errorf("%s=%q: InitialNow %v checkpoint %v, %v", stackconfig.EnvInitialCheckpoint, v, c.InitialNow, c.InitialCheckpoint, err)
		}
	}
	if cfg.Table != "cdc" || cfg.SafetyLag != 90*time.Second || cfg.MaxWindow != 6*time.Hour || cfg.Lease != 3*time.Hour ||
		!cfg.InitialCheckpoint.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("config = %+v", cfg)
	}
	for name, bad := range map[string]map[string]string{
		"no table":      {},
		"bad lag":       {stackconfig.EnvTable: "t", stackconfig.EnvSafetyLag: "two minutes"},
		"zero lease":    {stackconfig.EnvTable: "t", stackconfig.EnvLockLease: "0s"},
		"bad timestamp": {stackconfig.EnvTable: "t", stackconfig.EnvInitialCheckpoint: "yesterday"},
		"snapshot case": {stackconfig.EnvTable: "t", stackconfig.EnvInitialCheckpoint: "Snapshot"},
		"negative lag":  {stackconfig.EnvTable: "t", stackconfig.EnvSafetyLag: "-1m"},
	} {
		if _, err := ConfigFromEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// CDC_SAFETY_LAG=0 means no lag (windows end at now); unset means the default.
func TestZeroSafetyLagIsNoLag(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		env  string
		want time.Duration
	}{{"0s", 0}, {"", DefaultSafetyLag}, {"30s", 30 * time.Second}} {
		cfg, err := ConfigFromEnv(func(k string) string {
			return map[string]string{stackconfig.EnvTable: "t", stackconfig.EnvSafetyLag: c.env}[k]
		})
		if err != nil {
			t.Fatalf("CDC_SAFETY_LAG=%q: %v", c.env, err)
		}
		cfg.Now = func() time.Time { return now }
		st, err := New(struct{ DynamoAPI }{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Config().SafetyLag; got != c.want {
			t.Errorf("CDC_SAFETY_LAG=%q: lag %v, want %v", c.env, got, c.want)
		}
		if w := WindowAt(now.Add(-time.Hour), now, st.Config().SafetyLag, time.Hour*24); !w.Until.Equal(now.Add(-c.want)) {
			t.Errorf("CDC_SAFETY_LAG=%q: until %v", c.env, w.Until)
		}
	}
}

func TestCommitWithAnotherWindowIsRefused(t *testing.T) {
	f := newFixture(t, nil)
	a := f.start(t, "run-1")
	other := envelope.Window{Since: a.Window.Since, Until: a.Window.Until.Add(time.Minute)}
	_, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1", Window: &other})
	if !errors.Is(err, ErrWindowMismatch) {
		t.Fatalf("commit with another window: %v, want ErrWindowMismatch", err)
	}
	res, err := f.store.Commit(context.Background(), CommitRequest{Owner: arn("run-1"), RunID: "run-1", Window: &a.Window})
	if err != nil || !res.Checkpoint.Equal(a.Window.Until) {
		t.Fatalf("commit with the held window = %+v, %v", res, err)
	}
}

func TestUsedKeepsOnlyMentionedPlaceholders(t *testing.T) {
	names, values := used(
		map[string]string{"#a": "a", "#ab": "ab", "#unused": "u"},
		map[string]types.AttributeValue{":x": n(1), ":x2": n(2), ":gone": n(3)},
		"SET #ab = :x2", "#a = :x")
	if len(names) != 2 || names["#a"] != "a" || names["#ab"] != "ab" {
		t.Errorf("names = %v", names)
	}
	if len(values) != 2 || values[":x"] == nil || values[":x2"] == nil {
		t.Errorf("values = %v", values)
	}
	if n, v := used(map[string]string{"#a": "a"}, nil, "SET b = c"); n != nil || v != nil {
		t.Errorf("nothing mentioned: %v %v, want nil maps (DynamoDB rejects empty ones)", n, v)
	}
}

// TestContinuesOnlyAfterACommit: acquire says a window continues a
// delivered one (its overlap's repeats may be skipped) only when a run's
// commit set the checkpoint — not on a fresh record, not after a failed run
// that left it, not after a replay, and again after the next commit.
func TestContinuesOnlyAfterACommit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	commit := func(name string) {
		t.Helper()
		if _, err := f.store.Commit(ctx, CommitRequest{Owner: arn(name), RunID: name}); err != nil {
			t.Fatalf("commit %s: %v", name, err)
		}
		f.owners.set(arn(name), "SUCCEEDED")
		f.clock.Advance(5 * time.Minute)
	}
	if a := f.start(t, "run-1"); a.Continues {
		t.Fatalf("first window on a fresh record continues: %+v", a)
	}
	commit("run-1")
	if a := f.start(t, "run-2"); !a.Continues {
		t.Fatalf("window after a commit does not continue: %+v", a)
	}
	if a, err := f.store.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2"}); err != nil || !a.Continues {
		t.Fatalf("the holder's retried acquire: %+v, %v", a, err)
	}
	if _, err := f.store.Fail(ctx, FailRequest{Owner: arn("run-2"), RunID: "run-2", Reason: "States.TaskFailed"}); err != nil {
		t.Fatal(err)
	}
	f.owners.set(arn("run-2"), "FAILED")
	if a := f.start(t, "run-3"); !a.Continues {
		t.Fatalf("rerun after a failure (checkpoint still a commit's) does not continue: %+v", a)
	}
	commit("run-3")
	if _, err := f.store.Replay(ctx, ReplayRequest{Since: t0.Add(-3 * time.Hour), Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	if a := f.start(t, "run-4"); a.Continues {
		t.Fatalf("window after a replay continues: %+v", a)
	}
	commit("run-4")
	if a := f.start(t, "run-5"); !a.Continues {
		t.Fatalf("window after the replayed window's commit does not continue: %+v", a)
	}
}

// History and Replays read past DynamoDB's 1 MB page (the local gateway
// enforces it): asked for 1,000 runs of 2 KB each, History returns 1,000,
// newest first.
func TestHistoryReadsPastOnePage(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.start(t, "run-0")
	got, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key(pkRun, historySK(t0, "run-0"))})
	if err != nil || got.Item == nil {
		t.Fatalf("the first run's history item: %v", err)
	}
	const runs = 1100
	for i := 1; i < runs; i++ {
		it := item{}
		for k, v := range got.Item {
			it[k] = v
		}
		at := t0.Add(time.Duration(i) * time.Minute)
		it[attrSK] = str(historySK(at, fmt.Sprintf("run-%d", i)))
		it[attrRunID] = str(fmt.Sprintf("run-%d", i))
		it["padding"] = str(strings.Repeat("x", 2048))
		if _, err := f.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := f.store.History(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1000 || hs[0].RunID != fmt.Sprintf("run-%d", runs-1) || hs[999].RunID != fmt.Sprintf("run-%d", runs-1000) {
		t.Fatalf("History(1000): %d runs, first %q, last %q", len(hs), hs[0].RunID, hs[len(hs)-1].RunID)
	}
	if hs, err := f.store.History(ctx, 5000); err != nil || len(hs) != runs {
		t.Fatalf("History(5000): %d runs, %v; want all %d", len(hs), err, runs)
	}
}
