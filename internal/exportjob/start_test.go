package exportjob_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestStartStartsExportRecordsItAndQueuesFirstRecheck(t *testing.T) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-1", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %+v; logs %s", resp.BatchItemFailures, w.logs)
	}

	starts := w.hl.RequestsFor("StartExport")
	if len(starts) != 1 {
		t.Fatalf("StartExport requests = %d, want 1", len(starts))
	}
	r := starts[0]
	q, _ := url.ParseQuery(r.Query)
	if r.Method != "POST" || r.Path != "/datastore/ds1/r4/$export" || q.Get("_since") != "2026-11-21T10:00:00.000Z" ||
		q.Get("_type") != "Patient,Observation" || r.Prefer != "respond-async" {
		t.Errorf("start request = %s %s ?%s Prefer=%q", r.Method, r.Path, r.Query, r.Prefer)
	}
	wantBody := `{"JobName":"cdc-run-1","OutputDataConfig":{"S3Configuration":{"S3Uri":"s3://artifacts/exports/",` +
		`"KmsKeyId":"arn:aws:kms:us-east-1:000000000000:key/k1"}},"DataAccessRoleArn":"arn:aws:iam::000000000000:role/healthlake-export"}`
	if string(r.Body) != wantBody {
		t.Errorf("start body = %s\nwant         %s", r.Body, wantBody)
	}
	jobs := w.hl.Jobs()
	if len(jobs) != 1 {
		t.Fatalf("jobs = %d", len(jobs))
	}
	jobID := jobs[0].JobID

	led := w.ledger("run-1")
	if led["jobId"] != jobID || led["jobName"] != "cdc-run-1" || led["status"] != "SUBMITTED" || led["claimant"] != "m1" ||
		led["startedAt"] != "2026-11-21T10:05:00.000Z" || led["recheckSentAt"] == "" {
		t.Errorf("ledger = %v", led)
	}
	if ttl, _ := strconv.ParseInt(led["ttl"], 10, 64); ttl != w.clk.Now().Add(30*24*time.Hour).Unix() {
		t.Errorf("ledger ttl = %s", led["ttl"])
	}

	m, raw := w.oneRecheck()
	want := exportjob.RecheckMessage{
		TaskToken: token, ExecutionID: "arn:aws:states:us-east-1:000000000000:execution:cdc:run-1", RunID: "run-1",
		Window: window(), DatastoreID: dsID, JobID: jobID, StartedAt: "2026-11-21T10:05:00.000Z", Attempt: 1,
	}
	if m != want || raw.DelaySecs != 30 {
		t.Errorf("re-check = %+v delay %d\nwant       %+v delay 30", m, raw.DelaySecs, want)
	}
	if o := w.outcome(token); o.Status != "PENDING" || o.Heartbeats != 2 {
		t.Errorf("token = %+v, want PENDING with two heartbeats (the liveness check before starting, and after)", o)
	}
	if w.calls("healthlake:ListFHIRExportJobs") != 0 {
		t.Errorf("a fresh run must not list jobs")
	}
}

func TestStartRedeliveryAndDuplicatesStartOneExport(t *testing.T) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	msg := w.startMessage("run-dup", token)
	h := w.startHandler()
	for i, id := range []string{"m1", "m1", "m2"} { // redelivery, then a duplicate send
		if resp := w.invoke(h.Handle, record(id, msg)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d failed: %+v", i, resp)
		}
	}
	// One batch holding both copies.
	if resp := w.invoke(h.Handle, record("m3", msg), record("m4", msg)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failed: %+v", resp)
	}
	if n := len(w.hl.RequestsFor("StartExport")); n != 1 {
		t.Errorf("StartExport requests = %d, want 1", n)
	}
	if n := len(w.newMessages()); n != 1 {
		t.Errorf("re-check messages = %d, want 1", n)
	}
	if !strings.Contains(w.logs.String(), "duplicate start message") {
		t.Errorf("duplicates not logged: %s", w.logs)
	}
}

func TestStartResendsRecheckWhenEarlierDeliveryStoppedBeforeIt(t *testing.T) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	// The ledger says a job was recorded but no re-check was sent.
	putLedger(t, w, "run-half", map[string]string{"jobId": "job-recorded", "status": "SUBMITTED", "claimant": "m0",
		"claimedAt": "2026-11-21T10:04:00.000Z", "startedAt": "2026-11-21T10:04:01.000Z"})
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-half", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	m, raw := w.oneRecheck()
	if m.JobID != "job-recorded" || m.StartedAt != "2026-11-21T10:04:01.000Z" || m.Attempt != 1 || raw.DelaySecs != 30 {
		t.Errorf("re-check = %+v", m)
	}
	if len(w.hl.RequestsFor("StartExport")) != 0 || w.ledger("run-half")["recheckSentAt"] == "" {
		t.Errorf("started again or re-check not noted")
	}
}

