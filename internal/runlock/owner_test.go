package runlock

import (
	"context"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn/sfntest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestSFNOwnerCheckerOverTheSDK(t *testing.T) {
	env := localawstest.Start(t)
	runs := sfntest.Start(t, env)
	checker := SFNOwnerChecker{Client: sfn.NewFromConfig(env.Config())}
	ctx := context.Background()
	// PENDING_REDRIVE is passed on the same way; the emulator cannot
	// arrange it (no redrive): TestPendingRedriveIsLive holds its meaning.
	for _, status := range []string{"RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"} {
		a := arn("x-" + status)
		runs.Set(t, a, status)
		got, err := checker.ExecutionStatus(ctx, a)
		if err != nil || got != status {
			t.Errorf("status of a %s execution = %q, %v", status, got, err)
		}
	}
	if got, err := checker.ExecutionStatus(ctx, arn("never-started")); err != nil || got != StatusGone {
		t.Errorf("unknown execution = %q, %v; want GONE", got, err)
	}
	// A failure to ask is an error, never a verdict.
	env.Gateway.SetFaults(func(service, op string) (int, string, bool) {
		return 400, `{"__type":"AccessDeniedException","message":"denied"}`, service == localaws.ServiceSFN
	})
	if got, err := checker.ExecutionStatus(ctx, arn("x-RUNNING")); err == nil {
		t.Errorf("denied describe = %q, want an error", got)
	}
}

func TestStaleOwnerDetectedThroughStepFunctions(t *testing.T) {
	f := newFixture(t, nil)
	runs := sfntest.Start(t, f.env)
	cfg := f.store.Config()
	cfg.Owners = SFNOwnerChecker{Client: sfn.NewFromConfig(f.env.Config())}
	st, err := New(f.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs.Set(t, arn("run-1"), "RUNNING")
	if a, err := st.Acquire(ctx, AcquireRequest{Owner: arn("run-1"), RunID: "run-1"}); err != nil || !a.Acquired {
		t.Fatalf("first acquire = %+v, %v", a, err)
	}
	runs.Set(t, arn("run-2"), "RUNNING")
	if a, err := st.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2"}); err != nil || a.Acquired {
		t.Fatalf("acquire while run-1 runs = %+v, %v; want refused", a, err)
	}
	runs.Set(t, arn("run-1"), "TIMED_OUT")
	a, err := st.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2"})
	if err != nil || !a.Acquired || a.TookOverFrom != arn("run-1") {
		t.Fatalf("acquire after run-1 timed out = %+v, %v; want a take-over", a, err)
	}
	if n := f.env.Gateway.Calls()["states:DescribeExecution"]; n != 2 {
		t.Fatalf("DescribeExecution calls = %d, want 2", n)
	}
}

// An owner whose execution waits for a redrive (PENDING_REDRIVE) is about
// to run again: its lock is not taken over until it has ended.
func TestPendingRedriveIsLive(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.start(t, "run-1")
	f.owners.set(arn("run-1"), StatusPendingRedrive)
	f.owners.set(arn("run-2"), StatusRunning)
	if a, err := f.store.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()}); err != nil || a.Acquired {
		t.Fatalf("acquire while run-1 waits for a redrive = %+v, %v; want refused", a, err)
	}
	f.owners.set(arn("run-1"), "FAILED")
	a, err := f.store.Acquire(ctx, AcquireRequest{Owner: arn("run-2"), RunID: "run-2", StartTime: f.clock.Now()})
	if err != nil || !a.Acquired || a.TookOverFrom != arn("run-1") {
		t.Fatalf("acquire after run-1 failed = %+v, %v; want a take-over", a, err)
	}
}
