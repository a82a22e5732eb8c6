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

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// timeScale runs Retry intervals of seconds in microseconds.
const timeScale = 0.0001

const (
	runLockFn = "arn:aws:lambda:us-east-1:000000000000:function:run-lock"
	prepareFn = "arn:aws:lambda:us-east-1:000000000000:function:prepare-change"
	bucket    = "cdc-artifacts"
)

// window is what the checkpoint covers; exportWindow reaches back by the
// overlap (5 min) and is what is exported and delivered (contract C3).
var (
	window       = map[string]any{"since": "2026-11-21T10:00:00.000Z", "until": "2026-11-21T10:05:00.000Z"}
	exportWindow = map[string]any{"since": "2026-11-21T09:55:00.000Z", "until": "2026-11-21T10:05:00.000Z"}
)

// lambdas plays run-lock and prepare-change and records every payload.
type lambdas struct {
	mu       sync.Mutex
	payloads map[string][]map[string]any
	handle   func(fn string, in map[string]any) (out any, fnErr bool, err error)
	// deletes answers prepare-change's delete scan (action "deletes"),
	// recorded under deletesFn; nil answers done at once.
	deletes func(in map[string]any) (out any, fnErr bool, err error)
}

// deletesFn is the key the delete-scan payloads of prepare-change are
// recorded under, apart from its batches.
const deletesFn = prepareFn + "#deletes"

func (l *lambdas) Invoke(_ context.Context, fn string, payload []byte) ([]byte, bool, error) {
	var in map[string]any
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, false, fmt.Errorf("payload is not a JSON object: %w", err)
	}
	handle := l.handle
	if fn == prepareFn && in["action"] == "deletes" {
		fn, handle = deletesFn, func(_ string, in map[string]any) (any, bool, error) {
			if l.deletes != nil {
				return l.deletes(in)
			}
			return map[string]any{"done": true, "cursor": nil, "totals": map[string]any{}}, false, nil
		}
	}
	l.mu.Lock()
	if l.payloads == nil {
		l.payloads = map[string][]map[string]any{}
	}
	l.payloads[fn] = append(l.payloads[fn], in)
	l.mu.Unlock()
	out, fnErr, err := handle(fn, in)
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
// (Retry intervals of seconds take microseconds); the export heartbeat and
// the run timeout are set high enough that a test never races them unless
// it asks to.
func newHarness(t *testing.T, handle func(fn string, in map[string]any) (any, bool, error)) *harness {
	return newHarnessWith(t, nil, handle)
}

func newHarnessWith(t *testing.T, overrides map[string]string, handle func(fn string, in map[string]any) (any, bool, error)) *harness {
	t.Helper()
	ctx := context.Background()
	env := localawstest.Start(t)
	cfg := env.Config()
	h := &harness{t: t, l: &lambdas{handle: handle}}
	h.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	h.sqs = sqs.NewFromConfig(cfg)
	// The EXPRESS limit stays 5 minutes of real time: a busy machine must not
	// time a Map child out (scaled, it would be 30 ms).
	h.em = fakesfn.New(fakesfn.Options{Region: env.Region, AccountID: env.AccountID, Lambda: h.l, SQS: h.sqs, S3: h.s3,
		TimeScale: timeScale, ExpressMaxDuration: time.Duration(float64(asl.DefaultExpressMaxDuration) / timeScale)})
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
	v[ExportHeartbeatSeconds], v[ExportTimeoutSeconds], v[RunTimeoutSeconds] = "9000000", "99999990", "99999999"
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

// files returns n manifest files of the export job1.
func files(n int) []manifest.File {
	out := make([]manifest.File, n)
	for i := range out {
		out[i] = manifest.File{Bucket: bucket, Key: fmt.Sprintf("exports/ds-FHIR_EXPORT-job1/Patient/Patient-%d-0-0.ndjson", i), ResourceType: "Patient", Bytes: 1000}
	}
	return out
}

// putManifest writes the export's manifest as check-export does: the
// files planned into batches of at most perBatch files, split into parts of
// at most batchesPerPart batches under run runID's prefix. It returns the
// export wait's output for part 0 (contract C2).
func (h *harness) putManifest(runID string, fs []manifest.File, perBatch, batchesPerPart int) manifest.Export {
	h.t.Helper()
	parts := manifest.Split(manifest.Plan(fs, manifest.Limits{MaxFiles: perBatch}), batchesPerPart)
	for i, part := range parts {
		b, _ := json.Marshal(part)
		if _, err := h.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(manifest.PartKey(runID, i)), Body: strings.NewReader(string(b))}); err != nil {
			h.t.Fatal(err)
		}
	}
	ew := envelope.Window{Since: mustTime(h.t, exportWindow["since"]), Until: mustTime(h.t, exportWindow["until"])}
	ex := manifest.Export{Bucket: bucket, ManifestKey: manifest.PartKey(runID, 0), ManifestRunID: runID, Part: 0, Parts: len(parts),
		PartFiles: manifest.PartFiles(parts), FileCount: manifest.FileCount(parts[0]), BatchCount: len(parts[0]),
		JobID: "job1", DatastoreID: "ds", Window: ew}
	if err := ex.Validate(); err != nil {
		h.t.Fatal(err)
	}
	return ex
}

