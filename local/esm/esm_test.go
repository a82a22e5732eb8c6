package esm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// recorder is a handler that records every delivery and fails according to
// a rule.
type recorder struct {
	mu         sync.Mutex
	deliveries map[string]int    // body → deliveries
	counts     map[string]string // body → last ApproximateReceiveCount seen
	at         map[string]time.Time
	fail       func(body string, delivery int) bool
	failAll    func(invocation int) bool
	invocation int
}

func newRecorder() *recorder {
	return &recorder{deliveries: map[string]int{}, counts: map[string]string{}, at: map[string]time.Time{}}
}

func (r *recorder) handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.invocation++
	var resp events.SQSEventResponse
	for _, rec := range ev.Records {
		r.deliveries[rec.Body]++
		r.counts[rec.Body] = rec.Attributes["ApproximateReceiveCount"]
		if _, ok := r.at[rec.Body]; !ok {
			r.at[rec.Body] = time.Now()
		}
		if r.fail != nil && r.fail(rec.Body, r.deliveries[rec.Body]) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	if r.failAll != nil && r.failAll(r.invocation) {
		return events.SQSEventResponse{}, errors.New("handler failed")
	}
	return resp, nil
}

func (r *recorder) delivered(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveries[body]
}

type fixture struct {
	ctx    context.Context
	client *sqs.Client
	queue  string
	dlq    string
}

var queueSeq int

func setup(t *testing.T) fixture {
	t.Helper()
	env := localawstest.Start(t)
	client := sqs.NewFromConfig(env.Config())
	ctx := context.Background()
	queueSeq++
	name := fmt.Sprintf("esm-%s-%d-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano(), queueSeq)
	if len(name) > 70 {
		name = name[len(name)-70:]
	}
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	d, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatalf("create dlq: %v", err)
	}
	return fixture{ctx: ctx, client: client, queue: aws.ToString(q.QueueUrl), dlq: aws.ToString(d.QueueUrl)}
}

