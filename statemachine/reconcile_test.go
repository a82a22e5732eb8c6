package statemachine

import (
	"encoding/json"
	"strings"
	"testing"

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
