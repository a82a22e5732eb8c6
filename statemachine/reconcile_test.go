package statemachine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

const reconcileFn = "arn:aws:lambda:us-east-1:000000000000:function:reconcile"

func reconcileDef(t *testing.T) []byte {
	t.Helper()
	v := testValues()
	v[ReconcileFunctionArn] = reconcileFn
	def, err := Substitute(ReconcileDefinition(), v)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestReconcileDefinitionTakesNoLockAndNoExport: the reconciliation's
// placeholders are its Lambda, the Maps' concurrency and the run timeout —
// no run-lock, no start queue, no export wait (docs/RECONCILE.md).
func TestReconcileDefinitionTakesNoLockAndNoExport(t *testing.T) {
	got := strings.Join(ReconcilePlaceholders(), ",")
	if want := "MapMaxConcurrency,ReconcileFunctionArn,RunTimeoutSeconds"; got != want {
		t.Fatalf("ReconcilePlaceholders() = %s, want %s", got, want)
	}
	def := reconcileDef(t)
	if _, err := asl.ParseDefinition(def); err != nil {
		t.Fatalf("the local interpreter rejects the definition: %v", err)
	}
	var m struct {
		States map[string]struct {
			Resource       string
			MaxConcurrency int
		}
	}
	if err := json.Unmarshal(def, &m); err != nil {
		t.Fatal(err)
	}
	for name, s := range m.States {
		if strings.Contains(s.Resource, "sqs:") || strings.Contains(name, "Lock") || strings.Contains(name, "Export") {
			t.Errorf("state %s (%s): the reconciliation takes no lock and starts no export", name, s.Resource)
		}
	}
	if m.States["Fold"].MaxConcurrency != 10 || m.States["Refine"].MaxConcurrency != 10 || m.States["Compare"].MaxConcurrency != 10 {
		t.Fatal("the Maps' concurrency is not substituted as a number")
	}
}

// reconcileMachine creates the reconciliation's state machine on h's
// emulator and returns a function that runs one execution of it to its end:
// how it ended and the states it entered.
func reconcileMachine(t *testing.T, h *harness) func(name string) (asl.ExecutionInfo, string) {
	t.Helper()
	ctx := context.Background()
	created, err := h.client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String(ReconcileName),
		Definition: aws.String(string(reconcileDef(t))), RoleArn: aws.String("arn:aws:iam::000000000000:role/reconcile")})
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) (asl.ExecutionInfo, string) {
		t.Helper()
		out, err := h.client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		arn := aws.ToString(out.ExecutionArn)
		return h.wait(arn), strings.Join(h.statesEntered(arn), " ")
	}
}

// TestReconcileDefinitionRuns: plan, a fold child per partition, the count
// and list loops called again until done — the count loop's refine answer
// runs a refine child per partition, then the count loop again —, a compare
// child per partition, finish; a plan refused (no checkpoint yet) ends Skipped, successfully.
func TestReconcileDefinitionRuns(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	refuse, failPlan := false, false
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		if fn != reconcileFn {
			return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fn}, true, nil
		}
		mu.Lock()
		defer mu.Unlock()
		a, _ := in["action"].(string)
		calls[a]++
		switch a {
		case "plan":
			if refuse {
				return map[string]any{"errorType": "Refused", "errorMessage": "reconciliation refused: no run has committed a checkpoint yet"}, true, nil
			}
			if failPlan {
				return map[string]any{"errorType": "DatastoreChangedError", "errorMessage": "the RUN record's checkpoint belongs to HealthLake data store store-a"}, true, nil
			}
			return map[string]any{"runId": in["runId"], "partitions": 3, "partitionList": []int{0, 1, 2}}, false, nil
		case "count":
			// The first call answers not done, the second asks for the
			// refine step, the third is done.
			return map[string]any{"done": calls[a] >= 3, "refine": calls[a] == 2}, false, nil
		case "list":
			return map[string]any{"done": calls[a] >= 2, "refine": false}, false, nil
		case "fold", "refine", "diff":
			if in["plan"] == nil || in["partition"] == nil {
				return map[string]any{"errorType": "Test.BadInput", "errorMessage": "no plan or partition"}, true, nil
			}
			return map[string]any{"partition": in["partition"]}, false, nil
		case "finish":
			return map[string]any{"deletes": 1}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": a}, true, nil
	})
	run := reconcileMachine(t, h)
	info, states := run("reconcile-1")
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	if want := "Plan Fold Count CountDone? Count CountDone? Refine Count CountDone? List ListDone? List ListDone? Compare Finish Done"; states != want {
		t.Errorf("states %q, want %q", states, want)
	}
	if calls["fold"] != 3 || calls["refine"] != 3 || calls["diff"] != 3 || calls["finish"] != 1 {
		t.Errorf("calls %v: want 3 folds, 3 refines, 3 compares, 1 finish", calls)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	plans := calls["plan"]
	info, states = run("reconcile-2")
	if info.Status != asl.StatusSucceeded || states != "Plan Skipped" {
		t.Fatalf("a refused plan: %s, states %q; want SUCCEEDED through Skipped", info.Status, states)
	}
	if n := calls["plan"] - plans; n != 1 {
		t.Errorf("a refused plan was asked %d times, want once", n)
	}

	// A failed step: the execution fails with the step's error name (what
	// cdcctl status shows) and the fixed cause, never the step's message.
	mu.Lock()
	refuse, failPlan = false, true
	mu.Unlock()
	plans = calls["plan"]
	info, states = run("reconcile-3")
	if info.Status != asl.StatusFailed || states != "Plan Failed" || info.Error != "DatastoreChangedError" ||
		!strings.HasPrefix(info.Cause, "a reconciliation step failed") || strings.Contains(info.Cause, "store-a") {
		t.Fatalf("a failed plan: %s %q %q, states %q", info.Status, info.Error, info.Cause, states)
	}
	if n := calls["plan"] - plans; n != 1 {
		t.Errorf("a plan refused for another data store was asked %d times, want once (it will not change)", n)
	}
}

// TestReconcilePlanAndFinishRetryACrash: a crash or timeout of the plan or
// the finish (both read and overwrite, so a retry is harmless) is retried,
// instead of failing the reconciliation (ReconcileFailedAlarm, and deletes
// without history waiting a day).
func TestReconcilePlanAndFinishRetryACrash(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		a, _ := in["action"].(string)
		calls[a]++
		if (a == "plan" || a == "finish") && calls[a] == 1 {
			return map[string]any{"errorType": "Runtime.ExitError", "errorMessage": "the first attempt dies"}, true, nil
		}
		switch a {
		case "plan":
			return map[string]any{"runId": in["runId"], "partitions": 1, "partitionList": []int{0}}, false, nil
		case "count", "list":
			return map[string]any{"done": true, "refine": false}, false, nil
		case "fold", "diff":
			return map[string]any{"partition": in["partition"]}, false, nil
		case "finish":
			return map[string]any{"deletes": 0}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": a}, true, nil
	})
	if info, _ := reconcileMachine(t, h)("reconcile-crash"); info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["plan"] != 2 || calls["finish"] != 2 {
		t.Errorf("calls %v: want the plan and the finish tried twice each", calls)
	}
}
