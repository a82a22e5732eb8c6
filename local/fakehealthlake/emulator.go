// Package healthlake emulates the parts of AWS HealthLake the pipeline uses,
// over HTTP, for tests and cdc-local:
//
//   - FHIR R4 REST under /datastore/{datastoreId}/r4/: create, update
//     (creates if absent), read, delete, search of a type by
//     `_lastUpdated` (`_summary=count`, `_count`, paging, GET and POST
//     `_search`, the consistency header; search.go), instance and
//     type-level history (`_count`, `_since`, paging, the history
//     consistency header, a modelled history lag and per-type history
//     opt-out); server-assigned meta.versionId and millisecond
//     meta.lastUpdated (never going back; strictly increasing across a
//     resource's versions); bodies validated with golang-fhir-models.
//   - `$erase` of a resource and `$bulk-delete` of a type (soft or hard) as
//     asynchronous jobs with a modelled delay.
//   - $export (POST and GET) as an asynchronous job writing NDJSON into S3 in
//     HealthLake's layout through a real S3 client; status GET and cancel
//     DELETE on /r4/export/{jobId}; one job in progress at a time, others
//     QUEUED.
//   - the AWS JSON 1.0 operations ListFHIRExportJobs, DescribeFHIRExportJob,
//     ListFHIRDatastores and DescribeFHIRDatastore of the SDK's
//     service/healthlake client.
//   - SigV4 verification of every request against the configured credentials.
//   - FHIR Subscriptions (R5 Backport topic-based, EventBridge channel;
//     subscriptions.go): activation with a handshake, one notification per
//     matching write through Options.OnNotification, with modelled delay,
//     drops, duplicates and retries, moved on by Tick, Advance and RunJobs.
//
// Jobs advance lazily: every request (and Advance) moves each unfinished job
// on when its ProcessingDelay has passed, so there is no background goroutine.
// $erase and $bulk-delete jobs move on at every FHIR request and Tick as
// their EraseDelay or BulkDeleteDelay passes, also when Manual holds exports.
package fakehealthlake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// ObjectPutter is the S3 call export jobs write their files with
// (*s3.Client satisfies it).
type ObjectPutter interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Options configure an Emulator.
type Options struct {
	// Region and AccountID appear in ARNs and signatures; defaults from localaws.
	Region, AccountID string
	// AccessKeyID and SecretAccessKey are the only credentials accepted;
	// defaults localaws.AccessKeyID and localaws.SecretAccessKey.
	AccessKeyID, SecretAccessKey string
	// MoreAccessKeys are further accepted access key ids, each with its
	// secret (cdc-local gives every principal its own key).
	MoreAccessKeys map[string]string
	// SkipAuth turns SigV4 verification off.
	SkipAuth bool
	// S3 writes export files; exports fail without it.
	S3 ObjectPutter
	// DefaultExportS3URI and DefaultExportRoleARN serve a `GET …/$export`
	// sent without a body (the body, when given, wins).
	DefaultExportS3URI, DefaultExportRoleARN string
	// Datastores are created at start. More can be added with CreateDatastore.
	Datastores []string
	// DatastoreCreatedAt, when set, is every data store's CreatedAt (default
	// the clock at its creation). The request-rate quotas depend on it:
	// data stores created before LegacyBefore have HealthLake's lower ones.
	DatastoreCreatedAt time.Time
	// Quotas turns HealthLake's request-rate quotas on (Quotas, quotas.go):
	// a request over one is answered ThrottlingException, as HealthLake
	// answers it, and counted in QuotaThrottles. Off by default here;
	// cdc-local and the simulation turn it on (local/stack's
	// Options.HealthLakeQuotas).
	Quotas bool
	// ResourcesPerFile splits each type's export into files; default 5000.
	ResourcesPerFile int
	// ProcessingDelay is how long a job stays SUBMITTED before it is queued
	// or started, and each cancel step lasts (0: it moves on at the next
	// request). It is also how long a job stays IN_PROGRESS when the
	// duration model below is off (ExportStartup and ExportPerMB both 0).
	ProcessingDelay time.Duration
	// ExportStartup and ExportPerMB model how long a job runs: IN_PROGRESS
	// lasts ExportStartup + ExportPerMB × the MiB of resources it exports
	// (modelled; HealthLake documents no figure — see docs/LOCAL.md).
	ExportStartup, ExportPerMB time.Duration
	// MaxRunningExports is how many export jobs may be IN_PROGRESS at once
	// in the account and region (HealthLake's quota "concurrent
	// StartFHIRExportJob jobs": 1, not adjustable); others wait, first in
	// first out. Default 1.
	MaxRunningExports int
	// VisibilityLag is how long a write takes to become visible to exports:
	// an export that reads the data store at time T sees each resource as
	// it was at T − VisibilityLag (modelled; HealthLake documents no figure).
	VisibilityLag time.Duration
	// OnJobEvent, when set, receives the job state events HealthLake sends
	// to the account's default EventBridge bus (source "aws.healthlake").
	// It is called without the emulator's lock, after the request (or
	// Advance, RunJobs, Tick) that changed the job's status.
	OnJobEvent func(JobEvent)
	// Manual stops jobs from advancing by themselves; only Advance moves them.
	Manual bool
	// FaultRate is the probability that a call is answered
	// ThrottlingException or 500 instead of served (cdc-local --fault-rate).
	FaultRate float64
	// ThrottleStatuses are the HTTP statuses a throttled call of the FHIR
	// REST API is answered with: the fault dice pick one at random,
	// ThrottleNext takes them in turn. Default 429 and 400. HealthLake
	// answers ThrottlingException "for all operations" when a quota is
	// exceeded and its API reference gives it HTTP 400; for the FHIR REST
	// API no status is documented, so both are modelled. A throttled call of
	// the JSON API (X-Amz-Target) is always answered 400, as documented.
	ThrottleStatuses []int
	// JobFaultRate is the probability that a job ends FAILED.
	JobFaultRate float64
	// Seed seeds the fault dice; 0 picks a random seed.
	Seed uint64
	// ValidateOnLoad makes Datastore.Load validate with golang-fhir-models too.
	ValidateOnLoad bool
	// BodyDir, when set, keeps the stored bytes of every version in a
	// temporary file of this directory (one per data store, created with
	// os.CreateTemp at the first write and removed by Close); only where
	// each body is stays in memory. Empty keeps them in memory.
	BodyDir string
	// OnExportFinish, when set, is called as an export job finishes, before
	// its files are written and its status can be seen: snapshot writes the
	// job's data store as Datastore.Snapshot does (without taking the
	// emulator's lock). It runs with the emulator's lock held: it must not
	// call the emulator. cdc-local saves its state there, so nothing an
	// export carries is missing from the saved data store.
	OnExportFinish func(datastoreID string, snapshot func(io.Writer) error)
	// Now is the clock for meta.lastUpdated and job times; default time.Now.
	Now func() time.Time

	// HistoryMaxCount is the data store's largest history page: a history
	// read answers `_count` entries or this many, whichever is lower, and
	// this many without `_count` (HealthLake "Reading FHIR resource
	// history"; the figure is modelled). Default 100.
	HistoryMaxCount int
	// SearchMaxCount is the data store's largest search page: a search
	// answers `_count` entries or this many, whichever is lower, and this
	// many without `_count` (the figure is modelled). Default 100.
	SearchMaxCount int
	// HistoryLag is how long a new version stays out of history reads and
	// searches sent with `x-amz-fhir-history-consistency-level: eventual`
	// (the default when the header is absent; a search sees the version
	// before it, if any); `strong` reads see every version (modelled;
	// HealthLake documents no figure). 0: no lag. Changeable with
	// SetHistoryLag.
	HistoryLag time.Duration
	// HistoryOptOut lists resource types opted out of history (HealthLake
	// lets a customer do so through AWS Support; the behaviour is
	// modelled): their history reads see only the current, not deleted,
	// version of each resource. Changeable with SetHistoryOptOut.
	HistoryOptOut []string
	// EraseDelay is how long a `$erase` job stays SUBMITTED, and then
	// IN_PROGRESS, before the resource is erased and the job COMPLETED
	// (modelled). 0: it runs at the next request or Tick.
	EraseDelay time.Duration
	// BulkDeleteDelay is the same for `$bulk-delete` jobs (modelled).
	BulkDeleteDelay time.Duration
	// DatastoreNames gives data stores their DatastoreName in
	// ListFHIRDatastores and DescribeFHIRDatastore; default the id.
	DatastoreNames map[string]string
	// DatastoreKMSKeyID, when set, is the customer managed key the data
	// stores report in SseConfiguration; empty reports AWS_OWNED_KMS_KEY.
	DatastoreKMSKeyID string
	// Endpoint is the base URL of DatastoreEndpoint (…/datastore/{id}/r4/);
	// default https://healthlake.{Region}.amazonaws.com.
	Endpoint string

	// OnNotification, when set, receives every FHIR Subscription
	// notification (handshakes and event bundles) as the EventBridge event
	// HealthLake puts on the Subscription's bus (channel.endpoint); an
	// error is a failed delivery (a handshake's puts the Subscription in
	// error, an event bundle's is retried). It is called without the
	// emulator's lock, from Tick, Advance and RunJobs. Nil turns the
	// subscription model off: Subscriptions are stored but never activated
	// (their status stays "requested") and nothing is sent.
	OnNotification func(Notification) error
	// Subscriptions configure the subscription model (delays, faults,
	// retries, payload limits; see SubscriptionOptions).
	Subscriptions SubscriptionOptions
}

