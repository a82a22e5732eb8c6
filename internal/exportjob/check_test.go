package exportjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
)

func TestCheckRunningStatusesHeartbeatAndBackOff(t *testing.T) {
	w := newWorld(t, nil) // first delay 30 s, cap 300 s
	token, m := w.startedRun("run-poll")
	h := w.checkHandler()
	steps := []struct {
		status    string
		wantDelay int
	}{
		{"SUBMITTED", 60}, {"QUEUED", 120}, {"IN_PROGRESS", 240}, {"IN_PROGRESS", 300}, {"IN_PROGRESS", 300},
	}
	for i, s := range steps {
		if err := w.hl.SetJobStatus(m.JobID, s.status, ""); err != nil {
			t.Fatal(err)
		}
		resp := w.invoke(h.Handle, record(fmt.Sprintf("c%d", i), m))
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: failures %+v", s.status, resp)
		}
		next, raw := w.oneRecheck()
		want := m
		want.Attempt = m.Attempt + 1
		if next != want || raw.DelaySecs != s.wantDelay {
			t.Errorf("%s (attempt %d): next = %+v delay %d, want attempt %d delay %d", s.status, m.Attempt, next, raw.DelaySecs, want.Attempt, s.wantDelay)
		}
		if o := w.outcome(token); o.Status != "PENDING" || o.Heartbeats != i+3 { // +2 from start-export: before and after starting
			t.Errorf("%s: token %+v, want %d heartbeats", s.status, o, i+3)
		}
		m = next
	}
	if n := len(w.hl.RequestsFor("DescribeExport")); n != len(steps) {
		t.Errorf("describe requests = %d, want %d", n, len(steps))
	}
	// The QUEUED check says the export waits behind another job of the
	// account (HealthLake's one export slot); the others do not.
	if n := strings.Count(w.emf.String(), `"ExportQueuedSeconds":`); n != 1 {
		t.Errorf("%d ExportQueuedSeconds records for one QUEUED check: %s", n, w.emf)
	}
	d := w.hl.RequestsFor("DescribeExport")[0]
	if d.Method != "GET" || d.Path != "/datastore/ds1/r4/export/"+m.JobID {
		t.Errorf("describe request = %s %s", d.Method, d.Path)
	}
}

func TestCheckDelayNeverExceedsTheSQSMaximum(t *testing.T) {
	w := newWorld(t, func(c *exportjob.Config) { c.MaxCheckDelay = time.Hour; c.MaxWait = 100 * time.Hour })
	_, m := w.startedRun("run-cap")
	m.Attempt = 12
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp)
	}
	if _, raw := w.oneRecheck(); raw.DelaySecs != 900 {
		t.Errorf("delay = %d, want the SQS maximum 900", raw.DelaySecs)
	}
}

func TestCheckCompletedWritesManifestAndSucceeds(t *testing.T) {
	w := newWorld(t, nil)
	w.loadPatients(3)
	ds, _ := w.hl.Datastore(dsID)
	if _, err := ds.Load("Observation", "o1", []byte(`{"resourceType":"Observation","status":"final","code":{}}`)); err != nil {
		t.Fatal(err)
	}
	token, m := w.startedRun("run-done")
	if err := w.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.clk.Add(95 * time.Second)
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	job, _ := w.hl.Job(m.JobID)
	var want []manifest.File
	for _, o := range job.Output {
		key := strings.TrimPrefix(o.URL, "s3://"+bucket+"/")
		want = append(want, manifest.File{Bucket: bucket, Key: key, ResourceType: o.Type, Bytes: int64(len(w.getObject(key)))})
	}
	if len(want) != 2 {
		t.Fatalf("emulator output = %+v", job.Output)
	}
	body := w.getObject("manifests/run-done/part-00000.json")
	if wantBody := mustJSON(manifest.Plan(want, manifest.Limits{MaxFiles: 10})); body != wantBody {
		t.Errorf("manifest = %s\nwant       %s", body, wantBody)
	}
	for _, it := range want {
		if !strings.HasPrefix(it.Key, "exports/ds1-FHIR_EXPORT-"+m.JobID+"/"+it.ResourceType+"/") {
			t.Errorf("manifest key %s outside the job folder", it.Key)
		}
	}
	o := w.outcome(token)
	wantOut := manifest.Export{
		Bucket: bucket, ManifestKey: "manifests/run-done/part-00000.json", ManifestRunID: "run-done",
		Part: 0, Parts: 1, PartFiles: []int{2}, PartBatches: []int{1}, FileCount: 2, BatchCount: 1,
		JobID: m.JobID, DatastoreID: dsID, Window: window(),
	}
	if o.Status != "SUCCEEDED" || o.Output != mustJSON(wantOut) {
		t.Errorf("outcome = %+v\nwant output %s", o, mustJSON(wantOut))
	}
	// The job ended 95 s before the check wrote the manifest.
	if led := w.ledger("run-done"); led["status"] != "COMPLETED" || led["noticeSeconds"] != "95" {
		t.Errorf("ledger = %v", led)
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("re-queued after completion")
	}
	if w.calls("s3:ListObjects") != 1 {
		t.Errorf("S3 listing calls = %d, want 1 (the sizes of the job's files)", w.calls("s3:ListObjects"))
	}
	if !contains(w.logs.String(), `"files":2`, `"waitedSeconds":95`, `"executionId":"`+m.ExecutionID+`"`, `"window":"(`) {
		t.Errorf("completion log lacks counts or run context: %s", w.logs)
	}
	if !contains(w.emf.String(), `"ExportWaitSeconds":95`, `"Namespace":"HealthLakeCDC"`, `"Pipeline":"test-pipeline"`) {
		t.Errorf("no ExportWaitSeconds EMF record: %s", w.emf)
	}
}

