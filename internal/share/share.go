// Package share divides the pipeline's PutEvents share among the Map
// children of a run that publish at the same time. Each child beats on one
// DynamoDB item of its run — RATE#{runId} / CHILDREN, an attribute per
// child holding when its beat expires — every Period, and publishes at
// Of(total, live): the run's whole share divided by the children whose beat
// has not expired. When the Map's last round runs fewer children than its
// concurrency, or siblings finish early, the ones still running take up
// what the others left (docs/ARCHITECTURE.md, "The PutEvents share").
package share

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Defaults of Board.
const (
	// DefaultPeriod is how often a child beats (and learns how many
	// siblings are live).
	DefaultPeriod = 2 * time.Second
	// DefaultLease is how long a beat keeps a child counted: a child that
	// dies without leaving holds its part this long, which only slows the
	// others.
	DefaultLease = 3 * DefaultPeriod
)

// Item keys and attributes.
const (
	pkPrefix    = "RATE#"
	skChildren  = "CHILDREN"
	childPrefix = "c_"
	attrTTL     = stackconfig.TableTTLAttribute
	// itemTTL keeps a run's item a day after its last beat.
	itemTTL = 24 * time.Hour
)

// PK is the partition key of run runID's item: "RATE#{runId}".
func PK(runID string) string { return pkPrefix + runID }

// Of is one child's rate: total divided among live children (at least one).
func Of(total float64, live int) float64 {
	return total / float64(max(live, 1))
}

// ChildID names a child by what it works on (its batch's first file, by
// manifest.File.Name, so that two ranges of one file are two children):
// a retried attempt of the same batch replaces its own beat.
func ChildID(batchKey string) string {
	sum := sha256.Sum256([]byte(batchKey))
	return hex.EncodeToString(sum[:8])
}

// UpdateAPI is the part of the DynamoDB client a Board uses.
type UpdateAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Board is the table the children of a run beat on.
type Board struct {
	DB    UpdateAPI
	Table string
	// Lease is how long a beat counts (DefaultLease when 0); Now the clock
	// (time.Now when nil).
	Lease time.Duration
	Now   func() time.Time
}

func (b *Board) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Beat records that child of run runID is publishing and returns how many
// children of the run are live (their beat not expired), this one included.
func (b *Board) Beat(ctx context.Context, runID, child string) (int, error) {
	if b.DB == nil || b.Table == "" || runID == "" || child == "" {
		return 0, errors.New("share: board, run and child are required")
	}
	now := b.now()
	lease := b.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	out, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(b.Table),
		Key:                      key(runID),
		UpdateExpression:         aws.String("SET #me = :exp, #ttl = :ttl"),
		ExpressionAttributeNames: map[string]string{"#me": childPrefix + child, "#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(lease).UnixMilli(), 10)},
			":ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(itemTTL).Unix(), 10)},
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		return 0, fmt.Errorf("share: beat of run %s: %w", runID, err)
	}
	return live(out.Attributes, now), nil
}

// Leave ends child's beat (its expiry set to 0, so the attribute stays, a
// few bytes per batch): its siblings take up its part at their next beat.
func (b *Board) Leave(ctx context.Context, runID, child string) error {
	_, err := b.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(b.Table),
		Key:                       key(runID),
		UpdateExpression:          aws.String("SET #me = :gone"),
		ExpressionAttributeNames:  map[string]string{"#me": childPrefix + child},
		ExpressionAttributeValues: map[string]types.AttributeValue{":gone": &types.AttributeValueMemberN{Value: "0"}},
	})
	if err != nil {
		return fmt.Errorf("share: leave of run %s: %w", runID, err)
	}
	return nil
}

func key(runID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: PK(runID)},
		"sk": &types.AttributeValueMemberS{Value: skChildren},
	}
}

// live counts the child attributes of item whose expiry is after now.
func live(item map[string]types.AttributeValue, now time.Time) int {
	n := 0
	for name, v := range item {
		if !strings.HasPrefix(name, childPrefix) {
			continue
		}
		num, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		if ms, err := strconv.ParseInt(num.Value, 10, 64); err == nil && ms > now.UnixMilli() {
			n++
		}
	}
	return n
}

// Keep beats for child of run runID at once — before it returns, so the
// child starts at its part — and then every period (DefaultPeriod when 0)
// until stop is called or ctx ends; after each beat it calls set with the
// child's part of total, Of(total, live), and live. A failed beat keeps
// the part the child has (warn, when set, is called once with the error).
// stop ends the beats and leaves the board, so that the siblings take up
// the child's part at their next beat.
func (b *Board) Keep(ctx context.Context, runID, child string, total float64, period time.Duration,
	set func(rate float64, live int), warn func(error)) (stop func()) {
	if period <= 0 {
		period = DefaultPeriod
	}
	warned := false
	beat := func() {
		live, err := b.Beat(ctx, runID, child)
		switch {
		case err == nil:
			set(Of(total, live), live)
		case !warned && warn != nil && ctx.Err() == nil:
			warn(err)
			warned = true
		}
	}
	beat()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			t := time.NewTimer(period)
			select {
			case <-done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			beat()
		}
	}()
	return func() {
		close(done)
		<-finished
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := b.Leave(lctx, runID, child); err != nil && warn != nil {
			warn(err)
		}
	}
}