// Emulator is an http.Handler serving the HealthLake APIs the pipeline uses.
type Emulator struct {
	opts Options

	mu         sync.Mutex
	datastores map[string]*Datastore
	jobs       []*job
	jobByID    map[string]*job
	// active holds the jobs not in a terminal status, in submission order:
	// the only ones a tick looks at.
	active []*job
	// changes counts job status changes (a tick steps until none happens).
	changes    uint64
	lastStamp  int64 // newest lastUpdated given, Unix milliseconds
	maxRunning int
	requests   []Request
	rng        *rand.Rand

	throttleNext int
	throttleTurn int // REST throttles answered by ThrottleNext so far
	// quotaBuckets are the request-rate quotas' token buckets, by quota
	// name (and "/" data store id); quotaThrottles counts the requests each
	// refused; quotaTurn the REST ones, to take ThrottleStatuses in turn.
	quotaBuckets    map[string]*tokenbucket.Bucket
	quotaThrottles  map[string]int
	quotaTurn       int
	serverErrorNext int
	serverErrorCode int
	nextJobOutcome  []jobFault
	failNextCancel  int
	startFaults     []startFault
	pendingEvents   []JobEvent

	// noHistory holds the types of Options.HistoryOptOut.
	noHistory map[string]bool
	// deleteJobs holds the $erase and $bulk-delete jobs by id; pendingDeletes
	// those not COMPLETED, in submission order.
	deleteJobs     map[string]*deleteJob
	deleteOrder    []*deleteJob
	pendingDeletes []*deleteJob

	// subs is the FHIR Subscription model (subscriptions.go).
	subs subscriptions
}

