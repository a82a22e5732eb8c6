package fakesfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

// fakeLambda answers per function with a handler and records payloads.
type fakeLambda struct {
	mu       sync.Mutex
	handlers map[string]func(payload []byte) ([]byte, bool, error)
	calls    map[string][]string
}

func (f *fakeLambda) Invoke(_ context.Context, fn string, payload []byte) ([]byte, bool, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string][]string{}
	}
	f.calls[fn] = append(f.calls[fn], string(payload))
	h := f.handlers[fn]
	f.mu.Unlock()
	if h == nil {
		return nil, false, fmt.Errorf("function %s not found", fn)
	}
	return h(payload)
}

func waitDone(t *testing.T, em *Emulator, arn string) asl.ExecutionInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := em.WaitExecution(ctx, arn)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return info
}

func TestExecutionLifecycleOverTheSDK(t *testing.T) {
	ctx := context.Background()
	lambda := &fakeLambda{handlers: map[string]func([]byte) ([]byte, bool, error){
		"echo": func(p []byte) ([]byte, bool, error) { return p, false, nil },
	}}
	var mu sync.Mutex
	transitions := map[string]int{}
	em, client, _ := startSFN(t, Options{Lambda: lambda, TimeScale: 0.001, OnTransition: func(arn, _ string) {
		mu.Lock()
		transitions[arn]++
		mu.Unlock()
	}})
	def := `{"StartAt":"Call","States":{"Call":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	  "Parameters":{"FunctionName":"echo","Payload":{"v.$":"$.v"}},"ResultSelector":{"echoed.$":"$.Payload.v","code.$":"$.StatusCode"},"End":true}}}`
	created, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("echo-sm"), Definition: aws.String(def), RoleArn: aws.String("arn:aws:iam::000000000000:role/r")})
	if err != nil {
		t.Fatalf("CreateStateMachine: %v", err)
	}
	started, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("run-1"), Input: aws.String(`{"v":42}`)})
	if err != nil {
		t.Fatalf("StartExecution: %v", err)
	}
	if got := aws.ToString(started.ExecutionArn); got != em.ExecutionARN("echo-sm", "run-1") {
		t.Fatalf("execution ARN %s", got)
	}
	waitDone(t, em, aws.ToString(started.ExecutionArn))
	desc, err := client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: started.ExecutionArn})
	if err != nil {
		t.Fatalf("DescribeExecution: %v", err)
	}
	if desc.Status != types.ExecutionStatusSucceeded || aws.ToString(desc.Output) != `{"code":200,"echoed":42}` ||
		aws.ToString(desc.Input) != `{"v":42}` || desc.StopDate == nil || desc.StartDate == nil {
		t.Fatalf("describe = %+v output %s", desc, aws.ToString(desc.Output))
	}

	_, err = client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("run-1"), Input: aws.String(`{"v":1}`)})
	var exists *types.ExecutionAlreadyExists
	if !errors.As(err, &exists) {
		t.Fatalf("reused name: %v, want *types.ExecutionAlreadyExists", err)
	}
	auto, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Input: aws.String(`{"v":2}`)})
	if err != nil {
		t.Fatalf("StartExecution without a name: %v", err)
	}
	waitDone(t, em, aws.ToString(auto.ExecutionArn))

	hist, err := client.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: started.ExecutionArn})
	if err != nil {
		t.Fatalf("GetExecutionHistory: %v", err)
	}
	var kinds []string
	for _, ev := range hist.Events {
		kinds = append(kinds, string(ev.Type))
	}
	want := "ExecutionStarted TaskStateEntered TaskScheduled TaskStarted TaskSucceeded TaskStateExited ExecutionSucceeded"
	if strings.Join(kinds, " ") != want {
		t.Fatalf("history %v, want %s", kinds, want)
	}
	sched := hist.Events[2].TaskScheduledEventDetails
	if sched == nil || aws.ToString(sched.ResourceType) != "lambda" || aws.ToString(sched.Resource) != "invoke" || aws.ToString(sched.Parameters) != `{"FunctionName":"echo","Payload":{"v":42}}` {
		t.Fatalf("TaskScheduled details = %+v", sched)
	}
	if d := hist.Events[0].ExecutionStartedEventDetails; d == nil || aws.ToString(d.Input) != `{"v":42}` || aws.ToString(d.RoleArn) != "arn:aws:iam::000000000000:role/r" {
		t.Fatalf("ExecutionStarted details = %+v", d)
	}
	mu.Lock()
	n := transitions[aws.ToString(started.ExecutionArn)]
	mu.Unlock()
	if got, _ := em.Transitions(aws.ToString(started.ExecutionArn)); got != 1 || n != 1 {
		t.Fatalf("transitions = %d (hook %d), want 1", got, n)
	}

	list, err := client.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: created.StateMachineArn, StatusFilter: types.ExecutionStatusSucceeded})
	if err != nil || len(list.Executions) != 2 {
		t.Fatalf("ListExecutions SUCCEEDED: %v, %d items", err, len(list.Executions))
	}
	list, err = client.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: created.StateMachineArn, StatusFilter: types.ExecutionStatusRunning})
	if err != nil || len(list.Executions) != 0 {
		t.Fatalf("ListExecutions RUNNING: %v, %d items", err, len(list.Executions))
	}
}

