package stack

import (
	"context"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// With Options.Latency every SDK call of a Lambda waits its modelled
// latency, so the Lambda's measured duration is made of them: on the
// bubble's clock (where CPU work takes no time) run-lock's runs last 0
// without the model and a positive multiple of the fixed 50 ms per call
// with it; the model also delays the state transitions and invocations.
func TestLatencyModelIsPartOfEachLambdasDuration(t *testing.T) {
	const perCall = 50 * time.Millisecond
	run := func(t *testing.T, latency *localaws.LatencyConfig) (*Stack, report.Run, time.Duration) {
		ctx := context.Background()
		st, err := Start(ctx, Options{
			InMemory: true, Name: fmt.Sprintf("lat%d-%d", time.Now().UnixNano()%1e6, stackSeq.Add(1)),
			SampleSize: 8, Every: time.Hour, Latency: latency,
		})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		t.Cleanup(st.Close)
		began := time.Now()
		w, err := st.RunOnce(ctx)
		if err != nil || w.Outcome != report.OutcomeCommitted {
			t.Fatalf("window = %+v, %v", w, err)
		}
		return st, w, time.Since(began)
	}
	synctest.Test(t, func(t *testing.T) {
		st, _, took := run(t, nil)
		off := st.Lambdas.Durations()[FnRunLock]
		if off.Invocations == 0 || off.Max != 0 {
			t.Errorf("without a model run-lock = %+v: want runs of no virtual time", off)
		}
		if n, _ := st.Env.Gateway.Latency().Totals(); n != 0 {
			t.Errorf("%d modelled delays without a model", n)
		}
		t.Logf("window without the model: %v", took)
	})
	synctest.Test(t, func(t *testing.T) {
		st, _, took := run(t, &localaws.LatencyConfig{Services: map[string]map[string]localaws.Distribution{
			localaws.LatencyAny: {localaws.LatencyDefault: localaws.Fixed(perCall)},
		}})
		d := st.Lambdas.Durations()
		calls, total := st.Env.Gateway.Latency().Totals()
		t.Logf("window with 50 ms per call: %v; %d modelled delays (%v); slowest %q", took, calls, total, report.Slowest(d, 4))
		for _, fn := range []string{FnRunLock, FnStartExport, FnCheckExport, FnPrepareChange} {
			f := d[fn]
			if f.Invocations == 0 || f.Max < perCall.Seconds() {
				t.Errorf("%s = %+v: want runs of at least one modelled call", fn, f)
			}
		}
		rl := d[FnRunLock]
		for _, v := range []float64{rl.P50, rl.P99, rl.Max} {
			if k := v / perCall.Seconds(); k < 1 || math.Abs(k-math.Round(k)) > 1e-6 {
				t.Errorf("run-lock run of %vs is not a positive multiple of the 50 ms per call (%+v)", v, rl)
			}
		}
		if calls == 0 || total != time.Duration(calls)*perCall {
			t.Errorf("totals: %d delays, %v", calls, total)
		}
		if took < time.Duration(d[FnRunLock].Invocations)*perCall {
			t.Errorf("the window took %v, less than its run-lock invocations' overheads", took)
		}
	})
}

// TestFunctionsDeclareTheirInternalDeadlines: the functions that stop
// themselves before their timeout report the margin their handler was
// built with (so the reports' timeout warnings measure the time past it):
// prepare-change's from CDC_DEADLINE_MARGIN, reconcile's and the fast
// path's their defaults; the others have none.
func TestFunctionsDeclareTheirInternalDeadlines(t *testing.T) {
	st := startStack(t, func(o *Options) {
		o.FastPath = true
		o.LambdaEnv = map[string]string{stackconfig.EnvDeadlineMargin: "45s"}
	})
	d := st.Lambdas.Durations()
	for fn, want := range map[string]float64{
		FnPrepareChange: 45,
		FnReconcile:     reconcile.DefaultDeadlineMargin.Seconds(),
		FnFastPath:      fastpath.DefaultDeadlineMargin.Seconds(),
		FnRunLock:       0,
		FnStartExport:   0,
		FnCheckExport:   0,
	} {
		if got := d[fn]; got.Margin != want || got.Timeout == 0 {
			t.Errorf("%s = %+v, want margin %vs", fn, got, want)
		}
	}
}
