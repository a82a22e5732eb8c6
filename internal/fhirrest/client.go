// Package fhirrest is a small client for the AWS HealthLake FHIR REST
// export API: start (`POST …/r4/$export`), describe (`GET …/r4/export/{jobId}`)
// and cancel (`DELETE …/r4/export/{jobId}`), plus a resource's instance
// history (`GET …/r4/{type}/{id}/_history`). Requests are signed with SigV4
// (service `healthlake`) by aws-sdk-go-v2's signer. Throttling (429) and 5xx
// answers, and transport errors, are retried with exponential backoff; other
// 4xx answers are not.
//
// The SDK's service/healthlake StartFHIRExportJob cannot filter by `_since`,
// which is why this package speaks the FHIR REST API directly.
package fhirrest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// SigningName is the SigV4 service name HealthLake requests are signed for.
const SigningName = "healthlake"

// Job statuses reported by HealthLake (all ten).
const (
	StatusSubmitted           = "SUBMITTED"
	StatusQueued              = "QUEUED"
	StatusInProgress          = "IN_PROGRESS"
	StatusCompleted           = "COMPLETED"
	StatusCompletedWithErrors = "COMPLETED_WITH_ERRORS"
	StatusFailed              = "FAILED"
	StatusCancelSubmitted     = "CANCEL_SUBMITTED"
	StatusCancelInProgress    = "CANCEL_IN_PROGRESS"
	StatusCancelCompleted     = "CANCEL_COMPLETED"
	StatusCancelFailed        = "CANCEL_FAILED"
)

// Running reports whether a job in the given status may still produce
// output or hold HealthLake's export slot (SUBMITTED, QUEUED, IN_PROGRESS).
func Running(status string) bool {
	switch status {
	case StatusSubmitted, StatusQueued, StatusInProgress:
		return true
	}
	return false
}

// Terminal reports whether a status is final for the pipeline: everything
// except SUBMITTED, QUEUED, IN_PROGRESS, CANCEL_SUBMITTED and CANCEL_IN_PROGRESS.
func Terminal(status string) bool {
	switch status {
	case StatusCompleted, StatusCompletedWithErrors, StatusFailed, StatusCancelCompleted, StatusCancelFailed:
		return true
	}
	return false
}

// DefaultEndpoint returns the public HealthLake endpoint of a region.
func DefaultEndpoint(region string) string {
	return "https://healthlake." + region + ".amazonaws.com"
}

// Options configure a Client.
type Options struct {
	// Endpoint is the base URL, e.g. https://healthlake.us-east-1.amazonaws.com.
	// Default: DefaultEndpoint(Region).
	Endpoint string
	// Region is the SigV4 signing region (required).
	Region string
	// Credentials sign every request (required).
	Credentials aws.CredentialsProvider
	// HTTPClient sends requests; default a client with a 30 s timeout.
	HTTPClient *http.Client
	// MaxAttempts bounds the tries of one call, retries included; default 5.
	MaxAttempts int
	// BaseDelay and MaxDelay shape the exponential backoff with full jitter
	// between retries; defaults 200 ms and 5 s.
	BaseDelay, MaxDelay time.Duration
	// Sleep waits between retries; default a context-aware timer. Tests may
	// replace it to record the delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the signing clock; default time.Now.
	Now func() time.Time
}

// Client calls the HealthLake FHIR REST export API.
type Client struct {
	opts   Options
	base   *url.URL
	signer *v4.Signer
}

// New validates opts and returns a Client.
func New(opts Options) (*Client, error) {
	if opts.Region == "" {
		return nil, errors.New("healthlake client: region is required")
	}
	if opts.Credentials == nil {
		return nil, errors.New("healthlake client: credentials are required")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint(opts.Region)
	}
	base, err := url.Parse(strings.TrimRight(opts.Endpoint, "/"))
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("healthlake client: endpoint %q is not an absolute URL", opts.Endpoint)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 200 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = backoff.Sleep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Client{opts: opts, base: base, signer: v4.NewSigner()}, nil
}

// NewFromConfig builds a Client from an aws.Config (region, credentials,
// HTTP client). endpoint may be empty for the public endpoint of the
// region: its FIPS host when cfg asks for FIPS endpoints
// (awsclient.HealthLakeEndpoint).
func NewFromConfig(cfg aws.Config, endpoint string) (*Client, error) {
	if endpoint == "" && cfg.Region != "" {
		endpoint = awsclient.HealthLakeEndpoint(cfg)
	}
	opts := Options{Endpoint: endpoint, Region: cfg.Region, Credentials: cfg.Credentials}
	if hc, ok := cfg.HTTPClient.(*http.Client); ok {
		opts.HTTPClient = hc
	}
	return New(opts)
}

