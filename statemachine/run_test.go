package statemachine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	runLockFn = "arn:aws:lambda:us-east-1:000000000000:function:run-lock"
	prepareFn = "arn:aws:lambda:us-east-1:000000000000:function:prepare-change"
	bucket    = "cdc-artifacts"
)

var window = map[string]any{"since": "2026-11-21T10:00:00.000Z", "until": "2026-11-21T10:05:00.000Z"}

// lambdas plays run-lock and prepare-change and records every payload.
type lambdas struct {
	mu       sync.Mutex
	payloads map[string][]map[string]any
	handle   func(fn string, in map[string]any) (out any, fnErr bool, err error)
}

func (l *lambdas) Invoke(_ context.Context, fn string, payload []byte) ([]byte, bool, error) {
	var in map[string]any
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, false, fmt.Errorf("payload is not a JSON object: %w", err)
	}
	l.mu.Lock()
	if l.payloads == nil {
		l.payloads = map[string][]map[string]any{}
	}
	l.payloads[fn] = append(l.payloads[fn], in)
	l.mu.Unlock()
	out, fnErr, err := l.handle(fn, in)
	if err != nil {
		return nil, false, err
	}
	b, _ := json.Marshal(out)
	return b, fnErr, nil
}

func (l *lambdas) calls(fn string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.payloads[fn]...)
}

type harness struct {
	t      *testing.T
	em     *fakesfn.Emulator
	client *awssfn.Client
	s3     *s3.Client
	sqs    *sqs.Client
	queue  string
	smARN  string
	l      *lambdas
}

// newHarness runs the real definition on the emulator at TimeScale 0.0001
// (Retry intervals of seconds take microseconds); the export heartbeat is
// set high enough that a test never races it unless it asks to.
func newHarness(t *testing.T, handle func(fn string, in map[string]any) (any, bool, error)) *harness {
	return newHarnessWith(t, map[string]string{ExportHeartbeatSeconds: "9000000", ExportTimeoutSeconds: "99999999"}, handle)
}

func newHarnessWith(t *testing.T, overrides map[string]string, handle func(fn string, in map[string]any) (any, bool, error)) *harness {
	t.Helper()
	ctx := context.Background()
	env := localaws.StartTest(t)
	cfg := env.Config()
	h := &harness{t: t, l: &lambdas{handle: handle}}
	h.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	h.sqs = sqs.NewFromConfig(cfg)
	h.em = fakesfn.New(fakesfn.Options{Region: env.Region, AccountID: env.AccountID, Lambda: h.l, SQS: h.sqs, S3: h.s3, TimeScale: 0.0001})
	t.Cleanup(h.em.Close)
	env.Gateway.Handle(localaws.ServiceSFN, h.em)
	h.client = awssfn.NewFromConfig(cfg)
	if _, err := h.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	q, err := h.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("start-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	h.queue = aws.ToString(q.QueueUrl)
	v := testValues()
	v[StartQueueURL] = h.queue
	v[ArtifactBucket] = bucket
	v[RunLockFunctionArn] = runLockFn
	v[PrepareChangeFunctionArn] = prepareFn
	for k, val := range overrides {
		v[k] = val
	}
	def, err := Substitute(Definition(), v)
	if err != nil {
		t.Fatal(err)
	}
	created, err := h.client.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{Name: aws.String(Name), Definition: aws.String(string(def)), RoleArn: aws.String("arn:aws:iam::000000000000:role/sfn")})
	if err != nil {
		t.Fatalf("CreateStateMachine: %v", err)
	}
	h.smARN = aws.ToString(created.StateMachineArn)
	return h
}

func (h *harness) start(name string) string {
	h.t.Helper()
	out, err := h.client.StartExecution(context.Background(), &awssfn.StartExecutionInput{StateMachineArn: aws.String(h.smARN), Name: aws.String(name), Input: aws.String(`{}`)})
	if err != nil {
		h.t.Fatalf("StartExecution: %v", err)
	}
	return aws.ToString(out.ExecutionArn)
}

// startMessage receives the start message the WaitForExport state sent.
func (h *harness) startMessage() map[string]any {
	h.t.Helper()
	for i := 0; i < 60; i++ {
		out, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(h.queue), WaitTimeSeconds: 1})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, m := range out.Messages {
			var msg map[string]any
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil {
				h.t.Fatalf("start message %q: %v", aws.ToString(m.Body), err)
			}
			return msg
		}
	}
	h.t.Fatalf("no start message arrived")
	return nil
}

func (h *harness) wait(arn string) asl.ExecutionInfo {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := h.em.WaitExecution(ctx, arn)
	if err != nil {
		h.t.Fatal(err)
	}
	return info
}