func TestCheckNothingChangedWritesEmptyArray(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-empty")
	if err := w.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	if body := w.getObject("manifests/run-empty/part-00000.json"); body != "[]" {
		t.Errorf("manifest = %q, want []", body)
	}
	var out manifest.Export
	o := w.outcome(token)
	if err := json.Unmarshal([]byte(o.Output), &out); err != nil || o.Status != "SUCCEEDED" || out.FileCount != 0 || out.Parts != 1 || out.ManifestKey != "manifests/run-empty/part-00000.json" {
		t.Errorf("outcome = %+v", o)
	}
	if w.calls("s3:ListObjects") != 1 {
		t.Errorf("S3 listing calls = %d, want 1 (no output list)", w.calls("s3:ListObjects"))
	}
}

func TestCheckManyFilesKeepTaskOutputSmall(t *testing.T) {
	w2 := newWorld(t, nil)
	w2.hl.SetResourcesPerFile(1)
	w2.loadPatients(250)
	token, m := w2.startedRun("run-many")
	if err := w2.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := w2.invoke(w2.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	o := w2.outcome(token)
	if o.Status != "SUCCEEDED" || len(o.Output) > 1024 || !strings.Contains(o.Output, `"fileCount":250`) || !strings.Contains(o.Output, `"batchCount":25`) {
		t.Errorf("output (%d bytes) = %s", len(o.Output), o.Output)
	}
	var batches []manifest.Batch
	if err := json.Unmarshal([]byte(w2.getObject("manifests/run-many/part-00000.json")), &batches); err != nil || manifest.FileCount(batches) != 250 || len(batches) != 25 {
		t.Errorf("manifest batches = %d holding %d files, %v; want 25 batches of 10", len(batches), manifest.FileCount(batches), err)
	}
}

// COMPLETED_WITH_ERRORS: lenient (the default) publishes the good files,
// quarantines each entry of HealthLake's error files with a reason that
// carries no resource value, counts them (ExportErrors) and lets the run
// commit; strict fails the run as before.
func TestCheckCompletedWithErrors(t *testing.T) {
	for _, policy := range []string{"", exportjob.ErrorsStrict} {
		t.Run("policy="+policy, func(t *testing.T) {
			w := newWorld(t, func(c *exportjob.Config) { c.ErrorsPolicy = policy })
			w.loadPatients(4)
			token, m := w.startedRun("run-cwe")
			w.hl.CompleteNextJobWithErrorsLosing("2 resources could not be exported", 2)
			if err := w.hl.RunJobs(context.Background()); err != nil {
				t.Fatal(err)
			}
			resp := w.invoke(w.checkHandler().Handle, record("c1", m))
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %+v; logs %s", resp, w.logs)
			}
			o := w.outcome(token)
			job, _ := w.hl.Job(m.JobID)
			if led := w.ledger("run-cwe"); led["status"] != "COMPLETED_WITH_ERRORS" {
				t.Errorf("ledger = %v", led)
			}
			if policy == exportjob.ErrorsStrict {
				if o.Status != "FAILED" || o.Error != "ExportCompletedWithErrors" ||
					!contains(o.Cause, m.JobID, "2 resources could not be exported", "1 error file(s)", job.Errors[0].URL) {
					t.Errorf("outcome = %+v", o)
				}
				return
			}
			var out manifest.Export
			if err := json.Unmarshal([]byte(o.Output), &out); err != nil || o.Status != "SUCCEEDED" || !out.CompletedWithErrors || out.FileCount != 1 {
				t.Fatalf("outcome = %+v (%v)", o, err)
			}
			var batches []manifest.Batch
			if err := json.Unmarshal([]byte(w.getObject(out.ManifestKey)), &batches); err != nil || manifest.FileCount(batches) != 1 {
				t.Fatalf("manifest %v (%v): want the one good file", batches, err)
			}
			for _, f := range batches[0].Files {
				if strings.Contains(f.Key, "OperationOutcome") {
					t.Errorf("the error file is in the manifest: %s", f.Key)
				}
			}
			errKey := strings.TrimPrefix(job.Errors[0].URL, "s3://"+bucket+"/")
			q := w.getObject("quarantine/run-cwe/" + errKey + ".ndjson")
			lines := strings.Split(strings.TrimSpace(q), "\n")
			if len(lines) != 2 {
				t.Fatalf("quarantine = %q, want one record per error entry", q)
			}
			for i, l := range lines {
				var rec exportjob.ErrorRecord
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.File != errKey || rec.Line != int64(i+1) || rec.Reason != "export error: HealthLake could not export a resource (issue code exception)" || rec.Raw == "" {
					t.Errorf("record %d = %+v", i, rec)
				}
			}
			if !contains(w.emf.String(), `"ExportErrors":2`) {
				t.Errorf("no ExportErrors metric: %s", w.emf)
			}
			if strings.Contains(w.logs.String(), "Patient/p0") {
				t.Errorf("logs name a resource: %s", w.logs)
			}
		})
	}
}