type jobFault struct {
	status  string
	message string
	// lost is how many of the job's resources are left out of its files
	// and reported in its error file (COMPLETED_WITH_ERRORS).
	lost int
}

// startFault is the scripted answer of one `POST $export`: accept starts
// the job before answering status.
type startFault struct {
	accept  bool
	status  int
	message string
}

// Request is one export-API request the emulator served (FHIR CRUD calls are
// not recorded): what tests assert on.
type Request struct {
	// Operation is StartExport, DescribeExport, CancelExport,
	// ListFHIRExportJobs, DescribeFHIRExportJob, ListFHIRDatastores or
	// DescribeFHIRDatastore.
	Operation string
	Method    string
	Path      string
	// Query is the raw query string.
	Query string
	// Prefer and ContentType are the request headers of those names.
	Prefer, ContentType string
	Body                []byte
	// Status is the HTTP status answered.
	Status int
}

// New returns an Emulator.
func New(opts Options) *Emulator {
	if opts.Region == "" {
		opts.Region = localaws.DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = localaws.DefaultAccount
	}
	if opts.AccessKeyID == "" {
		opts.AccessKeyID = localaws.AccessKeyID
	}
	if opts.SecretAccessKey == "" {
		opts.SecretAccessKey = localaws.SecretAccessKey
	}
	if len(opts.ThrottleStatuses) == 0 {
		opts.ThrottleStatuses = []int{http.StatusTooManyRequests, http.StatusBadRequest}
	}
	if opts.ResourcesPerFile <= 0 {
		opts.ResourcesPerFile = 5000
	}
	if opts.MaxRunningExports <= 0 {
		opts.MaxRunningExports = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HistoryMaxCount <= 0 {
		opts.HistoryMaxCount = 100
	}
	if opts.SearchMaxCount <= 0 {
		opts.SearchMaxCount = 100
	}
	if opts.Endpoint == "" {
		opts.Endpoint = "https://healthlake." + opts.Region + ".amazonaws.com"
	}
	seed := opts.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	e := &Emulator{
		opts:       opts,
		datastores: map[string]*Datastore{},
		jobByID:    map[string]*job{},
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		deleteJobs: map[string]*deleteJob{},
		subs:       newSubscriptions(opts.Subscriptions),

		quotaBuckets:   map[string]*tokenbucket.Bucket{},
		quotaThrottles: map[string]int{},
	}
	e.noHistory = typeSet(opts.HistoryOptOut)
	for _, id := range opts.Datastores {
		e.CreateDatastore(id)
	}
	return e
}

// CreateDatastore adds an empty data store (or returns the existing one).
func (e *Emulator) CreateDatastore(id string) *Datastore {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ds, ok := e.datastores[id]; ok {
		return ds
	}
	ds := newDatastore(e, id)
	e.datastores[id] = ds
	return ds
}

// Close removes the files of Options.BodyDir; reads of stored bodies fail
// afterwards. Without BodyDir it does nothing.
func (e *Emulator) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, ds := range e.datastores {
		if err := ds.bodies.close(); err != nil {
			errs = append(errs, fmt.Errorf("data store %s: %w", ds.id, err))
		}
	}
	return errors.Join(errs...)
}

