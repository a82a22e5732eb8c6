// Package esm is the local SQS event-source mapping: what AWS Lambda's poller
// does between an SQS queue and a function, run in-process against the real
// SQS client pointed at the local endpoint.
//
// A Mapping long-polls its queue (batch size, visibility timeout), invokes the
// function with an events.SQSEvent through an Invoker (Lambda's JSON path),
// deletes the records that succeeded and leaves the others — the
// BatchItemFailures of a partial batch response, or every record when the
// function errors — to reappear after the visibility timeout. goaws reports
// ApproximateReceiveCount as 1 forever, so the mapping counts receives per
// message id itself and moves a message to the dead-letter queue once it has
// been received MaxReceiveCount times without success, the way an SQS
// redrive policy does.
package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/backoff"
)

// Handler is the shape of an SQS-triggered Lambda handler with partial batch
// responses.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Invoker invokes a function by name the way Lambda's Invoke API does: a
// handler error is functionError=true with out = {"errorType","errorMessage"};
// err means the invocation itself failed. local/lambdas.Registry
// implements it.
type Invoker interface {
	Invoke(ctx context.Context, function string, payload []byte) (out []byte, functionError bool, err error)
}

// Faults lets a fault plan make the mapping deliver a message twice, as SQS's
// at-least-once delivery may. A nil Faults injects nothing.
type Faults interface {
	// DuplicateDelivery reports whether the message is delivered a second
	// time right after its first delivery.
	DuplicateDelivery(queue, messageID string) bool
}

// Config describes one mapping.
type Config struct {
	// Function is the name the Invoker knows the function by.
	Function string
	// QueueURL is the source queue; QueueARN is put in each record's
	// eventSourceARN.
	QueueURL, QueueARN string
	// Region is put in each record's awsRegion.
	Region string
	// DLQURL is the dead-letter queue; with MaxReceiveCount > 0 a message
	// received that many times without success is moved there.
	DLQURL          string
	MaxReceiveCount int
	// Redrive, when set, is the client the move to the DLQ uses: in AWS
	// SQS's redrive policy moves the message, not the function's role
	// (default: the mapping's client).
	Redrive *sqs.Client
	// BatchSize is the most records per invocation, 1–10 (default 10).
	BatchSize int
	// VisibilityTimeout is requested on every receive; it is rounded up to
	// whole seconds (default 30 s).
	VisibilityTimeout time.Duration
	// WaitTime is the long-poll wait of one ReceiveMessage, whole seconds
	// 1–20 (default 1 s, so that Stop is quick).
	WaitTime time.Duration
	// Pollers is the number of concurrent pollers, each invoking the
	// function with its own batches (default 1).
	Pollers int
	// ReportBatchItemFailures makes the mapping honour the function's
	// BatchItemFailures; without it a successful invocation deletes the
	// whole batch. Mappings built by the stack always set it.
	ReportBatchItemFailures bool
	// Faults, if set, injects duplicate deliveries.
	Faults Faults
	// Logger receives ids and counts only; default slog.Default().
	Logger *slog.Logger
}

// Stats are a mapping's counters.
type Stats struct {
	Receives       int64 `json:"receives"`       // ReceiveMessage calls that returned messages
	Messages       int64 `json:"messages"`       // messages received (with redeliveries)
	Invocations    int64 `json:"invocations"`    // function invocations
	FunctionErrors int64 `json:"functionErrors"` // invocations that failed as a whole
	ItemFailures   int64 `json:"itemFailures"`   // records reported in BatchItemFailures
	Deleted        int64 `json:"deleted"`        // records deleted after success
	Duplicates     int64 `json:"duplicates"`     // injected duplicate deliveries
	MovedToDLQ     int64 `json:"movedToDLQ"`     // messages moved to the dead-letter queue
}

// Mapping is one running SQS event-source mapping.
type Mapping struct {
	client  *sqs.Client
	invoker Invoker
	cfg     Config
	log     *slog.Logger

	mu       sync.Mutex
	receives map[string]int // message id → receives seen
	stats    Stats

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New validates cfg and returns a stopped mapping.
func New(client *sqs.Client, invoker Invoker, cfg Config) (*Mapping, error) {
	if client == nil || invoker == nil {
		return nil, errors.New("esm: client and invoker are required")
	}
	if cfg.Function == "" || cfg.QueueURL == "" {
		return nil, errors.New("esm: Function and QueueURL are required")
	}
	if cfg.MaxReceiveCount > 0 && cfg.DLQURL == "" {
		return nil, fmt.Errorf("esm %s: MaxReceiveCount without DLQURL", cfg.Function)
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 10
	}
	if cfg.BatchSize > 10 {
		return nil, fmt.Errorf("esm %s: BatchSize %d above 10", cfg.Function, cfg.BatchSize)
	}
	if cfg.VisibilityTimeout <= 0 {
		cfg.VisibilityTimeout = 30 * time.Second
	}
	if cfg.WaitTime <= 0 {
		cfg.WaitTime = time.Second
	}
	if cfg.WaitTime > 20*time.Second {
		cfg.WaitTime = 20 * time.Second
	}
	if cfg.Pollers <= 0 {
		cfg.Pollers = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Mapping{
		client:   client,
		invoker:  invoker,
		cfg:      cfg,
		log:      log.With("esm", cfg.Function),
		receives: map[string]int{},
	}, nil
}

// Start runs the pollers until ctx is done or Stop is called.
func (m *Mapping) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	for i := 0; i < m.cfg.Pollers; i++ {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.poll(ctx)
		}()
	}
}

