package runctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/deletes"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type owners struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *owners) ExecutionStatus(_ context.Context, arn string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.m[arn]; ok {
		return s, nil
	}
	return runlock.StatusGone, nil
}

func (o *owners) set(arn, s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.m[arn] = s
}

type fakeResults struct {
	counts         runlock.Counts
	err            error
	gotBucket, key string
}

func (f *fakeResults) Summaries(_ context.Context, bucket, key string) (runlock.Counts, error) {
	f.gotBucket, f.key = bucket, key
	return f.counts, f.err
}

type fakeCanceller struct {
	mu   sync.Mutex
	runs []string
	err  error
}

func (f *fakeCanceller) CancelRunExport(_ context.Context, runID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, runID)
	return f.err
}

var tableSeq atomic.Int64

type fixture struct {
	store   *runlock.Store
	owners  *owners
	results *fakeResults
	cancel  *fakeCanceller
	logs    *bytes.Buffer
	emf     *bytes.Buffer
	h       *Handler
}

func newFixture(t *testing.T, opts ...func(*runlock.Config)) *fixture {
	t.Helper()
	env := localawstest.Start(t)
	db := dynamodb.NewFromConfig(env.Config())
	table := fmt.Sprintf("runctl-%d", tableSeq.Add(1))
	if err := runlock.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	f := &fixture{owners: &owners{m: map[string]string{}}, results: &fakeResults{}, cancel: &fakeCanceller{}, logs: &bytes.Buffer{}, emf: &bytes.Buffer{}}
	cfg := runlock.Config{Table: table, InitialCheckpoint: t0.Add(-time.Hour), Now: func() time.Time { return t0 }, Owners: f.owners}
	for _, o := range opts {
		o(&cfg)
	}
	st, err := runlock.New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.store = st
	f.h = &Handler{Lock: st, Results: f.results, Exports: f.cancel, Logger: slog.New(slog.NewJSONHandler(f.logs, nil)),
		Metrics: metrics.New(f.emf, "test"), Now: func() time.Time { return t0 }}
	return f
}

func arn(name string) string { return "arn:aws:states:us-east-1:000000000000:execution:cdc:" + name }

