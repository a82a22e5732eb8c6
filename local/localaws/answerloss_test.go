package localaws

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// loseFirst returns an AnswerLoss that drops the answers of the first n
// calls of op, and the count of calls of op seen.
func loseFirst(op string, n int) (AnswerLoss, func() int) {
	var mu sync.Mutex
	seen := 0
	return func(_, operation string, _ *http.Request) bool {
			if operation != op {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			seen++
			return seen <= n
		}, func() int {
			mu.Lock()
			defer mu.Unlock()
			return seen
		}
}

func counterItem(env *Env, db *dynamodb.Client, table string, t *testing.T) int {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "c"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["n"].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0
	}
	switch n.Value {
	case "1":
		return 1
	case "2":
		return 2
	}
	t.Fatalf("n = %s", n.Value)
	return 0
}

// A write whose answer is lost took effect: the SDK sends it again, and a
// conditional write's second attempt meets its own first one.
func TestALostAnswerIsServedAndTheCallSentAgain(t *testing.T) {
	env, db, table := limitsTable(t)
	loss, seen := loseFirst("PutItem", 1)
	env.Gateway.SetAnswerLoss(loss)
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "c"},
			"n": &ddbtypes.AttributeValueMemberN{Value: "1"},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("err = %v, want the second attempt's ConditionalCheckFailedException", err)
	}
	if seen() != 2 || env.Gateway.AnswersLost() != 1 {
		t.Errorf("PutItem calls = %d, answers lost = %d; want 2 and 1", seen(), env.Gateway.AnswersLost())
	}
	if n := counterItem(env, db, table, t); n != 1 {
		t.Errorf("item n = %d, want the first attempt's 1", n)
	}
}

// transactIncrement is a transaction that adds one to the counter item
// while it holds n.
func transactIncrement(from int, token string) *dynamodb.TransactWriteItemsInput {
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{{Update: &ddbtypes.Update{
		TableName: aws.String("limits"),
		Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "c"},
		},
		UpdateExpression:    aws.String("SET n = :to"),
		ConditionExpression: aws.String("attribute_not_exists(n) OR n = :from"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":from": &ddbtypes.AttributeValueMemberN{Value: []string{"0", "1", "2"}[from]},
			":to":   &ddbtypes.AttributeValueMemberN{Value: []string{"1", "2", "3"}[from]},
		},
	}}}}
	if token != "" {
		in.ClientRequestToken = aws.String(token)
	}
	return in
}

// The SDK fills a transaction's ClientRequestToken in once per call, so a
// transaction sent again after its answer was lost is the same request with
// the same token: DynamoDB answers it as the first, changing nothing.
func TestATransactionSentAgainWithItsTokenChangesNothing(t *testing.T) {
	env, db, table := limitsTable(t)
	loss, seen := loseFirst("TransactWriteItems", 1)
	env.Gateway.SetAnswerLoss(loss)
	if _, err := db.TransactWriteItems(context.Background(), transactIncrement(0, "")); err != nil {
		t.Fatalf("transaction whose first answer was lost: %v", err)
	}
	if seen() != 2 || env.Gateway.AnswersLost() != 1 {
		t.Errorf("TransactWriteItems calls = %d, answers lost = %d; want 2 and 1", seen(), env.Gateway.AnswersLost())
	}
	if n := counterItem(env, db, table, t); n != 1 {
		t.Errorf("n = %d, want 1: the transaction applied once", n)
	}
}

