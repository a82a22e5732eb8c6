package publish_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const testBus = "cdc-test"

// rig is local AWS with the EventBridge emulator, a real SDK client that
// does not retry by itself, and a recorder of the entries per call.
type rig struct {
	env    *localaws.Env
	em     *fakeeventbridge.Emulator
	sink   *fakeeventbridge.MemorySink
	client *recorder
	sleeps []time.Duration
}

// recorder wraps the real client and records the number of entries of each call.
type recorder struct {
	api   *eventbridge.Client
	mu    sync.Mutex
	sizes []int
}

func (r *recorder) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	r.mu.Lock()
	r.sizes = append(r.sizes, len(in.Entries))
	r.mu.Unlock()
	return r.api.PutEvents(ctx, in, optFns...)
}

func (r *recorder) callSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.sizes...)
}

// deliveries counts the events the bus delivered, by detail.
func (r *rig) deliveries() map[string]int {
	seen := map[string]int{}
	for _, ev := range r.sink.Events() {
		seen[string(ev.Event.Detail)]++
	}
	return seen
}

func newRig(t *testing.T, opts fakeeventbridge.Options) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	opts.Sink = sink
	opts.Buses = append(opts.Buses, testBus)
	opts.Region, opts.AccountID = env.Region, env.AccountID
	em := fakeeventbridge.New(opts)
	env.Gateway.Handle(localaws.ServiceEventBridge, em)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	return &rig{env: env, em: em, sink: sink, client: &recorder{api: eventbridge.NewFromConfig(cfg)}}
}

func (r *rig) publisher(t *testing.T, cfg publish.Config) *publish.Publisher {
	t.Helper()
	if cfg.EventBus == "" {
		cfg.EventBus = testBus
	}
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		r.sleeps = append(r.sleeps, d)
		return nil
	}
	if cfg.Rand == nil {
		cfg.Rand = func() float64 { return 0.5 }
	}
	p, err := publish.New(r.client, cfg)
	if err != nil {
		t.Fatalf("publish.New: %v", err)
	}
	return p
}

func detailN(i int) []byte {
	return []byte(fmt.Sprintf(`{"eventId":"Patient/%d/_history/1","n":%d}`, i, i))
}

// detailOfEntrySize builds a detail whose entry (with the default source and
// detail type) is exactly size bytes, using two-byte and four-byte UTF-8.
func detailOfEntrySize(t *testing.T, size int) []byte {
	t.Helper()
	fill := size - len(publish.DefaultSource) - len(publish.DefaultDetailType) - len(`{"s":""}`)
	if fill < 0 {
		t.Fatalf("size %d too small", size)
	}
	var b strings.Builder
	for fill >= 4 {
		b.WriteString("😀") // 4 bytes
		fill -= 4
	}
	for fill >= 2 {
		b.WriteString("é") // 2 bytes
		fill -= 2
	}
	b.WriteString(strings.Repeat("x", fill))
	d := []byte(`{"s":"` + b.String() + `"}`)
	if n := publish.EntrySize(publish.DefaultSource, publish.DefaultDetailType, len(d), nil, false); n != size {
		t.Fatalf("built an entry of %d bytes, want %d", n, size)
	}
	return d
}

