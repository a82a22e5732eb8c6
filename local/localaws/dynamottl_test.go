package localaws

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ttlClock is the local DynamoDB's clock in these tests (the gateway's
// own checks signatures, so it stays on the wall clock).
type ttlClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *ttlClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *ttlClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// UpdateTimeToLive and DescribeTimeToLive answer as DynamoDB documents: a
// second change within the hour is refused, a missing table is not found.
func TestTimeToLiveIsSetAndDescribed(t *testing.T) {
	ctx := context.Background()
	env, db, table := limitsTable(t)
	clock := &ttlClock{t: time.Now()}
	env.Gateway.dynamo.now = clock.now
	got, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil || got.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusDisabled {
		t.Fatalf("before: %+v, %v", got, err)
	}
	enable := func(on bool) error {
		_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table,
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(on)}})
		return err
	}
	if err := enable(true); err != nil {
		t.Fatal(err)
	}
	got, err = db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil || got.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(got.TimeToLiveDescription.AttributeName) != "ttl" {
		t.Fatalf("after: %+v, %v", got.TimeToLiveDescription, err)
	}
	validation(t, "a second change within the hour", enable(false), "Time to live has been modified multiple times within a fixed interval")
	clock.advance(time.Hour)
	validation(t, "enabling it again", enable(true), "TimeToLive is already enabled")
	if err := enable(false); err != nil {
		t.Errorf("disabling after an hour: %v", err)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("missing"),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}})
	var nf *ddbtypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("a missing table: %v, want ResourceNotFoundException", err)
	}
}

// An item whose time to live has passed is read like any other until the
// delete delay has passed too, then deleted; an item without a number there
// never expires.
func TestExpiredItemsAreDeletedAfterTheDelay(t *testing.T) {
	ctx := context.Background()
	env, db, table := limitsTable(t)
	t0 := time.Now()
	clock := &ttlClock{t: t0}
	env.Gateway.dynamo.now = clock.now
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &table,
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	put := func(sk string, ttl ddbtypes.AttributeValue) {
		it := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "p"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}
		if ttl != nil {
			it["ttl"] = ttl
		}
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	epoch := func(at time.Time) ddbtypes.AttributeValue {
		return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(at.Unix(), 10)}
	}
	put("expired", epoch(t0.Add(-time.Hour)))
	put("later", epoch(t0.Add(10*time.Hour)))
	put("string", &ddbtypes.AttributeValueMemberS{Value: "0"})
	put("none", nil)
	left := func() []string {
		out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "p"}}})
		if err != nil {
			t.Fatal(err)
		}
		var sks []string
		for _, it := range out.Items {
			sks = append(sks, it["sk"].(*ddbtypes.AttributeValueMemberS).Value)
		}
		return sks
	}
	clock.advance(47 * time.Hour)
	if got := left(); len(got) != 4 {
		t.Fatalf("47 h after: %v, want all four (an expired item is read until it is deleted)", got)
	}
	clock.advance(time.Hour + time.Minute)
	left() // the call that finds the sweep due (once an hour)
	if got := left(); len(got) != 3 || slices.Contains(got, "expired") {
		t.Fatalf("48 h after the expiry: %v, want all but the expired one", got)
	}
	if n := env.Gateway.ExpiredItems(); n != 1 {
		t.Errorf("ExpiredItems = %d, want 1", n)
	}
	clock.advance(100 * 24 * time.Hour)
	env.Gateway.SetTTLDeleteAfter(-1)
	if got := left(); len(got) != 3 {
		t.Errorf("with deletion off: %v, want the three left", got)
	}
}
