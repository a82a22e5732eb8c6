package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	batches    []int             // records per invocation
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
	r.batches = append(r.batches, len(ev.Records))
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

// queueSeq numbers the queues of tests that may run in parallel.
var queueSeq atomic.Int64

func setup(t *testing.T) fixture {
	t.Helper()
	env := localawstest.Start(t)
	client := sqs.NewFromConfig(env.Config())
	ctx := context.Background()
	name := fmt.Sprintf("esm-%s-%d-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano(), queueSeq.Add(1))
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
	return f.startInvoker(t, Func(h), mutate)
}

func (f fixture) startInvoker(t *testing.T, inv Invoker, mutate func(*Config)) *Mapping {
	t.Helper()
	cfg := Config{
		Function: "fn", QueueURL: f.queue, QueueARN: "arn:aws:sqs:us-east-1:000000000000:q", Region: "us-east-1",
		BatchSize: 10, VisibilityTimeout: time.Second, WaitTime: time.Second, ReportBatchItemFailures: true,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := New(f.client, inv, cfg)
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

// drained waits until the queue holds no message and the mapping has
// counted deleted deletes: it counts them once DeleteMessageBatch has
// answered, which may be after the queue already shows them gone.
func (f fixture) drained(t *testing.T, m *Mapping, deleted int64) {
	t.Helper()
	eventually(t, "queue drained", func() bool { return f.queueEmpty(t, f.queue) })
	eventually(t, "deletes counted", func() bool { return m.Stats().Deleted >= deleted })
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
	f.drained(t, m, 4)
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

	f.drained(t, m, 3)
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
	// The mapping counts the move once the source's DeleteMessage has
	// answered, which may be after the queue already shows it gone.
	eventually(t, "the move counted", func() bool { return m.Stats().MovedToDLQ >= 1 })
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
	f.drained(t, m, 1)
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
	base := Config{Function: "f", QueueURL: "u", VisibilityTimeout: time.Minute}
	with := func(f func(*Config)) Config {
		c := base
		f(&c)
		return c
	}
	for name, c := range map[string]struct {
		cfg  Config
		want string // in the error
	}{
		"no queue":                      {Config{Function: "f"}, "QueueURL"},
		"dlq missing":                   {with(func(c *Config) { c.MaxReceiveCount = 2 }), "DLQURL"},
		"batch above 10 without window": {with(func(c *Config) { c.BatchSize = 11 }), "BatchSize 11 above 10 needs a MaximumBatchingWindow"},
		"batch above 10 with 0.5 s":     {with(func(c *Config) { c.BatchSize = 100; c.MaximumBatchingWindow = 500 * time.Millisecond }), "not whole seconds"},
		"batch above 10,000":            {with(func(c *Config) { c.BatchSize = 10001; c.MaximumBatchingWindow = time.Second }), "BatchSize 10001 above 10000"},
		"window above 300 s":            {with(func(c *Config) { c.MaximumBatchingWindow = 301 * time.Second; c.VisibilityTimeout = time.Hour }), "outside 0–5m0s"},
		"negative window":               {with(func(c *Config) { c.MaximumBatchingWindow = -time.Second }), "outside 0–5m0s"},
		"fractional window":             {with(func(c *Config) { c.MaximumBatchingWindow = 1500 * time.Millisecond }), "not whole seconds"},
		"window as long as visibility":  {with(func(c *Config) { c.MaximumBatchingWindow = time.Minute }), "not shorter than VisibilityTimeout"},
		"above 1,000 batches at once":   {with(func(c *Config) { c.MaxPollers = 1001 }), "MaxPollers 1001 above 1000"},
		"negative low-traffic wait":     {with(func(c *Config) { c.LowTrafficWait = -time.Second }), "LowTrafficWait -1s is negative"},
		"low-traffic wait past the visibility": {with(func(c *Config) { c.MaximumBatchingWindow = time.Second; c.LowTrafficWait = time.Minute }),
			"not shorter than VisibilityTimeout"},
		"window past default visibility": {Config{Function: "f", QueueURL: "u", MaximumBatchingWindow: 30 * time.Second},
			"not shorter than VisibilityTimeout"},
		"function timeout past the visibility": {with(func(c *Config) { c.FunctionTimeout = 61 * time.Second }),
			"InvalidParameterValueException: Queue visibility timeout: 60 seconds is less than Function timeout: 61 seconds"},
	} {
		_, err := New(client, inv, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New(%+v) = %v, want an error with %q", name, c.cfg, err, c.want)
		}
	}
	for name, cfg := range map[string]Config{
		"the deployed fast path": with(func(c *Config) {
			c.BatchSize, c.MaximumBatchingWindow, c.LowTrafficWait = 100, time.Second, VeryLowTrafficWait
		}),
		"the most": with(func(c *Config) {
			c.BatchSize = MaxBatchSize
			c.MaximumBatchingWindow = MaxBatchingWindow
			c.VisibilityTimeout = time.Hour
		}),
		"10 without window":                          with(func(c *Config) { c.BatchSize = 10 }),
		"function timeout as long as the visibility": with(func(c *Config) { c.FunctionTimeout = time.Minute }),
	} {
		if _, err := New(client, inv, cfg); err != nil {
			t.Errorf("%s: New refused %+v: %v", name, cfg, err)
		}
	}
}

// The payload a mapping assembles from its records is the JSON
// encoding/json writes for the events.SQSEvent, so the size it checks
// against MaxPayloadBytes is the size the function receives.
func TestPayloadIsTheEventsJSON(t *testing.T) {
	m := &Mapping{cfg: Config{QueueARN: "arn:aws:sqs:us-east-1:000000000000:q", Region: "us-east-1"}}
	var ps []pending
	var want events.SQSEvent
	for i, body := range []string{"plain", `{"json":"<b>&amp;</b>"}`, "ünïcødé \u2028"} {
		msg := sqstypes.Message{
			MessageId: aws.String(fmt.Sprintf("id-%d", i)), ReceiptHandle: aws.String("rh"), Body: aws.String(body),
			MD5OfBody: aws.String("md5"), Attributes: map[string]string{"SentTimestamp": "1"},
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"k": {DataType: aws.String("String"), StringValue: aws.String("v")}},
		}
		p := pending{msg: msg, count: i + 1}
		rec := m.record(p)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		p.rec = b
		ps = append(ps, p)
		want.Records = append(want.Records, rec)
		wantJSON, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		var bt batch
		for _, p := range ps {
			bt.add(p)
		}
		if got := payload(ps); string(got) != string(wantJSON) || bt.bytes != len(wantJSON) {
			t.Fatalf("%d records: payload %s (batch counts %d bytes), want %s (%d bytes)", len(ps), got, bt.bytes, wantJSON, len(wantJSON))
		}
	}
}

// With a window a poller receives again (at most 10 messages a receive)
// until the batch has BatchSize records, and invokes then, without waiting
// for the window to pass.
func TestBatchFillsToBatchSizeAcrossReceives(t *testing.T) {
	f := setup(t)
	for i := 0; i < 25; i++ {
		f.send(t, fmt.Sprintf("m%d", i), 0)
	}
	r := newRecorder()
	start := time.Now()
	m := f.start(t, r.handle, func(c *Config) {
		c.BatchSize, c.MaximumBatchingWindow, c.VisibilityTimeout = 25, 20*time.Second, 60*time.Second
	})
	f.drained(t, m, 25)
	took := time.Since(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 1 || r.batches[0] != 25 {
		t.Fatalf("invocations of %v records, want one of 25", r.batches)
	}
	if took >= 20*time.Second {
		t.Errorf("the full batch waited %s, its window (20 s) out", took)
	}
	st := m.Stats()
	if st.Receives < 3 || st.Messages != 25 || st.Invocations != 1 || st.Deleted != 25 {
		t.Errorf("stats %+v: want 25 messages from at least 3 receives, one invocation, 25 deletes", st)
	}
}

// A batch that does not fill is invoked once its window has passed since
// its first message, with what it gathered.
func TestBatchIsInvokedWhenTheWindowPasses(t *testing.T) {
	f := setup(t)
	for _, b := range []string{"a", "b", "c"} {
		f.send(t, b, 0)
	}
	r := newRecorder()
	start := time.Now()
	m := f.start(t, r.handle, func(c *Config) {
		c.BatchSize, c.MaximumBatchingWindow, c.VisibilityTimeout = 100, 2*time.Second, 30*time.Second
	})
	f.drained(t, m, 3)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 1 || r.batches[0] != 3 {
		t.Fatalf("invocations of %v records, want one of 3", r.batches)
	}
	// The first message arrived after Start: the window ends 2 s later at
	// the earliest.
	if waited := r.at["a"].Sub(start); waited < 2*time.Second {
		t.Errorf("invoked %s after the start, before the 2 s window passed", waited)
	}
	if st := m.Stats(); st.Invocations != 1 || st.Deleted != 3 || st.Receives < 1 {
		t.Errorf("stats %+v: want one invocation, 3 deletes", st)
	}
}

// payloadSizes is an Invoker that notes each payload's size.
type payloadSizes struct {
	Invoker
	mu    sync.Mutex
	sizes []int
}

func (p *payloadSizes) Invoke(ctx context.Context, fn string, payload []byte) ([]byte, bool, error) {
	p.mu.Lock()
	p.sizes = append(p.sizes, len(payload))
	p.mu.Unlock()
	return p.Invoker.Invoke(ctx, fn, payload)
}

// Messages that would take a batch past Lambda's 6 MB payload start the
// next batch: every invocation stays within the limit, and every message is
// delivered and deleted once.
func TestPayloadLimitSplitsABatchAndLosesNothing(t *testing.T) {
	f := setup(t)
	if _, err := f.client.SetQueueAttributes(f.ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(f.queue),
		Attributes: map[string]string{"MaximumMessageSize": "1048576"}}); err != nil {
		t.Fatalf("set queue attributes: %v", err)
	}
	const n, size = 12, 1_000_000 // 5 fit in 6 MB with their metadata, 6 do not
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("%02d", i) + strings.Repeat("x", size-2)
		f.send(t, bodies[i], 0)
	}
	r := newRecorder()
	inv := &payloadSizes{Invoker: Func(r.handle)}
	m := f.startInvoker(t, inv, func(c *Config) {
		c.BatchSize, c.MaximumBatchingWindow, c.VisibilityTimeout = 100, 2*time.Second, 60*time.Second
	})
	// The queue is empty once SQS has deleted the last batch, a moment
	// before the mapping counts it.
	eventually(t, "queue drained and its deletes counted", func() bool { return f.queueEmpty(t, f.queue) && m.Stats().Deleted >= n })
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, b := range bodies {
		if got := r.deliveries[b]; got != 1 {
			t.Errorf("message %d delivered %d times, want once", i, got)
		}
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for i, sz := range inv.sizes {
		if sz > MaxPayloadBytes {
			t.Errorf("invocation %d carried %d bytes, more than %d", i, sz, MaxPayloadBytes)
		}
	}
	most := 0
	for _, k := range r.batches {
		most = max(most, k)
	}
	if len(r.batches) < 3 || most != 5 {
		t.Errorf("invocations of %v records: want at least 3, the largest of the 5 that fit", r.batches)
	}
	if st := m.Stats(); st.Messages != n || st.Deleted != n || st.MovedToDLQ != 0 {
		t.Errorf("stats %+v: want %d messages received and deleted once", st, n)
	}
}

// A scaling mapping adds pollers while receives come back full — never
// more than MaxPollers batches at once — and goes back to Pollers once the
// queue is empty; without MaxPollers it keeps the pollers it was given.
func TestMappingScalesWithTheBacklogAndBack(t *testing.T) {
	for _, c := range []struct {
		name              string
		pollers, max, top int
	}{
		{"scaling", 1, 4, 4},
		{"fixed", 2, 0, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := setup(t)
			const n = 300
			for i := 0; i < n; i++ {
				f.send(t, fmt.Sprintf("m%d", i), 0)
			}
			var mu sync.Mutex
			var running, most int
			seen := map[string]int{}
			slow := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				mu.Lock()
				running++
				most = max(most, running)
				for _, r := range ev.Records {
					seen[r.Body]++
				}
				mu.Unlock()
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				running--
				mu.Unlock()
				return events.SQSEventResponse{}, nil
			}
			m := f.start(t, slow, func(cfg *Config) {
				cfg.Pollers, cfg.MaxPollers, cfg.VisibilityTimeout = c.pollers, c.max, 30*time.Second
			})
			f.drained(t, m, n)
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != n {
				t.Fatalf("%d of %d messages delivered", len(seen), n)
			}
			if st := m.Stats(); st.PeakPollers != int64(c.top) || most > c.top {
				t.Errorf("peak pollers %d, most invocations at once %d; want %d, at most %d", st.PeakPollers, most, c.top, c.top)
			}
			eventually(t, "back to the base pollers", func() bool { return m.Pollers() == c.pollers })
		})
	}
}