func TestBatchesOfAtMostTenInOrder(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{})
	ctx := context.Background()
	for i := 0; i < 25; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprint(i)); err != nil {
			t.Fatalf("Add %d: %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := fmt.Sprint(r.client.callSizes()); got != "[10 10 5]" {
		t.Fatalf("entries per call = %s, want [10 10 5]", got)
	}
	evs := r.sink.Events()
	if len(evs) != 25 {
		t.Fatalf("delivered %d, want 25", len(evs))
	}
	for i, ev := range evs {
		if string(ev.Event.Detail) != string(detailN(i)) || ev.Bus != testBus || ev.Event.Source != "healthlake.cdc" || ev.Event.DetailType != "FHIR Resource Changed" {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	st := p.Stats()
	if st.Calls != 3 || st.Published != 25 || st.Retried != 0 || st.Failed != 0 || st.Chunks != 25 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestExactlyTenEntriesIsOneCall(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{Source: "my.source", DetailType: "My Type"})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprint(i)); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	if p.Pending() != 0 {
		t.Fatalf("the tenth Add did not send the batch: %d pending", p.Pending())
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := fmt.Sprint(r.client.callSizes()); got != "[10]" {
		t.Fatalf("calls = %s, want [10]", got)
	}
	if ev := r.sink.Events()[0].Event; ev.Source != "my.source" || ev.DetailType != "My Type" {
		t.Fatalf("source/detail type not configurable: %+v", ev)
	}
}

func TestEntryExactlyAtTheLimitWithMultiByteUTF8(t *testing.T) {
	const limit = 3000
	r := newRig(t, fakeeventbridge.Options{MaxRequestBytes: limit})
	p := r.publisher(t, publish.Config{MaxEntryBytes: limit})
	ctx := context.Background()

	at := detailOfEntrySize(t, limit)
	if len(at) == len([]rune(string(at))) {
		t.Fatal("test detail has no multi-byte characters")
	}
	if !p.Fits(len(at)) || p.Fits(len(at)+1) {
		t.Fatalf("Fits is off by one")
	}
	if err := p.Add(ctx, at, "at"); err != nil {
		t.Fatalf("Add at limit: %v", err)
	}
	over := detailOfEntrySize(t, limit+1)
	var tooLarge *publish.EntryTooLargeError
	if err := p.Add(ctx, over, "Patient/x/_history/1"); !errors.As(err, &tooLarge) || tooLarge.Size != limit+1 || tooLarge.Limit != limit {
		t.Fatalf("Add over limit: %v", err)
	}
	// Two entries of half the limit share a call; one byte more and they do not.
	half := detailOfEntrySize(t, limit/2)
	for i := 0; i < 2; i++ {
		if err := p.Add(ctx, half, "h"); err != nil {
			t.Fatalf("Add half: %v", err)
		}
	}
	halfPlus := detailOfEntrySize(t, limit/2+1)
	if err := p.Add(ctx, halfPlus, "hp"); err != nil {
		t.Fatalf("Add half+1: %v", err)
	}
	if err := p.Add(ctx, half, "hp"); err != nil {
		t.Fatalf("Add half: %v", err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	// at | half half | half+1 | half  (the emulator accepted every call: the formulas agree)
	if got := fmt.Sprint(r.client.callSizes()); got != "[1 2 1 1]" {
		t.Fatalf("calls = %s, want [1 2 1 1]", got)
	}
	if r.sink.Len() != 5 || r.em.Stats().RejectedCalls != 0 {
		t.Fatalf("delivered %d, stats %+v", r.sink.Len(), r.em.Stats())
	}
	if string(r.sink.Events()[0].Event.Detail) != string(at) {
		t.Fatal("multi-byte detail changed on the way")
	}
}

func TestPartialFailureRetriesOnlyFailedEntries(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{BaseDelay: 100 * time.Millisecond})
	ctx := context.Background()
	var mu sync.Mutex
	failed := map[string]int{}
	// Entries 2, 5 and 7 fail once (with different codes); entry 5 fails twice.
	r.em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range []string{`"n":2}`, `"n":5}`, `"n":7}`} {
			if strings.HasSuffix(e.Detail, n) {
				failed[n]++
				limit := 1
				if n == `"n":5}` {
					limit = 2
				}
				if failed[n] <= limit {
					if n == `"n":7}` {
						return "ThrottlingException", ""
					}
					return "InternalFailure", ""
				}
			}
		}
		return "", ""
	})
	for i := 0; i < 10; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprint(i)); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := fmt.Sprint(r.client.callSizes()); got != "[10 3 1]" {
		t.Fatalf("entries per call = %s, want [10 3 1]", got)
	}
	st := p.Stats()
	if st.Published != 10 || st.Retried != 4 || st.Failed != 0 || st.Calls != 3 {
		t.Fatalf("stats = %+v", st)
	}
	// Full jitter with Rand = 0.5: half of 100 ms, then half of 200 ms.
	if fmt.Sprint(r.sleeps) != "[50ms 100ms]" {
		t.Fatalf("sleeps = %v", r.sleeps)
	}
	// Every event delivered exactly once.
	seen := r.deliveries()
	for i := 0; i < 10; i++ {
		if seen[string(detailN(i))] != 1 {
			t.Fatalf("event %d delivered %d times", i, seen[string(detailN(i))])
		}
	}
}