// Stop cancels the pollers and waits for the invocations in flight.
func (m *Mapping) Stop() {
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
}

// Stats returns a copy of the counters.
func (m *Mapping) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// ReceiveCount returns how many times the mapping has received the message.
func (m *Mapping) ReceiveCount(messageID string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.receives[messageID]
}

func seconds(d time.Duration) int32 {
	s := int32((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// emptyReceivePause is the pause after an empty receive.
const emptyReceivePause = 10 * time.Millisecond

func (m *Mapping) poll(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		out, err := m.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(m.cfg.QueueURL),
			MaxNumberOfMessages:         int32(m.cfg.BatchSize),
			VisibilityTimeout:           seconds(m.cfg.VisibilityTimeout),
			WaitTimeSeconds:             seconds(m.cfg.WaitTime),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("receive failed", "queue", m.cfg.QueueURL, "error", err.Error())
			if backoff.Sleep(ctx, delay) != nil {
				return
			}
			if delay < 2*time.Second {
				delay *= 2
			}
			continue
		}
		delay = 100 * time.Millisecond
		if len(out.Messages) == 0 {
			// goaws can answer empty at once while a delayed message falls
			// due (its readiness test is strict); a short pause keeps this
			// loop from spinning, which would also freeze a synctest fake
			// clock (local/sim), since that moves only when all goroutines wait.
			if backoff.Sleep(ctx, emptyReceivePause) != nil {
				return
			}
			continue
		}
		m.handleBatch(ctx, out.Messages)
	}
}

// handleBatch processes one received batch: messages past their receive
// budget go to the DLQ, the rest are delivered.
func (m *Mapping) handleBatch(ctx context.Context, msgs []sqstypes.Message) {
	deliver := make([]sqstypes.Message, 0, len(msgs))
	counts := make(map[string]int, len(msgs))
	m.mu.Lock()
	m.stats.Receives++
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		m.receives[id]++
		counts[id] = m.receives[id]
		m.stats.Messages++
	}
	m.mu.Unlock()
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		if m.cfg.MaxReceiveCount > 0 && counts[id] > m.cfg.MaxReceiveCount {
			// Received past the budget (its visibility ran out while a
			// slow invocation held it): redrive instead of delivering.
			m.moveToDLQ(ctx, msg)
			continue
		}
		deliver = append(deliver, msg)
	}
	if len(deliver) == 0 {
		return
	}
	failed := m.invoke(ctx, deliver, counts)
	if m.cfg.Faults != nil {
		var dups []sqstypes.Message
		for _, msg := range deliver {
			if m.cfg.Faults.DuplicateDelivery(m.cfg.QueueURL, aws.ToString(msg.MessageId)) {
				dups = append(dups, msg)
			}
		}
		if len(dups) > 0 {
			m.mu.Lock()
			m.stats.Duplicates += int64(len(dups))
			m.mu.Unlock()
			// A duplicate's outcome does not change the first delivery's:
			// a record the first delivery finished is deleted all the same.
			_ = m.invoke(ctx, dups, counts)
		}
	}
	var ok []sqstypes.Message
	for _, msg := range deliver {
		id := aws.ToString(msg.MessageId)
		if !failed[id] {
			ok = append(ok, msg)
			continue
		}
		if m.cfg.MaxReceiveCount > 0 && counts[id] >= m.cfg.MaxReceiveCount {
			m.moveToDLQ(ctx, msg)
		}
	}
	m.delete(ctx, ok)
}

