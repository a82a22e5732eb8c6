package lambdas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

type echoIn struct {
	Name string `json:"name"`
}

type echoOut struct {
	Greeting string `json:"greeting"`
	ARN      string `json:"arn"`
}

type validationError struct{ field string }

func (e *validationError) Error() string { return "invalid " + e.field }

func newRegistry(t *testing.T) (*Registry, *atomic.Int64) {
	t.Helper()
	r := New("us-east-1", "000000000000")
	var sideEffects atomic.Int64
	if err := r.Register("echo", func(ctx context.Context, in echoIn) (echoOut, error) {
		sideEffects.Add(1)
		lc, _ := lambdacontext.FromContext(ctx)
		if in.Name == "" {
			return echoOut{}, &validationError{field: "name"}
		}
		if in.Name == "panic" {
			panic("boom")
		}
		return echoOut{Greeting: "hello " + in.Name, ARN: lc.InvokedFunctionArn}, nil
	}); err != nil {
		t.Fatalf("register: %v", err)
	}
	return r, &sideEffects
}

func TestInvokeByNameAndARNsRoundTripsJSON(t *testing.T) {
	r, _ := newRegistry(t)
	for _, ref := range []string{"echo", "echo:$LATEST", r.ARN("echo"), r.ARN("echo") + ":$LATEST", "000000000000:function:echo"} {
		out, fnErr, err := r.Invoke(context.Background(), ref, []byte(`{"name":"ada"}`))
		if err != nil || fnErr {
			t.Fatalf("%s: err=%v functionError=%v out=%s", ref, err, fnErr, out)
		}
		var got echoOut
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: decode %s: %v", ref, out, err)
		}
		if got.Greeting != "hello ada" || got.ARN != r.ARN("echo") {
			t.Errorf("%s: got %+v", ref, got)
		}
	}
}

func TestHandlerErrorIsAFunctionErrorWithTheRuntimeShape(t *testing.T) {
	r, _ := newRegistry(t)
	out, fnErr, err := r.Invoke(context.Background(), "echo", []byte(`{}`))
	if err != nil || !fnErr {
		t.Fatalf("err=%v functionError=%v, want a function error", err, fnErr)
	}
	var e map[string]any
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	if e["errorType"] != "validationError" || e["errorMessage"] != "invalid name" {
		t.Errorf("error payload = %s", out)
	}

	out, fnErr, err = r.Invoke(context.Background(), "echo", []byte(`{"name":"panic"}`))
	if err != nil || !fnErr {
		t.Fatalf("panic: err=%v functionError=%v", err, fnErr)
	}
	if err := json.Unmarshal(out, &e); err != nil || e["errorType"] != "string" || e["errorMessage"] != "boom" {
		t.Errorf("panic payload = %s", out)
	}

	out, fnErr, err = r.Invoke(context.Background(), "echo", []byte(`not json`))
	if err != nil || !fnErr {
		t.Fatalf("bad payload: err=%v functionError=%v out=%s", err, fnErr, out)
	}
}

func TestUnknownFunctionIsAnInvocationError(t *testing.T) {
	r, _ := newRegistry(t)
	for _, ref := range []string{"nope", "arn:aws:lambda:eu-west-1:000000000000:function:echo", "arn:aws:sqs:us-east-1:000000000000:echo"} {
		if _, _, err := r.Invoke(context.Background(), ref, []byte(`{}`)); !errors.Is(err, ErrFunctionNotFound) {
			t.Errorf("%s: err = %v, want ErrFunctionNotFound", ref, err)
		}
	}
}

type crashPlan struct{ before, after bool }

func (c crashPlan) CrashBefore(string) bool { return c.before }
func (c crashPlan) CrashAfter(string) bool  { return c.after }

