package runlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// TestOwnerChecksAgainstTheStepFunctionsEmulator runs the lock's owner
// checks against real executions of the project's Step Functions emulator:
// a running execution keeps the lock, a stopped one loses it, an unknown
// one is gone.
func TestOwnerChecksAgainstTheStepFunctionsEmulator(t *testing.T) {
	f := newFixture(t, nil)
	em := fakesfn.New(fakesfn.Options{Region: f.env.Region, AccountID: f.env.AccountID, TimeScale: 0.001})
	t.Cleanup(em.Close)
	f.env.Gateway.Handle(localaws.ServiceSFN, em)
	client := awssfn.NewFromConfig(f.env.Config())
	cfg := f.store.Config()
	cfg.Owners = SFNOwnerChecker{Client: client}
	store, err := New(f.db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sm, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("cdc"),
		Definition: aws.String(`{"StartAt":"Hold","States":{"Hold":{"Type":"Wait","Seconds":1000000,"End":true}}}`),
		RoleArn:    aws.String("arn:aws:iam::000000000000:role/r")})
	if err != nil {
		t.Fatalf("create state machine: %v", err)
	}
	start := func(name string) string {
		out, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: sm.StateMachineArn, Name: aws.String(name), Input: aws.String("{}")})
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		return aws.ToString(out.ExecutionArn)
	}
	run1, run2 := start("run-1"), start("run-2")
	if a, err := store.Acquire(ctx, AcquireRequest{Owner: run1, RunID: "run-1"}); err != nil || !a.Acquired {
		t.Fatalf("acquire run-1 = %+v, %v", a, err)
	}
	if a, err := store.Acquire(ctx, AcquireRequest{Owner: run2, RunID: "run-2"}); err != nil || a.Acquired || !strings.Contains(a.Reason, "RUNNING") {
		t.Fatalf("acquire run-2 while run-1 runs = %+v, %v; want refused", a, err)
	}
	if _, err := client.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: aws.String(run1)}); err != nil {
		t.Fatalf("stop run-1: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := cfg.Owners.ExecutionStatus(ctx, run1)
		if err != nil {
			t.Fatal(err)
		}
		if st == "ABORTED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run-1 still %s after StopExecution", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a, err := store.Acquire(ctx, AcquireRequest{Owner: run2, RunID: "run-2"})
	if err != nil || !a.Acquired || a.TookOverFrom != run1 || !strings.Contains(a.Reason, "ABORTED") {
		t.Fatalf("acquire run-2 after run-1 was aborted = %+v, %v; want a take-over", a, err)
	}
	if st, err := cfg.Owners.ExecutionStatus(ctx, em.ExecutionARN("cdc", "never-started")); err != nil || st != StatusGone {
		t.Fatalf("unknown execution = %q, %v; want GONE", st, err)
	}
}