func (h *harness) putManifest(key string, files int) {
	h.t.Helper()
	var items []map[string]any
	for i := 0; i < files; i++ {
		items = append(items, map[string]any{"bucket": bucket, "key": fmt.Sprintf("exports/ds-FHIR_EXPORT-job1/Patient/Patient-%d-0-0.ndjson", i), "resourceType": "Patient"})
	}
	b, _ := json.Marshal(items)
	if _, err := h.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(b))}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) getJSON(key string, v any) {
	h.t.Helper()
	out, err := h.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		h.t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	if err := json.Unmarshal(b, v); err != nil {
		h.t.Fatalf("%s: %v", key, err)
	}
}

func (h *harness) statesEntered(arn string) []string {
	evs, err := h.em.History(arn)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if strings.HasSuffix(e.Type, "StateEntered") {
			out = append(out, e.StateName)
		}
	}
	return out
}

func acquired(runID string) map[string]any {
	return map[string]any{"acquired": true, "reason": "", "runId": runID, "window": window, "empty": false}
}

func commitOK(in map[string]any) map[string]any {
	return map[string]any{"runId": in["executionName"], "checkpoint": window["until"], "outcome": "SUCCEEDED"}
}

func exportOutput(runID string, files int) string {
	b, _ := json.Marshal(map[string]any{"bucket": bucket, "manifestKey": "manifests/" + runID + ".json", "jobId": "job1", "datastoreId": "ds", "window": window, "fileCount": files})
	return string(b)
}

func mustEqualJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	var gv, wv any
	_ = json.Unmarshal(g, &gv)
	_ = json.Unmarshal(w, &wv)
	g2, _ := json.Marshal(gv)
	w2, _ := json.Marshal(wv)
	if string(g2) != string(w2) {
		t.Fatalf("%s =\n  %s\nwant\n  %s", what, g2, w2)
	}
}

// batchItems returns the Items of a prepare-change batch payload.
func batchItems(in map[string]any) []map[string]any {
	raw, _ := in["Items"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, it := range raw {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

func TestDefinitionHappyPath(t *testing.T) {
	// 12 files in batches of at most 5: three prepare-change invocations.
	h := newHarnessWith(t, map[string]string{ExportHeartbeatSeconds: "9000000", ExportTimeoutSeconds: "99999999", MapFilesPerBatch: "5"},
		func(fn string, in map[string]any) (any, bool, error) {
			switch {
			case fn == runLockFn && in["action"] == "acquire":
				return acquired(in["executionName"].(string)), false, nil
			case fn == runLockFn && in["action"] == "commit":
				return commitOK(in), false, nil
			case fn == prepareFn:
				n := len(batchItems(in))
				return map[string]any{"files": n, "lines": 2 * n, "events": 2 * n, "outsideWindow": 0, "quarantined": 0, "claimChecked": 0, "bytes": 100 * n}, false, nil
			}
			return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(fn, in)}, true, nil
		})
	arn := h.start("run-happy")
	msg := h.startMessage()
	if msg["executionId"] != arn || msg["runId"] != "run-happy" || msg["taskToken"] == "" {
		t.Fatalf("start message = %v", msg)
	}
	mustEqualJSON(t, "start message window", msg["window"], window)
	h.putManifest("manifests/run-happy.json", 12)
	if _, err := h.client.SendTaskHeartbeat(context.Background(), &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(msg["taskToken"].(string))}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if _, err := h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg["taskToken"].(string)), Output: aws.String(exportOutput("run-happy", 12))}); err != nil {
		t.Fatalf("SendTaskSuccess: %v", err)
	}
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? WaitForExport AnyFiles? PublishChanges CommitRun Done" {
		t.Fatalf("states entered: %s", got)
	}
	if n, _ := h.em.Transitions(arn); n != 7 {
		t.Fatalf("transitions = %d, want 7", n)
	}

	lock := h.l.calls(runLockFn)
	if len(lock) != 2 {
		t.Fatalf("run-lock calls = %v", lock)
	}
	startTime, _ := lock[0]["startTime"].(string)
	if _, err := time.Parse(time.RFC3339, startTime); err != nil {
		t.Fatalf("acquire startTime %q: %v", startTime, err)
	}
	mustEqualJSON(t, "acquire payload", lock[0], map[string]any{"action": "acquire", "executionId": arn, "executionName": "run-happy", "startTime": startTime})
	commit := lock[1]
	results, _ := commit["results"].(map[string]any)
	details, _ := results["ResultWriterDetails"].(map[string]any)
	mapRunArn, _ := results["MapRunArn"].(string)
	key, _ := details["Key"].(string)
	if details["Bucket"] != bucket || !strings.HasPrefix(key, "map-results/") || !strings.HasSuffix(key, "/manifest.json") || !strings.Contains(mapRunArn, ":mapRun:healthlake-cdc/") {
		t.Fatalf("commit results = %v", results)
	}
	mustEqualJSON(t, "commit payload", commit, map[string]any{"action": "commit", "executionId": arn, "executionName": "run-happy", "startTime": startTime,
		"window": window, "exportJobId": "job1", "results": results})

	prep := h.l.calls(prepareFn)
	if len(prep) != 3 {
		t.Fatalf("prepare-change ran %d times, want 3", len(prep))
	}
	seen := map[string]bool{}
	var sizes []int
	for _, p := range prep {
		items := batchItems(p)
		sizes = append(sizes, len(items))
		// The child payload is the batch: BatchInput carries the run, Items the files.
		mustEqualJSON(t, "prepare-change payload", p, map[string]any{
			"BatchInput": map[string]any{"window": window, "export": map[string]any{"datastoreId": "ds", "jobId": "job1"}, "runId": "run-happy", "executionId": arn},
			"Items":      p["Items"],
		})
		for _, file := range items {
			seen[fmt.Sprint(file["key"])] = true
			if len(file) != 3 || file["bucket"] != bucket || file["resourceType"] != "Patient" {
				t.Fatalf("file item = %v", file)
			}
		}
	}
	sort.Ints(sizes)
	if len(seen) != 12 || fmt.Sprint(sizes) != "[2 5 5]" {
		t.Fatalf("files seen = %v in batches of %v, want 12 in 5, 5, 2", seen, sizes)
	}

	var manifest struct {
		DestinationBucket, MapRunArn string
		ResultFiles                  map[string][]struct {
			Key  string
			Size int64
		}
	}
	h.getJSON(key, &manifest)
	if manifest.DestinationBucket != bucket || manifest.MapRunArn != mapRunArn || len(manifest.ResultFiles["SUCCEEDED"]) != 1 || len(manifest.ResultFiles["FAILED"]) != 0 {
		t.Fatalf("manifest = %+v", manifest)
	}
	var entries []struct {
		ExecutionArn, Input, Name, Output, Status string
	}
	h.getJSON(manifest.ResultFiles["SUCCEEDED"][0].Key, &entries)
	if len(entries) != 3 {
		t.Fatalf("%d result entries", len(entries))
	}
	for _, e := range entries {
		var out map[string]any
		if err := json.Unmarshal([]byte(e.Output), &out); err != nil || out["events"] != 2*out["files"].(float64) || e.Status != "SUCCEEDED" {
			t.Fatalf("result entry %+v", e)
		}
	}
	children := h.em.MapRunChildren(mapRunArn)
	if len(children) != 3 || children[0].Type != asl.TypeExpress {
		t.Fatalf("map run children = %+v", children)
	}
}