func TestEntriesThatKeepFailingFailWithCountAndCodes(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 3 * time.Second, Rand: func() float64 { return 0.999 }})
	ctx := context.Background()
	r.em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		switch {
		case strings.HasSuffix(e.Detail, `"n":1}`):
			return "InternalFailure", ""
		case strings.HasSuffix(e.Detail, `"n":2}`):
			return "ThrottlingException", ""
		}
		return "", ""
	})
	for i := 0; i < 4; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprintf("Patient/%d/_history/1", i)); err != nil {
			t.Fatalf("Add: %v", err)
		}
	}
	err := p.Flush(ctx)
	var fe *publish.FailedEntriesError
	if !errors.As(err, &fe) {
		t.Fatalf("Flush error = %v, want FailedEntriesError", err)
	}
	if fe.Count != 2 || fe.Attempts != 4 || fe.Codes["InternalFailure"] != 1 || fe.Codes["ThrottlingException"] != 1 {
		t.Fatalf("error = %+v", fe)
	}
	msg := err.Error()
	for _, want := range []string{"2 entries failed", "4 PutEvents attempts", "InternalFailure×1", "ThrottlingException×1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	// The failed entries come back as their tokens; the message names no resource.
	if fmt.Sprint(fe.Tokens) != "[Patient/1/_history/1 Patient/2/_history/1]" || strings.Contains(msg, "Patient/") {
		t.Errorf("tokens %v, message %q", fe.Tokens, msg)
	}
	if got := fmt.Sprint(r.client.callSizes()); got != "[4 2 2 2]" {
		t.Fatalf("entries per call = %s", got)
	}
	// Exponential, capped at MaxDelay, jittered (0.999 of the ceiling).
	want := []time.Duration{999 * time.Millisecond, 1998 * time.Millisecond, 2997 * time.Millisecond}
	if fmt.Sprint(r.sleeps) != fmt.Sprint(want) {
		t.Fatalf("sleeps = %v, want %v", r.sleeps, want)
	}
	if st := p.Stats(); st.Published != 2 || st.Failed != 2 || st.Retried != 6 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPermanentEntryErrorsAreNotRetried(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{})
	ctx := context.Background()
	_ = p.Add(ctx, []byte(`{"ok":1}`), "good")
	_ = p.Add(ctx, []byte(`[1]`), "bad")
	err := p.Flush(ctx)
	var fe *publish.FailedEntriesError
	if !errors.As(err, &fe) || fe.Count != 1 || fe.Codes["MalformedDetail"] != 1 || fe.Attempts != 1 || fe.Tokens[0] != "bad" {
		t.Fatalf("err = %v (%+v)", err, fe)
	}
	if len(r.client.callSizes()) != 1 || r.sink.Len() != 1 {
		t.Fatalf("calls %v, delivered %d", r.client.callSizes(), r.sink.Len())
	}
}

// The error codes AWS documents as not retryable for a PutEvents entry
// (PutEventsResultEntry.ErrorCode) fail at once; only InternalFailure and
// ThrottlingException (and codes AWS may add) are retried.
func TestDocumentedNonRetryableEntryCodesAreNotRetried(t *testing.T) {
	for _, code := range []string{"AccessDeniedException", "InvalidAccountIdException", "InvalidArgument", "MalformedDetail",
		"RedactionFailure", "NotAuthorizedForSourceException", "NotAuthorizedForDetailTypeException"} {
		r := newRig(t, fakeeventbridge.Options{})
		p := r.publisher(t, publish.Config{})
		ctx := context.Background()
		r.em.FailNextEntries(1, code)
		_ = p.Add(ctx, []byte(`{"ok":1}`), "Patient/1/_history/1")
		err := p.Flush(ctx)
		var fe *publish.FailedEntriesError
		if !errors.As(err, &fe) || fe.Count != 1 || fe.Codes[code] != 1 || fe.Attempts != 1 {
			t.Errorf("%s: err = %v (%+v)", code, err, fe)
		}
		if n := len(r.client.callSizes()); n != 1 {
			t.Errorf("%s: %d PutEvents calls, want 1", code, n)
		}
	}
	for _, code := range []string{"InternalFailure", "ThrottlingException"} {
		if !publish.RetryableEntryCode(code) {
			t.Errorf("%s is not retried", code)
		}
	}
}

