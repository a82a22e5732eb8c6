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

// TestEndpointWinsOverAShellsFIPS: --endpoint names the one host every call
// goes to, also from a shell that asks the SDK for FIPS endpoints
// (AWS_USE_FIPS_ENDPOINT=true, as FIPS accounts set it), where the SDK
// alone refuses a custom endpoint.
func TestEndpointWinsOverAShellsFIPS(t *testing.T) {
	s := newCtlStack(t)
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
	code, out, stderr := s.cdcctl(t, "status")
	if code != exitOK || !strings.Contains(out, "none yet") {
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
	s.sfn.Set(t, s.env.ARN("states", "execution:cdc:run-2"), "ABORTED")
	_, out, _ = s.cdcctl(t, "status")
	if !strings.Contains(out, "STALE") || !strings.Contains(out, "ABORTED") {
		t.Fatalf("stale holder not shown:\n%s", out)
	}
}

// TestStatusShowsTheFastPathCountsOfEachRun: with the Subscriptions fast
// path on, the run history shows per run what the window skipped because the
// fast path had published it and what it published that the fast path
// missed (docs/OPERATIONS.md, FastPathMissedAlarm); without, no such
// columns.
func TestStatusShowsTheFastPathCountsOfEachRun(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	arn1, _ := s.acquire(t, "run-1")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn1, RunID: "run-1", ExportJobID: "job-1",
		Counts: runlock.Counts{Files: 1, Events: 3}}); err != nil {
		t.Fatal(err)
	}
	if _, out, _ := s.cdcctl(t, "status"); strings.Contains(out, "FAST PATH") {
		t.Fatalf("fast-path columns without fast-path counts:\n%s", out)
	}
	arn2, _ := s.acquire(t, "run-2")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn2, RunID: "run-2", ExportJobID: "job-2",
		Counts: runlock.Counts{Files: 1, Events: 4, FastPathSkipped: 120, FastPathMissed: 4}}); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := s.cdcctl(t, "status")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "run-2") && strings.Contains(l, "job-2") {
			row = l
		}
	}
	if !strings.Contains(out, "FAST PATH SKIPPED") || !strings.Contains(out, "FAST PATH MISSED") || !strings.Contains(row, "120") {
		t.Fatalf("status lacks the fast-path counts:\n%s", out)
	}
	code, out, _ = s.cdcctl(t, "status", "--json")
	var v statusView
	decodeJSON(t, out, &v)
	if code != exitOK || len(v.History) < 1 || v.History[0].Counts.FastPathSkipped != 120 || v.History[0].Counts.FastPathMissed != 4 {
		t.Fatalf("json history = %+v", v.History)
	}
}