// StartExportInput is one `$export` request.
type StartExportInput struct {
	DatastoreID string
	// JobName names the job (1–64 characters); the pipeline derives it from the run id.
	JobName string
	// Since becomes `_since` (RFC 3339, milliseconds, UTC); zero omits it.
	Since time.Time
	// Types becomes `_type` (comma-separated) when not empty.
	Types []string
	// S3URI is where HealthLake writes the export (s3://bucket/prefix).
	S3URI string
	// KMSKeyID encrypts the export.
	KMSKeyID string
	// DataAccessRoleARN is the role HealthLake assumes to write to S3.
	DataAccessRoleARN string
}

// StartExportOutput is HealthLake's 202 answer.
type StartExportOutput struct {
	DatastoreID string `json:"datastoreId"`
	JobStatus   string `json:"jobStatus"`
	JobID       string `json:"jobId"`
	// Retried is true when an earlier attempt of this call failed in a way
	// that does not prove HealthLake refused it (a 5xx or a transport
	// error): that attempt may have started a job too.
	Retried bool `json:"-"`
}

// StartRequestBody is the JSON body of `POST …/$export`.
type StartRequestBody struct {
	JobName           string           `json:"JobName"`
	OutputDataConfig  OutputDataConfig `json:"OutputDataConfig"`
	DataAccessRoleArn string           `json:"DataAccessRoleArn"`
}

// OutputDataConfig is the request's output location.
type OutputDataConfig struct {
	S3Configuration S3Configuration `json:"S3Configuration"`
}

// S3Configuration is the request's bucket, prefix and key.
type S3Configuration struct {
	S3Uri    string `json:"S3Uri"`
	KmsKeyId string `json:"KmsKeyId,omitempty"`
}

// ExportPath returns the path of `$export` for a data store.
func ExportPath(datastoreID string) string {
	return "/datastore/" + url.PathEscape(datastoreID) + "/r4/$export"
}

// JobPath returns the path of an export job's status and cancel resource.
func JobPath(datastoreID, jobID string) string {
	return "/datastore/" + url.PathEscape(datastoreID) + "/r4/export/" + url.PathEscape(jobID)
}

// StartExport starts a system-wide export. The answer must be 202.
func (c *Client) StartExport(ctx context.Context, in StartExportInput) (*StartExportOutput, error) {
	if in.DatastoreID == "" || in.JobName == "" || in.S3URI == "" || in.DataAccessRoleARN == "" {
		return nil, errors.New("start export: datastore id, job name, S3 URI and data access role are required")
	}
	q := url.Values{}
	if !in.Since.IsZero() {
		q.Set("_since", in.Since.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	if len(in.Types) > 0 {
		q.Set("_type", strings.Join(in.Types, ","))
	}
	body, err := json.Marshal(StartRequestBody{
		JobName:           in.JobName,
		OutputDataConfig:  OutputDataConfig{S3Configuration: S3Configuration{S3Uri: in.S3URI, KmsKeyId: in.KMSKeyID}},
		DataAccessRoleArn: in.DataAccessRoleARN,
	})
	if err != nil {
		return nil, fmt.Errorf("start export: encode body: %w", err)
	}
	a, err := c.do(ctx, "StartExport", http.MethodPost, ExportPath(in.DatastoreID), q, body)
	if err != nil {
		return nil, markAmbiguous(err, a.ambiguous)
	}
	if a.status != http.StatusAccepted {
		return nil, markAmbiguous(a.failure(), a.ambiguous)
	}
	var out StartExportOutput
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, fmt.Errorf("start export: decode 202 answer: %w", err)
	}
	if out.JobID == "" {
		return nil, errors.New("start export: 202 answer has no jobId")
	}
	out.Retried = a.ambiguous
	return &out, nil
}

// OutputFile is one entry of a job's `output` or `error` list.
type OutputFile struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// ExportJob is the parsed answer of `GET …/r4/export/{jobId}`.
type ExportJob struct {
	JobID             string
	JobName           string
	JobStatus         string
	DatastoreID       string
	Message           string
	SubmitTime        time.Time
	EndTime           time.Time
	S3URI             string
	KMSKeyID          string
	DataAccessRoleARN string
	TransactionTime   string
	Request           string
	Output            []OutputFile
	Errors            []OutputFile
}

// DescribeResponse is the wire shape of the status answer (lower-camel keys;
// times like "Jul 18, 2023 8:53:26 PM").
type DescribeResponse struct {
	ExportJobProperties JobProperties `json:"exportJobProperties"`
	TransactionTime     string        `json:"transactionTime,omitempty"`
	Request             string        `json:"request,omitempty"`
	RequiresAccessToken bool          `json:"requiresAccessToken"`
	Output              []OutputFile  `json:"output,omitempty"`
	Error               []OutputFile  `json:"error,omitempty"`
}

// JobProperties is `exportJobProperties` of the status answer.
type JobProperties struct {
	JobID             string           `json:"jobId"`
	JobName           string           `json:"jobName,omitempty"`
	JobStatus         string           `json:"jobStatus"`
	SubmitTime        string           `json:"submitTime,omitempty"`
	EndTime           string           `json:"endTime,omitempty"`
	DatastoreID       string           `json:"datastoreId"`
	Message           string           `json:"message,omitempty"`
	OutputDataConfig  RESTOutputConfig `json:"outputDataConfig"`
	DataAccessRoleArn string           `json:"dataAccessRoleArn,omitempty"`
}

// RESTOutputConfig is `outputDataConfig` in lower camel case.
type RESTOutputConfig struct {
	S3Configuration RESTS3Configuration `json:"s3Configuration"`
}

// RESTS3Configuration is `s3Configuration` in lower camel case.
type RESTS3Configuration struct {
	S3Uri    string `json:"s3Uri"`
	KmsKeyId string `json:"kmsKeyId,omitempty"`
}

// SubmitTimeLayout is the layout of `submitTime` and `endTime`.
const SubmitTimeLayout = "Jan 2, 2006 3:04:05 PM"

// ParseJobTime parses a `submitTime`/`endTime` value. HealthLake writes them
// like "Jul 18, 2023 8:53:26 PM" without a zone; they are read as UTC. An
// RFC 3339 value is accepted too. Empty gives the zero time.
func ParseJobTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	// Newer JDKs put a narrow no-break space before AM/PM.
	s = strings.ReplaceAll(s, "\u202f", " ")
	if t, err := time.ParseInLocation(SubmitTimeLayout, s, time.UTC); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("unrecognised job time %q", s)
}