func TestCheckFailedAndCancelledStatusesFailTheRun(t *testing.T) {
	cases := []struct{ status, message, wantError string }{
		{"FAILED", "Access denied to s3://artifacts", "ExportFailed"},
		{"CANCEL_SUBMITTED", "", "ExportCancelled"},
		{"CANCEL_IN_PROGRESS", "cancel requested", "ExportCancelled"},
		{"CANCEL_COMPLETED", "cancelled by an operator", "ExportCancelled"},
		{"CANCEL_FAILED", "The export job could not be cancelled.", "ExportCancelFailed"},
	}
	w := newWorld(t, nil)
	for i, c := range cases {
		token, m := w.startedRun(fmt.Sprintf("run-%d", i))
		if err := w.hl.SetJobStatus(m.JobID, c.status, c.message); err != nil {
			t.Fatal(err)
		}
		resp := w.invoke(w.checkHandler().Handle, record(fmt.Sprintf("c%d", i), m))
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: failures %+v", c.status, resp)
		}
		msg := c.message
		if msg == "" {
			msg = "no message"
		}
		o := w.outcome(token)
		wantCause := "export job " + m.JobID + " is " + c.status + ": " + msg
		if o.Status != "FAILED" || o.Error != c.wantError || o.Cause != wantCause {
			t.Errorf("%s: outcome = %+v, want %s / %q", c.status, o, c.wantError, wantCause)
		}
		if len(w.newMessages()) != 0 {
			t.Errorf("%s: re-queued", c.status)
		}
		if led := w.ledger(m.RunID); led["status"] != c.status {
			t.Errorf("%s: ledger = %v", c.status, led)
		}
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 0 {
		t.Errorf("cancelled %d finished jobs", n)
	}
}

func TestCheckStaleTokenCancelsExportAndStopsPolling(t *testing.T) {
	// An answered token gives TaskTimedOut, a made-up one InvalidToken.
	for _, kind := range []string{"answered", "invalid"} {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t, nil)
			token, m := w.startedRun("run-stale")
			switch kind {
			case "answered":
				if _, err := w.sfnClient.SendTaskFailure(context.Background(), &sfn.SendTaskFailureInput{TaskToken: aws.String(token), Error: aws.String("X")}); err != nil {
					t.Fatal(err)
				}
			case "invalid":
				m.TaskToken = "not-a-task-token"
			}
			if err := w.hl.SetJobStatus(m.JobID, "IN_PROGRESS", ""); err != nil {
				t.Fatal(err)
			}
			resp := w.invoke(w.checkHandler().Handle, record("c1", m))
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %+v", resp)
			}
			cancels := w.hl.RequestsFor("CancelExport")
			job, _ := w.hl.Job(m.JobID)
			if len(cancels) != 1 || cancels[0].Method != "DELETE" || cancels[0].Path != "/datastore/ds1/r4/export/"+m.JobID || job.Status != "CANCEL_SUBMITTED" {
				t.Errorf("cancels %+v, job %s", cancels, job.Status)
			}
			if len(w.newMessages()) != 0 {
				t.Errorf("kept polling a gone run")
			}
			if led := w.ledger("run-stale"); led["status"] != "CANCEL_SUBMITTED" {
				t.Errorf("ledger = %v", led)
			}
		})
	}
}

