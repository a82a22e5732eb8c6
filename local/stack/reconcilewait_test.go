package stack

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// statesEntered lists the top-level states an execution entered, in order.
func statesEntered(t *testing.T, st *Stack, arn string) string {
	t.Helper()
	var names []string
	p := sfnapi.NewGetExecutionHistoryPaginator(st.sfnc, &sfnapi.GetExecutionHistoryInput{ExecutionArn: aws.String(arn)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("execution history of %s: %v", arn, err)
		}
		for _, e := range page.Events {
			if d := e.StateEnteredEventDetails; d != nil {
				names = append(names, aws.ToString(d.Name))
			}
		}
	}
	return strings.Join(names, " ")
}

// Wait and WaitReconciliation poll DescribeExecution 50 ms apart at first,
// doubling to at most 1 s: a 5-hour reconciliation costs about 18,000
// requests, not 360,000.
func TestPollBacksOffToOneSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		const running = 9
		out, err := pollUntilEnded(t.Context(), "arn:x", func(context.Context) (*sfnapi.DescribeExecutionOutput, error) {
			at = append(at, time.Now())
			if len(at) <= running {
				return &sfnapi.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusRunning}, nil
			}
			return &sfnapi.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusSucceeded}, nil
		})
		if err != nil || out.Status != sfntypes.ExecutionStatusSucceeded {
			t.Fatalf("poll = %v, %v", out, err)
		}
		want := []time.Duration{50, 100, 200, 400, 800, 1000, 1000, 1000, 1000}
		if len(at) != running+1 {
			t.Fatalf("%d polls, want %d", len(at), running+1)
		}
		for i, w := range want {
			if got := at[i+1].Sub(at[i]); got != w*time.Millisecond {
				t.Errorf("pause %d = %v, want %v", i, got, w*time.Millisecond)
			}
		}
	})
}

func TestPollStopsOnErrorAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := pollUntilEnded(t.Context(), "arn:x", func(context.Context) (*sfnapi.DescribeExecutionOutput, error) {
			return nil, boom
		}); !errors.Is(err, boom) {
			t.Errorf("describe error = %v, want it wrapped", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		calls := 0
		_, err := pollUntilEnded(ctx, "arn:x", func(context.Context) (*sfnapi.DescribeExecutionOutput, error) {
			calls++
			return &sfnapi.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusRunning}, nil
		})
		// 0.05+0.1+0.2+0.4+0.8 = 1.55 s, then 1 s apart: 14 calls in 10 s.
		if !errors.Is(err, context.DeadlineExceeded) || calls != 14 {
			t.Errorf("cancelled poll = %v after %d calls, want deadline exceeded after 14", err, calls)
		}
	})
}

// TestReconcileGivesUpWhenTheLockStaysHeld: a reconciliation retries while
// a run holds the lock for at most 60 waits of 30 s (30 min); a lock held
// longer ends it Skipped, and the run is unharmed. TimeScale 0.001: the
// bound is 1.8 s; the run's export takes longer (ExportDelay 1.5 s per
// status).
func TestReconcileGivesUpWhenTheLockStaysHeld(t *testing.T) {
	st := reconcileStack(t, func(o *Options) { o.ExportDelay = 1500 * time.Millisecond; o.TimeScale = 0.001 })
	committed(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	arn, before := startRunHoldingTheLock(ctx, t, st)
	r, err := st.Reconcile(ctx)
	if err != nil || !r.Skipped || r.Status != "SUCCEEDED" || r.Finished() {
		t.Fatalf("reconciliation while the lock stays held = %+v (%v), want Skipped", r, err)
	}
	got := statesEntered(t, st, r.ExecutionARN)
	if n := strings.Count(got, "WaitForLock"); n != 60 || !strings.HasSuffix(got, "LockTaken? Skipped") {
		t.Errorf("states entered: %d lock waits, ending %q; want 60 then Skipped", n, got[max(0, len(got)-40):])
	}
	if d := r.Duration(); d < 1800*time.Millisecond {
		t.Errorf("the reconciliation gave up after %v, want at least the bound (1.8 s scaled)", d)
	}
	if w, err := st.Wait(ctx, arn, time.Now(), before); err != nil || w.Outcome != report.OutcomeCommitted {
		t.Fatalf("the run that held the lock = %+v (%v)", w, err)
	}
}

// TestRunReconcilesBesideTheWindows: Run keeps both schedules, as AWS does,
// and their ticks coincide (2 s is a multiple of 1 s). The first window
// (ExportDelay 1 s per export status: about 3 s) still holds the lock at
// 2 s, so the window ticking then is skipped and the reconciliation waits
// for the lock instead of ending Skipped; its outcome reaches the
// OnReconciliation hook.
func TestRunReconcilesBesideTheWindows(t *testing.T) {
	st := reconcileStack(t, func(o *Options) {
		o.Every = time.Second
		o.ReconcileEvery = time.Hour // RunOptions.ReconcileEvery overrides it
		o.ExportDelay = time.Second
		o.TimeScale = 0.01
	})
	var mu sync.Mutex
	var recs []Reconciliation
	var windows []report.Run
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.RunWith(ctx, RunOptions{
			ReconcileEvery: 2 * time.Second,
			OnWindow: func(w report.Run, err error) {
				if err != nil {
					t.Errorf("window: %v", err)
				}
				mu.Lock()
				windows = append(windows, w)
				mu.Unlock()
			},
			OnReconciliation: func(r Reconciliation, err error) {
				if err != nil {
					t.Errorf("reconciliation: %v", err)
				}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			},
		})
	}()
	waitFor(t, "a scheduled reconciliation", func() bool { mu.Lock(); defer mu.Unlock(); return len(recs) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	r := recs[0]
	if r.Skipped || !r.Finished() {
		t.Fatalf("scheduled reconciliation = %+v, want finished", r)
	}
	var committed, skipped int
	for _, w := range windows {
		switch w.Outcome {
		case report.OutcomeCommitted, report.OutcomeEmpty:
			committed++
		case report.OutcomeSkipped:
			skipped++
		}
	}
	if got := statesEntered(t, st, r.ExecutionARN); !strings.HasPrefix(got, "Init AcquireLock LockTaken? WaitForLock") {
		t.Errorf("the reconciliation went %q; want a wait for the window holding the lock (windows %+v)", got, windows)
	}
	if committed < 1 || skipped < 1 {
		t.Errorf("windows: %d committed, %d skipped; want the schedule kept beside the reconciliation", committed, skipped)
	}
}