func (f fixture) send(t *testing.T, body string, delay int32) {
	t.Helper()
	if _, err := f.client.SendMessage(f.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(f.queue), MessageBody: aws.String(body), DelaySeconds: delay}); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (f fixture) start(t *testing.T, h Handler, mutate func(*Config)) *Mapping {
	t.Helper()
	cfg := Config{
		Function: "fn", QueueURL: f.queue, QueueARN: "arn:aws:sqs:us-east-1:000000000000:q", Region: "us-east-1",
		BatchSize: 10, VisibilityTimeout: time.Second, WaitTime: time.Second, ReportBatchItemFailures: true,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := New(f.client, Func(h), cfg)
	if err != nil {
		t.Fatalf("new mapping: %v", err)
	}
	m.Start(f.ctx)
	t.Cleanup(m.Stop)
	return m
}

// queueEmpty reports whether the queue holds no message, visible or not.
func (f fixture) queueEmpty(t *testing.T, url string) bool {
	t.Helper()
	out, err := f.client.GetQueueAttributes(f.ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

// eventually polls cond until it holds; the bound only stops a broken test.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPartialBatchFailureRedeliversOnlyTheFailedRecords(t *testing.T) {
	f := setup(t)
	for _, b := range []string{"a", "b", "bad", "c"} {
		f.send(t, b, 0)
	}
	r := newRecorder()
	r.fail = func(body string, delivery int) bool { return body == "bad" && delivery == 1 }
	m := f.start(t, r.handle, nil)

	eventually(t, "bad redelivered", func() bool { return r.delivered("bad") == 2 })
	eventually(t, "queue drained", func() bool { return f.queueEmpty(t, f.queue) })
	for _, b := range []string{"a", "b", "c"} {
		if got := r.delivered(b); got != 1 {
			t.Errorf("%s delivered %d times, want 1", b, got)
		}
	}
	r.mu.Lock()
	if r.counts["bad"] != "2" {
		t.Errorf("ApproximateReceiveCount on redelivery = %q, want 2", r.counts["bad"])
	}
	r.mu.Unlock()
	if st := m.Stats(); st.ItemFailures != 1 || st.Deleted != 4 {
		t.Errorf("stats = %+v, want 1 item failure and 4 deletes", st)
	}
}

func TestHandlerErrorRedeliversTheWholeBatch(t *testing.T) {
	f := setup(t)
	for _, b := range []string{"x", "y", "z"} {
		f.send(t, b, 0)
	}
	r := newRecorder()
	r.failAll = func(invocation int) bool { return invocation == 1 }
	// BatchSize 10 with three messages sent first: the first receive may
	// still split them, so count deliveries per body rather than batches.
	m := f.start(t, r.handle, nil)

	eventually(t, "queue drained", func() bool { return f.queueEmpty(t, f.queue) })
	total := 0
	for _, b := range []string{"x", "y", "z"} {
		n := r.delivered(b)
		if n < 1 || n > 2 {
			t.Errorf("%s delivered %d times", b, n)
		}
		total += n
	}
	st := m.Stats()
	if st.FunctionErrors != 1 {
		t.Errorf("function errors = %d, want 1", st.FunctionErrors)
	}
	// Every record of the failed invocation came back once more.
	if int64(total) != st.Messages || st.Deleted != 3 {
		t.Errorf("deliveries %d, stats %+v", total, st)
	}
	if total == 3 {
		t.Errorf("no record was redelivered after the handler error")
	}
}

func TestMessageMovesToDLQAfterMaxReceiveCount(t *testing.T) {
	f := setup(t)
	f.send(t, "poison", 0)
	f.send(t, "fine", 0)
	r := newRecorder()
	r.fail = func(body string, _ int) bool { return body == "poison" }
	m := f.start(t, r.handle, func(c *Config) { c.DLQURL = f.dlq; c.MaxReceiveCount = 3 })

	eventually(t, "source drained", func() bool { return f.queueEmpty(t, f.queue) })
	if got := r.delivered("poison"); got != 3 {
		t.Errorf("poison delivered %d times, want maxReceiveCount=3", got)
	}
	if got := r.delivered("fine"); got != 1 {
		t.Errorf("fine delivered %d times, want 1", got)
	}
	out, err := f.client.ReceiveMessage(f.ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(f.dlq), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatalf("receive dlq: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "poison" {
		t.Fatalf("DLQ holds %d messages, want the poison one", len(out.Messages))
	}
	if st := m.Stats(); st.MovedToDLQ != 1 {
		t.Errorf("movedToDLQ = %d, want 1", st.MovedToDLQ)
	}
}

func TestDelayedMessageIsDeliveredAfterItsDelay(t *testing.T) {
	f := setup(t)
	r := newRecorder()
	f.start(t, r.handle, nil)
	sent := time.Now()
	f.send(t, "later", 2)
	f.send(t, "now", 0)

	eventually(t, "delayed message delivered", func() bool { return r.delivered("later") == 1 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if waited := r.at["later"].Sub(sent); waited < 2*time.Second {
		t.Errorf("delayed message delivered after %v, before its 2 s delay", waited)
	}
	if r.deliveries["now"] != 1 {
		t.Errorf("undelayed message delivered %d times", r.deliveries["now"])
	}
}

type dupAll struct{}

func (dupAll) DuplicateDelivery(string, string) bool { return true }

func TestInjectedDuplicateDeliversTwiceAndDeletesOnce(t *testing.T) {
	f := setup(t)
	f.send(t, "once", 0)
	r := newRecorder()
	m := f.start(t, r.handle, func(c *Config) { c.Faults = dupAll{} })
	eventually(t, "queue drained", func() bool { return f.queueEmpty(t, f.queue) })
	if got := r.delivered("once"); got != 2 {
		t.Errorf("delivered %d times, want 2 (one injected duplicate)", got)
	}
	if st := m.Stats(); st.Duplicates != 1 || st.Deleted != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	client := sqs.NewFromConfig(aws.Config{Region: "us-east-1"})
	inv := Func(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	})
	for name, cfg := range map[string]Config{
		"no queue":      {Function: "f"},
		"batch too big": {Function: "f", QueueURL: "u", BatchSize: 11},
		"dlq missing":   {Function: "f", QueueURL: "u", MaxReceiveCount: 2},
	} {
		if _, err := New(client, inv, cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