func TestThrottledCallsAreRetriedWhole(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{})
	ctx := context.Background()
	r.em.ThrottleNextCalls(2)
	for i := 0; i < 3; i++ {
		_ = p.Add(ctx, detailN(i), fmt.Sprint(i))
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := fmt.Sprint(r.client.callSizes()); got != "[3 3 3]" {
		t.Fatalf("calls = %s", got)
	}
	if st := p.Stats(); st.Throttled != 2 || st.Published != 3 || st.Retried != 6 {
		t.Fatalf("stats = %+v", st)
	}
	if r.sink.Len() != 3 {
		t.Fatalf("delivered %d", r.sink.Len())
	}

	// Throttled past the bound: a CallError naming the code.
	r.em.ThrottleNextCalls(100)
	p2 := r.publisher(t, publish.Config{MaxAttempts: 3})
	_ = p2.Add(ctx, detailN(1), "x")
	err := p2.Flush(ctx)
	var ce *publish.CallError
	if !errors.As(err, &ce) || ce.Attempts != 3 || ce.Code != "ThrottlingException" || ce.Entries != 1 {
		t.Fatalf("err = %v", err)
	}
}

func TestValidationErrorsAreNotRetried(t *testing.T) {
	// The publisher believes in a larger limit than the bus enforces.
	r := newRig(t, fakeeventbridge.Options{MaxRequestBytes: 1000})
	p := r.publisher(t, publish.Config{MaxEntryBytes: 5000})
	ctx := context.Background()
	_ = p.Add(ctx, detailOfEntrySize(t, 2000), "big")
	err := p.Flush(ctx)
	var ce *publish.CallError
	if !errors.As(err, &ce) || ce.Attempts != 1 || ce.Code != "ValidationException" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "Total size of the entries in the request is over the limit") {
		t.Fatalf("message = %q", err.Error())
	}
}

func TestUnknownBusFailsLoudly(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	p := r.publisher(t, publish.Config{EventBus: "missing-bus"})
	_ = p.Add(context.Background(), detailN(1), "e")
	err := p.Flush(context.Background())
	var fe *publish.FailedEntriesError
	if !errors.As(err, &fe) || fe.Codes["ResourceNotFoundException"] != 1 || fe.Attempts != 1 {
		t.Fatalf("err = %v", err)
	}
}

