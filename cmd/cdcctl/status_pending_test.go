package main

import (
	"context"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// Issue 11.4: an operator sees a pending multi-part export, and a replay
// says it dropped it.
func TestStatusShowsAPendingExportAndReplayDropsIt(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	arn1, a := s.acquire(t, "run-1")
	exp := &manifest.Export{Bucket: "b", ManifestKey: manifest.PartKey("run-1", 0), ManifestRunID: "run-1", Parts: 3,
		PartFiles: []int{7, 7, 2}, FileCount: 7, JobID: "job-77", DatastoreID: "ds", Window: a.ExportWindow}
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn1, RunID: "run-1", Export: exp}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := s.cdcctl(t, "status")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"pending      part 2 of 3 (7 files) of export job job-77", "run-1 PARTIAL", "1/3",
		"checkpoint moves to " + envelope.FormatTime(a.Window.Until)} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = s.cdcctl(t, "status", "--json")
	var pv struct {
		Pending *struct {
			Window envelope.Window `json:"window"`
			Next   manifest.Export `json:"next"`
		} `json:"pending"`
	}
	decodeJSON(t, out, &pv)
	if pv.Pending == nil || pv.Pending.Next.ManifestKey != manifest.PartKey("run-1", 1) || pv.Pending.Next.FileCount != 7 ||
		!pv.Pending.Window.Until.Equal(a.Window.Until) {
		t.Fatalf("status --json pending = %+v\n%s", pv.Pending, out)
	}

	// An unlock keeps the pending export and says which part comes again.
	s.acquire(t, "run-2")
	s.sfn.Set(t, s.env.ARN("states", "execution:cdc:run-2"), "ABORTED")
	code, out, stderr = s.cdcctl(t, "unlock", "--by", "ops")
	if code != exitOK || !strings.Contains(out, "the next run delivers part 2 of 3 of export job job-77 again") {
		t.Fatalf("unlock: exit %d\n%s%s", code, out, stderr)
	}

	code, out, stderr = s.cdcctl(t, "replay", "--since", envelope.FormatTime(a.Window.Since), "--by", "ops")
	if code != exitOK || !strings.Contains(out, "dropped the pending export (parts 2-3 of 3 of job job-77)") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, stderr)
	}
	_, out, _ = s.cdcctl(t, "status", "--json")
	pv.Pending = nil
	decodeJSON(t, out, &pv)
	if pv.Pending != nil {
		t.Fatalf("pending export still shown after replay:\n%s", out)
	}
}
