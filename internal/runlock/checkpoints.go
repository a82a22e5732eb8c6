package runlock

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// GetItemAPI is the part of the DynamoDB client ReadCheckpoints uses.
type GetItemAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Checkpoints are what a reader outside the lock (the reconciliation) needs
// of RUN/STATE: the checkpoint (every version at or before it was
// published) and the origin (the first checkpoint: versions at or before it
// were never the pipeline's to publish — envelope.SnapshotSince after a
// snapshot start). Origin is zero on a record written before it was kept.
// Datastore is the HealthLake data store they belong to ("" on a record
// from before the binding): a reader configured for another one must not
// compare its store with them (DatastoreChangedError).
type Checkpoints struct {
	Checkpoint, Origin time.Time
	Datastore          string
}

// BelongsTo returns the DatastoreChangedError of c for a reader configured
// with datastoreID, or nil when c is that data store's (or either is "").
func (c Checkpoints) BelongsTo(datastoreID string) *DatastoreChangedError {
	if datastoreID == "" || c.Datastore == "" || c.Datastore == datastoreID {
		return nil
	}
	return &DatastoreChangedError{Bound: c.Datastore, Configured: datastoreID}
}

// ReadCheckpoints reads RUN/STATE with a consistent read; ok is false when
// no run has created it yet.
func ReadCheckpoints(ctx context.Context, db GetItemAPI, table string) (c Checkpoints, ok bool, err error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: stateKey(), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#c, #o, #d"),
		ExpressionAttributeNames: map[string]string{"#c": attrCheckpoint, "#o": attrOrigin, "#d": attrDatastore}})
	if err != nil {
		return Checkpoints{}, false, fmt.Errorf("read RUN/STATE from %s: %w", table, err)
	}
	if len(out.Item) == 0 {
		return Checkpoints{}, false, nil
	}
	get := func(name string) (time.Time, error) {
		v, isS := out.Item[name].(*types.AttributeValueMemberS)
		if !isS {
			return time.Time{}, nil
		}
		return envelope.ParseTime(v.Value)
	}
	if c.Checkpoint, err = get(attrCheckpoint); err != nil {
		return Checkpoints{}, false, fmt.Errorf("RUN/STATE %s: %w", attrCheckpoint, err)
	}
	if _, has := out.Item[attrCheckpoint]; !has {
		return Checkpoints{}, false, nil
	}
	if c.Origin, err = get(attrOrigin); err != nil {
		return Checkpoints{}, false, fmt.Errorf("RUN/STATE %s: %w", attrOrigin, err)
	}
	if v, isS := out.Item[attrDatastore].(*types.AttributeValueMemberS); isS {
		c.Datastore = v.Value
	}
	return c, true, nil
}
