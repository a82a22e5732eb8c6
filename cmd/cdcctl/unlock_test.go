package main

import (
	"context"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func TestUnlockReleasesOnlyAStaleLockUnlessForced(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	code, out, _ := s.cdcctl(t, "unlock")
	if code != exitOK || !strings.Contains(out, "free") {
		t.Fatalf("unlock of a free lock: exit %d: %s", code, out)
	}
	arn, a := s.acquire(t, "run-1")
	code, out, stderr := s.cdcctl(t, "unlock")
	if code != exitFailure || !strings.Contains(out, arn) || !strings.Contains(stderr, "--force") || !strings.Contains(stderr, "stop-execution") {
		t.Fatalf("unlock of a running owner: exit %d\n%s%s", code, out, stderr)
	}
	if st, _ := s.store.Status(ctx, 0); st.Lock == nil {
		t.Fatalf("refused unlock released the lock")
	}
	s.sfn.Set(t, arn, "TIMED_OUT")
	code, out, stderr = s.cdcctl(t, "unlock", "--json")
	if code != exitOK {
		t.Fatalf("unlock of a timed-out owner: exit %d: %s", code, stderr)
	}
	var v unlockView
	decodeJSON(t, out, &v)
	if !v.Released || v.RunID != "run-1" || v.Liveness.Status != "TIMED_OUT" {
		t.Fatalf("unlock = %+v", v)
	}
	st, _ := s.store.Status(ctx, 1)
	if st.Lock != nil || !st.Checkpoint.Equal(a.Window.Since) || st.History[0].Outcome != runlock.OutcomeAbandoned ||
		!strings.Contains(st.History[0].Reason, "tester") {
		t.Fatalf("after unlock: %+v", st)
	}
	// --force shows the owner and releases a live lock without asking.
	arn2, _ := s.acquire(t, "run-2")
	code, out, stderr = s.cdcctl(t, "unlock", "--force")
	if code != exitOK || !strings.Contains(out, arn2) || !strings.Contains(out, "released") {
		t.Fatalf("forced unlock: exit %d\n%s%s", code, out, stderr)
	}
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn2, RunID: "run-2"}); err == nil {
		t.Fatalf("the forced-out owner could still commit")
	}
}
