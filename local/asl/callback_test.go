package asl

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// callbackDef sends the token and waits, catching into $.error.
const callbackDef = `{"StartAt":"Wait","States":{
  "Wait":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken",
    "Parameters":{"QueueUrl":"q","MessageBody":{"taskToken.$":"$$.Task.Token","id.$":"$.id"}},
    "HeartbeatSeconds":60,"TimeoutSeconds":600,"ResultPath":"$.export",
    "Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"Failed"}],"End":true},
  "Failed":{"Type":"Fail","ErrorPath":"$.error.Error","CausePath":"$.error.Cause"}}}`

// sentTokens records the tokens a callback task sent.
func sentTokens() (TaskRunner, chan string) {
	ch := make(chan string, 4)
	return taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		body := c.Parameters.(map[string]any)["MessageBody"].(map[string]any)
		if c.Resource != "arn:aws:states:::sqs:sendMessage" || !c.WaitForTaskToken || body["taskToken"] != c.TaskToken {
			return nil, &Error{Name: "Test.BadCall", Cause: mustJSON(c)}
		}
		ch <- c.TaskToken
		return map[string]any{"MessageId": "m-1"}, nil
	}), ch
}

func TestWaitForTaskTokenSuccess(t *testing.T) {
	tasks, tokens := sentTokens()
	store := NewTokens(RealClock{}, 0)
	x := start(t, Config{Tasks: tasks, Tokens: store}, callbackDef, `{"id":"r1"}`)
	tok := <-tokens
	if err := store.Heartbeat(tok); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := store.Succeed(tok, `{"fileCount":2}`); err != nil {
		t.Fatalf("succeed: %v", err)
	}
	info := finish(t, x)
	jsonEq(t, "output", info.Output, `{"id":"r1","export":{"fileCount":2}}`)
	var types []string
	for _, e := range x.History() {
		types = append(types, e.Type)
	}
	want := "ExecutionStarted TaskStateEntered TaskScheduled TaskStarted TaskSubmitted TaskSucceeded TaskStateExited ExecutionSucceeded"
	if strings.Join(types, " ") != want {
		t.Fatalf("history = %v\nwant %s", types, want)
	}
	if err := store.Succeed(tok, `{}`); err != ErrTaskTimedOut {
		t.Fatalf("second success: %v, want ErrTaskTimedOut", err)
	}
}

func TestWaitForTaskTokenFailure(t *testing.T) {
	tasks, tokens := sentTokens()
	store := NewTokens(RealClock{}, 0)
	x := start(t, Config{Tasks: tasks, Tokens: store}, callbackDef, `{"id":"r1"}`)
	if err := store.Fail(<-tokens, "Export.Failed", "job FAILED"); err != nil {
		t.Fatal(err)
	}
	info := finish(t, x)
	if info.Status != StatusFailed || info.Error != "Export.Failed" || info.Cause != "job FAILED" {
		t.Fatalf("got %+v", info)
	}
}

func TestWaitForTaskTokenHeartbeatTimeout(t *testing.T) {
	clock := NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	tasks, tokens := sentTokens()
	store := NewTokens(clock, 0)
	x := start(t, Config{Tasks: tasks, Tokens: store, Clock: clock}, callbackDef, `{"id":"r1"}`)
	tok := <-tokens
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(61 * time.Second)
	info := finish(t, x)
	if info.Error != ErrorHeartbeatTimeout {
		t.Fatalf("got %+v", info)
	}
	if err := store.Heartbeat(tok); err != ErrTaskTimedOut {
		t.Fatalf("late heartbeat: %v, want ErrTaskTimedOut", err)
	}
	found := false
	for _, e := range x.History() {
		found = found || e.Type == "TaskTimedOut" && e.Error == ErrorHeartbeatTimeout
	}
	if !found {
		t.Fatalf("no TaskTimedOut event in %v", eventTypes(x.History()))
	}
}

func TestWaitForTaskTokenTimeoutDespiteHeartbeats(t *testing.T) {
	tasks, tokens := sentTokens()
	store := NewTokens(RealClock{}, 0.0001)
	x := start(t, Config{Tasks: tasks, Tokens: store, TimeScale: 0.0001}, strings.Replace(callbackDef, `"HeartbeatSeconds":60,`, "", 1), `{"id":"r1"}`)
	<-tokens
	info := finish(t, x)
	if info.Error != ErrorTimeout {
		t.Fatalf("got %+v", info)
	}
}

