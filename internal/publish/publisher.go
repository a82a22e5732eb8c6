// Package publish puts change events on an Amazon EventBridge bus. It batches
// entries by count (at most 10 per PutEvents call) and by size (each entry
// measured by AWS's documented formula, the sum per call within a configurable
// limit), paces its calls with a token bucket, retries only the failed
// entries of a partial failure with capped exponential backoff and full
// jitter, reports each entry's outcome to the caller through the token it
// passed to Add, and claim-checks resources too large for an entry by writing
// them to S3.
package publish

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// Defaults of Config. Source and detail type are the consumer package's.
const (
	DefaultSource        = cdcevent.DefaultSource
	DefaultDetailType    = cdcevent.DefaultDetailType
	DefaultMaxEntryBytes = 256 * 1024
	DefaultMaxAttempts   = 8
	DefaultBaseDelay     = 100 * time.Millisecond
	DefaultMaxDelay      = 5 * time.Second
	// MaxBatchEntries is the most entries one PutEvents call may carry.
	MaxBatchEntries = 10
	// ChunkBytes is EventBridge's billing unit: each started 64 KB of an
	// entry is billed as one event.
	ChunkBytes = 64 * 1024
)

// PutEventsAPI is the part of the EventBridge client the publisher uses.
type PutEventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Config configures a Publisher. Zero values take the defaults.
type Config struct {
	// EventBus is the bus name or ARN; "" is the account's default bus.
	EventBus string
	// Source and DetailType of every entry.
	Source, DetailType string
	// MaxEntryBytes is the PutEvents size limit: no entry, and no call's sum
	// of entry sizes, exceeds it. Default 262144.
	MaxEntryBytes int
	// MaxAttempts bounds the PutEvents attempts per entry (first try
	// included) that end in a retryable entry error such as InternalFailure.
	// Throttling (a ThrottlingException for the call or the entry) and
	// retryable call errors (5xx, transport) are retried until ctx is done
	// (the invocation's deadline) and do not count; only under a ctx without
	// a deadline (tools, tests) does MaxAttempts bound them too. Default 8.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff before retry n (n from 1): a
	// uniformly random duration in [0, min(MaxDelay, BaseDelay·2^(n-1))).
	BaseDelay, MaxDelay time.Duration
	// Sleep waits d or until ctx is done; default a timer. Tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a uniform float in [0, 1); default math/rand/v2.
	Rand func() float64
	// Concurrency is the most PutEvents calls in flight (each with its own
	// retries); default 1, calls one after another. With more, Sleep and
	// Rand must be safe for concurrent use and events may arrive out of
	// order (EventBridge promises no order anyway).
	Concurrency int
	// Rate is the most PutEvents requests per second this publisher sends,
	// retries included: a token bucket of Burst tokens refilled at Rate per
	// second, waited on (with Sleep) before every request. 0 = unlimited.
	Rate float64
	// Burst is the token bucket's size; default 1 (requests evenly spaced).
	Burst int
	// Now is the bucket's clock; default time.Now.
	Now func() time.Time
	// Rejectable lists per-entry error codes the caller handles itself from
	// the entry's Outcome (prepare-change quarantines a MalformedDetail
	// line): such an entry is not retried, not counted as failed and does
	// not fail the publisher.
	Rejectable []string
}