func putLedger(t *testing.T, w *world, runID string, attrs map[string]string) {
	t.Helper()
	item := map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "EXPORT#" + runID},
		"sk": &ddbtypes.AttributeValueMemberS{Value: "JOB"},
	}
	for k, v := range attrs {
		item[k] = &ddbtypes.AttributeValueMemberS{Value: v}
	}
	if _, err := w.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func TestStartRecoversExportStartedBeforeACrash(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	// An earlier invocation claimed the run 10 minutes ago, started the
	// export, and died before recording it.
	putLedger(t, w, "run-crash", map[string]string{"status": "CLAIMED", "claimant": "m-old", "claimedAt": "2026-11-21T09:55:00.000Z"})
	out, err := w.deps.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID: dsID, JobName: exportjob.JobName("run-crash"), S3URI: "s3://artifacts/exports/", DataAccessRoleARN: "arn:aws:iam::0:role/r",
	})
	if err != nil {
		t.Fatal(err)
	}
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m-new", w.startMessage("run-crash", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	if n := len(w.hl.RequestsFor("StartExport")); n != 1 {
		t.Errorf("StartExport requests = %d, want only the crashed one", n)
	}
	lists := w.hl.RequestsFor("ListFHIRExportJobs")
	if len(lists) != 1 || !contains(string(lists[0].Body), `"DatastoreId":"ds1"`, `"JobName":"cdc-run-crash"`) {
		t.Errorf("list requests = %+v", lists)
	}
	if led := w.ledger("run-crash"); led["jobId"] != out.JobID || led["claimant"] != "m-new" {
		t.Errorf("ledger = %v", led)
	}
	if m, _ := w.oneRecheck(); m.JobID != out.JobID {
		t.Errorf("re-check for %s, want %s", m.JobID, out.JobID)
	}
}

func TestStartWaitsWhileAnotherInvocationHoldsTheClaim(t *testing.T) {
	w := newWorld(t, nil)
	putLedger(t, w, "run-busy", map[string]string{"status": "CLAIMED", "claimant": "m-other", "claimedAt": "2026-11-21T10:04:30.000Z"})
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-busy", token)))
	if mustJSON(resp.BatchItemFailures) != `[{"itemIdentifier":"m1"}]` {
		t.Errorf("failures = %+v, want m1 retried", resp.BatchItemFailures)
	}
	if len(w.hl.RequestsFor("StartExport")) != 0 || len(w.newMessages()) != 0 {
		t.Errorf("started although another invocation holds the claim")
	}
	if o := w.outcome(token); o.Status != "PENDING" {
		t.Errorf("token = %+v", o)
	}
	// After the lease (2 min) the claim is taken over.
	w.clk.Add(3 * time.Minute)
	resp = w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-busy", token)))
	if len(resp.BatchItemFailures) != 0 || len(w.hl.RequestsFor("StartExport")) != 1 {
		t.Errorf("after the lease: %+v, starts %d", resp, len(w.hl.RequestsFor("StartExport")))
	}
}

func TestStartThrottlingIsRetriedThenLeftToSQS(t *testing.T) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	msg := w.startMessage("run-throttle", token)

	// Two throttles (429, then 400 ThrottlingException): absorbed by the
	// client's backoff (3 attempts).
	w.hl.ThrottleNext(2)
	resp := w.invoke(w.startHandler().Handle, record("m1", msg))
	var statuses []int
	for _, r := range w.hl.RequestsFor("StartExport") {
		statuses = append(statuses, r.Status)
	}
	if len(resp.BatchItemFailures) != 0 || mustJSON(statuses) != "[429,400,202]" || len(w.hl.Jobs()) != 1 {
		t.Fatalf("resp %+v statuses %v jobs %d", resp, statuses, len(w.hl.Jobs()))
	}

	// Persistent throttling: the record goes back to SQS, the run waits.
	w2 := newWorld(t, nil)
	token2 := w2.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	w2.hl.ThrottleNext(3)
	resp = w2.invoke(w2.startHandler().Handle, record("m1", w2.startMessage("run-throttle", token2)))
	if mustJSON(resp.BatchItemFailures) != `[{"itemIdentifier":"m1"}]` {
		t.Fatalf("failures = %+v", resp)
	}
	if o := w2.outcome(token2); o.Status != "PENDING" || len(w2.hl.Jobs()) != 0 {
		t.Errorf("token %+v, jobs %d", o, len(w2.hl.Jobs()))
	}
	if led := w2.ledger("run-throttle"); led["status"] != "CLAIMED" || led["jobId"] != "" {
		t.Errorf("ledger = %v", led)
	}
	// SQS redelivers the same message: it re-takes its own claim, checks
	// for a job by name, and starts one.
	resp = w2.invoke(w2.startHandler().Handle, record("m1", w2.startMessage("run-throttle", token2)))
	if len(resp.BatchItemFailures) != 0 || len(w2.hl.Jobs()) != 1 || len(w2.hl.RequestsFor("ListFHIRExportJobs")) != 1 {
		t.Errorf("redelivery: %+v jobs %d lists %d", resp, len(w2.hl.Jobs()), len(w2.hl.RequestsFor("ListFHIRExportJobs")))
	}
}

