// Package fastrecord is the record of what the Subscriptions fast path
// published: items of the pipeline's DynamoDB table, written by each
// fast-path invocation before it answers its batch (Writer) and read by the
// export path's windows — prepare-change and its delete scan — to skip the
// versions the fast path already delivered (Reader). docs/FASTPATH.md, "The
// record of what the fast path published".
//
// An item is
//
//	pk  "FASTPATH#{hour of the write, YYYY-MM-DDTHH}#{shard 0–1}"
//	sk  "{write time, RFC 3339 with milliseconds}#{invocation's request id}#{part}"
//	v   the versions, gzip-compressed TSV in the delivered index's form
//	    ("type\tid\tversionId\tlastUpdated", "\tD" for a delete)
//	n   how many versions v holds
//	ttl a day after the write (DynamoDB TTL; windows read 6 h back at most)
//
// The shard spreads one hour's writes over two partition-key values:
// DynamoDB allows a partition key 1,000 write units a second, and the sort
// keys grow with time, so DynamoDB cannot split a hot key's writes by sort
// key. The fast path writes one item per invocation, and its mapping's
// MaximumConcurrency bounds its invocations to a few hundred a second. A
// reader queries every shard of every hour its span touches from the sort
// key of its start: a window's span of about 8 minutes is two or four
// queries.
package fastrecord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Layout of the items.
const (
	// PKPrefix starts every record item's partition key (iampolicy
	// PKFastPath grants the fast path these items only).
	PKPrefix = "FASTPATH#"
	// Bucket is the span of write times one partition key holds.
	Bucket = time.Hour
	// Shards is how many partition keys share one bucket.
	Shards = 2
	// TTL is how long an item is kept after its write.
	TTL = 24 * time.Hour
	// MaxEntriesPerItem bounds the versions of one item: 1,000 entries are
	// at most about 200 KB before compression (a FHIR id is at most 64
	// characters), under DynamoDB's 400 KB item limit. An invocation that
	// published more writes several items.
	MaxEntriesPerItem = 1000

	bucketLayout = "2006-01-02T15"
	attrPK       = "pk"
	attrSK       = "sk"
	attrVersions = "v"
	attrCount    = "n"
	attrTTL      = stackconfig.TableTTLAttribute
)

// PK is the partition key of the items written at t in shard.
func PK(t time.Time, shard int) string {
	return PKPrefix + t.UTC().Truncate(Bucket).Format(bucketLayout) + "#" + strconv.Itoa(shard)
}

// SK is the sort key of part (0, 1, …) of what the invocation unique wrote
// at t. Sort keys order by write time within a partition key.
func SK(t time.Time, unique string, part int) string {
	return envelope.FormatTime(t) + "#" + unique + "#" + strconv.Itoa(part)
}

// Shard is the shard of the invocation unique.
func Shard(unique string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(unique))
	return int(h.Sum32() % Shards)
}

// Partitions returns the partition keys of the items written from from
// until to, oldest bucket first (at least from's).
func Partitions(from, to time.Time) []string {
	var out []string
	for b := from.UTC().Truncate(Bucket); !b.After(to); b = b.Add(Bucket) {
		for s := range Shards {
			out = append(out, PK(b, s))
		}
	}
	if len(out) == 0 {
		for s := range Shards {
			out = append(out, PK(from, s))
		}
	}
	return out
}

// PutAPI is the part of the DynamoDB client a Writer uses.
type PutAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Writer writes record items.
type Writer struct {
	DB    PutAPI
	Table string
}

// Put writes entries, what the invocation unique published, as the items
// of a write at at; it returns the key of the first ("pk sk"). Nothing is
// written without entries. Errors name the table and counts, never a
// resource.
func (w *Writer) Put(ctx context.Context, at time.Time, unique string, entries []delivered.Entry) (string, error) {
	if len(entries) == 0 {
		return "", nil
	}
	pk := PK(at, Shard(unique))
	var first string
	for part := 0; len(entries) > 0; part++ {
		n := min(len(entries), MaxEntriesPerItem)
		body, err := delivered.Encode(entries[:n])
		if err != nil {
			return "", fmt.Errorf("fast-path record: %w", err)
		}
		sk := SK(at, unique, part)
		_, err = w.DB.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(w.Table),
			Item: map[string]types.AttributeValue{
				attrPK:       &types.AttributeValueMemberS{Value: pk},
				attrSK:       &types.AttributeValueMemberS{Value: sk},
				attrVersions: &types.AttributeValueMemberB{Value: body},
				attrCount:    &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
				attrTTL:      &types.AttributeValueMemberN{Value: strconv.FormatInt(at.Add(TTL).Unix(), 10)},
			},
		})
		if err != nil {
			return "", fmt.Errorf("fast-path record of %d versions in table %s: %w", n, w.Table, err)
		}
		if part == 0 {
			first = pk + " " + sk
		}
		entries = entries[n:]
	}
	return first, nil
}

// QueryAPI is the part of the DynamoDB client a Reader uses.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// readers is how many partition keys a Reader queries at once.
const readers = 8

// Reader reads record items.
type Reader struct {
	DB    QueryAPI
	Table string
}

// Read returns the versions recorded in the items written from from until
// to: every shard of every bucket, with strongly consistent queries (an
// item written before the read is seen).
func (r *Reader) Read(ctx context.Context, from, to time.Time) (*delivered.Set, error) {
	pks := Partitions(from, to)
	set := &delivered.Set{}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan string)
	)
	fromSK := envelope.FormatTime(from)
	for range min(readers, len(pks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pk := range next {
				var local []delivered.Entry
				err := r.query(ctx, pk, fromSK, func(e delivered.Entry) { local = append(local, e) })
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				for _, e := range local {
					set.Add(e)
				}
				mu.Unlock()
			}
		}()
	}
	for _, pk := range pks {
		next <- pk
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return set, nil
}

// query reads the items of pk from the sort key fromSK on, every page.
func (r *Reader) query(ctx context.Context, pk, fromSK string, fn func(delivered.Entry)) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(r.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk >= :from"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK, "#v": attrVersions},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}, ":from": &types.AttributeValueMemberS{Value: fromSK}},
		ProjectionExpression:      aws.String("#v"),
		ConsistentRead:            aws.Bool(true),
	}
	p := dynamodb.NewQueryPaginator(r.DB, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("read the fast path's record in table %s: %w", r.Table, err)
		}
		for i, item := range page.Items {
			v, ok := item[attrVersions].(*types.AttributeValueMemberB)
			if !ok {
				return fmt.Errorf("fast-path record item %d of a page in table %s: %w", i+1, r.Table, errNoVersions)
			}
			err := delivered.ReadAll(bytes.NewReader(v.Value), nil, func(e delivered.Entry) error { fn(e); return nil })
			if err != nil {
				return fmt.Errorf("fast-path record item in table %s: %w", r.Table, err)
			}
		}
	}
	return nil
}

var errNoVersions = errors.New("no binary attribute v")