// DescribeExport reads a job's status and output list.
func (c *Client) DescribeExport(ctx context.Context, datastoreID, jobID string) (*ExportJob, error) {
	if datastoreID == "" || jobID == "" {
		return nil, errors.New("describe export: datastore id and job id are required")
	}
	a, err := c.do(ctx, "DescribeExport", http.MethodGet, JobPath(datastoreID, jobID), nil, nil)
	if err != nil {
		return nil, err
	}
	if a.status != http.StatusOK {
		return nil, a.failure()
	}
	var r DescribeResponse
	if err := json.Unmarshal(a.body, &r); err != nil {
		return nil, fmt.Errorf("describe export job %s: decode answer: %w", jobID, err)
	}
	p := r.ExportJobProperties
	if p.JobStatus == "" {
		return nil, fmt.Errorf("describe export job %s: answer has no jobStatus", jobID)
	}
	submit, err := ParseJobTime(p.SubmitTime)
	if err != nil {
		return nil, fmt.Errorf("describe export job %s: submitTime: %w", jobID, err)
	}
	end, err := ParseJobTime(p.EndTime)
	if err != nil {
		return nil, fmt.Errorf("describe export job %s: endTime: %w", jobID, err)
	}
	job := &ExportJob{
		JobID: p.JobID, JobName: p.JobName, JobStatus: p.JobStatus, DatastoreID: p.DatastoreID,
		Message: p.Message, SubmitTime: submit, EndTime: end,
		S3URI: p.OutputDataConfig.S3Configuration.S3Uri, KMSKeyID: p.OutputDataConfig.S3Configuration.KmsKeyId,
		DataAccessRoleARN: p.DataAccessRoleArn, TransactionTime: r.TransactionTime, Request: r.Request,
		Output: r.Output, Errors: r.Error,
	}
	if job.JobID == "" {
		job.JobID = jobID
	}
	if job.DatastoreID == "" {
		job.DatastoreID = datastoreID
	}
	return job, nil
}

// CancelExport asks HealthLake to cancel a job (`DELETE …/r4/export/{jobId}`).
// 200, 202 and 204 are success.
func (c *Client) CancelExport(ctx context.Context, datastoreID, jobID string) error {
	if datastoreID == "" || jobID == "" {
		return errors.New("cancel export: datastore id and job id are required")
	}
	a, err := c.do(ctx, "CancelExport", http.MethodDelete, JobPath(datastoreID, jobID), nil, nil)
	if err != nil {
		return err
	}
	switch a.status {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	}
	return a.failure()
}

// answer is a call's final answer: its status and body, whether an earlier
// attempt may have been acted on, and for a status of 400 and above the
// APIError it makes, read from the body once.
type answer struct {
	op        string
	status    int
	body      []byte
	errType   string
	ambiguous bool
	api       *APIError
}