func TestStartRefusedExportFailsTheRun(t *testing.T) {
	w := newWorld(t, func(c *exportjob.Config) { c.ResourceTypes = []string{"Spaceship"} })
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	msg := w.startMessage("run-refused", token)
	resp := w.invoke(w.startHandler().Handle, record("m1", msg))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("a refused export must not be retried: %+v", resp)
	}
	o := w.outcome(token)
	if o.Status != "FAILED" || o.Error != "ExportStartFailed" ||
		!contains(o.Cause, "run run-refused", "HTTP 400", "_type names an unsupported resource type") {
		t.Errorf("outcome = %+v", o)
	}
	if n := len(w.hl.RequestsFor("StartExport")); n != 1 {
		t.Errorf("StartExport requests = %d, want 1 (4xx is not retried)", n)
	}
	if led := w.ledger("run-refused"); led["status"] != "START_FAILED" {
		t.Errorf("ledger = %v", led)
	}
	w.invoke(w.startHandler().Handle, record("m2", msg))
	if n := len(w.hl.RequestsFor("StartExport")); n != 1 {
		t.Errorf("a duplicate after the refusal started again (%d requests)", n)
	}
}

func TestStartMalformedBodies(t *testing.T) {
	w := newWorld(t, nil)
	h := w.startHandler()
	cases := []struct {
		name      string
		body      func(token string) string
		wantCause string // "" when no token is readable
		wantLog   string
	}{
		{"not JSON", func(string) string { return `{"taskToken": ` }, "", "body is not a JSON object: syntax error"},
		{"array", func(string) string { return `[1,2]` }, "", "body is not a JSON object"},
		{"no token", func(string) string {
			return `{"runId":"r1","window":{"since":"2026-11-21T10:00:00Z","until":"2026-11-21T10:03:00Z"}}`
		}, "", "taskToken is missing or empty"},
		{"no runId", func(tok string) string {
			return `{"taskToken":"` + tok + `","window":{"since":"2026-11-21T10:00:00Z","until":"2026-11-21T10:03:00Z"}}`
		}, "runId is missing", "runId is missing"},
		{"bad since", func(tok string) string {
			return `{"taskToken":"` + tok + `","runId":"r1","window":{"since":"yesterday","until":"2026-11-21T10:03:00Z"}}`
		}, "window.since is missing or not an RFC 3339 time", "window.since"},
		{"reversed window", func(tok string) string {
			return `{"taskToken":"` + tok + `","runId":"r1","window":{"since":"2026-11-21T10:03:00Z","until":"2026-11-21T10:00:00Z"}}`
		}, "window.since is not before window.until", "window.since is not before"},
		{"window of the wrong type", func(tok string) string {
			return `{"taskToken":"` + tok + `","runId":"r1","window":"last five minutes"}`
		}, `body does not match the start message schema: field "window" has the wrong type`, "wrong type"},
	}
	for i, c := range cases {
		token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
		failuresBefore := w.calls("states:SendTaskFailure")
		id := "bad-" + strconv.Itoa(i)
		resp := w.invoke(h.Handle, record(id, c.body(token)))
		if len(resp.BatchItemFailures) != 0 {
			t.Errorf("%s: a bad body must not be retried: %+v", c.name, resp)
		}
		o := w.outcome(token)
		if c.wantCause == "" {
			if o.Status != "PENDING" || w.calls("states:SendTaskFailure") != failuresBefore {
				t.Errorf("%s: no token is readable, yet the task was answered: %+v", c.name, o)
			}
		} else if o.Status != "FAILED" || o.Error != "InvalidMessage" || !contains(o.Cause, "message "+id, c.wantCause) {
			t.Errorf("%s: outcome = %+v, want InvalidMessage naming %q", c.name, o, c.wantCause)
		}
		if !strings.Contains(w.logs.String(), c.wantLog) {
			t.Errorf("%s: log lacks %q", c.name, c.wantLog)
		}
	}
	if n := len(w.hl.RequestsFor("StartExport")); n != 0 {
		t.Errorf("bad bodies started %d exports", n)
	}
	if strings.Contains(w.logs.String(), "last five minutes") {
		t.Errorf("log quotes the message body")
	}
}