func mustTime(t *testing.T, v any) time.Time {
	t.Helper()
	tm, err := envelope.ParseTime(fmt.Sprint(v))
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// succeedExport answers the start message's task token with ex.
func (h *harness) succeedExport(token any, ex manifest.Export) {
	h.t.Helper()
	b, _ := json.Marshal(ex)
	if _, err := h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(fmt.Sprint(token)), Output: aws.String(string(b))}); err != nil {
		h.t.Fatalf("SendTaskSuccess: %v", err)
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

// The states of PublishWindow's branches: their states interleave in the
// history, each branch in its own order.
var (
	deleteBranch = map[string]bool{"FindDeletes": true, "DeletesDone?": true, "DeletesScanned": true}
	changeBranch = map[string]bool{"AnyFiles?": true, "NoChanges": true, "PublishChanges": true}
)

// paths splits the states entered into the run's own, the delete branch's
// and the change branch's, each in order, joined by spaces.
func (h *harness) paths(arn string) (run, deletes, changes string) {
	var r, d, c []string
	for _, s := range h.statesEntered(arn) {
		switch {
		case deleteBranch[s]:
			d = append(d, s)
		case changeBranch[s]:
			c = append(c, s)
		default:
			r = append(r, s)
		}
	}
	return strings.Join(r, " "), strings.Join(d, " "), strings.Join(c, " ")
}

// wantPaths fails t unless the run entered the states run, deletes and
// changes (see paths).
func (h *harness) wantPaths(t *testing.T, arn, run, deletes, changes string) {
	t.Helper()
	r, d, c := h.paths(arn)
	if r != run || d != deletes || c != changes {
		t.Fatalf("states entered:\n run     %q, want %q\n deletes %q, want %q\n changes %q, want %q", r, run, d, deletes, c, changes)
	}
}

func acquired(runID string) map[string]any {
	return map[string]any{"acquired": true, "reason": "", "runId": runID, "window": window, "exportWindow": exportWindow, "empty": false, "continues": false, "reuse": nil}
}

func commitOK(in map[string]any) map[string]any {
	return map[string]any{"runId": in["executionName"], "checkpoint": window["until"], "outcome": "SUCCEEDED"}
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

// batchFiles returns the files of a prepare-change payload.
func batchFiles(in map[string]any) []map[string]any {
	raw, _ := in["files"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, it := range raw {
		m, _ := it.(map[string]any)
		out = append(out, m)
	}
	return out
}

func TestDefinitionHappyPath(t *testing.T) {
	// 12 files planned in batches of at most 5: three prepare-change invocations.
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case fn == runLockFn && in["action"] == "commit":
			return commitOK(in), false, nil
		case fn == prepareFn:
			n := len(batchFiles(in))
			return map[string]any{"files": n, "lines": 2 * n, "events": 2 * n, "outsideWindow": 0, "quarantined": 0, "claimChecked": 0, "bytes": 100 * n}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(fn, in)}, true, nil
	})
	arn := h.start("run-happy")
	msg := h.startMessage()
	if msg["executionId"] != arn || msg["runId"] != "run-happy" || msg["taskToken"] == "" {
		t.Fatalf("start message = %v", msg)
	}
	// start-export exports the export window, overlap included.
	mustEqualJSON(t, "start message window", msg["window"], exportWindow)
	ex := h.putManifest("run-happy", files(12), 5, 0)
	if _, err := h.client.SendTaskHeartbeat(context.Background(), &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(msg["taskToken"].(string))}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	h.succeedExport(msg["taskToken"], ex)
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	h.wantPaths(t, arn, "AcquireLock LockTaken? WaitForExport PublishWindow CommitRun",
		"FindDeletes DeletesDone? DeletesScanned", "AnyFiles? PublishChanges")
	if n, _ := h.em.Transitions(arn); n != 10 {
		t.Fatalf("transitions = %d, want 10 (5 of the run, 3 of the delete branch, 2 of the change branch)", n)
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
	// The commit carries the checkpoint window and the whole export object,
	// so run-lock knows which manifest part this run delivered, and the
	// delete scan's last answer, whose totals join the run's counts.
	mustEqualJSON(t, "commit payload", commit, map[string]any{"action": "commit", "executionId": arn, "executionName": "run-happy", "startTime": startTime,
		"window": window, "export": ex, "exportJobId": "job1", "results": results,
		"deletes": map[string]any{"done": true, "cursor": nil, "totals": map[string]any{}}})

	prep := h.l.calls(prepareFn)
	if len(prep) != 3 {
		t.Fatalf("prepare-change ran %d times, want 3", len(prep))
	}
	seen := map[string]bool{}
	var sizes []int
	for _, p := range prep {
		fs := batchFiles(p)
		sizes = append(sizes, len(fs))
		// The child execution's start, so every attempt ends before the
		// EXPRESS child does (prepare.Input.ChildStartTime).
		if cs, err := time.Parse(time.RFC3339, fmt.Sprint(p["childStartTime"])); err != nil || time.Since(cs) > time.Minute || time.Until(cs) > time.Second {
			t.Errorf("childStartTime = %v, want the child execution's start", p["childStartTime"])
		}
		delete(p, "childStartTime")
		// One manifest batch with the run's context, the number of
		// batches of its Map (prepare.Config.RateFor), the checkpoint
		// window and whether the run continues a committed one (its
		// overlap's repeats are skipped).
		mustEqualJSON(t, "prepare-change payload", p, map[string]any{
			"files": p["files"], "window": exportWindow, "export": map[string]any{"datastoreId": "ds", "jobId": "job1"}, "runId": "run-happy", "executionId": arn,
			"batchCount": 3, "checkpoint": window, "continues": false,
		})
		for _, file := range fs {
			seen[fmt.Sprint(file["key"])] = true
			if len(file) != 4 || file["bucket"] != bucket || file["resourceType"] != "Patient" || file["bytes"] != float64(1000) {
				t.Fatalf("file = %v", file)
			}
		}
	}
	sort.Ints(sizes)
	if len(seen) != 12 || fmt.Sprint(sizes) != "[2 5 5]" {
		t.Fatalf("files seen = %v in batches of %v, want 12 in 5, 5, 2", seen, sizes)
	}

	var resultManifest struct {
		DestinationBucket, MapRunArn string
		ResultFiles                  map[string][]struct {
			Key  string
			Size int64
		}
	}
	h.getJSON(key, &resultManifest)
	if resultManifest.DestinationBucket != bucket || resultManifest.MapRunArn != mapRunArn || len(resultManifest.ResultFiles["SUCCEEDED"]) != 1 || len(resultManifest.ResultFiles["FAILED"]) != 0 {
		t.Fatalf("result manifest = %+v", resultManifest)
	}
	var entries []struct {
		ExecutionArn, Input, Name, Output, Status string
	}
	h.getJSON(resultManifest.ResultFiles["SUCCEEDED"][0].Key, &entries)
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

// TestDefinitionReusedExportSkipsTheWait runs two executions over one
// export of two manifest parts: the first waits for the export and
// publishes part 0; the second gets part 1 as run-lock's reuse object,
// sends no start message and publishes part 1. Every file is published
// once, each run under its own runId.
func TestDefinitionReusedExportSkipsTheWait(t *testing.T) {
	var ex manifest.Export
	var mu sync.Mutex
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			l := acquired(in["executionName"].(string))
			if in["executionName"] == "run-part1" {
				mu.Lock()
				next, ok := ex.Next()
				mu.Unlock()
				if !ok {
					return map[string]any{"errorType": "Test.NoNextPart", "errorMessage": "part 0 is the last"}, true, nil
				}
				l["reuse"] = next
			}
			return l, false, nil
		case fn == runLockFn && in["action"] == "commit":
			return commitOK(in), false, nil
		case fn == prepareFn:
			return map[string]any{"files": len(batchFiles(in)), "events": len(batchFiles(in))}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(fn, in)}, true, nil
	})
	// 6 files, 2 per batch, 2 batches per part: part 0 has 4 files, part 1 has 2.
	arn0 := h.start("run-part0")
	msg := h.startMessage()
	mu.Lock()
	ex = h.putManifest("run-part0", files(6), 2, 2)
	mu.Unlock()
	if ex.Parts != 2 || ex.FileCount != 4 {
		t.Fatalf("export = %+v, want 2 parts, 4 files in part 0", ex)
	}
	h.succeedExport(msg["taskToken"], ex)
	if info := h.wait(arn0); info.Status != asl.StatusSucceeded {
		t.Fatalf("first run: %s %s %s", info.Status, info.Error, info.Cause)
	}

	arn1 := h.start("run-part1")
	info := h.wait(arn1)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("second run: %s %s %s", info.Status, info.Error, info.Cause)
	}
	if r, d, c := h.paths(arn1); r != "AcquireLock LockTaken? ReuseExport PublishWindow CommitRun" || d != "FindDeletes DeletesDone? DeletesScanned" || c != "AnyFiles? PublishChanges" {
		got := r + " | " + d + " | " + c
		t.Fatalf("second run's states: %s", got)
	}
	out, err := h.sqs.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(h.queue), WaitTimeSeconds: 0})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("the reusing run sent a start message: %v %v", err, out)
	}
	// The reusing run's scan call carries the reuse, which prepare-change
	// answers done at once (TestFindIsDoneAtOnceForAReusedExport); the
	// exporting run's carries none.
	scans := h.l.calls(deletesFn)
	if len(scans) != 2 || scans[0]["runId"] != "run-part0" || scans[0]["reuse"] != nil ||
		scans[1]["runId"] != "run-part1" || scans[1]["reuse"] == nil {
		t.Fatalf("delete scans = %v, want the exporting run's without reuse, then the reusing run's with it", scans)
	}

	byRun := map[string][]string{}
	for _, p := range h.l.calls(prepareFn) {
		mustEqualJSON(t, "prepare-change context", map[string]any{"window": p["window"], "export": p["export"]},
			map[string]any{"window": exportWindow, "export": map[string]any{"datastoreId": "ds", "jobId": "job1"}})
		for _, f := range batchFiles(p) {
			byRun[fmt.Sprint(p["runId"])] = append(byRun[fmt.Sprint(p["runId"])], fmt.Sprint(f["key"]))
		}
	}
	seen := map[string]int{}
	for _, keys := range byRun {
		for _, k := range keys {
			seen[k]++
		}
	}
	if len(byRun["run-part0"]) != 4 || len(byRun["run-part1"]) != 2 || len(seen) != 6 {
		t.Fatalf("files by run = %v, want 4 then 2, 6 distinct", byRun)
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("%s published %d times", k, n)
		}
	}
	var commits []map[string]any
	for _, c := range h.l.calls(runLockFn) {
		if c["action"] == "commit" {
			commits = append(commits, c)
		}
	}
	next, _ := ex.Next()
	if len(commits) != 2 {
		t.Fatalf("commits = %v", commits)
	}
	mustEqualJSON(t, "first commit's export", commits[0]["export"], ex)
	mustEqualJSON(t, "second commit's export", commits[1]["export"], next)
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