// Datastore returns a data store by id.
func (e *Emulator) Datastore(id string) (*Datastore, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ds, ok := e.datastores[id]
	return ds, ok
}

// ThrottleNext answers the next n calls (any API) with ThrottlingException:
// a FHIR REST call with Options.ThrottleStatuses in turn (429, then 400, by
// default), a JSON API call with 400.
func (e *Emulator) ThrottleNext(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.throttleNext = n
}

// FailNextCalls answers the next n calls (any API) with the given 5xx status
// (default 500 when status is not 5xx).
func (e *Emulator) FailNextCalls(n, status int) {
	if status < 500 || status > 599 {
		status = http.StatusInternalServerError
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.serverErrorNext = n
	e.serverErrorCode = status
}

// FailNextJob makes the next job that finishes end FAILED with message.
func (e *Emulator) FailNextJob(message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextJobOutcome = append(e.nextJobOutcome, jobFault{status: StatusFailed, message: message})
}

// CompleteNextJobWithErrors makes the next job that finishes end
// COMPLETED_WITH_ERRORS: all its files are written, plus an OperationOutcome
// error file (listed in the job's `error` list) with one entry carrying
// message; no resource is missing from the files.
func (e *Emulator) CompleteNextJobWithErrors(message string) {
	e.CompleteNextJobWithErrorsLosing(message, 0)
}

// CompleteNextJobWithErrorsLosing is CompleteNextJobWithErrors where the
// lost newest resources of the export are left out of its files, and the
// error file has one OperationOutcome entry for each (naming the resource in
// `expression`), as a job some of whose resources failed to export.
func (e *Emulator) CompleteNextJobWithErrorsLosing(message string, lost int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nextJobOutcome = append(e.nextJobOutcome, jobFault{status: StatusCompletedWithErrors, message: message, lost: max(lost, 0)})
}

// AcceptThenFailNext makes the next n `POST $export` requests start their job
// but answer with the 5xx status (default 500): an answer lost after
// HealthLake accepted the request, which the client retries.
func (e *Emulator) AcceptThenFailNext(n, status int) {
	if status < 500 || status > 599 {
		status = http.StatusInternalServerError
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 0; i < n; i++ {
		e.startFaults = append(e.startFaults, startFault{accept: true, status: status, message: "Internal server error"})
	}
}

// RefuseNextStarts answers the next n `POST $export` requests with the 4xx
// status and an OperationOutcome carrying message, starting no job. Scripted
// answers (this and AcceptThenFailNext) are used in the order given.
func (e *Emulator) RefuseNextStarts(n, status int, message string) {
	if status < 400 || status > 499 {
		status = http.StatusBadRequest
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 0; i < n; i++ {
		e.startFaults = append(e.startFaults, startFault{status: status, message: message})
	}
}

// FailNextCancel makes the next cancelled job end CANCEL_FAILED.
func (e *Emulator) FailNextCancel() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failNextCancel++
}

// SetResourcesPerFile changes how many resources each export file holds
// for jobs that finish from now on.
func (e *Emulator) SetResourcesPerFile(n int) {
	if n <= 0 {
		n = 5000
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.ResourcesPerFile = n
}

// Requests returns the export-API requests served so far.
func (e *Emulator) Requests() []Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Request(nil), e.requests...)
}

// RequestsFor returns the served requests of one operation.
func (e *Emulator) RequestsFor(op string) []Request {
	var out []Request
	for _, r := range e.Requests() {
		if r.Operation == op {
			out = append(out, r)
		}
	}
	return out
}

// MaxConcurrentExports is the largest number of jobs ever IN_PROGRESS at once.
func (e *Emulator) MaxConcurrentExports() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.maxRunning
}

