package exportjob_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
)

func jobEvent(jobID, detailType string) exportjob.JobEventMessage {
	return exportjob.JobEventMessage{Kind: exportjob.KindJobEvent, DatastoreID: dsID, JobID: jobID, JobStatus: detailType}
}

// A HealthLake "Export Job Completed" event checks the run at once: the
// ledger's job pointer names the run, its entry the task token, and the
// check writes the manifest and answers the token without waiting for the
// next poll.
func TestJobEventCompletesTheRunAtOnce(t *testing.T) {
	w := newWorld(t, nil)
	w.loadPatients(2)
	token, m := w.startedRun("run-ev")
	if led := w.ledger("run-ev"); led["taskToken"] != token || led["windowSince"] != "2026-11-21T10:00:00.000Z" {
		t.Fatalf("ledger keeps no token or window for events: %v", led)
	}
	if err := w.hl.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := w.invoke(w.checkHandler().Handle, record("ev1", jobEvent(m.JobID, "Export Job Completed")))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %+v; logs %s", resp, w.logs)
	}
	o := w.outcome(token)
	var out manifest.Export
	if err := json.Unmarshal([]byte(o.Output), &out); err != nil || o.Status != "SUCCEEDED" || out.FileCount != 1 ||
		out.Window != window() || out.ManifestRunID != "run-ev" {
		t.Fatalf("outcome = %+v (%v)", o, err)
	}
	if len(w.newMessages()) != 0 {
		t.Errorf("an event-driven check queued a re-check")
	}
	// The polling chain's next check finds the run answered and stops.
	resp = w.invoke(w.checkHandler().Handle, record("c1", m))
	if len(resp.BatchItemFailures) != 0 || len(w.newMessages()) != 0 {
		t.Errorf("poll after the event: %+v", resp)
	}
	if n := len(w.hl.RequestsFor("CancelExport")); n != 0 {
		t.Errorf("a finished job was cancelled (%d)", n)
	}
}

// An event for a running job does nothing more than a heartbeat: polling
// goes on by its own chain, so no second chain starts.
func TestJobEventForARunningJobQueuesNothing(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-ev2")
	before := w.outcome(token).Heartbeats
	resp := w.invoke(w.checkHandler().Handle, record("ev1", jobEvent(m.JobID, "Export Job In Progress")))
	if len(resp.BatchItemFailures) != 0 || len(w.newMessages()) != 0 {
		t.Errorf("resp %+v, or a re-check was queued", resp)
	}
	if o := w.outcome(token); o.Status != "PENDING" || o.Heartbeats != before+1 {
		t.Errorf("token = %+v", o)
	}
}

// Events of jobs no run knows, of another data store, or malformed are
// dropped without failing the batch.
func TestJobEventsOfNoRunAreDropped(t *testing.T) {
	w := newWorld(t, nil)
	other := jobEvent("j-unknown", "Export Job Completed")
	foreign := jobEvent("j-unknown", "Export Job Completed")
	foreign.DatastoreID = "another"
	resp := w.invoke(w.checkHandler().Handle,
		record("e1", other), record("e2", foreign), record("e3", `{"kind":"jobEvent","jobId":7}`))
	if len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %+v", resp)
	}
	if n := len(w.hl.Requests()); n != 0 {
		t.Errorf("HealthLake requests = %d, want none", n)
	}
}
