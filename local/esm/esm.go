// Package esm is the local SQS event-source mapping: what AWS Lambda's poller
// does between an SQS queue and a function, run in-process against the real
// SQS client pointed at the local endpoint.
//
// A Mapping's pollers receive from the queue (at most 10 messages a
// ReceiveMessage, SQS's limit), gather a batch — up to BatchSize records
// within MaximumBatchingWindow (or LowTrafficWait, Lambda's wait at very low
// traffic), and never more than Lambda's 6 MB
// invocation payload — and invoke the function with an events.SQSEvent
// through an Invoker (Lambda's JSON path). They delete the records that
// succeeded and leave the others — the BatchItemFailures of a partial batch
// response, or every record when the function errors — to reappear after
// the visibility timeout. goaws reports ApproximateReceiveCount as 1
// forever, so the mapping counts receives per message id itself and moves a
// message to the dead-letter queue once it has been received
// MaxReceiveCount times without success, the way an SQS redrive policy
// does. docs/LOCAL.md ("SQS event-source mappings") says which of this AWS
// documents and which is modelled.
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

	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
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
	// BatchSize is the most records per invocation, 1–10,000 (default 10);
	// above 10 it needs a MaximumBatchingWindow of at least a second, as
	// Lambda's CreateEventSourceMapping does.
	BatchSize int
	// MaximumBatchingWindow is how long a poller gathers a batch, whole
	// seconds 0–300 (MaximumBatchingWindowInSeconds; default 0). With 0 a
	// poller invokes the function with what one receive returned; with a
	// window it receives again until the batch has BatchSize records or the
	// window has passed since the batch's first message (its receipt, or
	// for a message carried over from a full batch the start of the next
	// one). Either way a message that would take the payload past
	// MaxPayloadBytes ends the batch and starts the poller's next one. The
	// window must be shorter than VisibilityTimeout, so that every message
	// is still hidden when its batch is invoked.
	MaximumBatchingWindow time.Duration
	// LowTrafficWait models what Lambda says of a mapping with a batching
	// window on a queue with very low traffic: it "might wait for up to 20
	// seconds before invoking your function … even if you set a batch window
	// lower than 20 seconds" (VeryLowTrafficWait). With a window, a batch
	// whose first message came after a receive that found the queue empty
	// (a whole long poll without a message: very low traffic, as modelled
	// here) is invoked when it is full or LowTrafficWait after that message,
	// whichever comes first, when that is later than the window. AWS
	// names no threshold for "very low"; the mapping takes the longest wait
	// it allows. 0: not modelled; no effect without a window.
	LowTrafficWait time.Duration
	// VisibilityTimeout is requested on every receive; it is rounded up to
	// whole seconds (default 30 s). AWS recommends 6 × the function's
	// timeout, plus the batching window.
	VisibilityTimeout time.Duration
	// FunctionTimeout, when set, is the function's timeout: New refuses a
	// VisibilityTimeout shorter than it, as Lambda's CreateEventSourceMapping
	// does. 0 skips the check (tests that shorten the visibility timeout
	// and keep the deployed function timeouts).
	FunctionTimeout time.Duration
	// WaitTime is the long-poll wait of one ReceiveMessage, whole seconds
	// 1–20 (default 1 s). Lambda's pollers wait 20 s (LambdaLongPoll);
	// Stop cancels a receive in flight either way.
	WaitTime time.Duration
	// Pollers is the number of concurrent pollers, each gathering its own
	// batches and invoking the function with them, one at a time
	// (default 1). Lambda starts a standard queue's mapping with five.
	Pollers int
	// MaxPollers, when above Pollers, lets the mapping scale with the
	// backlog as Lambda's does, up to the mapping's MaximumConcurrency:
	// while a receive comes back full (messages are still waiting) it adds
	// a poller, at most one every ScaleUpEvery (Lambda's "up to 300 more
	// instances per minute"); a poller above Pollers stops after a receive
	// that found nothing ("When traffic is low, Lambda scales back the
	// processing to five concurrent batches"). 0: Pollers, fixed.
	MaxPollers int
	// ReportBatchItemFailures makes the mapping honour the function's
	// BatchItemFailures; without it a successful invocation deletes the
	// whole batch. Mappings built by the stack always set it.
	ReportBatchItemFailures bool
	// Faults, if set, injects duplicate deliveries.
	Faults Faults
	// Logger receives ids and counts only; default slog.Default().
	Logger *slog.Logger
}

