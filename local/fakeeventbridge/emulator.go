// Package eventbridge is the project's Amazon EventBridge emulator. It speaks
// the AWS JSON 1.1 protocol (X-Amz-Target "AWSEvents.<Operation>") so that the
// real aws-sdk-go-v2 EventBridge client talks to it unchanged, and implements
// PutEvents with AWS's validation and limits, CreateEventBus,
// DescribeEventBus, ListEventBuses and DeleteEventBus; rules with the full
// event-pattern language (internal/eventpattern) and TestEventPattern;
// targets (SQS queues, other buses, API destinations) with Input, InputPath,
// InputTransformer, RetryPolicy and DeadLetterConfig, delivered
// asynchronously (delivery.go); archives and replays (archive.go).
//
// Every accepted entry is also delivered to a Sink as the event a rule target
// receives (a catch-all view for tests and cdc-local's output). The PutEvents quota is a token bucket per account and Region
// (Options.PutEventsQuota); a request finding it empty is answered
// ThrottlingException, as AWS does. Tests can inject per-entry failures (ErrorCode such as
// InternalFailure or ThrottlingException) and whole-call throttling, and read
// counters of calls, accepted and failed entries and billed 64 KB chunks.
package fakeeventbridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
)

// Defaults of Options.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
	// DefaultMaxRequestBytes is PutEvents' size limit: 1 MB since AWS raised
	// it from 256 KB in January 2026 ("More room to build: serverless
	// services now support payloads up to 1 MB", AWS Compute Blog), read as
	// 1,000,000 bytes, the lesser of the two readings of "MB", so that a
	// request that fits here fits in AWS.
	DefaultMaxRequestBytes = 1_000_000
	// MaxEntries is the most entries one PutEvents call may carry.
	MaxEntries = 10
	// ChunkBytes is the billing unit: each started 64 KB of an entry is one event.
	ChunkBytes = 64 * 1024
	// DefaultBus is the bus every account has and that cannot be deleted.
	DefaultBus = "default"
	// TimeEntryBytes is what a set Time counts toward an entry's size.
	TimeEntryBytes = 14
)

// Options configure an Emulator. The zero value is usable.
type Options struct {
	// Region and AccountID appear in ARNs and in delivered events.
	Region, AccountID string
	// MaxRequestBytes is the limit on the sum of the entry sizes of one
	// PutEvents call (AWS's formula, see EntrySize); default
	// DefaultMaxRequestBytes.
	MaxRequestBytes int
	// Buses are created up front besides "default".
	Buses []string
	// AcceptUnknownBus makes PutEvents to a bus that does not exist succeed
	// and drop the entry, as AWS does today. By default such an entry fails
	// with ErrorCode ResourceNotFoundException, which catches
	// misconfiguration in tests.
	AcceptUnknownBus bool
	// Sink receives accepted entries; nil discards them.
	Sink Sink
	// Now and NewID replace the clock and the event id generator.
	Now   func() time.Time
	NewID func() string
	// MaxBodyBytes caps the HTTP request body; default 16 MiB.
	MaxBodyBytes int64
	// PutEventsQuota is the PutEvents requests per second allowed per
	// account and Region (the "PutEvents throttle limit in transactions per
	// second" of the EventBridge quotas page; see RegionPutEventsQuota): a
	// token bucket of PutEventsBurst tokens refilled at this rate, one token
	// per request. A request finding no token fails with
	// ThrottlingException. 0 = no quota.
	PutEventsQuota float64
	// PutEventsBurst is the bucket's size; default one second's worth of
	// the quota. AWS documents no burst: this is a model.
	PutEventsBurst int
	// Queues sends to SQS targets and dead-letter queues (through the
	// gateway, with the credentials its client signs with); nil makes such
	// deliveries fail.
	Queues QueueSender
	// HTTPClient calls API destinations; default a client with a 10 s timeout.
	HTTPClient *http.Client
	// RetryDelay is the delay before retry n (from 1) of a failed delivery;
	// default DefaultRetryDelay.
	RetryDelay func(n int) time.Duration
	// ArchiveDir, when set, keeps archived events' text in a temporary file
	// in this directory (removed by Close) instead of memory: a
	// simulation's archive would otherwise hold every event ever put.
	ArchiveDir string
	// Workers is the number of delivery goroutines; default 4.
	Workers int
}