// TestCheckStaleTokenAfterTheJobEndedIsTheUsualRace: the polling chain's
// check that arrives after another check (a job event's) completed the task
// finds the token stale and the job COMPLETED: it stops without a cancel and
// without a warning.
func TestCheckStaleTokenAfterTheJobEndedIsTheUsualRace(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-done")
	if _, err := w.sfnClient.SendTaskSuccess(context.Background(), &sfn.SendTaskSuccessInput{TaskToken: aws.String(token), Output: aws.String("{}")}); err != nil {
		t.Fatal(err)
	}
	if err := w.hl.SetJobStatus(m.JobID, "COMPLETED", ""); err != nil {
		t.Fatal(err)
	}
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	if cancels := w.hl.RequestsFor("CancelExport"); len(cancels) != 0 {
		t.Errorf("cancelled an ended job: %+v", cancels)
	}
	if len(w.newMessages()) != 0 {
		t.Error("kept polling")
	}
	logs := w.logs.String()
	if strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, "the export had ended") {
		t.Errorf("logs: %s", logs)
	}
}

func TestCheckMaxWaitFailsTheRunAndCancels(t *testing.T) {
	w := newWorld(t, func(c *exportjob.Config) { c.MaxWait = time.Hour })
	token, m := w.startedRun("run-slow")
	h := w.checkHandler()
	// Before the limit the next delay is trimmed to what is left.
	w.clk.Add(time.Hour - 10*time.Second)
	w.invoke(h.Handle, record("c1", m))
	next, raw := w.oneRecheck()
	if raw.DelaySecs != 10 {
		t.Errorf("delay near the limit = %d, want 10", raw.DelaySecs)
	}
	w.clk.Add(10 * time.Second)
	describesBefore := len(w.hl.RequestsFor("DescribeExport"))
	resp := w.invoke(h.Handle, record("c2", next))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v", resp)
	}
	o := w.outcome(token)
	if o.Status != "FAILED" || o.Error != "ExportTimedOut" || !contains(o.Cause, m.JobID, "did not finish within 1h0m0s") {
		t.Errorf("outcome = %+v", o)
	}
	cancels := w.hl.RequestsFor("CancelExport")
	if len(cancels) != 1 || cancels[0].Path != "/datastore/ds1/r4/export/"+m.JobID {
		t.Errorf("cancels = %+v", cancels)
	}
	if len(w.hl.RequestsFor("DescribeExport")) != describesBefore+1 { // the cancel's own status check
		t.Errorf("describe calls: %d → %d", describesBefore, len(w.hl.RequestsFor("DescribeExport")))
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("re-queued after the maximum wait")
	}
}

func TestCheckThrottledDescribeGoesBackToSQS(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-thr")
	w.hl.ThrottleNext(3) // the client's 3 attempts
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	if mustJSON(resp.BatchItemFailures) != `[{"itemIdentifier":"c1"}]` {
		t.Errorf("failures = %+v", resp)
	}
	// A check heartbeats before it describes: one that fails and comes
	// back after the visibility timeout has still kept the run alive.
	if o := w.outcome(token); o.Status != "PENDING" || o.Heartbeats != 3 { // start-export's two, then the throttled check's
		t.Errorf("token = %+v, want 3 heartbeats", o)
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("re-queued although the record is retried by SQS")
	}
	// The redelivered record then works.
	resp = w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("redelivery failed: %+v", resp)
	}
	if next, _ := w.oneRecheck(); next.Attempt != 2 {
		t.Errorf("next attempt = %d", next.Attempt)
	}
}

func TestCheckUnknownJobFailsTheRun(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-404")
	m.JobID = "no-such-job"
	w.invoke(w.checkHandler().Handle, record("c1", m))
	o := w.outcome(token)
	if o.Status != "FAILED" || o.Error != "ExportFailed" || !contains(o.Cause, "no-such-job", "HTTP 404") {
		t.Errorf("outcome = %+v", o)
	}
}

