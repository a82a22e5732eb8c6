// Package sqsconsumer reads healthlake-cdc events from an SQS queue that an
// EventBridge rule targets, applies them to a replica and deletes each
// message only once it is applied. A message that cannot be applied is left
// on the queue: it comes back after the visibility timeout and, after the
// queue's redrive policy's maxReceiveCount receives, SQS moves it to the
// dead-letter queue. Logs carry message ids, counts and error classes, never
// resource ids or content.
package sqsconsumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/replica"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

// QueueAPI is the part of the SQS client the consumer uses.
type QueueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Defaults of Consumer.
const (
	// DefaultWaitSeconds is the long-poll wait (the SQS maximum, 20 s).
	DefaultWaitSeconds = 20
	// MaxMessages is the most messages one ReceiveMessage returns (SQS: 10).
	MaxMessages = 10
)

// Stats counts what a consumer did.
type Stats struct {
	Received   int64 `json:"received"`
	Upserted   int64 `json:"upserted"`
	Deleted    int64 `json:"deleted"`
	Duplicates int64 `json:"duplicates"`
	Stale      int64 `json:"stale"`
	// Failed counts messages left on the queue (redelivered, then moved to
	// the dead-letter queue by the redrive policy).
	Failed int64 `json:"failed"`
	// Acked counts messages deleted from the queue; DeleteErrors the
	// deletes SQS refused (those messages come back as duplicates).
	Acked        int64 `json:"acked"`
	DeleteErrors int64 `json:"deleteErrors"`
}

// Add returns s + o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Received: s.Received + o.Received, Upserted: s.Upserted + o.Upserted, Deleted: s.Deleted + o.Deleted,
		Duplicates: s.Duplicates + o.Duplicates, Stale: s.Stale + o.Stale, Failed: s.Failed + o.Failed,
		Acked: s.Acked + o.Acked, DeleteErrors: s.DeleteErrors + o.DeleteErrors,
	}
}

// Consumer applies the events of one queue to one replica.
type Consumer struct {
	Queue    QueueAPI
	QueueURL string
	Replica  *replica.Replica
	// Objects resolves claim-checks (s3getter.New(s3Client)).
	Objects cdcevent.ObjectGetter
	// WaitSeconds is the long-poll wait, 0–20 (default DefaultWaitSeconds;
	// negative: 0, a short poll).
	WaitSeconds int
	// Logger receives message ids, counts and error classes; default discards.
	Logger *slog.Logger
}

func (c *Consumer) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Logger
}

// Run polls until ctx is done (returning nil then) or a receive fails for a
// reason other than ctx, and returns the totals.
func (c *Consumer) Run(ctx context.Context) (Stats, error) {
	var total Stats
	for ctx.Err() == nil {
		st, err := c.Poll(ctx)
		total = total.Add(st)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return total, err
		}
	}
	return total, nil
}

// Drain polls until a receive returns no message (the queue holds no
// visible message for WaitSeconds) or ctx is done, and returns the totals.
func (c *Consumer) Drain(ctx context.Context) (Stats, error) {
	var total Stats
	for {
		st, err := c.Poll(ctx)
		total = total.Add(st)
		if err != nil || st.Received == 0 {
			return total, err
		}
	}
}

// Poll receives one batch of messages (waiting up to WaitSeconds for the
// first), applies each and deletes those applied. It returns an error only
// when the receive fails; a message that fails is counted and left on the
// queue.
func (c *Consumer) Poll(ctx context.Context) (Stats, error) {
	wait := c.WaitSeconds
	switch {
	case wait == 0:
		wait = DefaultWaitSeconds
	case wait < 0:
		wait = 0
	}
	out, err := c.Queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(c.QueueURL), MaxNumberOfMessages: MaxMessages, WaitTimeSeconds: int32(min(wait, 20)),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return Stats{}, fmt.Errorf("sqsconsumer: receive: %w", err)
	}
	var st Stats
	var done []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		st.Received++
		outcome, err := c.handle(ctx, aws.ToString(m.Body))
		if err != nil {
			st.Failed++
			receives, _ := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
			c.logger().Warn("message not applied; left for redelivery and the dead-letter queue",
				"messageId", aws.ToString(m.MessageId), "receiveCount", receives, "reason", Reason(err))
			continue
		}
		switch outcome {
		case replica.Upserted:
			st.Upserted++
		case replica.Deleted:
			st.Deleted++
		case replica.Duplicate:
			st.Duplicates++
		case replica.Stale:
			st.Stale++
		}
		done = append(done, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if len(done) == 0 {
		return st, nil
	}
	del, err := c.Queue.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.QueueURL), Entries: done})
	if err != nil {
		// Applied but not deleted: they come back and are duplicates then.
		st.DeleteErrors += int64(len(done))
		c.logger().Warn("delete of applied messages failed; they will be redelivered as duplicates", "messages", len(done), "error", err.Error())
		return st, nil
	}
	st.Acked += int64(len(del.Successful))
	st.DeleteErrors += int64(len(del.Failed))
	return st, nil
}

// handle decodes one message body and applies it.
func (c *Consumer) handle(ctx context.Context, body string) (replica.Outcome, error) {
	d, err := DecodeMessage([]byte(body))
	if err != nil {
		return 0, err
	}
	return c.Replica.Apply(ctx, c.Objects, d)
}

// DecodeMessage decodes a message body: the whole EventBridge event (a
// target without input transformation) or the detail alone (a target with
// InputPath "$.detail").
func DecodeMessage(body []byte) (*cdcevent.Detail, error) {
	var probe struct {
		Detail        json.RawMessage `json:"detail"`
		SchemaVersion *string         `json:"schemaVersion"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return nil, fmt.Errorf("%w: message body is not a JSON object", cdcevent.ErrMalformed)
	}
	if len(probe.Detail) == 0 && probe.SchemaVersion != nil {
		return cdcevent.DecodeDetail(body)
	}
	ev, err := cdcevent.Decode(body)
	if err != nil {
		return nil, err
	}
	return &ev.Detail, nil
}

// Reason classifies an error for logs and metrics without its text (which
// may name a resource).
func Reason(err error) string {
	switch {
	case errors.Is(err, cdcevent.ErrUnsupportedSchema), errors.Is(err, cdcevent.ErrUnsupportedOperation):
		return "unsupported"
	case errors.Is(err, cdcevent.ErrMalformed), errors.Is(err, replica.ErrInvalid):
		return "malformed"
	case errors.Is(err, cdcevent.ErrChecksumMismatch), errors.Is(err, cdcevent.ErrSizeMismatch):
		return "claim-check-mismatch"
	case errors.Is(err, s3getter.ErrNotFound):
		return "claim-check-missing"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}