// RegionPutEventsQuota returns the default PutEvents quota (requests per
// second per account) of region as the EventBridge quotas page lists it
// (stackconfig.PutEventsRegionalDefault: from 10,000 in us-east-1 down to
// 400 in the Regions it does not name); 400, the safe side, for a name it
// does not know.
func RegionPutEventsQuota(region string) float64 {
	if q, ok := stackconfig.PutEventsRegionalDefault(region); ok {
		return q
	}
	return stackconfig.DefaultPutEventsQuota
}

// Entry is one PutEvents request entry as the emulator decoded it.
type Entry struct {
	Source       string
	DetailType   string
	Detail       string
	EventBusName string
	Resources    []string
	Time         *time.Time
	TraceHeader  string
}

// Size returns the entry's size by AWS's documented formula: 14 bytes if Time
// is set, plus the UTF-8 bytes of Source, DetailType, Detail and each
// Resources entry.
func (e Entry) Size() int {
	n := len(e.Source) + len(e.DetailType) + len(e.Detail)
	for _, r := range e.Resources {
		n += len(r)
	}
	if e.Time != nil {
		n += TimeEntryBytes
	}
	return n
}

// EntryFault decides whether an otherwise valid entry fails. call counts
// PutEvents calls from 1, index is the entry's position in the call. It
// returns the ErrorCode and ErrorMessage to answer with, or code "" to accept.
type EntryFault func(call, index int, e Entry) (code, message string)

// Stats are the emulator's counters.
type Stats struct {
	// PutEventsCalls counts every PutEvents request, throttled and rejected ones included.
	PutEventsCalls int64
	// ThrottledCalls counts calls answered with ThrottlingException.
	ThrottledCalls int64
	// QuotaThrottledCalls counts those throttled by the PutEvents quota
	// (the rest were injected).
	QuotaThrottledCalls int64
	// RejectedCalls counts calls that failed validation as a whole.
	RejectedCalls int64
	// EntriesAccepted and EntriesFailed count result entries.
	EntriesAccepted int64
	EntriesFailed   int64
	// Chunks counts billed 64 KB chunks of accepted entries.
	Chunks int64
	// AcceptedBytes sums the sizes of accepted entries.
	AcceptedBytes int64
	// FailedByCode counts failed entries per ErrorCode.
	FailedByCode map[string]int64
	// MatchedEvents counts (event, rule) matches; Invocations delivery
	// attempts, RetryInvocationAttempts those that were retries,
	// FailedInvocations deliveries given up, InvocationsSentToDLQ and
	// InvocationsFailedToBeSentToDLQ what became of those (EventBridge's
	// CloudWatch metrics of the same names).
	MatchedEvents                  int64
	Invocations                    int64
	RetryInvocationAttempts        int64
	FailedInvocations              int64
	InvocationsSentToDLQ           int64
	InvocationsFailedToBeSentToDLQ int64
}

type bus struct {
	name    string
	created time.Time
}

// Emulator is an in-process EventBridge. It is an http.Handler; mount it on
// the localaws gateway under the "events" signing name. Safe for concurrent use.
type Emulator struct {
	opts Options

	mu         sync.Mutex
	buses      map[string]*bus
	stats      Stats
	fault      EntryFault
	failNext   []string // error codes for the next failing entries
	throttleN  int
	throttleFn func(call int) bool
	quota      map[string]*tokenbucket.Bucket // by "account/region"
	// archiveFile holds archived events' text (Options.ArchiveDir),
	// archivedText the text of those kept in memory.
	archiveFile  *archiveFile
	archivedText [][]byte

	rules        map[string]map[string]*rule // by bus, then name
	archives     map[string]*archive
	replays      map[string]*replay
	connections  map[string]*connection
	destinations map[string]*apiDestination
	queueURLs    map[string]string // by queue ARN
	work         chan *delivery
	done         chan struct{}
	inflight     int
	closed       bool
}