// Limits of an SQS event-source mapping on a standard queue, as Lambda
// documents them (docs/LOCAL.md, "SQS event-source mappings").
const (
	// MaxBatchSize is the largest BatchSize; above
	// MaxBatchSizeWithoutWindow a mapping needs a batching window of at
	// least a second.
	MaxBatchSize              = 10000
	MaxBatchSizeWithoutWindow = 10
	// MaxBatchingWindow is the longest MaximumBatchingWindow.
	MaxBatchingWindow = 300 * time.Second
	// ScaleUpEvery is the shortest time between two pollers added to a
	// scaling mapping: 300 a minute.
	ScaleUpEvery = time.Minute / 300
	// MaxConcurrency is the most batches an SQS mapping processes at once
	// (MaximumConcurrency's maximum).
	MaxConcurrency = 1000
	// MaxPayloadBytes is the most bytes of one invocation's payload (the
	// events.SQSEvent JSON): Lambda's 6 MB for synchronous invocations,
	// read as 6,000,000 bytes, the lesser of the two readings of "MB", so
	// that a batch that fits here fits in AWS.
	MaxPayloadBytes = 6_000_000
)

// VeryLowTrafficWait is the longest Lambda says a mapping with a batching
// window may wait before it invokes when the queue's traffic is very low
// ("Using Lambda with Amazon SQS"; Config.LowTrafficWait).
const VeryLowTrafficWait = 20 * time.Second

// LambdaLongPoll is the long-poll wait of Lambda's SQS pollers, SQS's
// longest (docs/LOCAL.md, "SQS event-source mappings").
const LambdaLongPoll = 20 * time.Second

// maxReceive is SQS's largest MaxNumberOfMessages of one ReceiveMessage.
const maxReceive = 10

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
	PeakPollers    int64 `json:"peakPollers"`    // the most pollers at once
	// LowTrafficBatches are the batches that gathered for Config.LowTrafficWait
	// (their first message came after an empty long poll) rather than the
	// window; a batch that filled first was invoked then.
	LowTrafficBatches int64 `json:"lowTrafficBatches"`
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
	pollers  int       // running
	added    time.Time // when the last poller was added by scaling

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
		cfg.BatchSize = MaxBatchSizeWithoutWindow
	}
	if cfg.VisibilityTimeout <= 0 {
		cfg.VisibilityTimeout = 30 * time.Second
	}
	if err := checkBatching(cfg); err != nil {
		return nil, fmt.Errorf("esm %s: %w", cfg.Function, err)
	}
	if vis, fn := seconds(cfg.VisibilityTimeout), seconds(cfg.FunctionTimeout); cfg.FunctionTimeout > 0 && vis < fn {
		// Lambda's words ("Creating and configuring an Amazon SQS event
		// source mapping": "Lambda validates this requirement when you
		// create or update an event source mapping").
		return nil, fmt.Errorf("esm %s: InvalidParameterValueException: Queue visibility timeout: %d seconds is less than Function timeout: %d seconds",
			cfg.Function, vis, fn)
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
	if cfg.MaxPollers > MaxConcurrency {
		return nil, fmt.Errorf("esm %s: MaxPollers %d above %d, the most an SQS mapping processes at once", cfg.Function, cfg.MaxPollers, MaxConcurrency)
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

// checkBatching refuses the batch size and window Lambda refuses, and a
// window that outlasts the visibility timeout.
func checkBatching(cfg Config) error {
	w := cfg.MaximumBatchingWindow
	switch {
	case cfg.BatchSize > MaxBatchSize:
		return fmt.Errorf("BatchSize %d above %d, the most for a standard queue", cfg.BatchSize, MaxBatchSize)
	case w < 0 || w > MaxBatchingWindow:
		return fmt.Errorf("MaximumBatchingWindow %s outside 0–%s", w, MaxBatchingWindow)
	case w%time.Second != 0:
		return fmt.Errorf("MaximumBatchingWindow %s is not whole seconds (MaximumBatchingWindowInSeconds)", w)
	case cfg.BatchSize > MaxBatchSizeWithoutWindow && w < time.Second:
		return fmt.Errorf("BatchSize %d above %d needs a MaximumBatchingWindow of at least 1s", cfg.BatchSize, MaxBatchSizeWithoutWindow)
	case cfg.LowTrafficWait < 0:
		return fmt.Errorf("LowTrafficWait %s is negative", cfg.LowTrafficWait)
	case w > 0 && max(w, cfg.LowTrafficWait) >= time.Duration(seconds(cfg.VisibilityTimeout))*time.Second:
		// AWS accepts it and lengthens the messages' visibility instead;
		// the mapping does not model that.
		what := fmt.Sprintf("MaximumBatchingWindow %s", w)
		if cfg.LowTrafficWait > w {
			what = fmt.Sprintf("LowTrafficWait %s (with a window)", cfg.LowTrafficWait)
		}
		return fmt.Errorf("%s not shorter than VisibilityTimeout %s: a batch's first messages would reappear before its invocation (AWS recommends a visibility timeout of 6 × the function timeout plus the window)",
			what, cfg.VisibilityTimeout)
	}
	return nil
}

// Start runs the pollers until ctx is done or Stop is called.
func (m *Mapping) Start(ctx context.Context) {
	ctx, m.cancel = context.WithCancel(ctx)
	for i := 0; i < m.cfg.Pollers; i++ {
		m.startPoller(ctx, false)
	}
}

// startPoller counts and runs one more poller.
func (m *Mapping) startPoller(ctx context.Context, extra bool) {
	m.mu.Lock()
	m.countPoller()
	m.mu.Unlock()
	m.runPoller(ctx, extra)
}

// countPoller counts a poller about to run; m.mu is held.
func (m *Mapping) countPoller() {
	m.pollers++
	m.stats.PeakPollers = max(m.stats.PeakPollers, int64(m.pollers))
}

// runPoller runs a counted poller; an extra one (above Pollers) stops when a
// receive finds the queue empty.
func (m *Mapping) runPoller(ctx context.Context, extra bool) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.poll(ctx, extra)
		m.mu.Lock()
		m.pollers--
		m.mu.Unlock()
	}()
}

