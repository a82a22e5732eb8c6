// Package sfntest arranges Step Functions executions in a chosen status on
// the project's emulator (local/fakesfn), for tests of code that asks Step
// Functions about an execution — the run lock's owner check, cdcctl — with
// real SDK clients over localaws.
//
// Every state machine it creates holds its executions RUNNING in a
// callback task until the test ends them the way Step Functions' callers
// do: SendTaskSuccess (SUCCEEDED), SendTaskFailure (FAILED) and
// StopExecution (ABORTED), over the SDK; TIMED_OUT, which only a machine's
// TimeoutSeconds causes, through the emulator's TimeOutExecution.
package sfntest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// holdFunction is the name of the function the machines' callback task
// invokes; the emulator's Lambda invoker is the Runs itself.
const holdFunction = "sfntest-hold"

// definition holds an execution in a callback task until its token is
// answered.
const definition = `{"StartAt":"Hold","States":{"Hold":{"Type":"Task",
"Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken",
"Parameters":{"FunctionName":"` + holdFunction + `","Payload":{"token.$":"$$.Task.Token","execution.$":"$$.Execution.Id"}},
"End":true}}}`

// Runs is a Step Functions emulator served by a localaws.Env, with the
// task token of each execution it holds.
type Runs struct {
	// Emulator is the Step Functions emulator the Env now serves.
	Emulator *fakesfn.Emulator
	client   *sfn.Client

	mu     sync.Mutex
	tokens map[string]string // execution ARN → its task token
}

// Start serves a new emulator on env's gateway for the test's duration.
func Start(t testing.TB, env *localaws.Env) *Runs {
	t.Helper()
	r := &Runs{tokens: map[string]string{}, client: sfn.NewFromConfig(env.Config())}
	r.Emulator = fakesfn.New(fakesfn.Options{Region: env.Region, AccountID: env.AccountID, Lambda: r})
	t.Cleanup(r.Emulator.Close)
	env.Gateway.Handle(localaws.ServiceSFN, r.Emulator)
	return r
}

// Machine registers the holding state machine named name and returns its
// ARN (the same ARN again for the same name).
func (r *Runs) Machine(t testing.TB, name string) string {
	t.Helper()
	arn, err := r.Emulator.RegisterStateMachine(name, []byte(definition))
	if err != nil {
		t.Fatalf("sfntest: state machine %s: %v", name, err)
	}
	return arn
}

// Invoke is the holding task's function: it keeps the token.
func (r *Runs) Invoke(_ context.Context, function string, payload []byte) ([]byte, bool, error) {
	if function != holdFunction {
		return nil, false, fmt.Errorf("sfntest: no function %s", function)
	}
	var p struct{ Token, Execution string }
	if err := json.Unmarshal(payload, &p); err != nil || p.Token == "" || p.Execution == "" {
		return nil, false, fmt.Errorf("sfntest: payload %s: %v", payload, err)
	}
	r.mu.Lock()
	r.tokens[p.Execution] = p.Token
	r.mu.Unlock()
	return []byte(`{}`), false, nil
}

// Set puts the execution arn (arn:aws:states:…:execution:machine:name) in
// status: RUNNING starts it (its machine is registered first); SUCCEEDED,
// FAILED, ABORTED and TIMED_OUT start it if needed and end it. An
// execution that has ended cannot be set again, as in Step Functions.
func (r *Runs) Set(t testing.TB, arn, status string) {
	t.Helper()
	machine, name, ok := split(arn)
	if !ok {
		t.Fatalf("sfntest: %q is not an execution ARN", arn)
	}
	ctx := context.Background()
	x, exists := r.Emulator.Execution(arn)
	if !exists {
		if _, err := r.Emulator.StartExecution(ctx, r.Machine(t, machine), name, "{}"); err != nil {
			t.Fatalf("sfntest: start %s: %v", arn, err)
		}
		x, _ = r.Emulator.Execution(arn)
	}
	if st := x.Info().Status; st != asl.StatusRunning {
		t.Fatalf("sfntest: %s has ended %s; it cannot be set %s", arn, st, status)
	}
	token := r.token(t, arn)
	var err error
	switch status {
	case asl.StatusRunning:
		return
	case asl.StatusSucceeded:
		_, err = r.client.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(token), Output: aws.String("{}")})
	case asl.StatusFailed:
		_, err = r.client.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{TaskToken: aws.String(token),
			Error: aws.String("sfntest.Failed"), Cause: aws.String("the test failed it")})
	case asl.StatusAborted:
		_, err = r.client.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: aws.String(arn)})
	case asl.StatusTimedOut:
		err = r.Emulator.TimeOutExecution(arn)
	default:
		t.Fatalf("sfntest: status %q cannot be arranged (the emulator has no redrive)", status)
	}
	if err != nil {
		t.Fatalf("sfntest: set %s %s: %v", arn, status, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if info, err := x.Wait(wctx); err != nil || info.Status != status {
		t.Fatalf("sfntest: %s ended %s (%v), want %s", arn, info.Status, err, status)
	}
}

// Executions returns the executions of the named machine, oldest first.
func (r *Runs) Executions(machine string) []asl.ExecutionInfo {
	return r.Emulator.Executions(r.Emulator.StateMachineARN(machine))
}

// token waits up to 10 s for the execution's callback task to have run.
func (r *Runs) token(t testing.TB, arn string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		token := r.tokens[arn]
		r.mu.Unlock()
		if token != "" {
			return token
		}
	}
	t.Fatalf("sfntest: %s did not reach its callback task in 10 s", arn)
	return ""
}

// split returns the machine and execution names of an execution ARN.
func split(arn string) (machine, name string, ok bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 8 || parts[0] != "arn" || parts[2] != "states" || parts[5] != "execution" {
		return "", "", false
	}
	return parts[6], parts[7], true
}
