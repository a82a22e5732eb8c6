package runlock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// loseEachWriteOnce makes the gateway lose the answer of every DynamoDB
// write the first time its exact request arrives: each write takes effect,
// and the SDK's second attempt (the same bytes) meets it.
func loseEachWriteOnce(env *localaws.Env) {
	var mu sync.Mutex
	seen := map[[sha256.Size]byte]bool{}
	env.Gateway.SetAnswerLoss(func(service, op string, r *http.Request) bool {
		if !localaws.IsDynamoDBWrite(op) {
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

// holdRecord runs, from now on, a transaction of its own that includes
// RUN/STATE (a condition check and an unrelated put) and takes 150 ms at
// the gateway, as another writer of the record would; it returns when the
// transaction is answered.
func (f *fixture) holdRecord(t *testing.T) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f.db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{ConditionCheck: &types.ConditionCheck{TableName: aws.String(f.table), Key: stateKey(), ConditionExpression: aws.String("attribute_exists(pk)")}},
			{Put: &types.Put{TableName: aws.String(f.table), Item: key("OTHER", "x")}},
		}})
		done <- err
	}()
	return done
}

// Each run-lock write that meets another request writing RUN/STATE at the
// same moment (DynamoDB refuses it: TransactionConflict, which the SDK does
// not retry) reads the record again and decides again, instead of failing
// the execution (a page for nothing, and a window delivered again).
func TestRunLockWritesMeetingATransactionConflictDecideAgain(t *testing.T) {
	f := newFixture(t, nil)
	m, err := localaws.NewLatencyModel(localaws.LatencyConfig{Services: map[string]map[string]localaws.Distribution{
		localaws.ServiceDynamoDB: {"TransactWriteItems": localaws.Fixed(150 * time.Millisecond)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	a := f.start(t, "run-1")
	f.env.Gateway.SetLatency(m)
	ctx := context.Background()
	during := func(what string, write func() error) {
		t.Helper()
		held := f.holdRecord(t)
		time.Sleep(30 * time.Millisecond) // the other transaction is under way
		if err := write(); err != nil {
			t.Fatalf("%s during another transaction of the record: %v", what, err)
		}
		if err := <-held; err != nil {
			t.Fatalf("the other transaction: %v", err)
		}
	}

	during("a refused acquire", func() error {
		r := f.start(t, "run-2")
		if r.Acquired {
			t.Errorf("run-2 acquired a held lock")
		}
		return nil
	})
	during("commit", func() error {
		res, err := f.store.Commit(ctx, CommitRequest{Owner: arn("run-1"), RunID: "run-1", ExportJobID: "job-1"})
		if err == nil && (!res.Released || !res.Checkpoint.Equal(a.Window.Until)) {
			t.Errorf("commit = %+v", res)
		}
		return err
	})
	f.clock.Advance(5 * time.Minute)
	during("acquire", func() error {
		if b := f.start(t, "run-3"); !b.Acquired || !b.Window.Since.Equal(a.Window.Until) {
			t.Errorf("run-3 = %+v, want the window after run-1's", b)
		}
		return nil
	})
	if logs := f.logs.String(); strings.Count(logs, "reading it again") < 2 || strings.Contains(logs, "not counted") {
		t.Errorf("conflicts not met, or a refusal not counted: %s", logs)
	}
	if st := f.status(t); st.SkippedRuns != 1 {
		t.Errorf("skipped runs = %d, want run-2's refusal counted", st.SkippedRuns)
	}
}