// invoke runs the handler on a JSON payload, as the Lambda runtime does,
// and returns the JSON result.
func (f *fixture) invoke(t *testing.T, payload string) (map[string]any, error) {
	t.Helper()
	var in Input
	if err := json.Unmarshal([]byte(payload), &in); err != nil {
		t.Fatalf("payload: %v", err)
	}
	out, err := f.h.Handle(context.Background(), in)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func acquirePayload(name string) string {
	return fmt.Sprintf(`{"action":"acquire","executionId":%q,"executionName":%q,"startTime":"2026-11-21T10:00:00.000Z"}`, arn(name), name)
}

func TestAcquireOutputMatchesTheContract(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	got, err := f.invoke(t, acquirePayload("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"acquired": true, "runId": "run-1", "empty": false, "refusal": "", "continues": false,
		"window":       map[string]any{"since": "2026-11-21T09:00:00.000Z", "until": "2026-11-21T09:58:00.000Z"},
		"exportWindow": map[string]any{"since": "2026-11-21T08:59:00.000Z", "until": "2026-11-21T09:58:00.000Z"},
		"reuse":        nil}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["reason"]; !ok || len(got) != 9 {
		t.Errorf("output keys = %v, want acquired, reason, refusal, runId, window, exportWindow, empty, continues, reuse (contract C3)", got)
	}
	f.owners.set(arn("run-2"), "RUNNING")
	got, err = f.invoke(t, acquirePayload("run-2"))
	if err != nil {
		t.Fatal(err)
	}
	if got["acquired"] != false || got["window"] != nil || got["runId"] != "run-2" || !strings.Contains(got["reason"].(string), "run-1") ||
		got["refusal"] != string(runlock.RefusalLockHeld) {
		t.Fatalf("refused acquire = %v", got)
	}
	// Both runs report the checkpoint lag (t0 − checkpoint = 1 h); the refused one also a skipped run.
	lines := strings.Split(strings.TrimSpace(f.emf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"CheckpointLagSeconds":3600`) ||
		!strings.Contains(lines[1], `"SkippedRuns":1`) || !strings.Contains(lines[1], `"CheckpointLagSeconds":3600`) || !strings.Contains(lines[1], `"runId":"run-2"`) {
		t.Errorf("metrics = %s", f.emf)
	}
}

func TestCommitSumsTheChildrenIntoHistory(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	f.results.counts = runlock.Counts{Files: 3, Lines: 30, Events: 27, OutsideWindow: 2, Quarantined: 1, Bytes: 9000}
	got, err := f.invoke(t, `{"action":"commit","executionId":"`+arn("run-1")+`","executionName":"run-1","exportJobId":"job-7",
		"window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T09:58:00.000Z"},
		"results":{"MapRunArn":"arn:aws:states:us-east-1:0:mapRun:cdc/PublishChanges:1","ResultWriterDetails":{"Bucket":"art","Key":"map-results/1/manifest.json"}}}`)
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got["outcome"] != "SUCCEEDED" || got["checkpoint"] != "2026-11-21T09:58:00.000Z" || got["runId"] != "run-1" || len(got) != 3 {
		t.Fatalf("commit output = %v", got)
	}
	if f.results.gotBucket != "art" || f.results.key != "map-results/1/manifest.json" {
		t.Fatalf("results read from %s/%s", f.results.gotBucket, f.results.key)
	}
	st, err := f.store.Status(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if h := st.History[0]; h.Counts != f.results.counts || h.ExportJobID != "job-7" || h.Outcome != runlock.OutcomeSucceeded {
		t.Fatalf("history = %+v", h)
	}
}

// TestCommitRecordsTheDeleteScansTotals: the commit adds the delete scan's
// answer (the state's $.deletes) to the Map's counts: its deletes, and its
// fast-path skips and misses beside the lines'.
func TestCommitRecordsTheDeleteScansTotals(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	f.results.counts = runlock.Counts{Files: 2, Lines: 20, Events: 18, FastPathSkipped: 5, FastPathMissed: 1}
	scan, err := json.Marshal(deletes.Output{Done: true, Totals: deletes.Totals{Types: 146, Pages: 150, Entries: 40,
		Deletes: 7, NeverAnnounced: 2, FastPathSkipped: 3, FastPathMissed: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(t, `{"action":"commit","executionId":"`+arn("run-1")+`","executionName":"run-1",
		"window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T09:58:00.000Z"},
		"results":{"ResultWriterDetails":{"Bucket":"art","Key":"map-results/1/manifest.json"}},"deletes":`+string(scan)+`}`); err != nil {
		t.Fatalf("commit: %v", err)
	}
	st, err := f.store.Status(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	want := runlock.Counts{Files: 2, Lines: 20, Events: 18, Deletes: 7, FastPathSkipped: 8, FastPathMissed: 5}
	if got := st.History[0].Counts; got != want {
		t.Fatalf("history counts = %+v, want %+v", got, want)
	}
}

// TestParseDeletes: the placeholder of a run whose scan did not run counts
// nothing; a scan's answer gives its totals; anything else is an input error.
func TestParseDeletes(t *testing.T) {
	for _, raw := range []string{``, `null`, `{"done":false,"cursor":null}`} {
		if c, err := ParseDeletes(json.RawMessage(raw)); err != nil || c != (runlock.Counts{}) {
			t.Errorf("%q: %+v, %v; want nothing counted", raw, c, err)
		}
	}
	c, err := ParseDeletes(json.RawMessage(`{"done":true,"cursor":null,"totals":{"types":3,"deletes":2,"neverAnnounced":1}}`))
	if err != nil || c != (runlock.Counts{Deletes: 2}) {
		t.Errorf("scan answer: %+v, %v", c, err)
	}
	// What the scan answers (deletes.Output), marshalled as Step Functions
	// passes it on: the fields ParseDeletes mirrors keep the scan's names.
	scan, err := json.Marshal(deletes.Output{Done: true, Totals: deletes.Totals{Types: 4, Deletes: 5, FastPathSkipped: 6, FastPathMissed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ParseDeletes(scan); err != nil || c != (runlock.Counts{Deletes: 5, FastPathSkipped: 6, FastPathMissed: 7}) {
		t.Errorf("the scan's own answer %s: %+v, %v", scan, c, err)
	}
	for _, raw := range []string{`"seven"`, `{"totals":{"deletes":"7"}}`, `{"totals":{"deletes":-1}}`} {
		var ie *InputError
		if _, err := ParseDeletes(json.RawMessage(raw)); !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want InputError", raw, err)
		}
	}
}

func TestCommitRefusedWhenChildrenFailed(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	f.results.counts = runlock.Counts{Files: 2, FailedFiles: 1}
	_, err := f.invoke(t, `{"action":"commit","executionId":"`+arn("run-1")+`","executionName":"run-1","results":{"ResultWriterDetails":{"Bucket":"b","Key":"k"}}}`)
	var cf *ChildrenFailedError
	if !errors.As(err, &cf) || cf.Failed != 1 {
		t.Fatalf("commit err = %v, want ChildrenFailedError", err)
	}
	st, _ := f.store.Status(context.Background(), 0)
	if st.Lock == nil || !st.Checkpoint.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("refused commit changed the record: %+v", st)
	}
	if !strings.Contains(f.logs.String(), "children failed") {
		t.Fatalf("refusal not logged: %s", f.logs)
	}
}

func TestCommitByALostOwnerIsALockLostError(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	_, err := f.invoke(t, `{"action":"commit","executionId":"`+arn("other")+`","executionName":"other","results":null}`)
	var ll *LockLostError
	if !errors.As(err, &ll) || !errors.Is(err, runlock.ErrNotOwner) || ll.RunID != "other" {
		t.Fatalf("commit err = %v, want LockLostError", err)
	}
}

func TestEmptyWindowCommitWithoutResults(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.invoke(t, `{"action":"commit","executionId":"`+arn("run-1")+`","executionName":"run-1"}`); err != nil {
		t.Fatal(err)
	}
	// The next run's window is empty (same clock): commit is a clean no-op.
	f.owners.set(arn("run-2"), "RUNNING")
	got, err := f.invoke(t, acquirePayload("run-2"))
	if err != nil || got["acquired"] != true || got["empty"] != true {
		t.Fatalf("acquire = %v, %v; want an empty window", got, err)
	}
	got, err = f.invoke(t, `{"action":"commit","executionId":"`+arn("run-2")+`","executionName":"run-2","results":null}`)
	if err != nil || got["outcome"] != "EMPTY" || got["checkpoint"] != "2026-11-21T09:58:00.000Z" {
		t.Fatalf("empty commit = %v, %v", got, err)
	}
	if f.results.key != "" {
		t.Fatalf("results were read for an empty window")
	}
}

func TestFailCancelsTheExportAndRecordsAShortReason(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	f.cancel.err = errors.New("HealthLake said no")
	cause := `{"errorType":"PublishError","errorMessage":"3 entries failed after retries","stackTrace":["frame1","frame2"]}`
	payload, _ := json.Marshal(map[string]any{"action": "fail", "executionId": arn("run-1"), "executionName": "run-1",
		"startTime": "2026-11-21T10:00:00.000Z", "exportJobId": "job-3", "error": "PublishError", "cause": cause})
	got, err := f.invoke(t, string(payload))
	if err != nil {
		t.Fatalf("fail: %v", err)
	}
	if got["outcome"] != "FAILED" || got["checkpoint"] != "2026-11-21T09:00:00.000Z" {
		t.Fatalf("fail output = %v", got)
	}
	if len(f.cancel.runs) != 1 || f.cancel.runs[0] != "run-1" {
		t.Fatalf("cancelled exports = %v, want run-1", f.cancel.runs)
	}
	if !strings.Contains(f.logs.String(), "export cancel failed") {
		t.Fatalf("cancel failure not logged")
	}
	if !strings.Contains(f.emf.String(), `"RunsFailed":1`) {
		t.Errorf("no RunsFailed metric: %s", f.emf)
	}
	st, _ := f.store.Status(context.Background(), 1)
	if st.Lock != nil || st.History[0].Reason != "PublishError: 3 entries failed after retries" {
		t.Fatalf("after fail: lock %+v reason %q", st.Lock, st.History[0].Reason)
	}
	// Without a canceller, fail still closes the run.
	f.h.Exports = nil
	f.owners.set(arn("run-2"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-2")); err != nil {
		t.Fatal(err)
	}
	if got, err := f.invoke(t, `{"action":"fail","executionId":"`+arn("run-2")+`","executionName":"run-2","error":"States.Timeout"}`); err != nil || got["outcome"] != "FAILED" {
		t.Fatalf("fail without canceller = %v, %v", got, err)
	}
}

func TestBadInput(t *testing.T) {
	f := newFixture(t)
	for name, payload := range map[string]string{
		"unknown action": `{"action":"explode","executionId":"a","executionName":"b"}`,
		"no execution":   `{"action":"acquire"}`,
		"bad start time": `{"action":"acquire","executionId":"a","executionName":"b","startTime":"noon"}`,
		"bad results":    `{"action":"commit","executionId":"a","executionName":"b","results":{"ResultWriterDetails":{"Bucket":""}}}`,
	} {
		_, err := f.invoke(t, payload)
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("%s: err = %v, want InputError", name, err)
		}
	}
}

func TestFailureReason(t *testing.T) {
	cases := []struct{ errName, cause, want string }{
		{"States.Timeout", "", "States.Timeout"},
		{"", "", "UnknownError"},
		{"Lambda.Unknown", `{"errorType":"Runtime.ExitError","errorMessage":"exit status 2"}`, "Lambda.Unknown: Runtime.ExitError: exit status 2"},
		{"States.TaskFailed", "line one\nline two\ttab", "States.TaskFailed: line one line two tab"},
	}
	for _, c := range cases {
		if got := FailureReason(c.errName, c.cause); got != c.want {
			t.Errorf("FailureReason(%q, %q) = %q, want %q", c.errName, c.cause, got, c.want)
		}
	}
	long := FailureReason(strings.Repeat("E", 1000), strings.Repeat("é", 2000))
	if len(long) > maxErrorBytes+maxCauseBytes+10 || !strings.HasSuffix(long, "…") {
		t.Errorf("long reason not truncated: %d bytes", len(long))
	}
}

func TestParseResults(t *testing.T) {
	for raw, want := range map[string]string{
		``: "", `null`: "", `{}`: "",
		`{"ResultWriterDetails":{"Bucket":"b","Key":"k/manifest.json"}}`: "b/k/manifest.json",
		`{"Bucket":"b","Key":"k"}`:                                       "b/k",
	} {
		loc, ok, err := ParseResults(json.RawMessage(raw))
		got := ""
		if ok {
			got = loc.Bucket + "/" + loc.Key
		}
		if err != nil || got != want {
			t.Errorf("ParseResults(%s) = %q, %v; want %q", raw, got, err, want)
		}
	}
	if _, _, err := ParseResults(json.RawMessage(`[1,2]`)); err == nil {
		t.Errorf("an array was accepted")
	}
}

// The window a run carries in its commit round-trips the contract's format.
func TestInputWindowFormat(t *testing.T) {
	var in Input
	if err := json.Unmarshal([]byte(`{"window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T09:58:00.5Z"}}`), &in); err != nil {
		t.Fatal(err)
	}
	if in.Window == nil || envelope.FormatTime(in.Window.Until) != "2026-11-21T09:58:00.500Z" {
		t.Fatalf("window = %+v", in.Window)
	}
}

// TestSnapshotRunReportsNoCheckpointLag: a first run's snapshot starts at
// envelope.SnapshotSince; now − the zero time is no lag, so neither the run
// that takes the lock nor one refused meanwhile reports CheckpointLagSeconds.
func TestSnapshotRunReportsNoCheckpointLag(t *testing.T) {
	f := newFixture(t, func(c *runlock.Config) { c.InitialCheckpoint = time.Time{} })
	f.owners.set(arn("run-1"), "RUNNING")
	got, err := f.invoke(t, acquirePayload("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got["acquired"] != true {
		t.Fatalf("snapshot acquire = %v", got)
	}
	f.owners.set(arn("run-2"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-2")); err != nil {
		t.Fatal(err)
	}
	if out := f.emf.String(); strings.Contains(out, "CheckpointLagSeconds") || !strings.Contains(out, `"SkippedRuns":1`) {
		t.Errorf("metrics during a snapshot = %s", out)
	}
}
