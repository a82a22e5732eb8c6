package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// TestTheRunbookForAChangedDatastore follows docs/OPERATIONS.md, "The
// pipeline's data store changed", on the whole local stack: the RUN record
// belongs to another data store than the pipeline's (its DatastoreId
// changed), so the windows fail before taking the lock with
// DatastoreChangedError and the reconciliation fails too — neither starts
// the new store at the old store's checkpoint nor publishes its resources as
// repairs; `cdcctl status` says why; `cdcctl replay --since T --datastore
// ID` moves the record, and the next window delivers the new store from T.
func TestTheRunbookForAChangedDatastore(t *testing.T) {
	// No overlap: the window after the move exports from T exactly.
	st := statusStack(t, func(o *stack.Options) { o.LambdaEnv["CDC_OVERLAP"] = "0s" })
	ctx := context.Background()
	if _, err := st.PutResource(ctx, "Patient", "before", []byte(`{"resourceType":"Patient","id":"before"}`)); err != nil {
		t.Fatal(err)
	}
	if w := runWindow(t, st); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("first window %+v", w)
	}
	if v := statusJSON(t); v.Datastore != st.Res.DatastoreID || v.DatastoreChanged != "" {
		t.Fatalf("after the first window the record belongs to %q (%s), want %q", v.Datastore, v.DatastoreChanged, st.Res.DatastoreID)
	}

	bindRecordTo(t, st, "retired-store")
	w := runWindow(t, st)
	if w.Outcome != report.OutcomeFailed || w.Error != "DatastoreChangedError" || !strings.Contains(w.Note, "before taking the lock") {
		t.Fatalf("a window for another data store: %+v, want failed before the lock with DatastoreChangedError", w)
	}
	text := cdcctlStatus(t)
	for _, want := range []string{"data store   retired-store",
		"WARNING      the RUN record's checkpoint belongs to HealthLake data store retired-store, not to " + st.Res.DatastoreID,
		"DatastoreChangedError"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	// The reconciliation fails in its plan, with the plan's error, having
	// published nothing.
	delivered := st.Delivered.Len()
	r, err := st.Reconcile(ctx)
	if err != nil || r.Status != "FAILED" || r.Error != "DatastoreChangedError" || r.Last != nil || st.Delivered.Len() != delivered {
		t.Fatalf("reconciliation for another data store: %+v, %v; want FAILED with DatastoreChangedError having published nothing", r, err)
	}
	if line := lineWith(cdcctlStatus(t), "reconciliation "); !strings.Contains(line, "FAILED") || !strings.Contains(line, "DatastoreChangedError") {
		t.Errorf("status does not name the reconciliation's error: %q", line)
	}

	since := time.Now() // after the first window's Patient: only the next one is new
	code, out, errs := runCLI(t, "replay", "--since", envelope.FormatTime(since), "--datastore", st.Res.DatastoreID)
	if code != exitOK || !strings.Contains(out, "the RUN record moved from data store retired-store to "+st.Res.DatastoreID) {
		t.Fatalf("replay --datastore: exit %d\n%s%s", code, out, errs)
	}
	mark := st.Delivered.Len()
	if _, err := st.PutResource(ctx, "Patient", "after", []byte(`{"resourceType":"Patient","id":"after"}`)); err != nil {
		t.Fatal(err)
	}
	if w := runWindow(t, st); w.Outcome != report.OutcomeCommitted || w.Events != 1 {
		var ids []string
		for _, d := range st.Delivered.Since(mark) {
			ids = append(ids, fmt.Sprintf("%+v", d))
		}
		t.Fatalf("the window after the move: %+v %+v (T %v), want the one change since T; delivered %v", w, w.Window, since, ids)
	}
	if v := statusJSON(t); v.Datastore != st.Res.DatastoreID || v.DatastoreChanged != "" {
		t.Fatalf("after the move the record belongs to %q (%s)", v.Datastore, v.DatastoreChanged)
	}
}

func statusJSON(t *testing.T) statusView {
	t.Helper()
	var v statusView
	decodeJSON(t, cdcctlStatus(t, "--json"), &v)
	return v
}

// runCLI runs cdcctl with args.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// bindRecordTo makes the stack's RUN record belong to data store id, as a
// deployment for that data store left it.
func bindRecordTo(t *testing.T, st *stack.Stack, id string) {
	t.Helper()
	_, err := dynamodb.NewFromConfig(st.Config).UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(st.Res.Table),
		Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "RUN"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "STATE"}},
		UpdateExpression:          aws.String("SET datastoreId = :id"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":id": &ddbtypes.AttributeValueMemberS{Value: id}}})
	if err != nil {
		t.Fatal(err)
	}
}
