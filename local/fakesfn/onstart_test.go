package fakesfn

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
)

// OnStart hears of every execution started (over the API or the Go
// method) once, with its state machine; a refused start is not one.
func TestOnStartIsCalledOncePerStartedExecution(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var started [][2]string
	em, client, _ := startSFN(t, Options{OnStart: func(arn, sm string) {
		mu.Lock()
		started = append(started, [2]string{arn, sm})
		mu.Unlock()
	}})
	def := `{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3600,"End":true}}}`
	created, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("onstart-sm"), Definition: aws.String(def), RoleArn: aws.String("arn:aws:iam::000000000000:role/r")})
	if err != nil {
		t.Fatal(err)
	}
	in := &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("run-1"), Input: aws.String(`{}`)}
	if _, err := client.StartExecution(ctx, in); err != nil {
		t.Fatal(err)
	}
	// The same request again is an idempotent retry: no second start.
	if _, err := client.StartExecution(ctx, in); err != nil {
		t.Fatal(err)
	}
	if _, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("run-1"), Input: aws.String(`{"x":1}`)}); err == nil {
		t.Fatal("a different input under a running name was accepted")
	}
	if _, err := em.StartExecution(ctx, aws.ToString(created.StateMachineArn), "run-2", "{}"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := [][2]string{{em.ExecutionARN("onstart-sm", "run-1"), aws.ToString(created.StateMachineArn)}, {em.ExecutionARN("onstart-sm", "run-2"), aws.ToString(created.StateMachineArn)}}
	if len(started) != 2 || started[0] != want[0] || started[1] != want[1] {
		t.Fatalf("OnStart calls %v, want %v", started, want)
	}
}
