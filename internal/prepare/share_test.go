package prepare_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/share"
)

// TestBatchSharesThePutEventsShareOnTheBoard: a batch with a board beats on
// its run's item while it publishes, reports how many children shared the
// share, and leaves the board (its beat no longer live) when it ends.
func TestBatchSharesThePutEventsShareOnTheBoard(t *testing.T) {
	r := newRig(t, 0)
	db := dynamodb.NewFromConfig(r.env.Config())
	ctx := context.Background()
	if err := runlock.CreateTable(ctx, db, "cdc"); err != nil {
		t.Fatal(err)
	}
	board := &share.Board{DB: db, Table: "cdc"}
	// A sibling of the same run is publishing.
	if _, err := board.Beat(ctx, "run-1", "sibling"); err != nil {
		t.Fatal(err)
	}
	h := r.handler(t, func(c *prepare.Config) {
		c.Share, c.SharePeriod = board, 10*time.Millisecond
		c.Publish.Rate, c.MapMaxConcurrency = 100, 10
	})
	var body strings.Builder
	for i := 0; i < 30; i++ {
		fmt.Fprintln(&body, patient(fmt.Sprintf("p%d", i), "1", "2026-11-21T09:30:00Z", 0))
	}
	r.put(t, exportKey, []byte(body.String()))
	out, err := invoke(t, h, input(exportKey))
	if err != nil || out.Events != 30 {
		t.Fatalf("batch: %+v, %v", out, err)
	}
	if out.ShareLive != 2 {
		t.Errorf("shareLive = %d, want 2 (itself and the sibling)", out.ShareLive)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cdc"), Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: share.PK("run-1")}, "sk": &ddbtypes.AttributeValueMemberS{Value: "CHILDREN"}}})
	if err != nil {
		t.Fatal(err)
	}
	me, ok := got.Item["c_"+share.ChildID(exportKey)].(*ddbtypes.AttributeValueMemberN)
	if !ok || me.Value != "0" {
		t.Errorf("the batch's beat after it ended: %v, want left (0)", got.Item)
	}
	if n, err := board.Beat(ctx, "run-1", "sibling"); err != nil || n != 1 {
		t.Errorf("live after the batch left: %d, %v; want the sibling alone", n, err)
	}
}
