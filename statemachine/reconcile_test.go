package statemachine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

func TestReconcileDefinitionSubstitutesAndParses(t *testing.T) {
	got := strings.Join(ReconcilePlaceholders(), ",")
	want := "ArtifactBucket,ExportHeartbeatSeconds,ExportTimeoutSeconds,MapMaxConcurrency,ReconcileFunctionArn,RunLockFunctionArn,RunTimeoutSeconds,StartQueueUrl"
	if got != want {
		t.Fatalf("ReconcilePlaceholders() = %s, want %s", got, want)
	}
	v := testValues()
	v[ReconcileFunctionArn] = "arn:aws:lambda:us-east-1:000000000000:function:reconcile"
	def, err := Substitute(ReconcileDefinition(), v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asl.ParseDefinition(def); err != nil {
		t.Fatalf("the local interpreter rejects the definition: %v", err)
	}
	var m struct {
		States map[string]struct {
			Parameters struct {
				Payload map[string]any
			}
			MaxConcurrency int
		}
	}
	if err := json.Unmarshal(def, &m); err != nil {
		t.Fatal(err)
	}
	if m.States["AcquireLock"].Parameters.Payload["mode"] != "reconcile" {
		t.Fatal("the reconciliation must take the run lock in mode reconcile")
	}
	if m.States["BuildIndex"].MaxConcurrency != 10 || m.States["Compare"].MaxConcurrency != 10 {
		t.Fatal("the Maps' concurrency is not substituted as a number")
	}
}

// The reconciliation waits for a held lock for at most 30 minutes (60 waits
// of 30 s, docs/RECONCILE.md), and only on the LOCK_HELD refusal.
func TestReconcileLockWaitIsBounded(t *testing.T) {
	def, err := Substitute(ReconcileDefinition(), func() map[string]string {
		v := testValues()
		v[ReconcileFunctionArn] = "arn:aws:lambda:us-east-1:000000000000:function:reconcile"
		return v
	}())
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		States map[string]json.RawMessage
	}
	if err := json.Unmarshal(def, &m); err != nil {
		t.Fatal(err)
	}
	var wait struct{ Seconds int }
	if err := json.Unmarshal(m.States["WaitForLock"], &wait); err != nil {
		t.Fatal(err)
	}
	var choice struct {
		Choices []struct {
			And []struct {
				Variable        string
				StringEquals    *string
				NumericLessThan *int
			}
			Next string
		}
	}
	if err := json.Unmarshal(m.States["LockTaken?"], &choice); err != nil {
		t.Fatal(err)
	}
	attempts, refusal := 0, ""
	for _, c := range choice.Choices {
		if c.Next != "WaitForLock" {
			continue
		}
		for _, r := range c.And {
			if r.NumericLessThan != nil && r.Variable == "$.retry.attempt" {
				attempts = *r.NumericLessThan
			}
			if r.StringEquals != nil {
				refusal = *r.StringEquals
			}
		}
	}
	if total := time.Duration(attempts*wait.Seconds) * time.Second; total != 30*time.Minute || refusal != "LOCK_HELD" {
		t.Fatalf("lock wait: %d × %d s = %v on refusal %q; want 30m0s on LOCK_HELD (docs/RECONCILE.md)", attempts, wait.Seconds, total, refusal)
	}
}
