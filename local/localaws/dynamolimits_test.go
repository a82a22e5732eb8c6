package localaws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func limitsTable(t *testing.T) (*Env, *dynamodb.Client, string) {
	t.Helper()
	env := startTest(t)
	db := dynamodb.NewFromConfig(env.Config(), func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	table := "limits"
	// The pipeline's own table: key pk and sk, strings.
	if err := runlock.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return env, db, table
}

// sized is an item of exactly n bytes as DynamoDB counts them: pk "p"
// (3), sk of 4 characters (6), and a binary attribute "b" (1 + its bytes).
func sized(sk string, n int) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "p"},
		"sk": &ddbtypes.AttributeValueMemberS{Value: sk},
		"b":  &ddbtypes.AttributeValueMemberB{Value: make([]byte, n-3-(2+len(sk))-1)},
	}
}

func validation(t *testing.T, what string, err error, msg string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || ae.ErrorMessage() != msg {
		t.Errorf("%s: err = %v, want ValidationException %q", what, err, msg)
	}
}

// The sizes of the Developer Guide's rules ("DynamoDB item sizes and
// formats"), attribute names included.
func TestItemSizeFollowsTheDeveloperGuide(t *testing.T) {
	cases := []struct {
		item string
		want int
	}{
		{`{"name":{"S":"héllo"}}`, 4 + 6},
		{`{"n":{"N":"123"}}`, 1 + 2 + 1},
		{`{"n":{"N":"-0012.3400"}}`, 1 + 2 + 1},
		{`{"n":{"N":"1E+10"}}`, 1 + 1 + 1},
		{`{"b":{"B":"AAECAw=="}}`, 1 + 4},
		{`{"t":{"BOOL":true},"z":{"NULL":true}}`, 2 + 2},
		{`{"l":{"L":[{"S":"ab"},{"N":"1"}]}}`, 1 + 3 + (1 + 2) + (1 + 2)},
		{`{"m":{"M":{"k":{"S":"ab"}}}}`, 1 + 3 + (1 + 1 + 2)},
		{`{"e":{"L":[]}}`, 1 + 3},
		{`{"ss":{"SS":["a","bc"]},"bs":{"BS":["AA==","AAE="]}}`, 2 + 3 + 2 + 3},
	}
	for _, c := range cases {
		var it map[string]json.RawMessage
		if err := json.Unmarshal([]byte(c.item), &it); err != nil {
			t.Fatal(err)
		}
		got, err := itemSize(it)
		if err != nil || got != c.want {
			t.Errorf("%s: size %d, %v; want %d", c.item, got, err, c.want)
		}
	}
}

// An item over 400 KB is refused as DynamoDB refuses it, whichever write
// carries it, and nothing of the request is written; an item of exactly
// 400 KB is stored.
func TestItemsOver400KBAreRefused(t *testing.T) {
	ctx := context.Background()
	_, db, table := limitsTable(t)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("full", dynamoMaxItemSize)}); err != nil {
		t.Fatalf("an item of exactly 400 KB: %v", err)
	}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("over", dynamoMaxItemSize+1)})
	validation(t, "PutItem", err, dynamoItemTooLarge)
	_, err = db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{table: {
		{PutRequest: &ddbtypes.PutRequest{Item: sized("bat1", 10)}},
		{PutRequest: &ddbtypes.PutRequest{Item: sized("bat2", dynamoMaxItemSize+1)}},
	}}})
	validation(t, "BatchWriteItem", err, dynamoItemTooLarge)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: &table, Item: sized("tra1", 10)}},
		{Put: &ddbtypes.Put{TableName: &table, Item: sized("tra2", dynamoMaxItemSize+1)}},
	}})
	validation(t, "TransactWriteItems", err, dynamoItemTooLarge)
	if n := itemCount(t, db, table); n != 1 {
		t.Errorf("%d items stored, want only the 400 KB one", n)
	}
}

// An update that would take an item past 400 KB is refused and leaves the
// item as it was, alone or in a transaction (whose other writes are not
// applied either); one that stays within is applied.
func TestUpdatesPast400KBAreRefusedAndUndone(t *testing.T) {
	ctx := context.Background()
	_, db, table := limitsTable(t)
	key := func(sk string) map[string]ddbtypes.AttributeValue {
		return map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sized("grow", 300*1024)}); err != nil {
		t.Fatal(err)
	}
	grow := func(n int) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{TableName: &table, Key: key("grow"), UpdateExpression: aws.String("SET c = :c"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": &ddbtypes.AttributeValueMemberB{Value: make([]byte, n)}}}
	}
	_, err := db.UpdateItem(ctx, grow(150*1024))
	validation(t, "UpdateItem", err, dynamoUpdateTooLarge)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key("grow"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Item["c"]; ok || len(got.Item["b"].(*ddbtypes.AttributeValueMemberB).Value) != 300*1024-3-6-1 {
		t.Errorf("the refused update was applied: attributes %v", keysOf(got.Item))
	}
	// A new item made too large by its first update is not left behind.
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("new1"), UpdateExpression: aws.String("SET c = :c"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": &ddbtypes.AttributeValueMemberB{Value: make([]byte, dynamoMaxItemSize)}}})
	validation(t, "UpdateItem of a new item", err, dynamoUpdateTooLarge)
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: &table, Item: sized("tra1", 10)}},
		{Update: &ddbtypes.Update{TableName: &table, Key: key("grow"), UpdateExpression: aws.String("SET c = :c"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": &ddbtypes.AttributeValueMemberB{Value: make([]byte, 150*1024)}}}},
	}})
	validation(t, "TransactWriteItems with an update", err, dynamoUpdateTooLarge)
	if n := itemCount(t, db, table); n != 1 {
		t.Errorf("%d items after the refused writes, want the one put first", n)
	}
	if _, err := db.UpdateItem(ctx, grow(90*1024)); err != nil {
		t.Errorf("an update within 400 KB: %v", err)
	}
}