// ServeHTTP implements http.Handler.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeOutcome(w, http.StatusBadRequest, "invalid", "cannot read request body")
		return
	}
	if !e.opts.SkipAuth {
		key, secret := e.opts.AccessKeyID, e.opts.SecretAccessKey
		if s, ok := e.opts.MoreAccessKeys[requestAccessKey(r)]; ok {
			key, secret = requestAccessKey(r), s
		}
		if err := verifySigV4(r, body, key, secret); err != nil {
			writeAuthError(w, r, err)
			return
		}
	}
	if e.injectFault(w, r) || e.overQuota(w, r, body) {
		return
	}
	defer e.flushEvents()
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		e.serveJSON(w, r, target, body)
		return
	}
	e.serveREST(w, r, body)
}

// injectFault answers the call with a throttling or server error when a knob
// or the fault dice say so.
func (e *Emulator) injectFault(w http.ResponseWriter, r *http.Request) bool {
	jsonAPI := r.Header.Get("X-Amz-Target") != ""
	e.mu.Lock()
	status := 0
	switch {
	case e.throttleNext > 0:
		e.throttleNext--
		status = e.throttleStatus(jsonAPI, e.throttleTurn)
		if !jsonAPI {
			e.throttleTurn++
		}
	case e.serverErrorNext > 0:
		e.serverErrorNext--
		status = e.serverErrorCode
	case e.opts.FaultRate > 0 && e.rng.Float64() < e.opts.FaultRate:
		status = http.StatusInternalServerError
		if e.rng.IntN(2) == 0 {
			status = e.throttleStatus(jsonAPI, e.rng.IntN(len(e.opts.ThrottleStatuses)))
		}
	}
	if status != 0 {
		e.record(r, nil, status)
	}
	e.mu.Unlock()
	if status == 0 {
		return false
	}
	code, msg := "ThrottlingException", "Rate exceeded"
	if status >= 500 {
		code, msg = "InternalServerException", "Internal server error"
	}
	writeFault(w, jsonAPI, status, code, msg)
	return true
}

