package runlock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// loseEachWriteOnce makes the gateway lose the answer of every DynamoDB
// write the first time its exact request arrives: each write takes effect,
// and the SDK's second attempt (the same bytes) meets it.
func loseEachWriteOnce(env *localaws.Env) {
	var mu sync.Mutex
	seen := map[[sha256.Size]byte]bool{}
	env.Gateway.SetAnswerLoss(func(service, op string, r *http.Request) bool {
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems":
		default:
			return false
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		mu.Lock()
		defer mu.Unlock()
		if seen[sum] {
			return false
		}
		seen[sum] = true
		return true
	})
}

// Every run-lock write that took effect and lost its answer is sent again
// by the SDK; each tells its own first attempt from another writer's: the
// lock is taken once, a refusal counted once, a commit moves the checkpoint
// once, a failure and a replay are recorded as asked.
func TestRunLockWritesSurviveLostAnswers(t *testing.T) {
	f := newFixture(t, nil)
	loseEachWriteOnce(f.env)
	ctx := context.Background()

	a := f.start(t, "run-1")
	if !a.Acquired || a.Reason == "already held by this run" {
		t.Fatalf("acquire = %+v, want acquired as a new lock", a)
	}
	lost := f.env.Gateway.AnswersLost()
	if lost == 0 {
		t.Fatal("no answer was lost: the test exercises nothing")
	}
	f.clock.Advance(time.Minute)
	if r := f.start(t, "run-2"); r.Acquired {
		t.Fatalf("run-2 acquired a held lock: %+v", r)
	}
	if r := f.start(t, "run-2"); r.Acquired {
		t.Fatalf("run-2 acquired a held lock: %+v", r)
	}
	st := f.status(t)
	if st.SkippedRuns != 1 {
		t.Errorf("skipped runs = %d, want run-2 counted once", st.SkippedRuns)
	}

	res, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", ExportJobID: "job-1"})
	if err != nil {
		t.Fatalf("commit whose answer was lost: %v", err)
	}
	if !res.Released || res.Outcome != OutcomeSucceeded || !res.Checkpoint.Equal(a.Window.Until) {
		t.Errorf("commit = %+v, want SUCCEEDED at %s, released", res, a.Window.Until)
	}

	f.clock.Advance(5 * time.Minute)
	b := f.start(t, "run-3")
	if !b.Acquired || !b.Window.Since.Equal(a.Window.Until) {
		t.Fatalf("run-3 = %+v, want the window after run-1's", b)
	}
	fr, err := f.store.Fail(ctx, FailRequest{Owner: arn("run-3"), RunID: "run-3", StartTime: f.clock.Now(), Reason: "export failed"})
	if err != nil || !fr.Released || !fr.Checkpoint.Equal(a.Window.Until) {
		t.Errorf("fail = %+v, %v; want released, checkpoint unchanged", fr, err)
	}
	st = f.status(t)
	if st.Lock != nil || st.LastRun == nil || st.LastRun.RunID != "run-3" || st.LastRun.Outcome != OutcomeFailed {
		t.Errorf("after the failure: lock %+v, last run %+v", st.Lock, st.LastRun)
	}

	since := a.Window.Since.Add(-time.Hour)
	if _, err := f.store.Replay(ctx, ReplayRequest{Since: since, Actor: "operator", Reason: "test"}); err != nil {
		t.Fatalf("replay whose answer was lost: %v", err)
	}
	if st = f.status(t); !st.Checkpoint.Equal(since) {
		t.Errorf("checkpoint after replay = %s, want %s", st.Checkpoint, since)
	}
	if n := f.env.Gateway.AnswersLost(); n < lost+4 {
		t.Errorf("answers lost = %d, want one for each write", n)
	}
}
