package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestRunStartsAnExecution(t *testing.T) {
	s := newCtlStack(t)
	sm := s.sfn.Machine(t, "cdc")
	code, out, stderr := s.cdcctl(t, "run", "--state-machine-arn", sm, "--name", "manual-1", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v runView
	decodeJSON(t, out, &v)
	if v.ExecutionARN != s.env.ARN("states", "execution:cdc:manual-1") || v.StartDate == "" || v.LockHeldBy != "" {
		t.Fatalf("run = %+v", v)
	}
	ex := s.sfn.Executions("cdc")
	if len(ex) != 1 || ex[0].Name != "manual-1" || ex[0].Input != "{}" || ex[0].StateMachineARN != sm {
		t.Fatalf("executions = %+v", ex)
	}
	// The same name again while it runs: Step Functions would answer with
	// that execution; run says so and starts nothing.
	code, out, stderr = s.cdcctl(t, "run", "--state-machine-arn", sm, "--name", "manual-1")
	if code != exitOK || !strings.Contains(out, "already running: "+v.ExecutionARN) || strings.Contains(out, "started "+v.ExecutionARN) {
		t.Fatalf("same name while running: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = s.cdcctl(t, "run", "--state-machine-arn", sm, "--name", "manual-1", "--json")
	var again runView
	decodeJSON(t, out, &again)
	if code != exitOK || !again.AlreadyRunning || again.ExecutionARN != v.ExecutionARN || again.StartDate != v.StartDate {
		t.Fatalf("same name while running (json): exit %d, %+v, want the first execution", code, again)
	}
	if n := len(s.sfn.Executions("cdc")); n != 1 {
		t.Fatalf("executions = %d after the same name twice, want 1", n)
	}
	// With a live run holding the lock, run warns that the new one will be skipped.
	s.acquire(t, "run-9")
	code, out, stderr = s.cdcctl(t, "run", "--state-machine-arn", sm)
	if code != exitOK || !strings.Contains(out, "started ") || !strings.Contains(out, "run-9 holds the lock") {
		t.Fatalf("run with a held lock: exit %d\n%s%s", code, out, stderr)
	}
	if n := len(s.sfn.Executions("cdc")); n != 3 { // manual-1, the generated one, and run-9 started by acquire
		t.Fatalf("executions = %d, want 3", n)
	}
	// The name of an execution that has ended is refused (while it runs,
	// Step Functions answers the same name and input with the same execution).
	s.sfn.Set(t, v.ExecutionARN, "SUCCEEDED")
	code, _, stderr = s.cdcctl(t, "run", "--state-machine-arn", sm, "--name", "manual-1")
	if code != exitFailure || !strings.Contains(stderr, "ExecutionAlreadyExists") {
		t.Fatalf("duplicate: exit %d: %s", code, stderr)
	}
}

func TestRunNeedsAStateMachine(t *testing.T) {
	s := newCtlStack(t)
	code, _, stderr := s.cdcctl(t, "run")
	if code != exitUsage || !strings.Contains(stderr, "CDC_STATE_MACHINE_ARN") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	code, _, stderr = s.cdcctl(t, "run", "--state-machine-arn", s.env.ARN("states", "stateMachine:no-such-machine"))
	if code != exitFailure || !strings.Contains(stderr, "StateMachineDoesNotExist") {
		t.Fatalf("unknown state machine: exit %d: %s", code, stderr)
	}
}

// TestRunAgainstTheStepFunctionsEmulator starts an execution of the
// project's Step Functions emulator and sees it with DescribeExecution.
func TestRunAgainstTheStepFunctionsEmulator(t *testing.T) {
	s := newCtlStack(t)
	em := fakesfn.New(fakesfn.Options{Region: s.env.Region, AccountID: s.env.AccountID, TimeScale: 0.001})
	t.Cleanup(em.Close)
	s.env.Gateway.Handle(localaws.ServiceSFN, em)
	client := awssfn.NewFromConfig(s.env.Config())
	ctx := context.Background()
	sm, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("cdc"),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`),
		RoleArn:    aws.String("arn:aws:iam::000000000000:role/r")})
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := s.cdcctl(t, "run", "--state-machine-arn", aws.ToString(sm.StateMachineArn), "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v runView
	decodeJSON(t, out, &v)
	if !strings.HasPrefix(v.ExecutionARN, em.ExecutionARN("cdc", "manual-")) {
		t.Fatalf("execution ARN %q", v.ExecutionARN)
	}
	if _, err := em.WaitExecution(ctx, v.ExecutionARN); err != nil {
		t.Fatal(err)
	}
	d, err := client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(v.ExecutionARN)})
	if err != nil || d.Status != "SUCCEEDED" || aws.ToString(d.Input) != "{}" {
		t.Fatalf("describe = %+v, %v", d, err)
	}
}

// TestExecutionARNOfAQualifiedStateMachine: an execution of a state
// machine's version or alias is named by the machine alone.
func TestExecutionARNOfAQualifiedStateMachine(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:states:eu-west-1:123456789012:stateMachine:cdc":            "arn:aws:states:eu-west-1:123456789012:execution:cdc:manual-1",
		"arn:aws:states:eu-west-1:123456789012:stateMachine:cdc:3":          "arn:aws:states:eu-west-1:123456789012:execution:cdc:manual-1",
		"arn:aws:states:eu-west-1:123456789012:stateMachine:cdc:live":       "arn:aws:states:eu-west-1:123456789012:execution:cdc:manual-1",
		"arn:aws-us-gov:states:us-gov-west-1:123456789012:stateMachine:cdc": "arn:aws-us-gov:states:us-gov-west-1:123456789012:execution:cdc:manual-1",
	} {
		if got, ok := executionARN(in, "manual-1"); !ok || got != want {
			t.Errorf("executionARN(%s) = %q, %v; want %s", in, got, ok, want)
		}
	}
	if _, ok := executionARN("not-an-arn", "manual-1"); ok {
		t.Error("executionARN of a name that is no ARN: ok")
	}
}