func TestStartWithAStaleTokenStartsNoExport(t *testing.T) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	// The run is gone: its task was already answered (a late or redriven start message).
	if _, err := w.sfnClient.SendTaskFailure(context.Background(), &sfn.SendTaskFailureInput{TaskToken: aws.String(token), Error: aws.String("States.Timeout")}); err != nil {
		t.Fatal(err)
	}
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-gone", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if jobs, posts := w.hl.Jobs(), w.hl.RequestsFor("StartExport"); len(jobs) != 0 || len(posts) != 0 {
		t.Errorf("an export was started for a gone run: jobs %+v, requests %+v", jobs, posts)
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("a re-check was queued for a gone run")
	}
	if led := w.ledger("run-gone"); len(led) != 0 {
		t.Errorf("the ledger was written for a gone run: %v", led)
	}
	if !contains(w.logs.String(), "no export started") {
		t.Errorf("the skip is not logged: %s", w.logs)
	}
}

func TestJobNameIsDeterministicAndValid(t *testing.T) {
	long := strings.Repeat("r", 80)
	cases := map[string]string{
		"run-1":                 "cdc-run-1",
		"2026-11-21T10-05-00Z":  "cdc-2026-11-21T10-05-00Z",
		long:                    exportjob.JobName(long),
		"name with ünïcode&co!": exportjob.JobName("name with ünïcode&co!"),
	}
	for in, want := range cases {
		got := exportjob.JobName(in)
		if got != want || len(got) > 64 || len(got) < 5 || strings.ContainsAny(got, " &!ü") {
			t.Errorf("JobName(%q) = %q", in, got)
		}
	}
	if got := exportjob.JobName(long); !strings.HasPrefix(got, "cdc-"+strings.Repeat("r", 40)+"-") || len(got) != 61 {
		t.Errorf("JobName(long) = %q, want cdc- + 40 characters + - + 16 hex digits", got)
	}
	if exportjob.JobName(long) == exportjob.JobName(long+"x") {
		t.Errorf("distinct long run ids share a job name")
	}
}

// A POST $export that HealthLake accepted but answered with a 5xx is retried
// by the client and leaves a second job with the run's name that the ledger
// never saw: after such a retry start-export finds it by name and cancels it.
// (Without a retry no listing is made: TestStartStartsExportRecordsItAndQueuesFirstRecheck.)
func TestStartCancelsAnotherRunningJobWithTheRunsName(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	orphan, err := w.deps.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID: dsID, JobName: exportjob.JobName("run-dup"), Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		S3URI: "s3://" + bucket + "/exports/", DataAccessRoleARN: w.cfg.ExportRoleARN,
	})
	if err != nil {
		t.Fatal(err)
	}
	// This invocation's POST answers 500 once, then 202: the client retries.
	w.hl.FailNextCalls(1, http.StatusInternalServerError)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-dup", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	kept := w.ledger("run-dup")["jobId"]
	if kept == "" || kept == orphan.JobID {
		t.Fatalf("ledger job %q, orphan %q: want this invocation's own job recorded", kept, orphan.JobID)
	}
	if j, _ := w.hl.Job(orphan.JobID); j.Status != "CANCEL_SUBMITTED" {
		t.Errorf("orphan job status %q, want CANCEL_SUBMITTED", j.Status)
	}
	if j, _ := w.hl.Job(kept); !fhirrest.Running(j.Status) {
		t.Errorf("the run's own job is %q, want it running", j.Status)
	}
	if !contains(w.logs.String(), "cancelled a duplicate export job", orphan.JobID) {
		t.Errorf("the cancel is not logged: %s", w.logs)
	}
}

// A snapshot window (since at events.SnapshotSince, the first run of a fresh
// deployment) starts a full export: no `_since`.
func TestStartOfASnapshotWindowOmitsSince(t *testing.T) {
	for name, since := range map[string]time.Time{
		"at SnapshotSince":   envelope.SnapshotSince,
		"widened by overlap": envelope.SnapshotSince.Add(-time.Minute),
	} {
		t.Run(name, func(t *testing.T) { startsWithoutSince(t, since) })
	}
}