func TestCrashBeforeSkipsSideEffectsAndCrashAfterKeepsThem(t *testing.T) {
	r, side := newRegistry(t)
	r.SetFaults(crashPlan{before: true})
	out, fnErr, err := r.Invoke(context.Background(), "echo", []byte(`{"name":"ada"}`))
	if err != nil || !fnErr || side.Load() != 0 {
		t.Fatalf("crash before: err=%v fnErr=%v sideEffects=%d", err, fnErr, side.Load())
	}
	var e map[string]any
	if json.Unmarshal(out, &e) != nil || e["errorType"] != ErrorTypeCrash {
		t.Errorf("crash payload = %s", out)
	}

	r.SetFaults(crashPlan{after: true})
	_, fnErr, err = r.Invoke(context.Background(), "echo", []byte(`{"name":"ada"}`))
	if err != nil || !fnErr || side.Load() != 1 {
		t.Fatalf("crash after: err=%v fnErr=%v sideEffects=%d, want the side effect done", err, fnErr, side.Load())
	}

	r.SetFaults(nil)
	if _, fnErr, _ := r.Invoke(context.Background(), "echo", []byte(`{"name":"ada"}`)); fnErr {
		t.Fatal("invocation failed with faults removed")
	}
	st := r.Stats()["echo"]
	if st.Invocations != 3 || st.CrashesBefore != 1 || st.CrashesAfter != 1 || st.FunctionErrors != 2 {
		t.Errorf("stats = %+v", st)
	}
}

func TestRegisterRejectsBadFunctions(t *testing.T) {
	r, _ := newRegistry(t)
	for i, c := range []struct {
		name    string
		handler any
	}{{"echo", func() {}}, {"", func() {}}, {"a:b", func() {}}, {"x", nil}, {"y", 42}} {
		if err := r.Register(c.name, c.handler); err == nil {
			t.Errorf("case %d (%q): accepted", i, c.name)
		}
	}
	if got := fmt.Sprint(r.Names()); got != "[echo]" {
		t.Errorf("names = %s", got)
	}
}

func TestName(t *testing.T) {
	for ref, want := range map[string]string{
		"f": "f", "f:1": "f", "arn:aws:lambda:r:1:function:f": "f", "arn:aws:lambda:r:1:function:f:live": "f", "1:function:f": "f",
	} {
		if got := Name(ref); got != want {
			t.Errorf("Name(%q) = %q, want %q", ref, got, want)
		}
	}
}