// failure is the APIError of an answer its caller does not take: the one
// do read for a status of 400 and above, or one made now for a success
// the call does not expect (StartExport answered 200, not 202).
func (a answer) failure() *APIError {
	if a.api != nil {
		return a.api
	}
	return newAPIError(a.op, a.status, a.body, a.errType)
}

// do sends one signed request, retrying throttling (429, or any status
// whose error is a throttle: APIError.Throttled), 5xx and transport
// errors. It returns the final answer; a non-retryable status is returned
// to the caller without error, its APIError in answer.api. ambiguous
// reports an earlier attempt that failed with a 5xx or a transport error,
// which the server may have acted on (a throttle, 429 or 400, proves it
// did not); it is set on an error too.
func (c *Client) do(ctx context.Context, op, method, path string, query url.Values, body []byte) (answer, error) {
	var lastErr error
	ambiguous := false
	for attempt := 1; ; attempt++ {
		throttled := false
		st, rb, et, oerr := c.once(ctx, method, path, query, body)
		switch {
		case oerr != nil:
			lastErr = fmt.Errorf("%s: %w", op, oerr)
			if ctx.Err() != nil {
				return answer{ambiguous: ambiguous}, lastErr
			}
			ambiguous = true
		case st < 400:
			return answer{op: op, status: st, body: rb, errType: et, ambiguous: ambiguous}, nil
		default:
			api := newAPIError(op, st, rb, et)
			if !api.Retryable() {
				return answer{op: op, status: st, body: rb, errType: et, ambiguous: ambiguous, api: api}, nil
			}
			// A throttle (429, or ThrottlingException whatever the
			// status: HealthLake's API reference gives it 400) refused the
			// attempt; a 5xx may have been acted on.
			lastErr = api
			ambiguous = ambiguous || st >= 500
			if api.Throttled() {
				throttled = true
				traceOf(ctx).throttled()
			}
		}
		if attempt >= c.opts.MaxAttempts {
			return answer{ambiguous: ambiguous}, fmt.Errorf("after %d attempts: %w", attempt, lastErr)
		}
		wait := c.backoff(attempt)
		if throttled && onePerSecond[op] {
			wait += time.Second
		}
		if err := c.opts.Sleep(ctx, wait); err != nil {
			return answer{ambiguous: ambiguous}, fmt.Errorf("%s: waiting to retry: %w (last error: %v)", op, err, lastErr)
		}
	}
}

// onePerSecond are the calls HealthLake allows once a second per account
// (StartFHIRExportJob; CancelFHIRExportJob, not adjustable: AWS HealthLake
// endpoints and quotas). A throttled attempt of one waits the second the
// quota takes to earn a request back, then the backoff: with the backoff
// alone (50 ms to 1.6 s, 0.75 s at least over four retries) a call that
// lost its second to another could spend every attempt inside the next one
// — two cancels at once ran out of attempts about once in 200 — and three
// callers at once more often still.
var onePerSecond = map[string]bool{"StartExport": true, "CancelExport": true}

// backoff is exponential with full jitter, at least a quarter of the step.
func (c *Client) backoff(attempt int) time.Duration {
	d := backoff.Ceiling(c.opts.BaseDelay, c.opts.MaxDelay, attempt)
	quarter := d / 4
	return quarter + time.Duration(rand.Int64N(int64(d-quarter)+1))
}

func retryableStatus(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// once sends one signed request and returns the status, the body and the
// X-Amzn-ErrorType header's error name.
func (c *Client) once(ctx context.Context, method, path string, query url.Values, body []byte) (int, []byte, string, error) {
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + path
	u.RawPath = ""
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, nil, "", fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Accept", "application/fhir+json, application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	if p := preferHeader(ctx, method); p != "" {
		req.Header.Set("Prefer", p)
	}
	if method == http.MethodGet && (strings.Contains(path, "/_history") || strongRead(ctx)) {
		req.Header.Set(HistoryConsistencyHeader, "strong")
	}
	sum := sha256.Sum256(body)
	creds, err := c.opts.Credentials.Retrieve(ctx)
	if err != nil {
		return 0, nil, "", fmt.Errorf("retrieve credentials: %w", err)
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningName, c.opts.Region, c.opts.Now()); err != nil {
		return 0, nil, "", fmt.Errorf("sign request: %w", err)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, "", fmt.Errorf("send request: %w", err)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, "", fmt.Errorf("read answer: %w", err)
	}
	keepAnswerHeader(ctx, resp.Header)
	return resp.StatusCode, respBody, errorType(resp.Header.Get("X-Amzn-ErrorType")), nil
}
