package fakesfn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// TestExecutionsEndAtTheirTimeLimits: a STANDARD execution ends TIMED_OUT
// at its machine's TimeoutSeconds and an EXPRESS one at the EXPRESS limit
// (here a test's smaller Options.ExpressMaxDuration), both with
// States.Timeout in DescribeExecution and an ExecutionTimedOut event.
func TestExecutionsEndAtTheirTimeLimits(t *testing.T) {
	ctx := context.Background()
	em, client, _ := startSFN(t, Options{TimeScale: 0.001, ExpressMaxDuration: 2 * time.Minute})
	for _, tc := range []struct {
		typ   types.StateMachineType
		def   string
		cause string
	}{
		{types.StateMachineTypeStandard, `{"TimeoutSeconds":60,"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":86400,"End":true}}}`, "TimeoutSeconds"},
		{types.StateMachineTypeExpress, `{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":86400,"End":true}}}`, "EXPRESS"},
	} {
		created, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("limit-" + strings.ToLower(string(tc.typ))),
			Definition: aws.String(tc.def), RoleArn: aws.String("arn:aws:iam::000000000000:role/sfn"), Type: tc.typ})
		if err != nil {
			t.Fatal(err)
		}
		started, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("x")})
		if err != nil {
			t.Fatal(err)
		}
		arn := aws.ToString(started.ExecutionArn)
		waitDone(t, em, arn)
		desc, err := client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil || desc.Status != types.ExecutionStatusTimedOut || aws.ToString(desc.Error) != "States.Timeout" || !strings.Contains(aws.ToString(desc.Cause), tc.cause) {
			t.Fatalf("%s: DescribeExecution = %v %+v", tc.typ, err, desc)
		}
		hist, err := client.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), ReverseOrder: true, MaxResults: 1})
		if err != nil || len(hist.Events) != 1 || hist.Events[0].Type != types.HistoryEventTypeExecutionTimedOut ||
			aws.ToString(hist.Events[0].ExecutionTimedOutEventDetails.Error) != "States.Timeout" {
			t.Fatalf("%s: last event = %v %+v", tc.typ, err, hist)
		}
	}
}