// writeFault answers a refused call: the JSON API with an AWS JSON error,
// the FHIR REST API with an OperationOutcome (issue code "throttled" for a
// throttle, "exception" for a server error); both name the error in
// X-Amzn-ErrorType.
func writeFault(w http.ResponseWriter, jsonAPI bool, status int, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	if jsonAPI {
		writeJSONError(w, status, code, msg)
		return
	}
	issue := "throttled"
	if status >= 500 {
		issue = "exception"
	}
	writeOutcome(w, status, issue, msg)
}

// throttleStatus is the status of a throttled call: 400 for the JSON API
// (its API reference), Options.ThrottleStatuses[turn] for the FHIR REST API.
// The caller holds e.mu.
func (e *Emulator) throttleStatus(jsonAPI bool, turn int) int {
	if jsonAPI {
		return http.StatusBadRequest
	}
	return e.opts.ThrottleStatuses[turn%len(e.opts.ThrottleStatuses)]
}

// record appends an export-API request; the caller holds e.mu.
func (e *Emulator) record(r *http.Request, body []byte, status int) {
	op := operationOf(r)
	if op == "" {
		return
	}
	e.requests = append(e.requests, Request{
		Operation: op, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Prefer: r.Header.Get("Prefer"), ContentType: r.Header.Get("Content-Type"),
		Body: append([]byte(nil), body...), Status: status,
	})
}

func operationOf(r *http.Request) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/$export"):
		return "StartExport"
	case strings.Contains(r.URL.Path, "/r4/export/"):
		if r.Method == http.MethodDelete {
			return "CancelExport"
		}
		return "DescribeExport"
	}
	return ""
}

// OperationOutcome answers.

type outcomeIssue struct {
	Severity    string `json:"severity"`
	Code        string `json:"code"`
	Diagnostics string `json:"diagnostics,omitempty"`
}

type outcome struct {
	ResourceType string         `json:"resourceType"`
	Issue        []outcomeIssue `json:"issue"`
}

func writeOutcome(w http.ResponseWriter, status int, code, diagnostics string) {
	writeJSON(w, status, "application/fhir+json", outcome{
		ResourceType: "OperationOutcome",
		Issue:        []outcomeIssue{{Severity: "error", Code: code, Diagnostics: diagnostics}},
	})
}

func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSON(w, status, "application/x-amz-json-1.0", map[string]string{"__type": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode answer: %v", err), http.StatusInternalServerError)
		return
	}
	writeRaw(w, status, contentType, b)
}

// writeRaw answers b whole, with its Content-Length (as an answer of
// AWS's is sent), so the gateway's body cuts can end it part way.
func writeRaw(w http.ResponseWriter, status int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeAuthError(w http.ResponseWriter, r *http.Request, err error) {
	code := "InvalidSignatureException"
	if _, ok := err.(unknownKeyError); ok {
		code = "UnrecognizedClientException"
	}
	if r.Header.Get("X-Amz-Target") != "" {
		writeJSONError(w, http.StatusForbidden, code, err.Error())
		return
	}
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSON(w, http.StatusForbidden, "application/json", map[string]string{"message": err.Error()})
}

// nextStamp returns the lastUpdated (Unix milliseconds) of a new version
// of a resource whose previous version has lastUpdated prev (math.MinInt64
// for a new resource), without taking it: now truncated to the millisecond,
// never before an earlier stamp of any resource, and strictly after prev.
// Distinct resources written in the same millisecond share it, as in
// HealthLake; stamps never go back, so the log stays in order. The caller
// holds e.mu.
func (e *Emulator) nextStamp(prev int64) int64 {
	t := max(e.opts.Now().UnixMilli(), e.lastStamp)
	if t <= prev {
		t = prev + 1
	}
	return t
}

// commitStamp records a stamp given; the caller holds e.mu.
func (e *Emulator) commitStamp(t int64) {
	if t > e.lastStamp {
		e.lastStamp = t
	}
}

// stamp returns and takes the next lastUpdated of a resource whose previous
// version has lastUpdated prev; the caller holds e.mu.
func (e *Emulator) stamp(prev int64) int64 {
	t := e.nextStamp(prev)
	e.commitStamp(t)
	return t
}