// emptyWindowRun answers run-lock for a run whose window is empty: it
// acquires and commits; any other call is unexpected.
func emptyWindowRun(in map[string]any) (any, bool, error) {
	switch in["action"] {
	case "acquire":
		l := acquired(in["executionName"].(string))
		l["empty"] = true
		return l, false, nil
	case "commit":
		return commitOK(in), false, nil
	}
	return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
}

func TestDefinitionEmptyWindowCommitsAtOnce(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) { return emptyWindowRun(in) })
	arn := h.start("run-empty")
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? CommitRun" {
		t.Fatalf("states: %s", got)
	}
	commit := h.l.calls(runLockFn)[1]
	if commit["action"] != "commit" || commit["exportJobId"] != nil || commit["results"] != nil {
		t.Fatalf("commit payload = %v", commit)
	}
	mustEqualJSON(t, "commit window", commit["window"], window)
	mustEqualJSON(t, "commit export", commit["export"], map[string]any{"jobId": nil, "fileCount": 0})
	// No scan ran: the placeholder, which the commit counts as nothing.
	mustEqualJSON(t, "commit deletes", commit["deletes"], map[string]any{"done": false, "cursor": nil})
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
	ex := h.putManifest("run-nofiles", nil, 10, 0) // one part holding []
	h.succeedExport(msg["taskToken"], ex)
	info := h.wait(arn)
	if info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	h.wantPaths(t, arn, "AcquireLock LockTaken? WaitForExport PublishWindow CommitRun",
		"FindDeletes DeletesDone? DeletesScanned", "AnyFiles? NoChanges")
	commit := h.l.calls(runLockFn)[1]
	if commit["exportJobId"] != "job1" || commit["results"] != nil {
		t.Fatalf("commit payload = %v", commit)
	}
	mustEqualJSON(t, "commit export", commit["export"], ex)
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
		"window": window, "export": map[string]any{"jobId": nil, "fileCount": 0}, "exportJobId": nil, "error": "Export.Failed", "cause": "export job job1 ended FAILED"})
	// The SDK sees the execution as failed too.
	desc, err := h.client.DescribeExecution(context.Background(), &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil || desc.Status != "FAILED" || aws.ToString(desc.Error) != "Export.Failed" {
		t.Fatalf("DescribeExecution: %v %+v", err, desc)
	}
}

