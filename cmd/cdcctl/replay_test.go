package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

func TestReplayRefusedWhileARunHoldsTheLock(t *testing.T) {
	s := newCtlStack(t)
	arn, a := s.acquire(t, "run-1")
	since := envelope.FormatTime(time.Now().Add(-5 * time.Hour))
	code, out, stderr := s.cdcctl(t, "replay", "--since", since, "--reason", "test")
	if code != exitFailure || !strings.Contains(stderr, "run-1") || !strings.Contains(stderr, "wait") {
		t.Fatalf("replay while running: exit %d\n%s%s", code, out, stderr)
	}
	st, _ := s.store.Status(context.Background(), 0)
	if !st.Checkpoint.Equal(a.Window.Since) {
		t.Fatalf("refused replay moved the checkpoint to %v", st.Checkpoint)
	}
	// Once the owner is gone the lock is stale: replay says to unlock first.
	s.sfn.Set(t, arn, "FAILED")
	code, _, stderr = s.cdcctl(t, "replay", "--since", since)
	if code != exitFailure || !strings.Contains(stderr, "cdcctl unlock") {
		t.Fatalf("replay with a stale lock: exit %d: %s", code, stderr)
	}
}

func TestReplayMovesTheCheckpointBackAndRecordsWhoWhenAndFrom(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	arn, a := s.acquire(t, "run-1")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn, RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	to := time.Now().Add(-30 * time.Hour).UTC().Truncate(time.Millisecond)
	code, out, stderr := s.cdcctl(t, "replay", "--since", envelope.FormatTime(to), "--reason", "consumer outage", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v replayView
	decodeJSON(t, out, &v)
	if v.From != envelope.FormatTime(a.Window.Until) || v.To != envelope.FormatTime(to) || v.By != "tester" || v.Reason != "consumer outage" {
		t.Fatalf("replay = %+v", v)
	}
	st, _ := s.store.Status(ctx, 0)
	if !st.Checkpoint.Equal(to) || st.LastReplay == nil || st.LastReplay.By != "tester" {
		t.Fatalf("after replay: checkpoint %v last replay %+v", st.Checkpoint, st.LastReplay)
	}
	rs, err := s.store.Replays(ctx, 5)
	if err != nil || len(rs) != 1 || !rs[0].From.Equal(a.Window.Until) {
		t.Fatalf("audit = %+v, %v", rs, err)
	}
	// Forward is refused, and the text output says why.
	code, _, stderr = s.cdcctl(t, "replay", "--since", envelope.FormatTime(time.Now().Add(-time.Minute)))
	if code != exitFailure || !strings.Contains(stderr, "back only") {
		t.Fatalf("forward replay: exit %d: %s", code, stderr)
	}
}

func TestReplayUsage(t *testing.T) {
	s := newCtlStack(t)
	if code, _, stderr := s.cdcctl(t, "replay"); code != exitUsage || !strings.Contains(stderr, "--since") {
		t.Fatalf("no --since: exit %d: %s", code, stderr)
	}
	if code, _, stderr := s.cdcctl(t, "replay", "--since", "yesterday"); code != exitUsage || !strings.Contains(stderr, "RFC 3339") {
		t.Fatalf("bad --since: exit %d: %s", code, stderr)
	}
}

// TestReplaySnapshotReEmitsTheWholeStore: `cdcctl replay --since snapshot`
// moves the checkpoint to the beginning; the next window exports the whole
// store without _since and emits the current version of every live
// resource with the event ids consumers already have, and reads no
// deletions (those went out when they happened).
func TestReplaySnapshotReEmitsTheWholeStore(t *testing.T) {
	st := statusStack(t, nil)
	ctx := context.Background()
	for _, id := range []string{"kept", "gone"} {
		if _, err := st.PutResource(ctx, "Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	runWindow(t, st)
	resp, err := st.FHIR(ctx, http.MethodDelete, "Patient/gone", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(5 * time.Millisecond)
	runWindow(t, st)
	first := st.Delivered.EventIDs()
	if first["Patient/gone/_history/2"] != 1 || first["Patient/kept/_history/1"] != 1 {
		t.Fatalf("before the replay: %v", first)
	}

	code, out, errs := runCLI(t, "replay", "--since", "snapshot", "--reason", "a new consumer")
	if code != exitOK || !strings.Contains(out, "checkpoint moved back from ") || !strings.Contains(out, " to the beginning (snapshot) by ") ||
		!strings.Contains(out, "the next run exports the whole store") {
		t.Fatalf("replay --since snapshot: exit %d\n%s%s", code, out, errs)
	}
	if text := cdcctlStatus(t); !strings.Contains(text, "checkpoint   the beginning (snapshot)") {
		t.Errorf("status after a snapshot replay:\n%s", text)
	}
	mark := st.Delivered.Len()
	if w := runWindow(t, st); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("the snapshot window: %+v", w)
	}
	again := map[string]bool{}
	for _, d := range st.Delivered.Since(mark) {
		again[d.EventID] = true
	}
	live := st.Seeded() + 1 // the sample and "kept"
	if len(again) != live || !again["Patient/kept/_history/1"] || again["Patient/gone/_history/2"] || again["Patient/gone/_history/1"] {
		t.Fatalf("the snapshot window emitted %d events %v, want the %d live resources' current versions and no delete", len(again), again, live)
	}
	if code, _, errs := runCLI(t, "replay", "--since", "0001-01-01T00:00:00Z"); code != exitUsage || !strings.Contains(errs, "--since snapshot") {
		t.Fatalf("the zero time as --since: exit %d: %s", code, errs)
	}
}