func TestCheckMalformedBodies(t *testing.T) {
	w := newWorld(t, nil)
	h := w.checkHandler()
	base := func(token string) map[string]any {
		return map[string]any{"taskToken": token, "runId": "r1", "window": window(), "datastoreId": dsID,
			"jobId": "j1", "startedAt": "2026-11-21T10:05:00.000Z", "attempt": 1}
	}
	cases := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"no jobId", func(m map[string]any) { delete(m, "jobId") }, "jobId is missing"},
		{"no datastoreId", func(m map[string]any) { m["datastoreId"] = "" }, "datastoreId is missing"},
		{"attempt 0", func(m map[string]any) { m["attempt"] = 0 }, "attempt must be a positive number"},
		{"attempt text", func(m map[string]any) { m["attempt"] = "two" }, `field "attempt" has the wrong type`},
		{"bad startedAt", func(m map[string]any) { m["startedAt"] = "noon" }, "startedAt is not an RFC 3339 time"},
	}
	for i, c := range cases {
		token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
		body := base(token)
		c.mutate(body)
		resp := w.invoke(h.Handle, record(fmt.Sprintf("b%d", i), body))
		o := w.outcome(token)
		if len(resp.BatchItemFailures) != 0 || o.Status != "FAILED" || o.Error != "InvalidMessage" || !strings.Contains(o.Cause, c.want) {
			t.Errorf("%s: resp %+v outcome %+v, want InvalidMessage naming %q", c.name, resp, o, c.want)
		}
	}
	resp := w.invoke(h.Handle, record("b-no-token", `{"jobId":"j1"}`))
	if len(resp.BatchItemFailures) != 0 || !strings.Contains(w.logs.String(), "taskToken is missing or empty") {
		t.Errorf("no-token body: %+v", resp)
	}
	if n := len(w.hl.RequestsFor("DescribeExport")); n != 0 {
		t.Errorf("bad bodies described %d jobs", n)
	}
}

func TestCheckEndToEndThroughTheQueue(t *testing.T) {
	// start → re-check (SUBMITTED) → re-check (IN_PROGRESS) → COMPLETED,
	// each re-check taken from the queue as start/check-export sent it.
	w := newWorld(t, nil)
	w.loadPatients(5)
	token, m := w.startedRun("run-e2e")
	h := w.checkHandler()
	ctx := context.Background()
	var statuses []string
	for i := 0; i < 5; i++ {
		job, _ := w.hl.Job(m.JobID)
		statuses = append(statuses, job.Status)
		w.invoke(h.Handle, record(fmt.Sprintf("e%d", i), m))
		if o := w.outcome(token); o.Status != "PENDING" {
			break
		}
		m, _ = w.oneRecheck()
		if err := w.hl.Advance(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if o := w.outcome(token); o.Status != "SUCCEEDED" || !strings.Contains(o.Output, `"fileCount":1`) {
		t.Errorf("outcome = %+v after statuses %v", o, statuses)
	}
	if mustJSON(statuses) != `["SUBMITTED","IN_PROGRESS","COMPLETED"]` {
		t.Errorf("statuses seen = %v", statuses)
	}
}

// A re-check message delivered twice (SQS delivers at least once, and a
// send whose answer was lost is sent again) forks the polling chain: each
// copy checks the job and queues the next attempt. A fork costs a describe
// and a heartbeat per re-check while the job runs, and ends with it: the
// first copy to see the job done completes the task, the other meets a
// closed task and stops without cancelling anything.
func TestCheckADuplicateRecheckForksAChainThatEndsWithTheJob(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-fork")
	h := w.checkHandler()
	for _, id := range []string{"c1", "c1"} {
		if resp := w.invoke(h.Handle, record(id, m)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %+v; logs %s", resp, w.logs)
		}
	}
	forks := w.newMessages()
	if len(forks) != 2 {
		t.Fatalf("re-checks after a duplicate = %d, want 2 (the chain forks)", len(forks))
	}
	if err := w.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, f := range forks {
		if resp := w.invoke(h.Handle, record(fmt.Sprintf("c2-%d", i), f.Body)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("fork %d: failures %+v; logs %s", i, resp, w.logs)
		}
	}
	if o := w.outcome(token); o.Status != "SUCCEEDED" {
		t.Errorf("outcome = %+v, want SUCCEEDED", o)
	}
	if n := len(w.newMessages()); n != 0 {
		t.Errorf("%d re-checks after the job ended, want none", n)
	}
	if cancels := w.hl.RequestsFor("CancelExport"); len(cancels) != 0 {
		t.Errorf("a fork cancelled the ended job: %+v", cancels)
	}
	if logs := w.logs.String(); strings.Contains(logs, `"level":"WARN"`) || !strings.Contains(logs, "the export had ended") {
		t.Errorf("logs: %s", logs)
	}
}
