package stack

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// TestEachPrincipalTouchesOnlyItsOwnItemsEndToEnd: signing as each Lambda
// with its own key, through the local endpoint and the real DynamoDB
// client, the items of its neighbours are refused with DynamoDB's
// AccessDeniedException (dynamodb:LeadingKeys), and its own are served.
// The export Lambdas can never move RUN/STATE's checkpoint.
func TestEachPrincipalTouchesOnlyItsOwnItemsEndToEnd(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 2 })
	committed(t, st)
	ctx := context.Background()
	key := func(pk, sk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}
	}
	setCheckpoint := func(p iampolicy.Principal) error {
		_, err := dynamodb.NewFromConfig(st.principalConfig(p)).UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(st.Res.Table), Key: key("RUN", "STATE"),
			UpdateExpression:          aws.String("SET lastRunTime = :t"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":t": &ddbtypes.AttributeValueMemberS{Value: "2020-01-01T00:00:00.000Z"}},
		})
		return err
	}
	get := func(p iampolicy.Principal, pk, sk string) error {
		_, err := dynamodb.NewFromConfig(st.principalConfig(p)).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Res.Table), Key: key(pk, sk)})
		return err
	}
	denied := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDeniedException" {
			t.Errorf("%s: %v, want AccessDeniedException", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want served", what, err)
		}
	}
	for _, p := range []iampolicy.Principal{iampolicy.StartExport, iampolicy.CheckExport, iampolicy.PrepareChange, iampolicy.Reconcile} {
		denied(string(p)+" moves the checkpoint", setCheckpoint(p))
	}
	denied("start-export reads RECONCILE/STATE", get(iampolicy.StartExport, "RECONCILE", "STATE"))
	denied("check-export reads RUN/STATE", get(iampolicy.CheckExport, "RUN", "STATE"))
	denied("prepare-change reads an export ledger item", get(iampolicy.PrepareChange, "EXPORT#x", "JOB"))
	denied("run-lock reads RECONCILE/STATE", get(iampolicy.RunLock, "RECONCILE", "STATE"))
	denied("reconcile reads an export ledger item", get(iampolicy.Reconcile, "EXPORT#x", "JOB"))
	beat := func(p iampolicy.Principal, pk string) error {
		_, err := dynamodb.NewFromConfig(st.principalConfig(p)).UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(st.Res.Table), Key: key(pk, "CHILDREN"),
			UpdateExpression:          aws.String("SET c_x = :t"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":t": &ddbtypes.AttributeValueMemberN{Value: "1"}},
		})
		return err
	}
	denied("prepare-change writes an export ledger item as a share beat", beat(iampolicy.PrepareChange, "EXPORT#x"))
	denied("start-export beats on a run's PutEvents share", beat(iampolicy.StartExport, "RATE#x"))
	allowed("prepare-change beats on its run's PutEvents share", beat(iampolicy.PrepareChange, "RATE#x"))
	allowed("start-export reads its ledger", get(iampolicy.StartExport, "EXPORT#x", "JOB"))
	allowed("run-lock reads RUN/STATE", get(iampolicy.RunLock, "RUN", "STATE"))
	allowed("reconcile reads RUN/STATE (the checkpoint)", get(iampolicy.Reconcile, "RUN", "STATE"))
	allowed("reconcile reads RECONCILE/STATE", get(iampolicy.Reconcile, "RECONCILE", "STATE"))
	if w := runWindow(t, st); w.Status != "SUCCEEDED" {
		t.Errorf("a window after the refused writes: %+v", w)
	}
}
