package asl

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestChoiceOperators(t *testing.T) {
	input := `{"s":"abc","n":5,"f":2.5,"b":true,"t":"2026-11-21T10:00:00Z","nul":null,"other":"abc","m":10}`
	cases := []struct {
		rule string
		want bool
	}{
		{`"Variable":"$.s","StringEquals":"abc"`, true},
		{`"Variable":"$.s","StringEqualsPath":"$.other"`, true},
		{`"Variable":"$.s","StringLessThan":"abd"`, true},
		{`"Variable":"$.s","StringGreaterThan":"abd"`, false},
		{`"Variable":"$.s","StringLessThanEquals":"abc"`, true},
		{`"Variable":"$.s","StringGreaterThanEquals":"abc"`, true},
		{`"Variable":"$.s","StringMatches":"a*c"`, true},
		{`"Variable":"$.s","StringMatches":"a\\*c"`, false},
		{`"Variable":"$.n","NumericEquals":5`, true},
		{`"Variable":"$.n","NumericLessThanPath":"$.m"`, true},
		{`"Variable":"$.f","NumericGreaterThan":2`, true},
		{`"Variable":"$.f","NumericLessThanEquals":2.5`, true},
		{`"Variable":"$.n","NumericGreaterThanEquals":6`, false},
		{`"Variable":"$.s","NumericEquals":5`, false},
		{`"Variable":"$.b","BooleanEquals":true`, true},
		{`"Variable":"$.b","BooleanEqualsPath":"$.b"`, true},
		{`"Variable":"$.t","TimestampEquals":"2026-11-21T10:00:00.000Z"`, true},
		{`"Variable":"$.t","TimestampLessThan":"2026-11-21T11:00:00Z"`, true},
		{`"Variable":"$.t","TimestampGreaterThan":"2026-11-21T11:00:00Z"`, false},
		{`"Variable":"$.t","TimestampGreaterThanEqualsPath":"$.t"`, true},
		{`"Variable":"$.nul","IsNull":true`, true},
		{`"Variable":"$.missing","IsPresent":false`, true},
		{`"Variable":"$.s","IsPresent":true`, true},
		{`"Variable":"$.n","IsNumeric":true`, true},
		{`"Variable":"$.s","IsString":true`, true},
		{`"Variable":"$.b","IsBoolean":true`, true},
		{`"Variable":"$.t","IsTimestamp":true`, true},
		{`"And":[{"Variable":"$.n","NumericEquals":5},{"Variable":"$.b","BooleanEquals":true}]`, true},
		{`"Or":[{"Variable":"$.n","NumericEquals":4},{"Variable":"$.b","BooleanEquals":false}]`, false},
		{`"Not":{"Variable":"$.n","NumericEquals":4}`, true},
	}
	for _, c := range cases {
		def := `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{` + c.rule + `,"Next":"Yes"}],"Default":"No"},
		  "Yes":{"Type":"Pass","Result":"yes","End":true},"No":{"Type":"Pass","Result":"no","End":true}}}`
		info := runDef(t, fastCfg(nil), def, input)
		got := info.Output == `"yes"`
		if info.Status != StatusSucceeded || got != c.want {
			t.Errorf("rule {%s}: status %s output %s, want match=%v", c.rule, info.Status, info.Output, c.want)
		}
	}
}

func TestChoiceWithoutMatchOrDefaultFails(t *testing.T) {
	def := `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.n","NumericEquals":1,"Next":"Y"}]},"Y":{"Type":"Succeed"}}}`
	info := runDef(t, fastCfg(nil), def, `{"n":2}`)
	if info.Error != ErrorNoChoiceMatched {
		t.Fatalf("error = %q, want States.NoChoiceMatched", info.Error)
	}
	info = runDef(t, fastCfg(nil), def, `{}`)
	if info.Error != ErrorRuntime {
		t.Fatalf("missing variable: error = %q, want States.Runtime", info.Error)
	}
}

func TestRetryThenCatchWithResultPath(t *testing.T) {
	var calls atomic.Int32
	tasks := taskFunc(func(context.Context, TaskCall) (any, error) {
		calls.Add(1)
		return nil, &Error{Name: "Lambda.ServiceException", Cause: "down"}
	})
	def := `{"StartAt":"T","States":{
	  "T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	    "Retry":[{"ErrorEquals":["Other"],"MaxAttempts":5},
	             {"ErrorEquals":["Lambda.ServiceException"],"IntervalSeconds":2,"MaxAttempts":3,"BackoffRate":2,"MaxDelaySeconds":5,"JitterStrategy":"FULL"}],
	    "Catch":[{"ErrorEquals":["States.TaskFailed"],"ResultPath":"$.error","Next":"H"}],"End":true},
	  "H":{"Type":"Pass","End":true}}}`
	x := start(t, fastCfg(tasks), def, `{"keep":1}`)
	info := finish(t, x)
	if calls.Load() != 4 {
		t.Fatalf("task ran %d times, want 1 + 3 retries", calls.Load())
	}
	jsonEq(t, "output", info.Output, `{"keep":1,"error":{"Error":"Lambda.ServiceException","Cause":"down"}}`)
	// entered T once + 3 retries + H
	if x.Transitions() != 5 {
		t.Fatalf("transitions = %d, want 5", x.Transitions())
	}
}