// scaleUp adds a poller when the mapping scales, is below MaxPollers and
// added none in the last ScaleUpEvery: a receive came back full. The check
// and the count are one step, so the mapping never runs more than MaxPollers.
func (m *Mapping) scaleUp(ctx context.Context) {
	if m.cfg.MaxPollers <= m.cfg.Pollers || ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	now := time.Now()
	ok := m.pollers < m.cfg.MaxPollers && now.Sub(m.added) >= ScaleUpEvery
	if ok {
		m.added = now
		m.countPoller()
	}
	m.mu.Unlock()
	if ok {
		m.runPoller(ctx, true)
	}
}

// Stop cancels the pollers and waits for the invocations in flight. A batch
// still being gathered is not invoked: its messages reappear after their
// visibility timeout.
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

// Pollers returns how many pollers are running.
func (m *Mapping) Pollers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pollers
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

// pending is a received message on its way to an invocation.
type pending struct {
	msg   sqstypes.Message
	count int    // receives of its message id, this one included
	rec   []byte // its record, as the invocation's payload carries it
}

func (p pending) id() string { return aws.ToString(p.msg.MessageId) }

// emptyPayload is the size of an events.SQSEvent without records; each
// record adds its own size and, after the first, a comma.
const emptyPayload = len(`{"Records":[]}`)

// batch is what a poller gathers for one invocation.
type batch struct {
	msgs  []pending
	bytes int // the payload's size with these records
}

// add appends p unless the payload would grow past MaxPayloadBytes. An
// empty batch takes any message (SQS's 1 MiB message limit keeps a record
// far below the payload limit).
func (b *batch) add(p pending) bool {
	if len(b.msgs) == 0 {
		b.msgs, b.bytes = append(b.msgs, p), emptyPayload+len(p.rec)
		return true
	}
	n := b.bytes + 1 + len(p.rec)
	if n > MaxPayloadBytes {
		return false
	}
	b.msgs, b.bytes = append(b.msgs, p), n
	return true
}

// payload is the JSON events.SQSEvent of ps, as encoding/json writes it.
func payload(ps []pending) []byte {
	n := emptyPayload + len(ps)
	for _, p := range ps {
		n += len(p.rec)
	}
	buf := make([]byte, 0, n)
	buf = append(buf, `{"Records":[`...)
	for i, p := range ps {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, p.rec...)
	}
	return append(buf, "]}"...)
}

// poll gathers batches and invokes the function with each, one at a time,
// until ctx is done — or, for an extra poller, until a receive finds
// nothing. Messages a full batch could not take (the payload limit) start
// the next one.
func (m *Mapping) poll(ctx context.Context, extra bool) {
	var carry []pending
	for ctx.Err() == nil {
		var b batch
		for len(carry) > 0 && len(b.msgs) < m.cfg.BatchSize && b.add(carry[0]) {
			carry = carry[1:]
		}
		var ok bool
		if carry, ok = m.gather(ctx, &b, carry, extra); !ok {
			// Stopped: what was gathered is not invoked; its messages
			// reappear after their visibility timeout.
			return
		}
		if extra && len(b.msgs) == 0 && len(carry) == 0 {
			return // it found the queue empty
		}
		if len(b.msgs) > 0 {
			m.handleBatch(ctx, b.msgs)
		}
	}
}