func TestAClientRequestTokenHoldsForTenMinutes(t *testing.T) {
	env, db, table := limitsTable(t)
	// The gateway's clock runs ahead of the SDK's by what advance adds
	// (within the 15 minutes a signature is valid for).
	var mu sync.Mutex
	var ahead time.Duration
	env.Gateway.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(ahead) })
	advance := func(d time.Duration) { mu.Lock(); ahead += d; mu.Unlock() }
	ctx := context.Background()

	if _, err := db.TransactWriteItems(ctx, transactIncrement(0, "tok-1")); err != nil {
		t.Fatal(err)
	}
	// The same request again, within the 10 minutes: answered, not applied
	// (applied again, its condition n = 0 would fail).
	advance(9 * time.Minute)
	if _, err := db.TransactWriteItems(ctx, transactIncrement(0, "tok-1")); err != nil {
		t.Errorf("the same request with its token: %v", err)
	}
	if n := counterItem(env, db, table, t); n != 1 {
		t.Errorf("n = %d after the repeat, want 1", n)
	}
	// The token with other parameters.
	_, err := db.TransactWriteItems(ctx, transactIncrement(1, "tok-1"))
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "IdempotentParameterMismatchException" {
		t.Errorf("token with other parameters: err = %v, want IdempotentParameterMismatchException", err)
	}
	// Past the 10 minutes the token is a new request: evaluated again, and
	// its condition (n = 0) now fails.
	advance(2 * time.Minute)
	_, err = db.TransactWriteItems(ctx, transactIncrement(0, "tok-1"))
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Errorf("the token after 10 minutes: err = %v, want TransactionCanceledException (a new request)", err)
	}
	// A cancelled transaction keeps no token (modelled): the token with
	// other parameters is a new request, not a mismatch.
	if _, err := db.TransactWriteItems(ctx, transactIncrement(0, "tok-2")); !errors.As(err, &tce) {
		t.Fatalf("err = %v, want TransactionCanceledException", err)
	}
	if _, err := db.TransactWriteItems(ctx, transactIncrement(1, "tok-2")); err != nil {
		t.Fatalf("a cancelled transaction's token with other parameters: %v", err)
	}
	if n := counterItem(env, db, table, t); n != 2 {
		t.Errorf("n = %d, want 2", n)
	}
}

// slowTransactions makes every TransactWriteItems take d at the gateway.
func slowTransactions(t *testing.T, env *Env, d time.Duration) {
	t.Helper()
	m, err := NewLatencyModel(LatencyConfig{Services: map[string]map[string]Distribution{
		ServiceDynamoDB: {"TransactWriteItems": Fixed(d)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env.Gateway.SetLatency(m)
}

// A write of an item an ongoing transaction includes is refused, as
// DynamoDB refuses it: TransactionConflictException for a plain write, a
// cancelled transaction (reason TransactionConflict) for another
// transaction. Neither changes anything; the SDK retries neither.
func TestWritesOfAnItemInAnOngoingTransactionConflict(t *testing.T) {
	env, db, table := limitsTable(t)
	slowTransactions(t, env, 400*time.Millisecond)
	ctx := context.Background()
	counter := map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "c"},
	}
	other := map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "other"},
	}
	// while runs a transaction setting n = 1 on the counter and, 100 ms
	// into it, f.
	while := func(f func()) error {
		done := make(chan error, 1)
		go func() {
			_, err := db.TransactWriteItems(ctx, transactIncrement(0, ""))
			done <- err
		}()
		time.Sleep(100 * time.Millisecond)
		f()
		return <-done
	}

	var plain, elsewhere error
	err := while(func() {
		_, plain = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: counter,
			UpdateExpression: aws.String("SET m = :one"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}})
		_, elsewhere = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: other})
	})
	if err != nil {
		t.Fatalf("the ongoing transaction: %v", err)
	}
	var tce *ddbtypes.TransactionConflictException
	if !errors.As(plain, &tce) {
		t.Errorf("UpdateItem of the transaction's item: err = %v, want TransactionConflictException", plain)
	}
	if elsewhere != nil {
		t.Errorf("PutItem of another item: %v", elsewhere)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: counter, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Item["m"]; ok {
		t.Error("the refused UpdateItem changed the item")
	}

	// Two transactions of one item: the one that arrived while the other
	// was ongoing is cancelled, and the other applies.
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: counter}); err != nil {
		t.Fatal(err)
	}
	var second error
	first := while(func() {
		_, second = db.TransactWriteItems(ctx, transactIncrement(0, ""))
	})
	var cancelled *ddbtypes.TransactionCanceledException
	if !errors.As(second, &cancelled) || len(cancelled.CancellationReasons) != 1 ||
		aws.ToString(cancelled.CancellationReasons[0].Code) != "TransactionConflict" {
		t.Errorf("a transaction that arrived during another: err = %v, want TransactionCanceledException [TransactionConflict]", second)
	}
	if first != nil {
		t.Errorf("the transaction that arrived first: %v", first)
	}
	if n := counterItem(env, db, table, t); n != 1 {
		t.Errorf("n = %d, want 1: one of the two applied", n)
	}
	// Once the transaction is served, the item is free.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: counter,
		UpdateExpression: aws.String("SET m = :one"), ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":one": &ddbtypes.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Errorf("UpdateItem after the transaction: %v", err)
	}
}