func TestStopExecutionAbortsAWaitingExecution(t *testing.T) {
	ctx := context.Background()
	em, client, _ := startSFN(t, Options{})
	arn, err := em.RegisterStateMachine("waiter", []byte(`{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":86400,"End":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	started, err := client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: aws.String(arn), Name: aws.String("long")})
	if err != nil {
		t.Fatal(err)
	}
	running, _ := client.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: aws.String(arn), StatusFilter: types.ExecutionStatusRunning})
	if len(running.Executions) != 1 {
		t.Fatalf("%d running executions, want 1", len(running.Executions))
	}
	if _, err := client.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: started.ExecutionArn, Error: aws.String("Op"), Cause: aws.String("test")}); err != nil {
		t.Fatalf("StopExecution: %v", err)
	}
	desc, _ := client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: started.ExecutionArn})
	if desc.Status != types.ExecutionStatusAborted || aws.ToString(desc.Error) != "Op" {
		t.Fatalf("describe after stop = %s %s", desc.Status, aws.ToString(desc.Error))
	}
}

func TestAPIErrors(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startSFN(t, Options{})
	_, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("bad"), Definition: aws.String(`{"StartAt":"X","States":{}}`), RoleArn: aws.String("r")})
	var invalid *types.InvalidDefinition
	if !errors.As(err, &invalid) {
		t.Fatalf("bad definition: %v", err)
	}
	_, err = client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("unsupported"), RoleArn: aws.String("r"),
		Definition: aws.String(`{"StartAt":"X","States":{"X":{"Type":"Task","Resource":"arn:aws:states:::dynamodb:putItem","End":true}}}`)})
	if !errors.As(err, &invalid) {
		t.Fatalf("unsupported resource: %v", err)
	}
	_, err = client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:000000000000:stateMachine:none")})
	var noSM *types.StateMachineDoesNotExist
	if !errors.As(err, &noSM) {
		t.Fatalf("unknown state machine: %v", err)
	}
	_, err = client.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String("arn:aws:states:us-east-1:000000000000:execution:none:x")})
	var noEx *types.ExecutionDoesNotExist
	if !errors.As(err, &noEx) {
		t.Fatalf("unknown execution: %v", err)
	}
	created, err := client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String("ok"), RoleArn: aws.String("r"),
		Definition: aws.String(`{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Input: aws.String(`{"a":`)})
	var badInput *types.InvalidExecutionInput
	if !errors.As(err, &badInput) {
		t.Fatalf("bad input: %v", err)
	}
	_, err = client.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: created.StateMachineArn, Name: aws.String("has space")})
	var badName *types.InvalidName
	if !errors.As(err, &badName) {
		t.Fatalf("bad name: %v", err)
	}
}