// gather receives into b until it is full — BatchSize records, or a
// message that would take the payload past MaxPayloadBytes, which is
// returned with the rest of its receive to start the next batch — or its
// window has passed since its first message. Without a window one receive
// that yields messages ends it. Within the window a poller long-polls while
// a second or more is left (ReceiveMessage waits whole seconds), polls
// again at once while a receive comes back full, and otherwise waits out
// the window and then polls once more without waiting. A batch whose first
// message came after an empty long poll gathers for LowTrafficWait rather
// than the window, when that is longer (firstWait). A receive that comes
// back full lets a scaling mapping add a poller (scaleUp). An extra poller
// whose batch is empty returns it empty after a receive that found nothing.
// ok is false when ctx ended.
func (m *Mapping) gather(ctx context.Context, b *batch, carry []pending, extra bool) (rest []pending, ok bool) {
	window := m.cfg.MaximumBatchingWindow
	if len(carry) > 0 {
		return carry, true // full: the next message does not fit
	}
	var deadline time.Time
	if len(b.msgs) > 0 {
		deadline = time.Now().Add(window)
	}
	delay := 100 * time.Millisecond
	lastFull := false
	idle := false // the last receive was a whole long poll that found nothing
	for len(b.msgs) < m.cfg.BatchSize {
		wait := seconds(m.cfg.WaitTime)
		if len(b.msgs) > 0 {
			left := time.Until(deadline)
			switch {
			case window == 0:
				return nil, true
			case lastFull:
				wait = 0 // more are waiting: take them now
			case left <= 0:
				return nil, true
			case left >= time.Second:
				wait = min(wait, int32(left/time.Second))
			default:
				if backoff.Sleep(ctx, left) != nil {
					return nil, false
				}
				wait = 0
			}
		}
		n := min(maxReceive, m.cfg.BatchSize-len(b.msgs))
		polled := time.Now()
		msgs, err := m.receive(ctx, n, wait)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			m.log.Warn("receive failed", "queue", m.cfg.QueueURL, "error", err.Error())
			if backoff.Sleep(ctx, delay) != nil {
				return nil, false
			}
			if delay < 2*time.Second {
				delay *= 2
			}
			lastFull = false
			continue
		}
		delay = 100 * time.Millisecond
		lastFull = len(msgs) == n
		if len(msgs) == maxReceive {
			m.scaleUp(ctx)
		}
		if len(msgs) == 0 {
			if extra && len(b.msgs) == 0 {
				return nil, true
			}
			// A whole long poll without a message: very low traffic.
			idle = len(b.msgs) == 0 && wait > 0 && time.Since(polled) >= time.Duration(wait)*time.Second
			// goaws can answer empty at once while a delayed message falls
			// due (its readiness test is strict); a short pause keeps this
			// loop from spinning, which would also freeze a synctest fake
			// clock (local/sim), since that moves only when all goroutines wait.
			pause := emptyReceivePause
			if len(b.msgs) > 0 {
				pause = min(pause, time.Until(deadline))
			}
			if backoff.Sleep(ctx, pause) != nil {
				return nil, false
			}
			continue
		}
		ps := m.admit(ctx, msgs)
		for i, p := range ps {
			if len(b.msgs) == 0 {
				deadline = time.Now().Add(m.firstWait(idle))
			}
			if !b.add(p) {
				return ps[i:], true
			}
		}
	}
	return nil, true
}

// firstWait is how long a batch may gather from its first message: the
// window, or LowTrafficWait when that is longer and the receive before the
// message found the queue empty (idle; counted in LowTrafficBatches).
func (m *Mapping) firstWait(idle bool) time.Duration {
	w := m.cfg.MaximumBatchingWindow
	if !idle || w == 0 || m.cfg.LowTrafficWait <= w {
		return w
	}
	m.mu.Lock()
	m.stats.LowTrafficBatches++
	m.mu.Unlock()
	return m.cfg.LowTrafficWait
}

// receive makes one ReceiveMessage call for up to n messages, waiting up
// to wait seconds. A wait of 0 is left out of the request, so the queue's
// ReceiveMessageWaitTimeSeconds applies: 0 on the stack's queues.
func (m *Mapping) receive(ctx context.Context, n int, wait int32) ([]sqstypes.Message, error) {
	out, err := m.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(m.cfg.QueueURL),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           seconds(m.cfg.VisibilityTimeout),
		WaitTimeSeconds:             wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("receive: %w", err)
	}
	return out.Messages, nil
}

