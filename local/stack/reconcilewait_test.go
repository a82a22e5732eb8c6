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

// TestReconcileRunsWhileAWindowHoldsTheLock: the reconciliation takes
// neither the run lock nor HealthLake's export slot, so it runs and finishes
// while a window holds the lock and exports, and the window commits
// unharmed. TimeScale 0.001, ExportDelay 1.5 s per status: the window's
// export outlasts the reconciliation.
func TestReconcileRunsWhileAWindowHoldsTheLock(t *testing.T) {
	t.Parallel()
	st := reconcileStack(t, func(o *Options) { o.ExportDelay = 1500 * time.Millisecond; o.TimeScale = 0.001 })
	committed(t, st)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jobs := len(st.HealthLake.Jobs())
	arn, before := startRunHoldingTheLock(ctx, t, st)
	r, err := st.Reconcile(ctx)
	if err != nil || r.Skipped || !r.Finished() {
		t.Fatalf("reconciliation while a window holds the lock = %+v (%v), want finished", r, err)
	}
	if got := statesEntered(t, st, r.ExecutionARN); strings.Contains(got, "Lock") || strings.Contains(got, "Export") {
		t.Errorf("the reconciliation went %q: no lock, no export", got)
	}
	if n := len(st.HealthLake.Jobs()); n != jobs+1 {
		t.Errorf("%d export jobs since the window started, want only the window's", n-jobs)
	}
	if w, err := st.Wait(ctx, arn, time.Now(), before); err != nil || w.Outcome != report.OutcomeCommitted {
		t.Fatalf("the window that held the lock = %+v (%v)", w, err)
	}
}

// TestRunReconcilesBesideTheWindows: Run keeps both schedules, as AWS
// does. A reconciliation that ticks before the first window committed ends
// Skipped (nothing to reconcile yet); a later one finishes beside the
// windows, which are never refused on its account. Its outcome reaches the
// OnReconciliation hook.
func TestRunReconcilesBesideTheWindows(t *testing.T) {
	t.Parallel()
	st := reconcileStack(t, func(o *Options) {
		o.Every = time.Second
		o.ReconcileEvery = time.Hour // RunOptions.ReconcileEvery overrides it
		o.ExportDelay = 200 * time.Millisecond
		o.TimeScale = 0.01
	})
	var mu sync.Mutex
	var recs []Reconciliation
	var windows []report.Run
	finished := func() bool {
		for _, r := range recs {
			if r.Finished() {
				return true
			}
		}
		return false
	}
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
	waitFor(t, "a finished reconciliation", func() bool { mu.Lock(); defer mu.Unlock(); return finished() })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range recs {
		if !r.Finished() && !r.Skipped {
			t.Errorf("reconciliation %+v neither finished nor skipped", r)
		}
	}
	committedN := 0
	for _, w := range windows {
		if w.Outcome == report.OutcomeCommitted || w.Outcome == report.OutcomeEmpty {
			committedN++
		}
	}
	if committedN < 1 {
		t.Errorf("windows %+v: none committed beside the reconciliation", windows)
	}
}

// TestPollBearsATransientDescribeError: one failed describe (a lost
// connection, a garbled answer) is asked again; the wait goes on.
func TestPollBearsATransientDescribeError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		out, err := pollUntilEnded(t.Context(), "arn:x", func(context.Context) (*sfnapi.DescribeExecutionOutput, error) {
			calls++
			switch calls {
			case 1:
				return &sfnapi.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusRunning}, nil
			case 2:
				return nil, errors.New("read/write on closed pipe")
			}
			return &sfnapi.DescribeExecutionOutput{Status: sfntypes.ExecutionStatusSucceeded}, nil
		})
		if err != nil || out.Status != sfntypes.ExecutionStatusSucceeded || calls != 3 {
			t.Fatalf("poll = %v, %v after %d calls; want SUCCEEDED after 3", out, err, calls)
		}
	})
}