// Each pipeline Lambda gets the timeout the stack deploys, and the handler
// sees it as its context's deadline.
func TestPipelineLambdasGetTheDeployedTimeout(t *testing.T) {
	r := New("us-east-1", "000000000000")
	var left time.Duration
	for _, name := range stackconfig.Lambdas() {
		if err := r.Register(name, func(ctx context.Context, _ json.RawMessage) (string, error) {
			if dl, ok := ctx.Deadline(); ok {
				left = time.Until(dl)
			}
			return "ok", nil
		}); err != nil {
			t.Fatal(err)
		}
		want, _ := stackconfig.Default().Function(name)
		if got, err := r.Timeout(name); err != nil || got != want.Timeout {
			t.Errorf("%s timeout %v (%v), want %v", name, got, err, want.Timeout)
		}
		if _, fnErr, err := r.Invoke(context.Background(), name, []byte(`{}`)); err != nil || fnErr {
			t.Fatalf("%s: %v %v", name, fnErr, err)
		}
		if left <= 0 || left > want.Timeout {
			t.Errorf("%s handler deadline in %v, want within %v", name, left, want.Timeout)
		}
	}
	if err := r.Register("other", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Timeout("other"); got != 15*time.Minute {
		t.Errorf("other function timeout %v, want Lambda's maximum", got)
	}
}

// A handler that returns after its deadline timed out: its result is lost.
func TestHandlerPastItsTimeoutIsATimeout(t *testing.T) {
	r := New("us-east-1", "000000000000")
	var ran atomic.Bool
	if err := r.Register("slow", func(ctx context.Context) (string, error) {
		<-ctx.Done()
		ran.Store(true)
		return "late result", nil
	}, WithTimeout(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	out, fnErr, err := r.Invoke(context.Background(), "slow", []byte(`{}`))
	if err != nil || !fnErr || !ran.Load() {
		t.Fatalf("invoke: out %s, functionError %v, err %v", out, fnErr, err)
	}
	var e struct{ ErrorType, ErrorMessage string }
	if err := json.Unmarshal(out, &e); err != nil || e.ErrorType != ErrorTypeTimeout || !strings.Contains(e.ErrorMessage, "timed out") {
		t.Errorf("error = %s, want %s", out, ErrorTypeTimeout)
	}
	if s := r.Stats()["slow"]; s.FunctionErrors != 1 {
		t.Errorf("stats %+v, want one function error", s)
	}
}

// Each run's duration is the handler's (the invocation overhead before it
// is not), measured on the clock the handler sees; Durations summarizes
// them with the function's timeout.
func TestDurationsMeasureEachRunAndLeaveOutTheOverhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New("us-east-1", "000000000000")
		if err := r.Register("sleepy", func(ctx context.Context, in struct{ Ms int }) (string, error) {
			time.Sleep(time.Duration(in.Ms) * time.Millisecond)
			return "ok", nil
		}, WithTimeout(10*time.Second)); err != nil {
			t.Fatal(err)
		}
		if err := r.Register(stackconfig.PrepareChange, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		r.SetInvokeLatency(func(fn string) time.Duration { return 7 * time.Second })
		start := time.Now()
		for _, ms := range []int{100, 300, 200, 9000} {
			if _, fnErr, err := r.Invoke(context.Background(), "sleepy", []byte(fmt.Sprintf(`{"Ms":%d}`, ms))); err != nil || fnErr {
				t.Fatalf("invoke: %v %v", fnErr, err)
			}
		}
		if took := time.Since(start); took != 4*7*time.Second+9600*time.Millisecond {
			t.Errorf("four invocations took %v, want 4 × 7 s overhead + 9.6 s of runs", took)
		}
		d := r.Durations()
		want := Durations{P50: 0.2, P99: 9, Max: 9, Timeout: 10, Invocations: 4}
		if got := d["sleepy"]; got != want {
			t.Errorf("sleepy = %+v, want %+v", got, want)
		}
		if got := d["sleepy"].ShareOfTimeout(); got != 0.9 {
			t.Errorf("share of timeout = %v", got)
		}
		if err := r.Register("stops-itself", func(ctx context.Context, in struct{ Ms int }) error {
			time.Sleep(time.Duration(in.Ms) * time.Millisecond)
			return nil
		}, WithTimeout(10*time.Second), WithDeadlineMargin(2*time.Second)); err != nil {
			t.Fatal(err)
		}
		for _, ms := range []int{100, 8000, 8500, 9000} {
			if _, fnErr, err := r.Invoke(context.Background(), "stops-itself", []byte(fmt.Sprintf(`{"Ms":%d}`, ms))); err != nil || fnErr {
				t.Fatalf("invoke: %v %v", fnErr, err)
			}
		}
		if got := r.Durations()["stops-itself"]; got.Margin != 2 || got.InternalDeadline() != 8 || got.PastInternalDeadline != 2 {
			t.Errorf("stops-itself = %+v, want a 2 s margin and the 2 runs past 8 s counted", got)
		}
		if got := d[stackconfig.PrepareChange]; got.Invocations != 0 || got.Timeout != stackconfig.Default().PrepareChange.Timeout.Seconds() {
			t.Errorf("prepare-change never run = %+v, want its deployed timeout", got)
		}
		// A cancelled caller does not wait out the overhead.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := r.Invoke(ctx, "sleepy", []byte(`{"Ms":1}`)); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled invoke: %v", err)
		}
	})
}