func TestDefinitionLockRefusedIsSkipped(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		if fn == runLockFn && in["action"] == "acquire" {
			return map[string]any{"acquired": false, "reason": "held by another run"}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-skip")
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s %s", info.Status, info.Error)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? Skipped" {
		t.Fatalf("states: %s", got)
	}
	if n := len(h.l.calls(runLockFn)); n != 1 || len(h.l.calls(prepareFn)) != 0 {
		t.Fatalf("run-lock calls %d", n)
	}
}

func TestDefinitionEmptyWindowCommitsAtOnce(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch in["action"] {
		case "acquire":
			l := acquired(in["executionName"].(string))
			l["empty"] = true
			return l, false, nil
		case "commit":
			return commitOK(in), false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-empty")
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? CommitRun Done" {
		t.Fatalf("states: %s", got)
	}
	commit := h.l.calls(runLockFn)[1]
	if commit["action"] != "commit" || commit["exportJobId"] != nil || commit["results"] != nil {
		t.Fatalf("commit payload = %v", commit)
	}
	mustEqualJSON(t, "commit window", commit["window"], window)
}

func TestDefinitionNoFilesCommitsWithoutMapRun(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch in["action"] {
		case "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case "commit":
			return commitOK(in), false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-nofiles")
	msg := h.startMessage()
	if _, err := h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg["taskToken"].(string)), Output: aws.String(exportOutput("run-nofiles", 0))}); err != nil {
		t.Fatal(err)
	}
	info := h.wait(arn)
	if got := strings.Join(h.statesEntered(arn), " "); info.Status != asl.StatusSucceeded || got != "AcquireLock LockTaken? WaitForExport AnyFiles? CommitRun Done" {
		t.Fatalf("status %s, states %s", info.Status, got)
	}
	commit := h.l.calls(runLockFn)[1]
	if commit["exportJobId"] != "job1" || commit["results"] != nil {
		t.Fatalf("commit payload = %v", commit)
	}
}