func (c Config) withDefaults() Config {
	if c.Source == "" {
		c.Source = DefaultSource
	}
	if c.DetailType == "" {
		c.DetailType = DefaultDetailType
	}
	if c.MaxEntryBytes <= 0 {
		c.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.BaseDelay <= 0 {
		c.BaseDelay = DefaultBaseDelay
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = DefaultMaxDelay
	}
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.Burst <= 0 {
		c.Burst = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// EntrySize returns the size of a PutEvents entry by AWS's documented
// formula: 14 bytes if Time is set, plus the UTF-8 bytes of Source,
// DetailType, Detail and each Resources entry. Go strings and byte slices
// hold UTF-8, so their lengths are the byte counts.
func EntrySize(source, detailType string, detailLen int, resources []string, withTime bool) int {
	n := len(source) + len(detailType) + detailLen
	for _, r := range resources {
		n += len(r)
	}
	if withTime {
		n += 14
	}
	return n
}

// Chunks returns the billed 64 KB chunks of an entry of size bytes (at least one).
func Chunks(size int) int {
	if size <= 0 {
		return 1
	}
	return (size + ChunkBytes - 1) / ChunkBytes
}

// Stats are a Publisher's counters.
type Stats struct {
	Calls     int64 // PutEvents calls made, failed ones included
	Published int64 // entries accepted by EventBridge
	Retried   int64 // entry re-sends after a failure (one entry retried twice counts 2)
	Failed    int64 // entries that finally failed
	Rejected  int64 // entries that failed with a Config.Rejectable code (left to the caller)
	Throttled int64 // calls that failed as a whole (throttled, 5xx, transport) and were retried
	Bytes     int64 // sum of the sizes of accepted entries
	Chunks    int64 // billed 64 KB chunks of accepted entries
}

// EntryTooLargeError is returned by Add for an entry larger than the limit.
// It names sizes only, never the entry's resource.
type EntryTooLargeError struct {
	Size, Limit int
}

// Error implements error.
func (e *EntryTooLargeError) Error() string {
	return fmt.Sprintf("publish: an entry of %d bytes is over the PutEvents limit of %d", e.Size, e.Limit)
}

// FailedEntriesError reports entries that still failed after the bounded
// retries, or were rejected with a permanent error code. Its message names
// counts and codes only; Tokens lets the caller say where the entries came
// from (prepare-change names line numbers).
type FailedEntriesError struct {
	Count    int            // entries that failed
	Attempts int            // PutEvents attempts made for the batch
	Codes    map[string]int // entries per final ErrorCode
	Tokens   []any          // the Add tokens of the first failed entries, at most 10
}

// Error implements error: it names the count and the error codes.
func (e *FailedEntriesError) Error() string {
	codes := make([]string, 0, len(e.Codes))
	for c := range e.Codes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s×%d", c, e.Codes[c])
	}
	return fmt.Sprintf("publish: %d entries failed after %d PutEvents attempts (error codes: %s)", e.Count, e.Attempts, strings.Join(parts, ", "))
}

// CallError reports a PutEvents call that failed as a whole after the
// bounded retries, or with an error that is not worth retrying.
type CallError struct {
	Entries  int    // entries in the call
	Attempts int    // attempts made
	Code     string // the API error code, "" for transport errors
	Err      error
}

// Error implements error.
func (e *CallError) Error() string {
	return fmt.Sprintf("publish: PutEvents of %d entries failed after %d attempts: %v", e.Entries, e.Attempts, e.Err)
}

// Unwrap returns the last call error.
func (e *CallError) Unwrap() error { return e.Err }

// Outcome is what became of one entry added with a token: accepted by
// EventBridge (Code ""), or failed for good with Code, the entry's final
// ErrorCode (a Config.Rejectable code, a permanent one, or one whose retries
// were spent) or the failed call's error code ("RequestFailed" when it has
// none).
type Outcome struct {
	Token any
	Code  string
}

type pending struct {
	token any
	entry types.PutEventsRequestEntry
	size  int
	tries int // attempts that ended in a retryable entry error counted against MaxAttempts
}

// Publisher batches entries and sends them with PutEvents, with up to
// Config.Concurrency calls in flight. Add and Flush must be called from one
// goroutine; Stats and Outcomes may be called from any. Call Flush after the
// last Add.
type Publisher struct {
	api    PutEventsAPI
	cfg    Config
	bus    *string
	source *string
	dtype  *string
	fixed  int // bytes of Source and DetailType per entry
	reject map[string]bool
	bucket *tokenbucket.Bucket       // nil: no rate limit
	dry    func(detail []byte) error // dry run: where details go instead of PutEvents

	batch     []pending
	batchSize int

	slots chan struct{} // one token per send in flight
	wg    sync.WaitGroup

	mu       sync.Mutex
	stats    Stats
	err      error     // the first send error; FailedEntriesErrors of later batches are merged into it
	outcomes []Outcome // settled, not yet taken
	settled  atomic.Bool
}

// New returns a Publisher that sends through api.
func New(api PutEventsAPI, cfg Config) (*Publisher, error) {
	if api == nil {
		return nil, errors.New("publish: nil PutEventsAPI")
	}
	return newPublisher(api, nil, cfg)
}

// NewDryRun returns a Publisher that sends nothing: Add checks the entry's
// size as New's would and hands the detail to write at once (a token comes
// back as accepted). cdcctl inspect drives the emitter through it.
func NewDryRun(write func(detail []byte) error, cfg Config) (*Publisher, error) {
	if write == nil {
		return nil, errors.New("publish: nil writer for a dry run")
	}
	return newPublisher(nil, write, cfg)
}

func newPublisher(api PutEventsAPI, dry func([]byte) error, cfg Config) (*Publisher, error) {
	cfg = cfg.withDefaults()
	p := &Publisher{api: api, dry: dry, cfg: cfg, source: aws.String(cfg.Source), dtype: aws.String(cfg.DetailType)}
	if cfg.EventBus != "" {
		p.bus = aws.String(cfg.EventBus)
	}
	p.fixed = EntrySize(cfg.Source, cfg.DetailType, 0, nil, false)
	if p.fixed >= cfg.MaxEntryBytes {
		return nil, fmt.Errorf("publish: source and detail type alone (%d bytes) reach the limit of %d", p.fixed, cfg.MaxEntryBytes)
	}
	if cfg.Rate < 0 {
		return nil, fmt.Errorf("publish: negative rate %v", cfg.Rate)
	}
	if cfg.Rate > 0 {
		p.bucket = tokenbucket.New(cfg.Rate, cfg.Burst, cfg.Now)
	}
	p.reject = map[string]bool{}
	for _, c := range cfg.Rejectable {
		p.reject[c] = true
	}
	p.batch = make([]pending, 0, MaxBatchEntries)
	p.slots = make(chan struct{}, cfg.Concurrency)
	return p, nil
}

// Config returns the configuration in effect, defaults applied.
func (p *Publisher) Config() Config { return p.cfg }

// EntrySize returns the size of an entry with a detail of detailLen bytes.
// No Time and no Resources are set on entries.
func (p *Publisher) EntrySize(detailLen int) int { return p.fixed + detailLen }

// Fits reports whether an entry with a detail of detailLen bytes is within the limit.
func (p *Publisher) Fits(detailLen int) bool { return p.EntrySize(detailLen) <= p.cfg.MaxEntryBytes }

// Stats returns the counters so far (of sends that have finished).
func (p *Publisher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Pending returns the number of entries added but not yet handed to a send.
func (p *Publisher) Pending() int { return len(p.batch) }

// Outcomes appends to dst the outcomes of the entries with a token settled
// since the last call, and returns the extended slice. Cheap when nothing
// settled.
func (p *Publisher) Outcomes(dst []Outcome) []Outcome {
	if !p.settled.Load() {
		return dst
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dst = append(dst, p.outcomes...)
	clear(p.outcomes)
	p.outcomes = p.outcomes[:0]
	p.settled.Store(false)
	return dst
}

// Add queues one entry whose detail is the JSON object detail. token, when
// not nil, comes back with the entry's Outcome (see Outcomes); it is how the
// caller tells its entries apart, so the detail is never parsed back. The
// detail is copied. Add hands the batch to a send when it is full (10
// entries) or when the entry would not fit the size limit beside the entries
// already queued; with Concurrency > 1 it waits only while that many sends
// are in flight. It returns an *EntryTooLargeError for an entry over the
// limit on its own (nothing queued, no outcome), and the first send error
// (*FailedEntriesError or *CallError) once one is known; Flush returns it too.
func (p *Publisher) Add(ctx context.Context, detail []byte, token any) error {
	size := p.EntrySize(len(detail))
	if size > p.cfg.MaxEntryBytes {
		return &EntryTooLargeError{Size: size, Limit: p.cfg.MaxEntryBytes}
	}
	if p.dry != nil {
		if err := p.dry(detail); err != nil {
			return err
		}
		p.finish(Stats{Published: 1, Bytes: int64(size), Chunks: int64(Chunks(size))}, []Outcome{{Token: token}}, nil)
		return nil
	}
	if len(p.batch) > 0 && p.batchSize+size > p.cfg.MaxEntryBytes {
		if err := p.dispatch(ctx); err != nil {
			return err
		}
	}
	p.batch = append(p.batch, pending{
		token: token,
		size:  size,
		entry: types.PutEventsRequestEntry{
			EventBusName: p.bus, Source: p.source, DetailType: p.dtype, Detail: aws.String(string(detail)),
		},
	})
	p.batchSize += size
	if len(p.batch) == MaxBatchEntries {
		return p.dispatch(ctx)
	}
	return p.firstError()
}

// Flush sends the queued entries, waits for every send in flight and
// returns the first send error, if any.
func (p *Publisher) Flush(ctx context.Context) error {
	if len(p.batch) > 0 {
		_ = p.dispatch(ctx)
	}
	return p.Wait()
}

// Wait waits for the sends in flight, without sending queued entries, and
// returns the first send error, if any.
func (p *Publisher) Wait() error {
	p.wg.Wait()
	return p.firstError()
}

func (p *Publisher) firstError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// dispatch hands the queued batch to a send: inline when Concurrency is 1,
// else on a goroutine once a slot is free.
func (p *Publisher) dispatch(ctx context.Context) error {
	batch := p.batch
	p.batch = make([]pending, 0, MaxBatchEntries)
	p.batchSize = 0
	if err := p.firstError(); err != nil {
		return err // the invocation fails anyway: send nothing more
	}
	if p.cfg.Concurrency <= 1 {
		p.finish(p.send(ctx, batch))
		return p.firstError()
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		err := &CallError{Entries: len(batch), Err: ctx.Err()}
		p.finish(Stats{Failed: int64(len(batch))}, failedAll(nil, batch, "RequestFailed"), err)
		return p.firstError()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.slots }()
		p.finish(p.send(ctx, batch))
	}()
	return p.firstError()
}

// failedAll appends an outcome with code for every entry of batch with a token.
func failedAll(dst []Outcome, batch []pending, code string) []Outcome {
	for _, pe := range batch {
		if pe.token != nil {
			dst = append(dst, Outcome{Token: pe.token, Code: code})
		}
	}
	return dst
}

// finish adds the counters and outcomes of one send and keeps its error.
func (p *Publisher) finish(st Stats, outs []Outcome, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Calls += st.Calls
	p.stats.Published += st.Published
	p.stats.Retried += st.Retried
	p.stats.Failed += st.Failed
	p.stats.Rejected += st.Rejected
	p.stats.Throttled += st.Throttled
	p.stats.Bytes += st.Bytes
	p.stats.Chunks += st.Chunks
	for _, o := range outs {
		if o.Token != nil {
			p.outcomes = append(p.outcomes, o)
			p.settled.Store(true)
		}
	}
	if err == nil {
		return
	}
	if p.err == nil {
		p.err = err
		return
	}
	var into, from *FailedEntriesError
	if errors.As(p.err, &into) && errors.As(err, &from) {
		into.Count += from.Count
		into.Attempts = max(into.Attempts, from.Attempts)
		for c, n := range from.Codes {
			into.Codes[c] += n
		}
		for _, tok := range from.Tokens {
			if len(into.Tokens) < 10 {
				into.Tokens = append(into.Tokens, tok)
			}
		}
	}
}

// permanentCodes are per-entry error codes that a retry cannot fix: those
// the PutEventsResultEntry reference lists as non-retryable, and a few
// call-level codes an emulator or proxy may report per entry.
var permanentCodes = map[string]bool{
	"InvalidArgument":                     true,
	"InvalidAccountIdException":           true,
	"RedactionFailure":                    true,
	"MalformedDetail":                     true,
	"ValidationException":                 true,
	"SerializationException":              true,
	"AccessDeniedException":               true,
	"NotAuthorizedForSourceException":     true,
	"NotAuthorizedForDetailTypeException": true,
	"ResourceNotFoundException":           true,
}

// RetryableEntryCode reports whether a failed entry with this ErrorCode is
// retried: every code but those a retry cannot fix (invalid or malformed
// entries, authorization, an unknown bus).
func RetryableEntryCode(code string) bool {
	return !permanentCodes[code] && !strings.Contains(code, "AccessDenied")
}

// retryableCallError reports whether a failed call is worth retrying:
// throttling, service-side failures and transport errors, but not
// validation, authorization or a cancelled context.
func retryableCallError(ctx context.Context, err error) (code string, retry bool) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "", false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
		switch {
		case strings.Contains(code, "Throttl"), code == "InternalException", code == "InternalFailure",
			code == "ServiceUnavailable", code == "RequestTimeout", code == "LimitExceededException":
			return code, true
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
			return code, true
		}
		return code, false
	}
	return "", true // transport error: the request may not have arrived
}

// backoff returns the full-jitter delay before retry n (n from 1): uniform
// in [0, min(MaxDelay, BaseDelay·2^(n-1))).
func (p *Publisher) backoff(n int) time.Duration {
	return time.Duration(p.cfg.Rand() * float64(backoff.Ceiling(p.cfg.BaseDelay, p.cfg.MaxDelay, n)))
}

// isThrottle reports whether an error code is EventBridge throttling.
func isThrottle(code string) bool { return strings.Contains(code, "Throttl") }

// send puts batch, retrying only failed entries, and returns its counters,
// the outcomes of its entries and its error. Throttling and retryable call
// errors are retried until ctx is done when ctx has a deadline; other
// retryable entry errors for at most MaxAttempts attempts per entry.
func (p *Publisher) send(ctx context.Context, batch []pending) (st Stats, outs []Outcome, _ error) {
	_, untilDeadline := ctx.Deadline()
	todo := batch
	entries := make([]types.PutEventsRequestEntry, 0, len(batch))
	var final *FailedEntriesError
	fail := func(pe pending, code string) {
		if final == nil {
			final = &FailedEntriesError{Codes: map[string]int{}}
		}
		final.Count++
		final.Codes[code]++
		if pe.token != nil && len(final.Tokens) < 10 {
			final.Tokens = append(final.Tokens, pe.token)
		}
		st.Failed++
		outs = append(outs, Outcome{Token: pe.token, Code: code})
	}
	callFailed := func(attempts int, code string, err error) (Stats, []Outcome, error) {
		st.Failed += int64(len(todo))
		c := code
		if c == "" {
			c = "RequestFailed"
		}
		return st, failedAll(outs, todo, c), &CallError{Entries: len(todo), Attempts: attempts, Code: code, Err: err}
	}
	attempt := 0
	for len(todo) > 0 {
		attempt++
		if attempt > 1 {
			if err := p.cfg.Sleep(ctx, p.backoff(attempt-1)); err != nil {
				return callFailed(attempt-1, "", fmt.Errorf("wait before retry: %w", err))
			}
			st.Retried += int64(len(todo))
		}
		if p.bucket != nil {
			if err := p.bucket.Wait(ctx, p.cfg.Sleep); err != nil {
				return callFailed(attempt-1, "", fmt.Errorf("wait for the PutEvents rate: %w", err))
			}
		}
		entries = entries[:0]
		for _, pe := range todo {
			entries = append(entries, pe.entry)
		}
		st.Calls++
		out, err := p.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			code, retry := retryableCallError(ctx, err)
			if !untilDeadline {
				for i := range todo {
					todo[i].tries++
				}
			}
			if !retry || !untilDeadline && attempt >= p.cfg.MaxAttempts {
				return callFailed(attempt, code, err)
			}
			st.Throttled++
			continue
		}
		if len(out.Entries) != len(entries) {
			return callFailed(attempt, "", fmt.Errorf("response has %d result entries for %d request entries", len(out.Entries), len(entries)))
		}
		var next []pending
		for i, r := range out.Entries {
			pe := todo[i]
			code := aws.ToString(r.ErrorCode)
			if code == "" && r.EventId != nil {
				st.Published++
				st.Bytes += int64(pe.size)
				st.Chunks += int64(Chunks(pe.size))
				if pe.token != nil {
					outs = append(outs, Outcome{Token: pe.token})
				}
				continue
			}
			if code == "" {
				code = "MissingEventId"
			}
			if p.reject[code] {
				st.Rejected++
				outs = append(outs, Outcome{Token: pe.token, Code: code})
				continue
			}
			if !isThrottle(code) || !untilDeadline {
				pe.tries++
			}
			if !RetryableEntryCode(code) || pe.tries >= p.cfg.MaxAttempts {
				fail(pe, code)
				continue
			}
			next = append(next, pe)
		}
		todo = next
	}
	if final != nil {
		final.Attempts = attempt
		return st, outs, final
	}
	return st, outs, nil
}

// SetRate changes the most PutEvents requests per second the publisher
// sends from now on (a Map child's share as its siblings start and finish,
// internal/share). It does nothing for a publisher built without a rate
// (unlimited) or for a rate ≤ 0.
func (p *Publisher) SetRate(rate float64) {
	if p.bucket == nil || rate <= 0 {
		return
	}
	p.bucket.SetRate(rate)
}

// Rate is the publisher's current rate, 0 when unlimited.
func (p *Publisher) Rate() float64 {
	if p.bucket == nil {
		return 0
	}
	return p.bucket.Rate()
}
