package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
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