// With a batching window, a batch whose first message came after a whole
// long poll found the queue empty waits LowTrafficWait (Lambda's "up to 20
// seconds" at very low traffic) unless it fills; messages already waiting,
// a batch that fills, and a mapping that does not model the wait are
// invoked as the window alone says.
func TestABatchAfterAnEmptyPollWaitsTheLowTrafficWait(t *testing.T) {
	const window, lowTraffic = time.Second, 4 * time.Second
	cases := []struct {
		name       string
		lowTraffic time.Duration
		batch      int
		waiting    bool  // the messages are sent before the mapping starts
		held       bool  // want the batch held for lowTraffic
		counted    int64 // want LowTrafficBatches
	}{
		{"after an empty poll", lowTraffic, 100, false, true, 1},
		{"messages already waiting", lowTraffic, 100, true, false, 0},
		{"a batch that fills", lowTraffic, 3, false, false, 1},
		{"not modelled", 0, 100, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			bodies := []string{"a", "b", "c"}
			if c.waiting {
				for _, b := range bodies {
					f.send(t, b, 0)
				}
			}
			r := newRecorder()
			m := f.start(t, r.handle, func(cfg *Config) {
				cfg.BatchSize, cfg.MaximumBatchingWindow, cfg.LowTrafficWait, cfg.VisibilityTimeout = c.batch, window, c.lowTraffic, 30*time.Second
			})
			if !c.waiting {
				// A whole 1 s long poll comes back empty first.
				time.Sleep(1500 * time.Millisecond)
			}
			sent := time.Now()
			if !c.waiting {
				for _, b := range bodies {
					f.send(t, b, 0)
				}
			}
			f.drained(t, m, 3)
			r.mu.Lock()
			waited := r.at["a"].Sub(sent)
			batches := append([]int(nil), r.batches...)
			r.mu.Unlock()
			if len(batches) != 1 || batches[0] != 3 {
				t.Fatalf("invocations of %v records, want one of 3", batches)
			}
			if st := m.Stats(); st.LowTrafficBatches != c.counted {
				t.Errorf("LowTrafficBatches = %d, want %d", st.LowTrafficBatches, c.counted)
			}
			if c.held && waited < lowTraffic-100*time.Millisecond {
				t.Errorf("invoked %s after the send, want at least %s", waited, lowTraffic)
			}
			if !c.held && waited >= lowTraffic-time.Second {
				t.Errorf("invoked %s after the send, want at most the window's %s", waited, window)
			}
		})
	}
}