// admit counts one receive that returned msgs: each message's receive
// count and the stats. A message received more than MaxReceiveCount times
// (its visibility ran out while a slow invocation held it) goes to the
// DLQ instead, as SQS's redrive does; the others come back with their
// records.
func (m *Mapping) admit(ctx context.Context, msgs []sqstypes.Message) []pending {
	ps := make([]pending, 0, len(msgs))
	m.mu.Lock()
	m.stats.Receives++
	for _, msg := range msgs {
		id := aws.ToString(msg.MessageId)
		m.receives[id]++
		ps = append(ps, pending{msg: msg, count: m.receives[id]})
		m.stats.Messages++
	}
	m.mu.Unlock()
	out := ps[:0]
	for _, p := range ps {
		if m.cfg.MaxReceiveCount > 0 && p.count > m.cfg.MaxReceiveCount {
			m.moveToDLQ(ctx, p.msg)
			continue
		}
		rec, err := json.Marshal(m.record(p))
		if err != nil {
			// Left to reappear after its visibility timeout, as a failed
			// invocation leaves it.
			m.log.Error("encode record", "messageId", p.id(), "error", err.Error())
			continue
		}
		p.rec = rec
		out = append(out, p)
	}
	return out
}

// record is p as Lambda passes it to the function.
func (m *Mapping) record(p pending) events.SQSMessage {
	msg := p.msg
	attrs := make(map[string]string, len(msg.Attributes)+1)
	for k, v := range msg.Attributes {
		attrs[k] = v
	}
	attrs["ApproximateReceiveCount"] = strconv.Itoa(p.count)
	rec := events.SQSMessage{
		MessageId:              p.id(),
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
	return rec
}

// handleBatch invokes the function with one gathered batch, deletes the
// records that succeeded and moves those that failed their last receive to
// the DLQ.
func (m *Mapping) handleBatch(ctx context.Context, ps []pending) {
	failed := m.invoke(ctx, ps)
	if m.cfg.Faults != nil {
		var dups []pending
		for _, p := range ps {
			if m.cfg.Faults.DuplicateDelivery(m.cfg.QueueURL, p.id()) {
				dups = append(dups, p)
			}
		}
		if len(dups) > 0 {
			m.mu.Lock()
			m.stats.Duplicates += int64(len(dups))
			m.mu.Unlock()
			// A duplicate's outcome does not change the first delivery's:
			// a record the first delivery finished is deleted all the same.
			_ = m.invoke(ctx, dups)
		}
	}
	var ok []pending
	for _, p := range ps {
		if !failed[p.id()] {
			ok = append(ok, p)
			continue
		}
		if m.cfg.MaxReceiveCount > 0 && p.count >= m.cfg.MaxReceiveCount {
			m.moveToDLQ(ctx, p.msg)
		}
	}
	m.delete(ctx, ok)
}

// invoke calls the function with ps and returns the ids that failed.
func (m *Mapping) invoke(ctx context.Context, ps []pending) map[string]bool {
	all := make(map[string]bool, len(ps))
	for _, p := range ps {
		all[p.id()] = true
	}
	m.mu.Lock()
	m.stats.Invocations++
	m.mu.Unlock()
	out, fnErr, err := m.invoker.Invoke(ctx, m.cfg.Function, payload(ps))
	if err != nil || fnErr {
		m.mu.Lock()
		m.stats.FunctionErrors++
		m.mu.Unlock()
		if err != nil {
			m.log.Warn("invocation failed", "records", len(ps), "error", err.Error())
		} else {
			m.log.Warn("function error", "records", len(ps), "error", errorType(out))
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

// delete deletes ps from the queue, in DeleteMessageBatch calls of at most
// 10 entries (SQS's limit).
func (m *Mapping) delete(ctx context.Context, ps []pending) {
	for len(ps) > 0 {
		n := min(len(ps), maxReceive)
		m.deleteBatch(ctx, ps[:n])
		ps = ps[n:]
	}
}

func (m *Mapping) deleteBatch(ctx context.Context, ps []pending) {
	entries := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(ps))
	for i, p := range ps {
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), ReceiptHandle: p.msg.ReceiptHandle,
		})
	}
	out, err := m.client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{
		QueueUrl: aws.String(m.cfg.QueueURL), Entries: entries,
	})
	if err != nil {
		m.log.Warn("delete batch failed", "records", len(ps), "error", err.Error())
		return
	}
	m.mu.Lock()
	m.stats.Deleted += int64(len(out.Successful))
	for _, p := range ps {
		delete(m.receives, p.id())
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