func TestDefinitionExportFailureGoesToHandleFailure(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch in["action"] {
		case "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case "fail":
			return map[string]any{"runId": in["executionName"], "checkpoint": window["since"], "outcome": "FAILED"}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-exportfail")
	msg := h.startMessage()
	if _, err := h.client.SendTaskFailure(context.Background(), &awssfn.SendTaskFailureInput{TaskToken: aws.String(msg["taskToken"].(string)),
		Error: aws.String("Export.Failed"), Cause: aws.String("export job job1 ended FAILED")}); err != nil {
		t.Fatal(err)
	}
	info := h.wait(arn)
	if info.Status != asl.StatusFailed || info.Error != "Export.Failed" || info.Cause != "export job job1 ended FAILED" {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? WaitForExport HandleFailure Failed" {
		t.Fatalf("states: %s", got)
	}
	fail := h.l.calls(runLockFn)[1]
	startTime := fail["startTime"]
	mustEqualJSON(t, "fail payload", fail, map[string]any{"action": "fail", "executionId": arn, "executionName": "run-exportfail", "startTime": startTime,
		"window": window, "exportJobId": nil, "error": "Export.Failed", "cause": "export job job1 ended FAILED"})
	// The SDK sees the execution as failed too.
	desc, err := h.client.DescribeExecution(context.Background(), &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil || desc.Status != "FAILED" || aws.ToString(desc.Error) != "Export.Failed" {
		t.Fatalf("DescribeExecution: %v %+v", err, desc)
	}
}

func TestDefinitionMapChildFailingAfterRetriesGoesToHandleFailure(t *testing.T) {
	// One file per batch: the failing file fails its child alone.
	h := newHarnessWith(t, map[string]string{ExportHeartbeatSeconds: "9000000", ExportTimeoutSeconds: "99999999", MapFilesPerBatch: "1"}, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case fn == runLockFn && in["action"] == "fail":
			return map[string]any{"runId": in["executionName"], "outcome": "FAILED"}, false, nil
		case fn == prepareFn:
			for _, file := range batchItems(in) {
				if strings.Contains(file["key"].(string), "Patient-1-") {
					return nil, false, errors.New("Rate exceeded") // the invocation fails: Lambda.ServiceException
				}
			}
			return map[string]any{"files": len(batchItems(in)), "events": 1}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-mapfail")
	msg := h.startMessage()
	h.putManifest("manifests/run-mapfail.json", 3)
	if _, err := h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg["taskToken"].(string)), Output: aws.String(exportOutput("run-mapfail", 3))}); err != nil {
		t.Fatal(err)
	}
	info := h.wait(arn)
	if info.Status != asl.StatusFailed || info.Error != asl.ErrorExceedToleratedFailure {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? WaitForExport AnyFiles? PublishChanges HandleFailure Failed" {
		t.Fatalf("states: %s", got)
	}
	failing := 0
	for _, p := range h.l.calls(prepareFn) {
		if items := batchItems(p); len(items) != 1 {
			t.Fatalf("a batch of %d files with MapFilesPerBatch 1", len(items))
		} else if strings.Contains(items[0]["key"].(string), "Patient-1-") {
			failing++
		}
	}
	if failing != 6 {
		t.Fatalf("the failing file was tried %d times, want 1 + 5 retries", failing)
	}
	fail := h.l.calls(runLockFn)[1]
	if fail["action"] != "fail" || fail["error"] != asl.ErrorExceedToleratedFailure || fail["exportJobId"] != "job1" {
		t.Fatalf("fail payload = %v", fail)
	}
	// The failed child is recorded with Lambda.ServiceException.
	var failedChild bool
	for _, c := range h.em.Executions(h.smARN) {
		if c.MapRunARN != "" && c.Status == asl.StatusFailed && c.Error == asl.ErrorLambdaServiceException {
			failedChild = true
		}
	}
	if !failedChild {
		t.Fatalf("no failed child execution with Lambda.ServiceException")
	}
}

func TestDefinitionSilentExportTimesOutIntoHandleFailure(t *testing.T) {
	h := newHarnessWith(t, map[string]string{ExportHeartbeatSeconds: "60", ExportTimeoutSeconds: "3600"}, func(fn string, in map[string]any) (any, bool, error) {
		switch in["action"] {
		case "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case "fail":
			return map[string]any{"runId": in["executionName"], "outcome": "FAILED"}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-silent")
	info := h.wait(arn) // nobody heartbeats: 60 s scaled to 6 ms
	if info.Status != asl.StatusFailed || info.Error != asl.ErrorHeartbeatTimeout {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	fail := h.l.calls(runLockFn)[1]
	if fail["action"] != "fail" || fail["error"] != asl.ErrorHeartbeatTimeout {
		t.Fatalf("fail payload = %v", fail)
	}
	msg := h.startMessage()
	_, err := h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg["taskToken"].(string)), Output: aws.String(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "TaskTimedOut") {
		t.Fatalf("late SendTaskSuccess: %v, want TaskTimedOut", err)
	}
}