func TestDistributedMapWritesResultsAndToleratesNothing(t *testing.T) {
	store := newMemStore()
	_ = store.PutObject(context.Background(), "b", "manifests/r.json", []byte(`[{"key":"a"},{"key":"b"},{"key":"c"}]`))
	tasks := taskFunc(func(_ context.Context, c TaskCall) (any, error) {
		p := c.Parameters.(map[string]any)
		if p["file"].(map[string]any)["key"] == "b" && p["fail"] == true {
			return nil, &Error{Name: "Prepare.Failed", Cause: "b is bad"}
		}
		return map[string]any{"file": p["file"].(map[string]any)["key"], "idx": p["idx"]}, nil
	})
	def := `{"StartAt":"M","States":{"M":{"Type":"Map",
	  "ItemReader":{"Resource":"arn:aws:states:::s3:getObject","ReaderConfig":{"InputType":"JSON"},"Parameters":{"Bucket.$":"$.bucket","Key.$":"$.key"}},
	  "ItemSelector":{"file.$":"$$.Map.Item.Value","idx.$":"$$.Map.Item.Index","fail.$":"$.fail"},
	  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},
	     "StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","End":true}}},
	  "MaxConcurrency":2,"ToleratedFailurePercentage":0,
	  "ResultWriter":{"Resource":"arn:aws:states:::s3:putObject","Parameters":{"Bucket":"b","Prefix":"map-results"}},
	  "ResultPath":"$.publish","End":true}}}`
	var mu sync.Mutex
	var children []*Execution
	cfg := Config{Tasks: tasks, Objects: store, OnChildExecution: func(x *Execution) {
		mu.Lock()
		defer mu.Unlock()
		children = append(children, x)
	}}
	info := runDef(t, cfg, def, `{"bucket":"b","key":"manifests/r.json","fail":false}`)
	if info.Status != StatusSucceeded {
		t.Fatalf("got %+v", info)
	}
	var out struct {
		Publish struct {
			MapRunArn           string
			ResultWriterDetails struct{ Bucket, Key string }
		} `json:"publish"`
	}
	if err := json.Unmarshal([]byte(info.Output), &out); err != nil {
		t.Fatal(err)
	}
	p := out.Publish
	if !strings.HasPrefix(p.MapRunArn, "arn:aws:states:us-east-1:000000000000:mapRun:test/M:") || p.ResultWriterDetails.Bucket != "b" ||
		!strings.HasPrefix(p.ResultWriterDetails.Key, "map-results/") || !strings.HasSuffix(p.ResultWriterDetails.Key, "/manifest.json") {
		t.Fatalf("map output = %+v", p)
	}
	var manifest struct {
		DestinationBucket, MapRunArn string
		ResultFiles                  map[string][]struct {
			Key  string
			Size int
		}
	}
	if err := json.Unmarshal(store.get(t, "b", p.ResultWriterDetails.Key), &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.DestinationBucket != "b" || manifest.MapRunArn != p.MapRunArn || len(manifest.ResultFiles["SUCCEEDED"]) != 1 ||
		len(manifest.ResultFiles["FAILED"]) != 0 || manifest.ResultFiles["PENDING"] == nil {
		t.Fatalf("manifest = %+v", manifest)
	}
	sf := manifest.ResultFiles["SUCCEEDED"][0]
	body := store.get(t, "b", sf.Key)
	if len(body) != sf.Size || !strings.HasSuffix(sf.Key, "/SUCCEEDED_0.json") {
		t.Fatalf("result file %s: size %d, manifest says %d", sf.Key, len(body), sf.Size)
	}
	var results []map[string]any
	if err := json.Unmarshal(body, &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results, want 3", len(results))
	}
	for _, r := range results {
		for _, k := range []string{"ExecutionArn", "Input", "InputDetails", "Name", "Output", "OutputDetails", "StartDate", "StopDate", "Status"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("result entry lacks %s: %v", k, r)
			}
		}
		if _, ok := r["Output"].(string); !ok || r["Status"] != "SUCCEEDED" || !strings.Contains(r["ExecutionArn"].(string), ":express:test/M:") {
			t.Fatalf("result entry = %v", r)
		}
	}
	if len(children) != 3 {
		t.Fatalf("%d child executions recorded, want 3", len(children))
	}

	// One failing child exceeds a 0 % tolerance.
	children = nil
	info = runDef(t, cfg, def, `{"bucket":"b","key":"manifests/r.json","fail":true}`)
	if info.Status != StatusFailed || info.Error != ErrorExceedToleratedFailure {
		t.Fatalf("got %+v", info)
	}
	failedFiles := 0
	for k := range store.objects {
		if strings.HasSuffix(k, "/FAILED_0.json") {
			failedFiles++
			var fr []map[string]any
			_ = json.Unmarshal(store.objects[k], &fr)
			if len(fr) != 1 || fr[0]["Error"] != "Prepare.Failed" || fr[0]["Status"] != "FAILED" {
				t.Fatalf("FAILED file = %s", store.objects[k])
			}
		}
	}
	if failedFiles != 1 {
		t.Fatalf("%d FAILED_0.json files, want 1", failedFiles)
	}
}

func TestDistributedMapItemReaderFailure(t *testing.T) {
	def := `{"StartAt":"M","States":{"M":{"Type":"Map",
	  "ItemReader":{"Resource":"arn:aws:states:::s3:getObject","Parameters":{"Bucket":"b","Key":"missing.json"}},
	  "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"EXPRESS"},"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},
	  "End":true}}}`
	info := runDef(t, Config{Objects: newMemStore()}, def, `{}`)
	if info.Error != ErrorItemReaderFailed {
		t.Fatalf("got %+v", info)
	}
}
