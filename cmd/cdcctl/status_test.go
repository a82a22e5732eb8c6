package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func TestStatusOfAFreshTable(t *testing.T) {
	s := newCtlStack(t)
	code, out, stderr := s.cdcctl(t, "status")
	if code != exitOK || !strings.Contains(out, "none yet") || !strings.Contains(out, "cdcctl replay --since") {
		t.Fatalf("exit %d\n%s%s", code, out, stderr)
	}
}

func TestStatusShowsHolderCheckpointLagJobAndRuns(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	arn1, a1 := s.acquire(t, "run-1")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn1, RunID: "run-1", ExportJobID: "job-1",
		Counts: runlock.Counts{Files: 2, Events: 17, Quarantined: 1}}); err != nil {
		t.Fatal(err)
	}
	_, _ = s.acquire(t, "run-2")
	db := dynamodb.NewFromConfig(s.env.Config())
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "EXPORT#run-2"}, "sk": &types.AttributeValueMemberS{Value: "JOB"},
		"jobId": &types.AttributeValueMemberS{Value: "job-2"}, "status": &types.AttributeValueMemberS{Value: "IN_PROGRESS"},
		"startedAt": &types.AttributeValueMemberS{Value: "2026-11-21T10:00:00.000Z"},
	}}); err != nil {
		t.Fatal(err)
	}

	code, out, stderr := s.cdcctl(t, "status")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"held by run-2", "owner is RUNNING", "job-2 IN_PROGRESS", "run-1 SUCCEEDED", "lag ",
		"last runs", "job-1", "17"} {
		if !strings.Contains(out, want) {
			t.Errorf("status text lacks %q:\n%s", want, out)
		}
	}

	code, out, stderr = s.cdcctl(t, "status", "--json", "--last", "5")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v statusView
	decodeJSON(t, out, &v)
	if v.Lock == nil || v.Lock.RunID != "run-2" || !v.Lock.Live || v.Lock.OwnerStatus != "RUNNING" {
		t.Fatalf("lock = %+v", v.Lock)
	}
	if v.Checkpoint == "" || v.LagSeconds < 119 || v.ExportJob == nil || v.ExportJob.JobID != "job-2" {
		t.Fatalf("status = checkpoint %q lag %v job %+v (first window ended %s)", v.Checkpoint, v.LagSeconds, v.ExportJob, a1.Window.Until)
	}
	if len(v.History) != 2 || v.History[0].RunID != "run-2" || v.History[1].Counts.Events != 17 {
		t.Fatalf("history = %+v", v.History)
	}

	// A holder whose execution ended shows as stale.
	s.sfn.SetStatus(s.env.ARN("states", "execution:cdc:run-2"), "ABORTED")
	_, out, _ = s.cdcctl(t, "status")
	if !strings.Contains(out, "STALE") || !strings.Contains(out, "ABORTED") {
		t.Fatalf("stale holder not shown:\n%s", out)
	}
}