// New returns an emulator with the "default" bus and opts.Buses.
func New(opts Options) *Emulator {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = NewUUID
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 16 << 20
	}
	if opts.PutEventsBurst <= 0 {
		opts.PutEventsBurst = max(1, int(math.Ceil(opts.PutEventsQuota)))
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.RetryDelay == nil {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	e := &Emulator{opts: opts, buses: map[string]*bus{}, quota: map[string]*tokenbucket.Bucket{},
		rules: map[string]map[string]*rule{}, archives: map[string]*archive{}, replays: map[string]*replay{},
		connections: map[string]*connection{}, destinations: map[string]*apiDestination{}, queueURLs: map[string]string{},
		work: make(chan *delivery, 1024), done: make(chan struct{})}
	for i := 0; i < opts.Workers; i++ {
		go e.worker()
	}
	now := opts.Now().UTC()
	e.buses[DefaultBus] = &bus{name: DefaultBus, created: now}
	for _, b := range opts.Buses {
		e.buses[b] = &bus{name: b, created: now}
	}
	e.stats.FailedByCode = map[string]int64{}
	return e
}

// BusARN returns the ARN of the named bus in the emulator's region and account.
func (e *Emulator) BusARN(name string) string {
	return "arn:aws:events:" + e.opts.Region + ":" + e.opts.AccountID + ":event-bus/" + name
}

// SetEntryFault installs (or, with nil, removes) a per-entry fault function.
func (e *Emulator) SetEntryFault(f EntryFault) {
	e.mu.Lock()
	e.fault = f
	e.mu.Unlock()
}

// FailNextEntries makes the next n otherwise valid entries fail with the
// given ErrorCode (e.g. "InternalFailure", "ThrottlingException").
func (e *Emulator) FailNextEntries(n int, code string) {
	e.mu.Lock()
	for i := 0; i < n; i++ {
		e.failNext = append(e.failNext, code)
	}
	e.mu.Unlock()
}

// ThrottleNextCalls makes the next n PutEvents calls fail as a whole with
// ThrottlingException (HTTP 400, "Rate exceeded").
func (e *Emulator) ThrottleNextCalls(n int) {
	e.mu.Lock()
	e.throttleN += n
	e.mu.Unlock()
}

// SetThrottle installs (or, with nil, removes) a function deciding per call
// (counted from 1) whether PutEvents is throttled as a whole.
func (e *Emulator) SetThrottle(f func(call int) bool) {
	e.mu.Lock()
	e.throttleFn = f
	e.mu.Unlock()
}

// Stats returns a copy of the counters.
func (e *Emulator) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.FailedByCode = make(map[string]int64, len(e.stats.FailedByCode))
	for k, v := range e.stats.FailedByCode {
		s.FailedByCode[k] = v
	}
	return s
}

// apiError is an AWS JSON protocol error.
type apiError struct {
	status  int
	code    string
	message string
}

func (a *apiError) Error() string { return a.code + ": " + a.message }

func validation(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ValidationException", message: msg}
}

func notFound(name string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ResourceNotFoundException", message: "Event bus " + name + " does not exist."}
}