func TestCallbackAndDistributedMapOverRealSQSAndS3(t *testing.T) {
	ctx := context.Background()
	lambda := &fakeLambda{handlers: map[string]func([]byte) ([]byte, bool, error){
		"prep": func(p []byte) ([]byte, bool, error) {
			var in struct{ Key string }
			_ = json.Unmarshal(p, &in)
			if in.Key == "boom" {
				return []byte(`{"errorType":"Prep.Bad","errorMessage":"boom"}`), true, nil
			}
			return []byte(`{"file":"` + in.Key + `"}`), false, nil
		},
	}}
	env := startEnv(t)
	cfg := env.Config()
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	sqsc := sqs.NewFromConfig(cfg)
	em, client := startSFNOn(t, env, Options{Lambda: lambda, SQS: sqsc, S3: s3c, TimeScale: 0.001})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("art")}); err != nil {
		t.Fatal(err)
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("sfn-api-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	def := `{"StartAt":"Wait","States":{
	  "Wait":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
	    "Parameters":{"QueueUrl":"` + aws.ToString(q.QueueUrl) + `","MessageBody":{"taskToken.$":"$$.Task.Token","run.$":"$$.Execution.Name"}},
	    "HeartbeatSeconds":600,"TimeoutSeconds":3600,"ResultPath":"$.export","Next":"Map"},
	  "Map":{"Type":"Map","ItemReader":{"Resource":"arn:aws:states:::s3:getObject","ReaderConfig":{"InputType":"JSON"},
	      "Parameters":{"Bucket.$":"$.export.bucket","Key.$":"$.export.key"}},
	    "ItemSelector":{"Key.$":"$$.Map.Item.Value.key"},
	    "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},"StartAt":"P","States":{
	      "P":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"FunctionName":"prep","Payload.$":"$"},"OutputPath":"$.Payload","End":true}}},
	    "ResultWriter":{"Resource":"arn:aws:states:::s3:putObject","Parameters":{"Bucket":"art","Prefix":"map-results"}},
	    "ResultPath":"$.publish","End":true}}}`
	arn, err := em.RegisterStateMachine("cb", []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, manifest string
		want           types.ExecutionStatus
	}{{"ok", `[{"key":"a"},{"key":"b"}]`, types.ExecutionStatusSucceeded}, {"bad", `[{"key":"a"},{"key":"boom"}]`, types.ExecutionStatusFailed}} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("art"), Key: aws.String("manifests/" + tc.name + ".json"), Body: strings.NewReader(tc.manifest)}); err != nil {
			t.Fatal(err)
		}
		exArn, err := em.StartExecution(ctx, arn, tc.name, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct{ TaskToken, Run string }
		for msg.TaskToken == "" {
			rcv, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range rcv.Messages {
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
					t.Fatalf("message body %s: %v", aws.ToString(m.Body), err)
				}
			}
		}
		if msg.Run != tc.name {
			t.Fatalf("message for run %q, want %q", msg.Run, tc.name)
		}
		if _, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg.TaskToken),
			Output: aws.String(`{"bucket":"art","key":"manifests/` + tc.name + `.json"}`)}); err != nil {
			t.Fatalf("SendTaskSuccess: %v", err)
		}
		info := waitDone(t, em, exArn)
		if string(tc.want) != info.Status {
			t.Fatalf("%s: status %s (%s: %s)", tc.name, info.Status, info.Error, info.Cause)
		}
		if tc.want == types.ExecutionStatusFailed {
			if info.Error != asl.ErrorExceedToleratedFailure {
				t.Fatalf("error %s, want States.ExceedToleratedFailureThreshold", info.Error)
			}
			continue
		}
		var out struct {
			Publish struct {
				MapRunArn           string
				ResultWriterDetails struct{ Bucket, Key string }
			} `json:"publish"`
		}
		_ = json.Unmarshal([]byte(info.Output), &out)
		obj, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("art"), Key: aws.String(out.Publish.ResultWriterDetails.Key)})
		if err != nil {
			t.Fatalf("manifest %s: %v", out.Publish.ResultWriterDetails.Key, err)
		}
		obj.Body.Close()
		children, err := client.ListExecutions(ctx, &awssfn.ListExecutionsInput{MapRunArn: aws.String(out.Publish.MapRunArn)})
		if err != nil || len(children.Executions) != 2 {
			t.Fatalf("map run children: %v, %d", err, len(children.Executions))
		}
		child := children.Executions[0]
		if !strings.Contains(aws.ToString(child.ExecutionArn), ":express:cb/Map:") || child.Status != types.ExecutionStatusSucceeded {
			t.Fatalf("child = %+v", child)
		}
		h, err := client.GetExecutionHistory(ctx, &awssfn.GetExecutionHistoryInput{ExecutionArn: child.ExecutionArn})
		if err != nil || len(h.Events) == 0 {
			t.Fatalf("child history: %v", err)
		}
	}
}