func TestCancelledContextStopsRetrying(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	r.em.FailNextEntries(1, "InternalFailure")
	ctx, cancel := context.WithCancel(context.Background())
	p, _ := publish.New(r.client, publish.Config{EventBus: testBus, Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	_ = p.Add(ctx, detailN(1), "e")
	err := p.Flush(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestNewRejectsALimitBelowTheFixedPart(t *testing.T) {
	if _, err := publish.New(&recorder{}, publish.Config{MaxEntryBytes: 10}); err == nil {
		t.Fatal("New accepted a limit smaller than source + detail type")
	}
	if _, err := publish.New(nil, publish.Config{}); err == nil {
		t.Fatal("New accepted a nil API")
	}
}

func TestEntrySizeFormula(t *testing.T) {
	if n := publish.EntrySize("ab", "cd", 10, []string{"r1", "r22"}, true); n != 2+2+10+2+3+14 {
		t.Fatalf("EntrySize = %d", n)
	}
	if n := publish.EntrySize("é", "😀", 0, nil, false); n != 6 {
		t.Fatalf("EntrySize counts runes, not bytes: %d", n)
	}
	for size, want := range map[int]int{1: 1, 65536: 1, 65537: 2, 262144: 4} {
		if publish.Chunks(size) != want {
			t.Errorf("Chunks(%d) = %d", size, publish.Chunks(size))
		}
	}
	if !publish.RetryableEntryCode("InternalFailure") || !publish.RetryableEntryCode("ThrottlingException") ||
		publish.RetryableEntryCode("MalformedDetail") || publish.RetryableEntryCode("KMSAccessDeniedException") {
		t.Fatal("RetryableEntryCode classification")
	}
	var v map[string]any
	_ = json.Unmarshal(detailN(3), &v)
	if v["n"] != float64(3) {
		t.Fatal("detailN")
	}
}

// gate wraps the real client and holds the first call until `want` calls
// are in flight (or a second passes), recording the most seen at once.
type gate struct {
	api     *eventbridge.Client
	want    int
	mu      sync.Mutex
	now     int
	maxSeen int
	opened  chan struct{}
	once    sync.Once
}

func (g *gate) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	g.mu.Lock()
	g.now++
	g.maxSeen = max(g.maxSeen, g.now)
	if g.now >= g.want {
		g.once.Do(func() { close(g.opened) })
	}
	g.mu.Unlock()
	select {
	case <-g.opened:
	case <-time.After(time.Second):
	}
	defer func() {
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
	}()
	return g.api.PutEvents(ctx, in, optFns...)
}

func TestConcurrentSendsAreBoundedAndDeliverEverythingOnce(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	g := &gate{api: r.client.api, want: 4, opened: make(chan struct{})}
	var mu sync.Mutex
	p, err := publish.New(g, publish.Config{EventBus: testBus, Concurrency: 4,
		Sleep: func(context.Context, time.Duration) error { return nil },
		Rand:  func() float64 { mu.Lock(); defer mu.Unlock(); return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	r.em.FailNextEntries(5, "InternalFailure")
	ctx := context.Background()
	for i := 0; i < 95; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprint(i)); err != nil {
			t.Fatalf("Add %d: %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if g.maxSeen != 4 {
		t.Fatalf("at most %d calls in flight, want exactly 4", g.maxSeen)
	}
	seen := r.deliveries()
	for i := 0; i < 95; i++ {
		if seen[string(detailN(i))] != 1 {
			t.Fatalf("event %d delivered %d times", i, seen[string(detailN(i))])
		}
	}
	if st := p.Stats(); st.Published != 95 || st.Retried != 5 || st.Failed != 0 || st.Calls < 11 || st.Calls > 15 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestConcurrentFailuresAreMergedIntoOneError(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	// The first batch's retry waits until the second batch was sent, so
	// the two failing batches are in flight together whatever the
	// scheduling (under the race detector the first failure could
	// otherwise end the Adds before the second batch goes out).
	second := make(chan struct{})
	var once sync.Once
	r.em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		if call >= 2 {
			once.Do(func() { close(second) })
		}
		switch {
		case strings.HasSuffix(e.Detail, `"n":3}`):
			return "InternalFailure", ""
		case strings.HasSuffix(e.Detail, `"n":13}`):
			return "MalformedDetail", ""
		}
		return "", ""
	})
	p, _ := publish.New(r.client, publish.Config{EventBus: testBus, Concurrency: 2, MaxAttempts: 2,
		Sleep: func(context.Context, time.Duration) error {
			select {
			case <-second:
			case <-time.After(5 * time.Second):
			}
			return nil
		}})
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		_ = p.Add(ctx, detailN(i), fmt.Sprintf("Patient/%d/_history/1", i))
	}
	err := p.Flush(ctx)
	var fe *publish.FailedEntriesError
	if !errors.As(err, &fe) || fe.Count != 2 || fe.Codes["InternalFailure"] != 1 || fe.Codes["MalformedDetail"] != 1 {
		t.Fatalf("err = %v", err)
	}
	if err := p.Add(ctx, detailN(99), "late"); !errors.Is(err, fe) {
		t.Fatalf("Add after a failure = %v, want the first error", err)
	}
}

// A PutEvents whose answer was lost (EventBridge took the entries, the
// connection closed before the answer) is sent again: EventBridge has no
// idempotency key for PutEvents, so consumers get each of its events twice,
// with the same eventId (docs/EVENTS.md, "Each version once", case 8). The
// publisher counts each once.
func TestAPutEventsWhoseAnswerWasLostIsSentAgain(t *testing.T) {
	r := newRig(t, fakeeventbridge.Options{})
	var lost sync.Once
	r.env.Gateway.SetAnswerLoss(func(service, op string, _ *http.Request) bool {
		hit := false
		if service == localaws.ServiceEventBridge && op == "PutEvents" {
			lost.Do(func() { hit = true })
		}
		return hit
	})
	p := r.publisher(t, publish.Config{})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := p.Add(ctx, detailN(i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush after a lost answer: %v", err)
	}
	if r.env.Gateway.AnswersLost() != 1 {
		t.Fatalf("answers lost = %d", r.env.Gateway.AnswersLost())
	}
	seen := r.deliveries()
	for i := 0; i < 3; i++ {
		if seen[string(detailN(i))] != 2 {
			t.Errorf("event %d delivered %d times, want twice (the call and its resend)", i, seen[string(detailN(i))])
		}
	}
	if st := p.Stats(); st.Published != 3 || st.Calls != 2 {
		t.Errorf("stats = %+v, want 3 published in 2 calls", st)
	}
}