// ServeHTTP implements http.Handler for the AWS JSON 1.1 protocol.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AWSEvents.")
	if r.Method != http.MethodPost || !ok {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "UnknownOperationException", message: "unknown operation " + target})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, e.opts.MaxBodyBytes+1))
	if err != nil {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "read request body: " + err.Error()})
		return
	}
	if int64(len(body)) > e.opts.MaxBodyBytes {
		writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, code: "RequestEntityTooLarge", message: "request body too large"})
		return
	}
	var out any
	var aerr *apiError
	switch op {
	case "PutEvents":
		out, aerr = e.putEvents(r.Context(), e.opts.AccountID+"/"+requestRegion(r, e.opts.Region), body)
	case "CreateEventBus":
		out, aerr = e.createEventBus(body)
	case "DescribeEventBus":
		out, aerr = e.describeEventBus(body)
	case "ListEventBuses":
		out, aerr = e.listEventBuses(body)
	case "DeleteEventBus":
		out, aerr = e.deleteEventBus(body)
	case "PutRule":
		out, aerr = e.putRule(body)
	case "DescribeRule":
		out, aerr = e.describeRule(body)
	case "ListRules":
		out, aerr = e.listRules(body)
	case "DeleteRule":
		out, aerr = e.deleteRule(body)
	case "EnableRule":
		out, aerr = e.setRuleState(body, "ENABLED")
	case "DisableRule":
		out, aerr = e.setRuleState(body, "DISABLED")
	case "PutTargets":
		out, aerr = e.putTargets(body)
	case "ListTargetsByRule":
		out, aerr = e.listTargetsByRule(body)
	case "RemoveTargets":
		out, aerr = e.removeTargets(body)
	case "TestEventPattern":
		out, aerr = e.testEventPattern(body)
	case "CreateArchive":
		out, aerr = e.createArchive(body)
	case "DescribeArchive":
		out, aerr = e.describeArchive(body)
	case "ListArchives":
		out, aerr = e.listArchives(body)
	case "DeleteArchive":
		out, aerr = e.deleteArchive(body)
	case "StartReplay":
		out, aerr = e.startReplay(body)
	case "DescribeReplay":
		out, aerr = e.describeReplay(body)
	case "ListReplays":
		out, aerr = e.listReplays(body)
	case "CreateConnection":
		out, aerr = e.createConnection(body)
	case "DescribeConnection":
		out, aerr = e.describeConnection(body)
	case "DeleteConnection":
		out, aerr = e.deleteConnection(body)
	case "CreateApiDestination":
		out, aerr = e.createAPIDestination(body)
	case "DescribeApiDestination":
		out, aerr = e.describeAPIDestination(body)
	case "DeleteApiDestination":
		out, aerr = e.deleteAPIDestination(body)
	default:
		aerr = &apiError{status: http.StatusBadRequest, code: "UnknownOperationException", message: "operation " + op + " is not supported by the emulator"}
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	buf, err := json.Marshal(out)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "InternalException", message: "encode response"})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_, _ = w.Write(buf)
}

func writeError(w http.ResponseWriter, a *apiError) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", a.code)
	w.WriteHeader(a.status)
	buf, _ := json.Marshal(map[string]string{"__type": a.code, "message": a.message})
	_, _ = w.Write(buf)
}

// wireEntry is a PutEventsRequestEntry on the wire; Time is epoch seconds.
type wireEntry struct {
	Source       *string     `json:"Source"`
	DetailType   *string     `json:"DetailType"`
	Detail       *string     `json:"Detail"`
	EventBusName *string     `json:"EventBusName"`
	Resources    []string    `json:"Resources"`
	Time         json.Number `json:"Time"`
	TraceHeader  *string     `json:"TraceHeader"`
}

type resultEntry struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