// TestDefinitionMapChildFailingAfterRetriesGoesToHandleFailure: a batch
// whose every attempt fails fails its child after the child's retries (the
// Lambda.* retrier: 1 + 5 attempts; handler errors: 1 + 2), the Map fails
// (ToleratedFailurePercentage 0) and the run goes to HandleFailure, so the
// next run covers the window again.
func TestDefinitionMapChildFailingAfterRetriesGoesToHandleFailure(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fail     func() (any, bool, error)
		childErr string
		attempts int
	}{
		{"invocation error", func() (any, bool, error) { return nil, false, errors.New("Rate exceeded") }, asl.ErrorLambdaServiceException, 6},
		{"ReadFailed", func() (any, bool, error) {
			return map[string]any{"errorType": "ReadFailed", "errorMessage": "read 1 of 1 files failed"}, true, nil
		}, "ReadFailed", 3},
		{"unknown handler error", func() (any, bool, error) {
			return map[string]any{"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out"}, true, nil
		}, "Sandbox.Timedout", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
				switch {
				case fn == runLockFn && in["action"] == "acquire":
					return acquired(in["executionName"].(string)), false, nil
				case fn == runLockFn && in["action"] == "fail":
					return map[string]any{"runId": in["executionName"], "outcome": "FAILED"}, false, nil
				case fn == prepareFn:
					for _, file := range batchFiles(in) {
						if strings.Contains(file["key"].(string), "Patient-1-") {
							return tc.fail()
						}
					}
					return map[string]any{"files": len(batchFiles(in)), "events": 1}, false, nil
				}
				return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
			})
			arn := h.start("run-mapfail")
			msg := h.startMessage()
			// One file per batch: the failing file fails its child alone.
			h.succeedExport(msg["taskToken"], h.putManifest("run-mapfail", files(3), 1, 0))
			info := h.wait(arn)
			if info.Status != asl.StatusFailed || info.Error != asl.ErrorExceedToleratedFailure {
				t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
			}
			// The Map's failure stops the delete branch wherever it is.
			if r, d, c := h.paths(arn); r != "AcquireLock LockTaken? WaitForExport PublishWindow HandleFailure Failed" ||
				c != "AnyFiles? PublishChanges" || !strings.HasPrefix("FindDeletes DeletesDone? DeletesScanned", d) {
				t.Fatalf("states: %s | %s | %s", r, d, c)
			}
			failing := 0
			for _, p := range h.l.calls(prepareFn) {
				if fs := batchFiles(p); len(fs) != 1 {
					t.Fatalf("a batch of %d files, want 1", len(fs))
				} else if strings.Contains(fs[0]["key"].(string), "Patient-1-") {
					failing++
				}
			}
			if failing != tc.attempts {
				t.Fatalf("the failing batch was tried %d times, want %d", failing, tc.attempts)
			}
			fail := h.l.calls(runLockFn)[1]
			if fail["action"] != "fail" || fail["error"] != asl.ErrorExceedToleratedFailure || fail["exportJobId"] != "job1" {
				t.Fatalf("fail payload = %v", fail)
			}
			if ex, _ := fail["export"].(map[string]any); ex["manifestKey"] != manifest.PartKey("run-mapfail", 0) {
				t.Fatalf("fail payload's export = %v", fail["export"])
			}
			var failedChild bool
			for _, c := range h.em.Executions(h.smARN) {
				if c.MapRunARN != "" && c.Status == asl.StatusFailed && c.Error == tc.childErr {
					failedChild = true
				}
			}
			if !failedChild {
				t.Fatalf("no failed child execution with %s", tc.childErr)
			}
		})
	}
}

