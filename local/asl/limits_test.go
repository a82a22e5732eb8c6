package asl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// expressMapDef is a Distributed Map whose EXPRESS children run one Task
// each; tolerating every failure lets the test see each child's end.
const expressMapDef = `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items",
  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},
     "StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","End":true}}},
  "ToleratedFailurePercentage":100,"End":true}}}`

// sleepingTask returns after the item's "s" seconds on clock, or fails when
// its execution ends first.
func sleepingTask(clock Clock) TaskRunner {
	return taskFunc(func(ctx context.Context, c TaskCall) (any, error) {
		n, _ := isInteger(c.Parameters.(map[string]any)["s"])
		select {
		case <-clock.After(time.Duration(n) * time.Second):
			return map[string]any{"slept": n}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
}

// childrenByInput collects the Distributed Map's child executions.
type childrenByInput struct {
	mu sync.Mutex
	m  map[string]*Execution
}

func (c *childrenByInput) add(x *Execution) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[x.Info().Input] = x
}

func (c *childrenByInput) get(t *testing.T, input string) *Execution {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	x, ok := c.m[input]
	if !ok {
		t.Fatalf("no child with input %s", input)
	}
	return x
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a safety bound, not a timing assertion
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestExpressChildEndsAtTheExpressLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit      time.Duration // Config.ExpressMaxDuration
		fast, slow int           // seconds
	}{
		{"AWS's 5 minutes", 0, 240, 360},
		{"a test's smaller limit", time.Minute, 50, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
			kids := &childrenByInput{m: map[string]*Execution{}}
			cfg := Config{Tasks: sleepingTask(clock), Clock: clock, ExpressMaxDuration: tc.limit, OnChildExecution: kids.add}
			x := start(t, cfg, expressMapDef, fmt.Sprintf(`{"items":[{"s":%d},{"s":%d}]}`, tc.fast, tc.slow))
			limit := tc.limit
			if limit == 0 {
				limit = DefaultExpressMaxDuration
			}
			// Each child has armed its limit and its task's sleep.
			waitFor(t, "both children to sleep", func() bool { return clock.Waiters() == 4 })
			clock.Advance(time.Duration(tc.fast) * time.Second)
			fast := kids.get(t, fmt.Sprintf(`{"s":%d}`, tc.fast))
			<-fast.Done()
			clock.Advance(limit - time.Duration(tc.fast)*time.Second)
			info := finish(t, x)
			if info.Status != StatusSucceeded {
				t.Fatalf("parent = %+v", info)
			}
			if fi := fast.Info(); fi.Status != StatusSucceeded {
				t.Fatalf("the child inside the limit = %s %s %s", fi.Status, fi.Error, fi.Cause)
			}
			slow := kids.get(t, fmt.Sprintf(`{"s":%d}`, tc.slow))
			si := slow.Info()
			if si.Status != StatusTimedOut || si.Error != ErrorTimeout || !strings.Contains(si.Cause, "EXPRESS") {
				t.Fatalf("the child past the limit = %s %s %s", si.Status, si.Error, si.Cause)
			}
			h := slow.History()
			if last := h[len(h)-1]; last.Type != "ExecutionTimedOut" || h[len(h)-2].Type != "TaskStateAborted" {
				t.Fatalf("the timed-out child's history ends %v", eventTypes(h[len(h)-2:]))
			}
			// The Map reports the child as failed (it carries Error and Cause).
			if !strings.Contains(info.Output, ErrorTimeout) {
				t.Fatalf("map output %s does not report the timed-out child", info.Output)
			}
		})
	}
}

func TestTimedOutExpressChildFailsTheMapWithNoTolerance(t *testing.T) {
	def := strings.Replace(expressMapDef, `"ToleratedFailurePercentage":100`, `"ToleratedFailurePercentage":0`, 1)
	tasks := taskFunc(func(ctx context.Context, _ TaskCall) (any, error) { <-ctx.Done(); return nil, ctx.Err() })
	info := runDef(t, Config{Tasks: tasks, TimeScale: 0.0001}, def, `{"items":[{"s":1}]}`) // 5 min: 30 ms
	if info.Status != StatusFailed || info.Error != ErrorExceedToleratedFailure {
		t.Fatalf("got %s %s %s", info.Status, info.Error, info.Cause)
	}
}

func TestExpressExecutionEndsAtTheExpressLimitBeforeItsTimeoutSeconds(t *testing.T) {
	m, err := ParseDefinition([]byte(`{"TimeoutSeconds":3600,"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3000,"End":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	clock := NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	r := NewRunner(Config{Clock: clock})
	xs := map[string]*Execution{}
	for _, typ := range []string{TypeExpress, TypeStandard} {
		x, err := r.Start(context.Background(), m, StartInput{ExecutionARN: "arn:x:" + typ, Name: "x", Type: typ})
		if err != nil {
			t.Fatal(err)
		}
		xs[typ] = x
	}
	// Each has armed its execution limit and its Wait state.
	waitFor(t, "both executions to wait", func() bool { return clock.Waiters() == 4 })
	clock.Advance(DefaultExpressMaxDuration)
	if info := finish(t, xs[TypeExpress]); info.Status != StatusTimedOut || info.Error != ErrorTimeout || !strings.Contains(info.Cause, "EXPRESS") {
		t.Fatalf("EXPRESS execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	clock.Advance(3000*time.Second - DefaultExpressMaxDuration)
	if info := finish(t, xs[TypeStandard]); info.Status != StatusSucceeded {
		t.Fatalf("STANDARD execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
}

// TestDataLimitAfterParameters: a state's input after Parameters (Pass,
// Parallel) or an inline Map iteration's input after ItemSelector over
// 256 KiB fails with States.DataLimitExceeded, even when what the state
// outputs is small.
func TestDataLimitAfterParameters(t *testing.T) {
	big := strings.Repeat("x", 150*1024)
	input := fmt.Sprintf(`{"s":%q,"items":[1]}`, big)
	for name, def := range map[string]string{
		"Pass": `{"StartAt":"P","States":{"P":{"Type":"Pass","Parameters":{"a.$":"$.s","b.$":"$.s"},"OutputPath":"$.a","End":true}}}`,
		"Parallel": `{"StartAt":"P","States":{"P":{"Type":"Parallel","Parameters":{"a.$":"$.s","b.$":"$.s"},"ResultPath":null,
		  "Branches":[{"StartAt":"B","States":{"B":{"Type":"Pass","Result":1,"End":true}}}],"End":true}}}`,
		"inline Map": `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","ItemSelector":{"a.$":"$.s","b.$":"$.s"},"ResultPath":null,
		  "ItemProcessor":{"StartAt":"B","States":{"B":{"Type":"Pass","Result":1,"End":true}}},"End":true}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			info := runDef(t, Config{}, def, input)
			if info.Status != StatusFailed || info.Error != ErrorDataLimitExceeded {
				t.Fatalf("got %s %s %s", info.Status, info.Error, info.Cause)
			}
		})
	}
}