type putEventsOutput struct {
	Entries          []resultEntry `json:"Entries"`
	FailedEntryCount int           `json:"FailedEntryCount"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// busName returns the bus name of an EventBusName (a name or an ARN).
func busName(s string) string {
	if s == "" {
		return DefaultBus
	}
	if i := strings.LastIndex(s, ":event-bus/"); i >= 0 {
		return s[i+len(":event-bus/"):]
	}
	return s
}

// requestRegion returns the Region of a SigV4-signed request's credential
// scope (Credential=AKID/date/region/service/aws4_request), or def.
func requestRegion(r *http.Request, def string) string {
	auth := r.Header.Get("Authorization")
	i := strings.Index(auth, "Credential=")
	if i < 0 {
		return def
	}
	scope := strings.Split(strings.SplitN(auth[i+len("Credential="):], ",", 2)[0], "/")
	if len(scope) < 5 || scope[2] == "" {
		return def
	}
	return scope[2]
}

// takeToken takes a PutEvents token of the account and Region key, and
// reports false when the bucket is empty. e.mu is held.
func (e *Emulator) takeToken(key string) bool {
	if e.opts.PutEventsQuota <= 0 {
		return true
	}
	b, ok := e.quota[key]
	if !ok {
		b = tokenbucket.New(e.opts.PutEventsQuota, e.opts.PutEventsBurst, e.opts.Now)
		e.quota[key] = b
	}
	return b.Take(1)
}

func (e *Emulator) putEvents(ctx context.Context, quotaKey string, body []byte) (any, *apiError) {
	var in struct {
		Entries []wireEntry `json:"Entries"`
	}
	e.mu.Lock()
	e.stats.PutEventsCalls++
	call := int(e.stats.PutEventsCalls)
	throttled := false
	if e.throttleN > 0 {
		e.throttleN--
		throttled = true
	} else if e.throttleFn != nil && e.throttleFn(call) {
		throttled = true
	} else if !e.takeToken(quotaKey) {
		throttled = true
		e.stats.QuotaThrottledCalls++
	}
	if throttled {
		e.stats.ThrottledCalls++
	}
	e.mu.Unlock()
	if throttled {
		return nil, &apiError{status: http.StatusBadRequest, code: "ThrottlingException", message: "Rate exceeded"}
	}
	reject := func(a *apiError) (any, *apiError) {
		e.mu.Lock()
		e.stats.RejectedCalls++
		e.mu.Unlock()
		return nil, a
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return reject(&apiError{status: http.StatusBadRequest, code: "SerializationException", message: "Start of structure or map found where not expected."})
	}
	switch {
	case len(in.Entries) == 0:
		return reject(validation("1 validation error detected: Value '[]' at 'entries' failed to satisfy constraint: Member must have length greater than or equal to 1"))
	case len(in.Entries) > MaxEntries:
		return reject(validation("1 validation error detected: Value '[PutEventsRequestEntry]' at 'entries' failed to satisfy constraint: Member must have length less than or equal to 10"))
	}
	entries := make([]Entry, len(in.Entries))
	total := 0
	for i, we := range in.Entries {
		en := Entry{
			Source: str(we.Source), DetailType: str(we.DetailType), Detail: str(we.Detail),
			EventBusName: str(we.EventBusName), Resources: we.Resources, TraceHeader: str(we.TraceHeader),
		}
		if we.Time != "" {
			f, err := we.Time.Float64()
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				return reject(&apiError{status: http.StatusBadRequest, code: "SerializationException", message: "Time is not a timestamp"})
			}
			sec, frac := math.Modf(f)
			t := time.Unix(int64(sec), int64(frac*1e9)).UTC()
			en.Time = &t
		}
		entries[i] = en
		total += en.Size()
	}
	if total > e.opts.MaxRequestBytes {
		return reject(validation("Total size of the entries in the request is over the limit."))
	}

	out := putEventsOutput{Entries: make([]resultEntry, len(entries))}
	for i, en := range entries {
		res := e.putEntry(ctx, call, i, en)
		out.Entries[i] = res
		e.mu.Lock()
		if res.ErrorCode != "" {
			out.FailedEntryCount++
			e.stats.EntriesFailed++
			e.stats.FailedByCode[res.ErrorCode]++
		} else {
			size := en.Size()
			e.stats.EntriesAccepted++
			e.stats.AcceptedBytes += int64(size)
			e.stats.Chunks += int64(Chunks(size))
		}
		e.mu.Unlock()
	}
	return out, nil
}

// Chunks returns the number of billed 64 KB chunks of an entry of size bytes
// (at least one).
func Chunks(size int) int {
	if size <= 0 {
		return 1
	}
	return (size + ChunkBytes - 1) / ChunkBytes
}

// putEntry validates, applies injected faults to, and delivers one entry.
func (e *Emulator) putEntry(ctx context.Context, call, index int, en Entry) resultEntry {
	name := busName(en.EventBusName)
	e.mu.Lock()
	_, exists := e.buses[name]
	e.mu.Unlock()
	switch {
	case en.Source == "":
		return resultEntry{ErrorCode: "InvalidArgument", ErrorMessage: "Parameter Source is not valid. Reason: Source is a required argument."}
	case en.DetailType == "":
		return resultEntry{ErrorCode: "InvalidArgument", ErrorMessage: "Parameter DetailType is not valid. Reason: DetailType is a required argument."}
	case en.Detail == "":
		return resultEntry{ErrorCode: "InvalidArgument", ErrorMessage: "Parameter Detail is not valid. Reason: Detail is a required argument."}
	}
	detail, ok := compactObject(en.Detail)
	switch {
	case !ok:
		return resultEntry{ErrorCode: "MalformedDetail", ErrorMessage: "Detail is malformed."}
	case strings.HasPrefix(en.Source, "aws."):
		return resultEntry{ErrorCode: "NotAuthorizedForSourceException", ErrorMessage: "Not authorized for the source."}
	case !exists && !e.opts.AcceptUnknownBus:
		return resultEntry{ErrorCode: "ResourceNotFoundException", ErrorMessage: "Event bus " + name + " does not exist."}
	}
	e.mu.Lock()
	code, msg := "", ""
	if len(e.failNext) > 0 {
		code = e.failNext[0]
		e.failNext = e.failNext[1:]
		msg = defaultMessage(code)
	} else if e.fault != nil {
		code, msg = e.fault(call, index, en)
		if code != "" && msg == "" {
			msg = defaultMessage(code)
		}
	}
	e.mu.Unlock()
	if code != "" {
		return resultEntry{ErrorCode: code, ErrorMessage: msg}
	}
	id := e.opts.NewID()
	if !exists {
		return resultEntry{EventID: id} // AWS accepts and drops it
	}
	t := e.opts.Now().UTC()
	if en.Time != nil {
		t = *en.Time
	}
	resources := en.Resources
	if resources == nil {
		resources = []string{}
	}
	ev := Event{
		Version: "0", ID: id, DetailType: en.DetailType, Source: en.Source,
		Account: e.opts.AccountID, Time: t.Format("2006-01-02T15:04:05Z"), Region: e.opts.Region,
		Resources: resources, Detail: detail,
	}
	if e.opts.Sink != nil {
		if err := e.opts.Sink.Deliver(ctx, name, ev); err != nil {
			return resultEntry{ErrorCode: "InternalFailure", ErrorMessage: "Internal Service Failure"}
		}
	}
	e.ingest(name, ev)
	return resultEntry{EventID: id}
}

// ingest routes an accepted event to the bus's rules and archives. An
// event no rule or archive of its bus can see is not encoded at all.
func (e *Emulator) ingest(bus string, ev Event) {
	e.mu.Lock()
	listened := e.listened(bus)
	e.mu.Unlock()
	if !listened {
		return
	}
	raw, err := marshalEvent(ev)
	if err != nil {
		return
	}
	e.mu.Lock()
	e.route(bus, raw, nil, true)
	e.mu.Unlock()
}

// listened reports whether bus has a rule or an archive. e.mu is held.
func (e *Emulator) listened(bus string) bool {
	if len(e.rules[bus]) > 0 {
		return true
	}
	for _, a := range e.archives {
		if a.sourceBus == bus {
			return true
		}
	}
	return false
}

// detailMark stands for the detail while the envelope is encoded: a JSON
// number, so the bytes `,"detail":0` can only be the member itself (a
// quote inside a string is escaped).
var detailMark = []byte(`,"detail":0`)

// marshalEvent is ev's JSON text with <, > and & left as they are. Its
// detail is written as it is: every path into ingest has compacted it
// (compactObject), so the text is not scanned a second time.
func marshalEvent(ev Event) ([]byte, error) {
	detail := ev.Detail
	ev.Detail = json.RawMessage("0")
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, err
	}
	head := bytes.TrimRight(b.Bytes(), "\n")
	at := bytes.Index(head, detailMark)
	if at < 0 {
		return nil, fmt.Errorf("fakeeventbridge: encoded event %s has no detail", ev.ID)
	}
	out := make([]byte, 0, len(head)+len(detail))
	out = append(out, head[:at+len(detailMark)-1]...)
	out = append(out, detail...)
	return append(out, head[at+len(detailMark):]...), nil
}

// PutServiceEvent puts an event an AWS service sends (a source starting
// "aws.", which PutEvents refuses) on bus: it goes to the bus's rules and
// archives, not to the Sink. Empty ID, Version, Account, Region and Time are
// filled in; resources default to [].
func (e *Emulator) PutServiceEvent(bus string, ev Event) error {
	name := busName(bus)
	e.mu.Lock()
	_, ok := e.buses[name]
	e.mu.Unlock()
	if !ok {
		return fmt.Errorf("fakeeventbridge: event bus %s does not exist", name)
	}
	detail, ok := compactObject(string(ev.Detail))
	if !ok {
		return fmt.Errorf("fakeeventbridge: service event detail is not a JSON object")
	}
	ev.Detail = detail
	if ev.ID == "" {
		ev.ID = e.opts.NewID()
	}
	if ev.Version == "" {
		ev.Version = "0"
	}
	if ev.Account == "" {
		ev.Account = e.opts.AccountID
	}
	if ev.Region == "" {
		ev.Region = e.opts.Region
	}
	if ev.Time == "" {
		ev.Time = e.opts.Now().UTC().Format("2006-01-02T15:04:05Z")
	}
	if ev.Resources == nil {
		ev.Resources = []string{}
	}
	e.ingest(name, ev)
	return nil
}

func defaultMessage(code string) string {
	switch code {
	case "InternalFailure":
		return "Internal Service Failure"
	case "ThrottlingException":
		return "Rate exceeded"
	default:
		return code
	}
}

// compactObject is s without insignificant white space if s is a JSON
// object (one pass validates and compacts), and false if it is not.
func compactObject(s string) (json.RawMessage, bool) {
	b := bytes.TrimLeft([]byte(s), " \t\r\n")
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(len(b))
	if err := json.Compact(&out, b); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

type busOut struct {
	Name             string  `json:"Name"`
	Arn              string  `json:"Arn"`
	CreationTime     float64 `json:"CreationTime"`
	LastModifiedTime float64 `json:"LastModifiedTime"`
}

func (e *Emulator) busOut(b *bus) busOut {
	ts := float64(b.created.UnixMilli()) / 1000
	return busOut{Name: b.name, Arn: e.BusARN(b.name), CreationTime: ts, LastModifiedTime: ts}
}

func validBusName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-", c)) {
			return false
		}
	}
	return true
}

func (e *Emulator) createEventBus(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request"}
	}
	if !validBusName(in.Name) {
		return nil, validation(fmt.Sprintf("1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [/\\.\\-_A-Za-z0-9]+", in.Name))
	}
	if in.Name == DefaultBus {
		return nil, validation("Event bus name must not be default.")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.buses[in.Name]; ok {
		return nil, &apiError{status: http.StatusBadRequest, code: "ResourceAlreadyExistsException", message: "Event bus " + in.Name + " already exists."}
	}
	e.buses[in.Name] = &bus{name: in.Name, created: e.opts.Now().UTC()}
	return map[string]string{"EventBusArn": e.BusARN(in.Name)}, nil
}

func (e *Emulator) describeEventBus(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request"}
		}
	}
	name := busName(in.Name)
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.buses[name]
	if !ok {
		return nil, notFound(name)
	}
	return e.busOut(b), nil
}

func (e *Emulator) listEventBuses(body []byte) (any, *apiError) {
	var in struct {
		NamePrefix string `json:"NamePrefix"`
		Limit      int    `json:"Limit"`
		NextToken  string `json:"NextToken"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request"}
		}
	}
	limit, a := listLimit(in.Limit)
	if a != nil {
		return nil, a
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out struct {
		EventBuses []busOut `json:"EventBuses"`
		NextToken  string   `json:"NextToken,omitempty"`
	}
	var names []string
	names, out.NextToken = namePage(e.buses, in.NamePrefix, in.NextToken, limit)
	out.EventBuses = make([]busOut, 0, len(names))
	for _, n := range names {
		out.EventBuses = append(out.EventBuses, e.busOut(e.buses[n]))
	}
	return out, nil
}