// itemCount is how many items the table holds (one page suffices here).
func itemCount(t *testing.T, db *dynamodb.Client, table string) int {
	t.Helper()
	out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Items)
}

func keysOf(it map[string]ddbtypes.AttributeValue) []string {
	var out []string
	for k := range it {
		out = append(out, k)
	}
	return out
}

// A Query or Scan answers at most 1 MB of items and a LastEvaluatedKey to
// go on from; paging through returns every item once, in order, projected
// as asked.
func TestQueryAndScanPagesHoldAtMost1MB(t *testing.T) {
	ctx := context.Background()
	_, db, table := limitsTable(t)
	const items, size = 25, 100 * 1024
	for i := range items {
		it := sized(fmt.Sprintf("%04d", i), size)
		it["tag"] = &ddbtypes.AttributeValueMemberS{Value: "x"}
		it["b"] = &ddbtypes.AttributeValueMemberB{Value: make([]byte, size-3-6-1-4)}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, pages [][]map[string]ddbtypes.AttributeValue, projected bool) {
		t.Helper()
		var sks []string
		for i, page := range pages {
			if len(page) > (1<<20)/size {
				t.Errorf("%s: page %d holds %d items of 100 KB", what, i+1, len(page))
			}
			for _, it := range page {
				sk, _ := it["sk"].(*ddbtypes.AttributeValueMemberS)
				if projected {
					if len(it) != 1 || it["tag"] == nil {
						t.Fatalf("%s: projected item has %v", what, keysOf(it))
					}
					continue
				}
				sks = append(sks, sk.Value)
			}
		}
		n := 0
		for _, p := range pages {
			n += len(p)
		}
		if n != items || len(pages) < 3 {
			t.Errorf("%s: %d items in %d pages, want %d in at least 3", what, n, len(pages), items)
		}
		if !projected && strings.Join(sks, ",") != strings.Join(sortedSKs(items), ",") {
			t.Errorf("%s: items out of order or repeated: %v", what, sks)
		}
	}
	query := func(projection bool) [][]map[string]ddbtypes.AttributeValue {
		in := &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("#pk = :p"),
			ExpressionAttributeNames:  map[string]string{"#pk": "pk"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "p"}}, ConsistentRead: aws.Bool(true)}
		if projection {
			in.ProjectionExpression = aws.String("#t")
			in.ExpressionAttributeNames["#t"] = "tag"
		}
		var pages [][]map[string]ddbtypes.AttributeValue
		p := dynamodb.NewQueryPaginator(db, in)
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if int(out.Count) != len(out.Items) {
				t.Errorf("Count %d for %d items", out.Count, len(out.Items))
			}
			pages = append(pages, out.Items)
		}
		return pages
	}
	check("Query", query(false), false)
	check("Query with a projection", query(true), true)
	var pages [][]map[string]ddbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, out.Items)
	}
	check("Scan", pages, false)
	// A Limit under the page still ends the page.
	out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "p"}}, Limit: aws.Int32(2)})
	if err != nil || len(out.Items) != 2 || out.LastEvaluatedKey == nil {
		t.Errorf("Limit 2: %d items, key %v, %v", len(out.Items), out.LastEvaluatedKey, err)
	}
}

func sortedSKs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%04d", i)
	}
	return out
}

// A transaction of more than 100 actions is refused whole; one of 100 is
// applied.
func TestTransactionsHoldAtMost100Actions(t *testing.T) {
	ctx := context.Background()
	_, db, table := limitsTable(t)
	puts := func(prefix string, n int) []ddbtypes.TransactWriteItem {
		var items []ddbtypes.TransactWriteItem
		for i := 0; i < n; i++ {
			items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: &table, Item: sized(fmt.Sprintf("%s%03d", prefix, i), 100)}})
		}
		return items
	}
	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts("over", 101)})
	validation(t, "TransactWriteItems", err, dynamoTooManyActions)
	if n := itemCount(t, db, table); n != 0 {
		t.Errorf("%d items stored after a refused transaction", n)
	}
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts("full", 100)}); err != nil {
		t.Fatalf("100 actions: %v", err)
	}
	if n := itemCount(t, db, table); n != 100 {
		t.Errorf("%d items stored, want 100", n)
	}
}
