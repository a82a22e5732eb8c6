package fakesfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// TestConformanceOverTheSDK runs the cases of local/asl's conformance suite
// (../asl/testdata/conformance.json) that need no Task resource through the
// emulator with the real SDK v2 client: CreateStateMachine (invalid cases
// must fail with InvalidDefinition), StartExecution, DescribeExecution.
func TestConformanceOverTheSDK(t *testing.T) {
	b, err := os.ReadFile("../asl/testdata/conformance.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name       string          `json:"name"`
		Definition json.RawMessage `json:"definition"`
		Parameters json.RawMessage `json:"parameters"`
		JSONata    json.RawMessage `json:"jsonata"`
		Input      json.RawMessage `json:"input"`
		Output     json.RawMessage `json:"output"`
		Error      string          `json:"error"`
		Cause      string          `json:"cause"`
		Invalid    string          `json:"invalid"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, client, _ := startSFN(t, Options{TimeScale: 0.001})
	ran, passed := 0, 0
	for i, c := range cases {
		def := string(c.Definition)
		switch {
		case c.Parameters != nil:
			def = `{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":` + string(c.Parameters) + `,"End":true}}}`
		case c.JSONata != nil:
			def = `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Output":` + string(c.JSONata) + `,"End":true}}}`
		}
		if strings.Contains(def, `"Task"`) {
			continue // the emulator serves only real resources
		}
		ran++
		ok := t.Run(c.Name, func(t *testing.T) {
			created, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
				Name: aws.String(fmt.Sprintf("conf-%d", i)), Definition: aws.String(def), RoleArn: aws.String("arn:aws:iam::000000000000:role/r")})
			if c.Invalid != "" {
				var invalid *types.InvalidDefinition
				if !errors.As(err, &invalid) || !strings.Contains(err.Error(), c.Invalid) {
					t.Fatalf("CreateStateMachine: %v; want InvalidDefinition naming %q", err, c.Invalid)
				}
				return
			}
			if err != nil {
				t.Fatalf("CreateStateMachine: %v", err)
			}
			started, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Input: aws.String(string(c.Input))})
			if err != nil {
				t.Fatalf("StartExecution: %v", err)
			}
			var desc *awssfn.DescribeExecutionOutput
			for {
				if desc, err = client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: started.ExecutionArn}); err != nil {
					t.Fatalf("DescribeExecution: %v", err)
				}
				if desc.Status != types.ExecutionStatusRunning {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			if c.Error != "" {
				if desc.Status != types.ExecutionStatusFailed || aws.ToString(desc.Error) != c.Error || (c.Cause != "" && aws.ToString(desc.Cause) != c.Cause) {
					t.Fatalf("status %s error %q cause %q; want FAILED %s", desc.Status, aws.ToString(desc.Error), aws.ToString(desc.Cause), c.Error)
				}
				return
			}
			if desc.Status != types.ExecutionStatusSucceeded {
				t.Fatalf("status %s: %s %s", desc.Status, aws.ToString(desc.Error), aws.ToString(desc.Cause))
			}
			var got, want any
			if err := json.Unmarshal([]byte(aws.ToString(desc.Output)), &got); err != nil {
				t.Fatalf("output %q: %v", aws.ToString(desc.Output), err)
			}
			_ = json.Unmarshal(c.Output, &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("output %s; want %s", aws.ToString(desc.Output), c.Output)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("conformance over the SDK: %d of %d Task-free cases pass (%d cases in all)", passed, ran, len(cases))
}