// listLimit reads a list call's Limit: 1–100, 100 when absent.
func listLimit(limit int) (int, *apiError) {
	if limit < 0 || limit > 100 {
		return 0, validation("1 validation error detected: Value at 'limit' failed to satisfy constraint: Member must have value between 1 and 100")
	}
	if limit == 0 {
		return 100, nil
	}
	return limit, nil
}

// namePage returns, in name order, at most limit of m's names that start
// with prefix and sort after after (the NextToken of the page before), and
// the NextToken of the page after them ("" at the end: the last name given).
func namePage[V any](m map[string]V, prefix, after string, limit int) ([]string, string) {
	var names []string
	for n := range m {
		if strings.HasPrefix(n, prefix) && n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) > limit {
		return names[:limit], names[limit-1]
	}
	return names, ""
}

func (e *Emulator) deleteEventBus(body []byte) (any, *apiError) {
	var in struct {
		Name string `json:"Name"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, code: "SerializationException", message: "malformed request"}
	}
	name := busName(in.Name)
	if name == DefaultBus {
		return nil, validation("Cannot delete event bus default.")
	}
	e.mu.Lock()
	delete(e.buses, name) // AWS answers success for a bus that does not exist
	e.mu.Unlock()
	return struct{}{}, nil
}

// NewUUID returns a random (version 4) UUID in its canonical text form.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
