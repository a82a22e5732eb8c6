package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// replay --wait waits for the running window to end, then moves the
// checkpoint back from the checkpoint that run committed.
func TestReplayWaitWaitsForTheRunningWindow(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	arn, a := s.acquire(t, "run-1")
	to := a.Window.Since.Add(-2 * time.Hour)

	type result struct {
		code        int
		out, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, stderr := s.cdcctl(t, "replay", "--since", envelope.FormatTime(to), "--wait", "--wait-poll", "20ms", "--json")
		done <- result{code, out, stderr}
	}()
	// The replay is still waiting: the lock is held and the checkpoint unmoved.
	select {
	case r := <-done:
		t.Fatalf("replay --wait returned while the run held the lock: exit %d: %s%s", r.code, r.out, r.stderr)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn, RunID: "run-1"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.code != exitOK || !strings.Contains(r.stderr, "waiting") {
		t.Fatalf("replay --wait: exit %d: %s%s", r.code, r.out, r.stderr)
	}
	var v replayView
	decodeJSON(t, r.out, &v)
	if v.From != envelope.FormatTime(a.Window.Until) || v.To != envelope.FormatTime(to) {
		t.Fatalf("replay = %+v, want from the committed checkpoint %s", v, envelope.FormatTime(a.Window.Until))
	}
	st, _ := s.store.Status(ctx, 0)
	if !st.Checkpoint.Equal(to) {
		t.Fatalf("checkpoint %v, want %v", st.Checkpoint, to)
	}
}

func TestReplayWaitGivesUpAndLeavesTheCheckpoint(t *testing.T) {
	s := newCtlStack(t)
	_, a := s.acquire(t, "run-1")
	code, _, stderr := s.cdcctl(t, "replay", "--since", envelope.FormatTime(a.Window.Since.Add(-time.Hour)), "--wait", "--wait-timeout", "100ms", "--wait-poll", "20ms")
	if code != exitFailure || !strings.Contains(stderr, "still holds the lock") || !strings.Contains(stderr, "not moved") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	st, _ := s.store.Status(context.Background(), 0)
	if !st.Checkpoint.Equal(a.Window.Since) {
		t.Fatalf("checkpoint moved to %v", st.Checkpoint)
	}
	// A stale lock is not waited for: it needs `cdcctl unlock`.
	arn := s.env.ARN("states", "execution:cdc:run-1")
	s.sfn.Set(t, arn, "FAILED")
	code, _, stderr = s.cdcctl(t, "replay", "--since", envelope.FormatTime(a.Window.Since.Add(-time.Hour)), "--wait", "--wait-timeout", "10s")
	if code != exitFailure || !strings.Contains(stderr, "cdcctl unlock") {
		t.Fatalf("stale lock: exit %d: %s", code, stderr)
	}
	if code, _, stderr := s.cdcctl(t, "replay", "--since", envelope.FormatTime(a.Window.Since), "--wait-poll", "0s"); code != exitUsage {
		t.Fatalf("zero poll: exit %d: %s", code, stderr)
	}
}
