package runlock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging/loggingtest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// owners is an in-memory OwnerChecker: executions not registered are GONE.
type owners struct {
	mu     sync.Mutex
	status map[string]string
	err    error
	calls  atomic.Int64
}

func newOwners() *owners { return &owners{status: map[string]string{}} }

func (o *owners) set(arn, status string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.status[arn] = status
}

func (o *owners) setErr(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.err = err
}

func (o *owners) ExecutionStatus(_ context.Context, arn string) (string, error) {
	o.calls.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return "", o.err
	}
	if st, ok := o.status[arn]; ok {
		return st, nil
	}
	return StatusGone, nil
}

var tableSeq atomic.Int64

// fixture is one fresh table on a local DynamoDB with a store over it.
type fixture struct {
	env    *localaws.Env
	db     *dynamodb.Client
	table  string
	clock  *clock
	owners *owners
	logs   *loggingtest.Buffer
	store  *Store
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	env := localawstest.Start(t)
	db := dynamodb.NewFromConfig(env.Config())
	f := &fixture{env: env, db: db, table: fmt.Sprintf("runlock-%d", tableSeq.Add(1)),
		clock: newClock(t0), owners: newOwners(), logs: &loggingtest.Buffer{}}
	if err := CreateTable(context.Background(), db, f.table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	cfg := Config{
		Table:             f.table,
		InitialCheckpoint: t0.Add(-time.Hour),
		Now:               f.clock.Now,
		Owners:            f.owners,
		Logger:            slog.New(slog.NewJSONHandler(f.logs, nil)),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	st, err := New(db, cfg)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	f.store = st
	return f
}

func arn(name string) string {
	return "arn:aws:states:us-east-1:000000000000:execution:cdc:" + name
}

// start acquires as a new RUNNING execution named name.
func (f *fixture) start(t *testing.T, name string) Acquisition {
	t.Helper()
	f.owners.set(arn(name), StatusRunning)
	a, err := f.store.Acquire(context.Background(), AcquireRequest{Owner: arn(name), RunID: name, StartTime: f.clock.Now()})
	if err != nil {
		t.Fatalf("acquire %s: %v", name, err)
	}
	return a
}

func (f *fixture) status(t *testing.T) Status {
	t.Helper()
	st, err := f.store.Status(context.Background(), 50)
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}
