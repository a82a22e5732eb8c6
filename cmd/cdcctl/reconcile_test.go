package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
)

// putReconcileState writes RECONCILE/STATE as the reconciliation's finish does.
func putReconcileState(t *testing.T, s *ctlStack, runID, counts string) {
	t.Helper()
	s3 := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	_, err := dynamodb.NewFromConfig(s.env.Config()).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(s.table),
		Item: map[string]ddbtypes.AttributeValue{"pk": s3(reconcile.StatePK), "sk": s3(reconcile.StateSK), "runId": s3(runID),
			"startedAt": s3("2026-11-21T10:00:00.000Z"), "finishedAt": s3("2026-11-21T10:05:00.000Z"), "checkpoint": s3("2026-11-21T09:55:00.000Z"),
			"partitions": &ddbtypes.AttributeValueMemberN{Value: "16"}, "counts": s3(counts)}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReconcileStatusShowsTheLastReconciliation(t *testing.T) {
	s := newCtlStack(t)
	code, out, stderr := s.cdcctl(t, "reconcile", "status")
	if code != exitOK || !strings.Contains(out, "none yet") {
		t.Fatalf("status before any reconciliation: exit %d\n%s%s", code, out, stderr)
	}
	putReconcileState(t, s, "reconcile-1", `{"store":120,"repairs":2,"deletes":3,"unconfirmed":1,"hardDeletes":1,"pending":4,"deliveredLive":9000,"queries":146,"leaves":5}`)
	code, out, stderr = s.cdcctl(t, "reconcile", "status")
	for _, want := range []string{"reconcile-1", "checked              9000 live versions delivered, against 146 HealthLake counts",
		"listed               120 resources, in 5 ranges whose counts differed", "deletes              3 (hard deletes 1)",
		"repairs              2", "unconfirmed          1", "pending              4 (", "ReconcileRepairs"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("status lacks %q: exit %d\n%s%s", want, code, out, stderr)
		}
	}
	code, out, _ = s.cdcctl(t, "reconcile", "status", "--json")
	var v reconcileView
	decodeJSON(t, out, &v)
	if code != exitOK || v.Last == nil || v.Last.RunID != "reconcile-1" || v.Last.Resources != 120 || v.Last.Deletes != 3 || v.Last.Repairs != 2 || v.Last.Unconfirmed != 1 ||
		v.Last.DeliveredLive != 9000 || v.Last.Queries != 146 || v.Last.Leaves != 5 || v.Last.Pending != 4 {
		t.Fatalf("status --json = %+v", v.Last)
	}
}

func TestReconcileStartsTheReconciliation(t *testing.T) {
	s := newCtlStack(t)
	sm := s.sfn.Machine(t, "cdc-reconcile")
	code, out, stderr := s.cdcctl(t, "reconcile", "--reconcile-state-machine-arn", sm, "--name", "reconcile-manual", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v reconcileView
	decodeJSON(t, out, &v)
	if v.ExecutionARN != s.env.ARN("states", "execution:cdc-reconcile:reconcile-manual") || v.StartDate == "" {
		t.Fatalf("reconcile = %+v", v)
	}
	// The same name while it runs starts nothing and says so.
	code, out, stderr = s.cdcctl(t, "reconcile", "--reconcile-state-machine-arn", sm, "--name", "reconcile-manual")
	if code != exitOK || !strings.Contains(out, "already running: "+v.ExecutionARN) {
		t.Fatalf("same name while running: exit %d\n%s%s", code, out, stderr)
	}
	if n := len(s.sfn.Executions("cdc-reconcile")); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
	// With a run holding the lock it says the reconciliation runs beside it.
	s.acquire(t, "run-3")
	t.Setenv(envReconcileStateMachineARN, sm)
	code, out, _ = s.cdcctl(t, "reconcile")
	if code != exitOK || !strings.Contains(out, "run-3 holds the lock; the reconciliation takes none and runs beside it") {
		t.Fatalf("reconcile with a held lock: exit %d\n%s", code, out)
	}
}

func TestReconcileUsage(t *testing.T) {
	s := newCtlStack(t)
	if code, _, stderr := s.cdcctl(t, "reconcile"); code != exitUsage || !strings.Contains(stderr, envReconcileStateMachineARN) {
		t.Errorf("no state machine: exit %d: %s", code, stderr)
	}
	if code, _, stderr := s.cdcctl(t, "reconcile", "now"); code != exitUsage || !strings.Contains(stderr, `unexpected argument "now"`) {
		t.Errorf("stray argument: exit %d: %s", code, stderr)
	}
	t.Setenv(envTable, "")
	var out, errb strings.Builder
	if code := run(context.Background(), []string{"reconcile", "status", "--endpoint", s.env.URL}, strings.NewReader(""), &out, &errb); code != exitUsage || !strings.Contains(errb.String(), "CDC_TABLE") {
		t.Errorf("status without a table: exit %d: %s", code, errb.String())
	}
}