func startsWithoutSince(t *testing.T, since time.Time) {
	w := newWorld(t, nil)
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	msg := w.startMessage("run-1", token)
	msg.Window.Since = since
	if resp := w.invoke(w.startHandler().Handle, record("m1", msg)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %+v; logs %s", resp.BatchItemFailures, w.logs)
	}
	starts := w.hl.RequestsFor("StartExport")
	if len(starts) != 1 {
		t.Fatalf("StartExport requests = %d, want 1", len(starts))
	}
	if q, _ := url.ParseQuery(starts[0].Query); q.Has("_since") || q.Get("_type") != "Patient,Observation" {
		t.Errorf("snapshot start query ?%s, want no _since", starts[0].Query)
	}
}

// The ledger write that records the job took effect and its answer was
// lost: the SDK sent it again, and the second attempt's condition (no job
// recorded yet) met the first attempt's write. The invocation recognises
// its own job and polls it; it neither drops the run nor cancels the job.
func TestStartWhoseJobRecordAnswerWasLostPollsItsJob(t *testing.T) {
	w := newWorld(t, nil)
	var lost atomic.Int64
	w.env.Gateway.SetAnswerLoss(func(service, op string, _ *http.Request) bool {
		// The first UpdateItem of a start is the job record's.
		return service == localaws.ServiceDynamoDB && op == "UpdateItem" && lost.CompareAndSwap(0, 1)
	})
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-lost", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %+v; logs %s", resp.BatchItemFailures, w.logs)
	}
	if w.env.Gateway.AnswersLost() != 1 {
		t.Fatalf("answers lost = %d, want 1", w.env.Gateway.AnswersLost())
	}
	jobs := w.hl.Jobs()
	if len(jobs) != 1 || jobs[0].Status == "CANCEL_SUBMITTED" || jobs[0].Status == "CANCEL_COMPLETED" {
		t.Fatalf("jobs = %+v, want the one export, not cancelled", jobs)
	}
	if led := w.ledger("run-lost"); led["jobId"] != jobs[0].JobID || led["recheckSentAt"] == "" {
		t.Errorf("ledger = %v, want the job recorded and its first re-check noted", led)
	}
	if m, _ := w.oneRecheck(); m.JobID != jobs[0].JobID {
		t.Errorf("re-check for %s, want %s", m.JobID, jobs[0].JobID)
	}
	if o := w.outcome(token); o.Status != "PENDING" || o.Heartbeats != 2 {
		t.Errorf("token = %+v, want PENDING with both heartbeats", o)
	}
	if strings.Contains(w.logs.String(), "claim lost") {
		t.Errorf("its own write taken for a lost claim: %s", w.logs)
	}
}

// Another invocation took the run's claim over and recorded its own job
// while this one was starting an export: this one cancels its job, queues
// no polling, and lets the message go.
func TestStartWhoseClaimWasTakenOverCancelsItsOwnJob(t *testing.T) {
	w := newWorld(t, nil)
	var raced atomic.Int64
	w.env.Gateway.SetAnswerLoss(func(service, op string, _ *http.Request) bool {
		if service == localaws.ServiceDynamoDB && op == "UpdateItem" && raced.CompareAndSwap(0, 1) {
			// Just before this invocation's job record arrives.
			putLedger(t, w, "run-raced", map[string]string{"jobId": "job-other", "status": "SUBMITTED", "claimant": "m-other",
				"claimedAt": "2026-11-21T10:05:00.000Z", "startedAt": "2026-11-21T10:05:00.000Z"})
		}
		return false
	})
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("m1", w.startMessage("run-raced", token)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch failures %+v; logs %s", resp.BatchItemFailures, w.logs)
	}
	jobs := w.hl.Jobs()
	if len(jobs) != 1 || !strings.HasPrefix(jobs[0].Status, "CANCEL") {
		t.Errorf("jobs = %+v, want this invocation's export cancelled", jobs)
	}
	if led := w.ledger("run-raced"); led["jobId"] != "job-other" || led["claimant"] != "m-other" {
		t.Errorf("ledger = %v, want the other invocation's record kept", led)
	}
	if n := len(w.newMessages()); n != 0 {
		t.Errorf("re-check messages = %d, want none", n)
	}
	if !strings.Contains(w.logs.String(), "claim lost") {
		t.Errorf("lost claim not logged: %s", w.logs)
	}
}