func TestRetrySucceedsAndRetryCountInContext(t *testing.T) {
	var calls atomic.Int32
	var lastRetry any
	tasks := taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		lastRetry = c.Parameters.(map[string]any)["retry"]
		if calls.Add(1) < 3 {
			return nil, errors.New("flaky")
		}
		return "ok", nil
	})
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	  "Parameters":{"retry.$":"$$.State.RetryCount"},"Retry":[{"ErrorEquals":["States.ALL"],"MaxAttempts":2}],"End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `{}`)
	if info.Status != StatusSucceeded || info.Output != `"ok"` || lastRetry != int64(2) {
		t.Fatalf("got %+v, last RetryCount %v", info, lastRetry)
	}
}

func TestMaxAttemptsZeroNeverRetries(t *testing.T) {
	var calls atomic.Int32
	tasks := taskFunc(func(context.Context, TaskCall) (any, error) { calls.Add(1); return nil, &Error{Name: "E"} })
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","Retry":[{"ErrorEquals":["E"],"MaxAttempts":0}],"End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `{}`)
	if calls.Load() != 1 || info.Error != "E" {
		t.Fatalf("calls %d, error %q", calls.Load(), info.Error)
	}
}

func TestTaskTimeoutSeconds(t *testing.T) {
	tasks := taskFunc(func(ctx context.Context, _ TaskCall) (any, error) { <-ctx.Done(); return nil, ctx.Err() })
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","TimeoutSeconds":3,
	  "Catch":[{"ErrorEquals":["States.Timeout"],"Next":"Late"}],"End":true},"Late":{"Type":"Pass","Result":"late","End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `{}`)
	if info.Output != `"late"` {
		t.Fatalf("got %+v", info)
	}
}

func TestWaitStatesUseScaledClock(t *testing.T) {
	clock := NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	def := `{"StartAt":"W1","States":{
	  "W1":{"Type":"Wait","Seconds":60,"Next":"W2"},
	  "W2":{"Type":"Wait","SecondsPath":"$.s","Next":"W3"},
	  "W3":{"Type":"Wait","TimestampPath":"$.ts","End":true}}}`
	x := start(t, Config{Clock: clock}, def, `{"s":30,"ts":"2026-11-21T10:05:00Z"}`)
	for _, step := range []time.Duration{60 * time.Second, 30 * time.Second, 210 * time.Second} {
		for clock.Waiters() == 0 {
			time.Sleep(time.Millisecond)
		}
		select {
		case <-x.Done():
			t.Fatalf("finished before the clock reached the wait's end")
		default:
		}
		clock.Advance(step)
	}
	info := finish(t, x)
	if info.Status != StatusSucceeded {
		t.Fatalf("got %+v", info)
	}
}

func TestExecutionStopAborts(t *testing.T) {
	def := `{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3600,"End":true}}}`
	clock := NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	x := start(t, Config{Clock: clock}, def, `{}`)
	for clock.Waiters() == 0 { // the Wait state is sleeping
		time.Sleep(time.Millisecond)
	}
	x.Stop("Operator", "stopped by test")
	info := finish(t, x)
	if info.Status != StatusAborted || info.Error != "Operator" {
		t.Fatalf("got %+v", info)
	}
	h := x.History()
	if h[len(h)-2].Type != "WaitStateAborted" || h[len(h)-1].Type != "ExecutionAborted" {
		t.Fatalf("history ends %v", eventTypes(h[len(h)-2:]))
	}
}

func TestExecutionTimeoutSeconds(t *testing.T) {
	def := `{"TimeoutSeconds":10,"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3600,"End":true}}}`
	info := runDef(t, Config{TimeScale: 0.0001}, def, `{}`)
	if info.Status != StatusTimedOut {
		t.Fatalf("got %+v", info)
	}
}

func TestParallelAndInlineMap(t *testing.T) {
	tasks := taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		n, _ := isInteger(c.Parameters.(map[string]any)["n"])
		return n * 10, nil
	})
	def := `{"StartAt":"P","States":{
	  "P":{"Type":"Parallel","Branches":[
	     {"StartAt":"A","States":{"A":{"Type":"Pass","Result":"a","End":true}}},
	     {"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","MaxConcurrency":2,
	         "ItemSelector":{"n.$":"$$.Map.Item.Value","i.$":"$$.Map.Item.Index"},
	         "ItemProcessor":{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","End":true}}},"End":true}}}],
	   "ResultPath":"$.out","End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `{"items":[1,2,3]}`)
	jsonEq(t, "output", info.Output, `{"items":[1,2,3],"out":["a",[10,20,30]]}`)
}

func TestInlineMapIterationFailureFailsState(t *testing.T) {
	tasks := taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		if c.Parameters == int64(2) {
			return nil, &Error{Name: "Bad", Cause: "two"}
		}
		return c.Parameters, nil
	})
	def := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","End":true}}},
	  "Catch":[{"ErrorEquals":["Bad"],"Next":"C"}],"End":true},"C":{"Type":"Pass","End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `[1,2,3]`)
	jsonEq(t, "output", info.Output, `{"Error":"Bad","Cause":"two"}`)
}

func TestEndlessLoopHitsHistoryLimit(t *testing.T) {
	def := `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"},"B":{"Type":"Pass","Next":"A"}}}`
	info := runDef(t, fastCfg(nil), def, `{}`)
	if info.Status != StatusFailed || info.Error != ErrorRuntime || info.Transitions < MaxHistoryEvents/2-2 {
		t.Fatalf("got %s %s after %d transitions", info.Status, info.Error, info.Transitions)
	}
}