// TestDefinitionMapChildRetriesHandlerErrors: prepare-change's retryable
// errors (contract C4) and any other task failure are retried inside the
// child with backoff, so one failed attempt does not fail the window.
func TestDefinitionMapChildRetriesHandlerErrors(t *testing.T) {
	kinds := []string{"BatchDeadlineExceeded", "PublishFailed", "ReadFailed", "Sandbox.Timedout"}
	var mu sync.Mutex
	tries := map[string]int{}
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case fn == runLockFn && in["action"] == "commit":
			return commitOK(in), false, nil
		case fn == prepareFn:
			key := fmt.Sprint(batchFiles(in)[0]["key"])
			mu.Lock()
			tries[key]++
			n := tries[key]
			mu.Unlock()
			var i int
			if _, err := fmt.Sscanf(key, "exports/ds-FHIR_EXPORT-job1/Patient/Patient-%d-", &i); err == nil && i < len(kinds) && n == 1 {
				return map[string]any{"errorType": kinds[i], "errorMessage": "first attempt fails"}, true, nil
			}
			return map[string]any{"files": 1, "events": 1}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-retry")
	msg := h.startMessage()
	h.succeedExport(msg["taskToken"], h.putManifest("run-retry", files(len(kinds)+1), 1, 0))
	if info := h.wait(arn); info.Status != asl.StatusSucceeded {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i <= len(kinds); i++ {
		key := files(len(kinds) + 1)[i].Key
		want := 2
		if i == len(kinds) {
			want = 1
		}
		if tries[key] != want {
			t.Fatalf("batch %d was tried %d times, want %d (tries %v)", i, tries[key], want, tries)
		}
	}
}

// TestDefinitionRunTimeoutEndsTheExecution: the top-level TimeoutSeconds
// ends an execution whose export never answers, TIMED_OUT with
// States.Timeout (which no Catch sees), before the lock's lease.
func TestDefinitionRunTimeoutEndsTheExecution(t *testing.T) {
	h := newHarnessWith(t, map[string]string{RunTimeoutSeconds: "600"}, func(fn string, in map[string]any) (any, bool, error) {
		if in["action"] == "acquire" {
			return acquired(in["executionName"].(string)), false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-timeout")
	msg := h.startMessage()
	info := h.wait(arn) // 600 s at TimeScale 0.0001: 60 ms
	if info.Status != asl.StatusTimedOut || info.Error != asl.ErrorTimeout {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	desc, err := h.client.DescribeExecution(context.Background(), &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil || desc.Status != "TIMED_OUT" {
		t.Fatalf("DescribeExecution: %v %+v", err, desc)
	}
	if n := len(h.l.calls(runLockFn)); n != 1 {
		t.Fatalf("run-lock calls = %d, want the acquire only", n)
	}
	_, err = h.client.SendTaskSuccess(context.Background(), &awssfn.SendTaskSuccessInput{TaskToken: aws.String(msg["taskToken"].(string)), Output: aws.String(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "TaskTimedOut") {
		t.Fatalf("SendTaskSuccess after the run timed out: %v, want TaskTimedOut", err)
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

// TestDefinitionDeleteScanLoopsOnItsCursor: the run's delete scan gets the
// window (not the export window: no overlap), the export's data store and
// job, and a null cursor first; while it answers a cursor the machine calls
// it again with that cursor, and only once it is done do the batches run.
func TestDefinitionDeleteScanLoopsOnItsCursor(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case fn == runLockFn && in["action"] == "commit":
			return commitOK(in), false, nil
		case fn == prepareFn:
			return map[string]any{"files": len(batchFiles(in))}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(fn, in)}, true, nil
	})
	var mu sync.Mutex
	n := 0
	h.l.deletes = func(in map[string]any) (any, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n < 3 {
			return map[string]any{"done": false, "cursor": map[string]any{"seq": n, "pending": []any{map[string]any{"type": "Patient", "next": fmt.Sprint("page-", n)}}}, "totals": map[string]any{"deletes": n}}, false, nil
		}
		return map[string]any{"done": true, "cursor": nil, "totals": map[string]any{"deletes": 3}}, false, nil
	}
	arn := h.start("run-scan")
	msg := h.startMessage()
	h.succeedExport(msg["taskToken"], h.putManifest("run-scan", files(2), 2, 0))
	if info := h.wait(arn); info.Status != asl.StatusSucceeded {
		t.Fatalf("status %s: %s %s", info.Status, info.Error, info.Cause)
	}
	h.wantPaths(t, arn, "AcquireLock LockTaken? WaitForExport PublishWindow CommitRun",
		"FindDeletes DeletesDone? FindDeletes DeletesDone? FindDeletes DeletesDone? DeletesScanned", "AnyFiles? PublishChanges")
	scans := h.l.calls(deletesFn)
	if len(scans) != 3 {
		t.Fatalf("%d scan calls, want 3", len(scans))
	}
	if scans[0]["cursor"] != nil {
		t.Errorf("first cursor = %v, want null", scans[0]["cursor"])
	}
	mustEqualJSON(t, "second cursor", scans[1]["cursor"], map[string]any{"seq": 1, "pending": []any{map[string]any{"type": "Patient", "next": "page-1"}}})
	for _, sc := range scans {
		mustEqualJSON(t, "scan context", map[string]any{"window": sc["window"], "export": sc["export"], "runId": sc["runId"]},
			map[string]any{"window": acquired("run-scan")["window"], "export": map[string]any{"datastoreId": "ds", "jobId": "job1"}, "runId": "run-scan"})
	}
}

// TestDefinitionDeleteScanFailureFailsTheRun: a scan that keeps failing
// (a history page that does not parse, a 429 storm) is retried, then the run
// goes to HandleFailure and the checkpoint stays. The Map beside it
// publishes the window's changes all the same (the next run's window covers
// them again; the delivered index keeps them from consumers a second time).
func TestDefinitionDeleteScanFailureFailsTheRun(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		switch {
		case fn == runLockFn && in["action"] == "acquire":
			return acquired(in["executionName"].(string)), false, nil
		case fn == runLockFn && in["action"] == "fail":
			return map[string]any{"outcome": "FAILED"}, false, nil
		case fn == prepareFn:
			n := len(batchFiles(in))
			return map[string]any{"files": n, "lines": n, "events": n}, false, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(fn, in)}, true, nil
	})
	h.l.deletes = func(map[string]any) (any, bool, error) {
		return map[string]any{"errorType": "ScanFailed", "errorMessage": "delete scan: history of Patient: answer is not a JSON Bundle"}, true, nil
	}
	arn := h.start("run-scanfail")
	msg := h.startMessage()
	h.succeedExport(msg["taskToken"], h.putManifest("run-scanfail", files(2), 2, 0))
	info := h.wait(arn)
	if info.Status != asl.StatusFailed || info.Error != "ScanFailed" {
		t.Fatalf("status %s %s, want FAILED ScanFailed", info.Status, info.Error)
	}
	if n := len(h.l.calls(deletesFn)); n != 4 {
		t.Errorf("%d scan attempts, want 4 (the first and 3 retries)", n)
	}
	h.wantPaths(t, arn, "AcquireLock LockTaken? WaitForExport PublishWindow HandleFailure Failed",
		"FindDeletes", "AnyFiles? PublishChanges")
	if n := len(h.l.calls(runLockFn)); n != 2 || h.l.calls(runLockFn)[1]["action"] != "fail" {
		t.Errorf("run-lock calls %v, want acquire then fail", h.l.calls(runLockFn))
	}
}

// TestDefinitionARunLockCrashIsRetried: a run-lock invocation that crashes
// or times out (Lambda reports an unhandled error) is invoked again — the
// run-lock actions are idempotent — so one crash neither fails the
// execution (an ExecutionFailedAlarm for nothing) nor, at the commit,
// sends a delivered window to be delivered again.
func TestDefinitionARunLockCrashIsRetried(t *testing.T) {
	var mu sync.Mutex
	crashed := map[string]bool{}
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		action, _ := in["action"].(string)
		mu.Lock()
		first := !crashed[action]
		crashed[action] = true
		mu.Unlock()
		if fn == runLockFn && first {
			errorType := "Runtime.ExitError"
			if action == "commit" {
				errorType = "Sandbox.Timedout"
			}
			return map[string]any{"errorType": errorType, "errorMessage": "the first attempt of " + action + " dies"}, true, nil
		}
		return emptyWindowRun(in)
	})
	arn := h.start("run-crash")
	if info := h.wait(arn); info.Status != asl.StatusSucceeded {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	if got := strings.Join(h.statesEntered(arn), " "); got != "AcquireLock LockTaken? CommitRun" {
		t.Fatalf("states: %s", got)
	}
	var actions []string
	for _, c := range h.l.calls(runLockFn) {
		actions = append(actions, fmt.Sprint(c["action"]))
	}
	if got := strings.Join(actions, " "); got != "acquire acquire commit commit" {
		t.Errorf("run-lock calls: %s, want each action tried again once", got)
	}
}

// TestDefinitionFinalRunLockErrorsAreNotRetried: a refusal that will not
// change (the data store changed, the input is wrong, the lock was lost,
// children failed) ends the execution at once.
func TestDefinitionFinalRunLockErrorsAreNotRetried(t *testing.T) {
	h := newHarness(t, func(fn string, in map[string]any) (any, bool, error) {
		if fn == runLockFn && in["action"] == "acquire" {
			return map[string]any{"errorType": "DatastoreChangedError", "errorMessage": "the checkpoint belongs to another data store"}, true, nil
		}
		return map[string]any{"errorType": "Test.Unexpected", "errorMessage": fmt.Sprint(in)}, true, nil
	})
	arn := h.start("run-moved")
	if info := h.wait(arn); info.Status != asl.StatusFailed || info.Error != "DatastoreChangedError" {
		t.Fatalf("execution = %s %s %s", info.Status, info.Error, info.Cause)
	}
	if n := len(h.l.calls(runLockFn)); n != 1 {
		t.Errorf("run-lock calls = %d, want 1", n)
	}
}