// invoke calls the function with msgs and returns the ids that failed.
func (m *Mapping) invoke(ctx context.Context, msgs []sqstypes.Message, counts map[string]int) map[string]bool {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	all := make(map[string]bool, len(msgs))
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		all[id] = true
		attrs := make(map[string]string, len(msg.Attributes)+1)
		for k, v := range msg.Attributes {
			attrs[k] = v
		}
		attrs["ApproximateReceiveCount"] = strconv.Itoa(counts[id])
		rec := events.SQSMessage{
			MessageId:              id,
			ReceiptHandle:          aws.ToString(msg.ReceiptHandle),
			Body:                   aws.ToString(msg.Body),
			Md5OfBody:              aws.ToString(msg.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(msg.MD5OfMessageAttributes),
			Attributes:             attrs,
			EventSourceARN:         m.cfg.QueueARN,
			EventSource:            "aws:sqs",
			AWSRegion:              m.cfg.Region,
		}
		if len(msg.MessageAttributes) > 0 {
			rec.MessageAttributes = make(map[string]events.SQSMessageAttribute, len(msg.MessageAttributes))
			for k, v := range msg.MessageAttributes {
				rec.MessageAttributes[k] = events.SQSMessageAttribute{
					StringValue: v.StringValue, BinaryValue: v.BinaryValue,
					StringListValues: v.StringListValues, BinaryListValues: v.BinaryListValues,
					DataType: aws.ToString(v.DataType),
				}
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		m.log.Error("encode event", "error", err.Error())
		return all
	}
	m.mu.Lock()
	m.stats.Invocations++
	m.mu.Unlock()
	out, fnErr, err := m.invoker.Invoke(ctx, m.cfg.Function, payload)
	if err != nil || fnErr {
		m.mu.Lock()
		m.stats.FunctionErrors++
		m.mu.Unlock()
		if err != nil {
			m.log.Warn("invocation failed", "records", len(msgs), "error", err.Error())
		} else {
			m.log.Warn("function error", "records", len(msgs), "error", errorType(out))
		}
		return all
	}
	if !m.cfg.ReportBatchItemFailures {
		return map[string]bool{}
	}
	var resp events.SQSEventResponse
	if len(out) > 0 && string(out) != "null" {
		if err := json.Unmarshal(out, &resp); err != nil {
			// Lambda treats an unparsable partial batch response as a
			// complete failure.
			m.log.Warn("invalid batch response", "error", err.Error())
			return all
		}
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if !all[f.ItemIdentifier] {
			// An empty or unknown identifier fails the whole batch.
			m.log.Warn("batch response names an unknown record")
			return all
		}
		failed[f.ItemIdentifier] = true
	}
	m.mu.Lock()
	m.stats.ItemFailures += int64(len(failed))
	m.mu.Unlock()
	return failed
}

func errorType(out []byte) string {
	var e struct {
		ErrorType string `json:"errorType"`
	}
	_ = json.Unmarshal(out, &e)
	return e.ErrorType
}

func (m *Mapping) delete(ctx context.Context, msgs []sqstypes.Message) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(msgs))
	for i, msg := range msgs {
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle,
		})
	}
	out, err := m.client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{
		QueueUrl: aws.String(m.cfg.QueueURL), Entries: entries,
	})
	if err != nil {
		m.log.Warn("delete batch failed", "records", len(msgs), "error", err.Error())
		return
	}
	m.mu.Lock()
	m.stats.Deleted += int64(len(out.Successful))
	for _, msg := range msgs {
		delete(m.receives, aws.ToString(msg.MessageId))
	}
	m.mu.Unlock()
	if len(out.Failed) > 0 {
		m.log.Warn("delete batch partly failed", "failed", len(out.Failed))
	}
}

// moveToDLQ copies msg to the dead-letter queue and deletes it from the
// source, as SQS's redrive does.
func (m *Mapping) moveToDLQ(ctx context.Context, msg sqstypes.Message) {
	ctx = context.WithoutCancel(ctx)
	id := aws.ToString(msg.MessageId)
	in := &sqs.SendMessageInput{QueueUrl: aws.String(m.cfg.DLQURL), MessageBody: msg.Body}
	if len(msg.MessageAttributes) > 0 {
		in.MessageAttributes = msg.MessageAttributes
	}
	redrive := m.client
	if m.cfg.Redrive != nil {
		redrive = m.cfg.Redrive
	}
	if _, err := redrive.SendMessage(ctx, in); err != nil {
		m.log.Warn("redrive to DLQ failed", "messageId", id, "error", err.Error())
		return
	}
	if _, err := redrive.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl: aws.String(m.cfg.QueueURL), ReceiptHandle: msg.ReceiptHandle,
	}); err != nil {
		m.log.Warn("delete after redrive failed", "messageId", id, "error", err.Error())
	}
	m.mu.Lock()
	m.stats.MovedToDLQ++
	delete(m.receives, id)
	m.mu.Unlock()
	m.log.Info("moved to DLQ", "messageId", id)
}

// Func adapts a Handler to an Invoker that accepts any function name and
// invokes h through lambda.NewHandler, so the JSON path is Lambda's own.
func Func(h Handler) Invoker { return funcInvoker{lambda.NewHandler(h)} }

type funcInvoker struct{ h lambda.Handler }

func (f funcInvoker) Invoke(ctx context.Context, _ string, payload []byte) ([]byte, bool, error) {
	out, err := f.h.Invoke(ctx, payload)
	if err != nil {
		b, _ := json.Marshal(map[string]string{"errorType": "error", "errorMessage": err.Error()})
		return b, true, nil
	}
	return out, false, nil
}
