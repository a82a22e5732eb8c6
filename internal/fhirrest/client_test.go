package fhirrest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

type fixture struct {
	env    *localaws.Env
	emu    *fakehealthlake.Emulator
	client *fhirrest.Client
	sleeps *sleeps
	s3     *s3.Client
}

func newFixture(t *testing.T, secret string, maxAttempts int) *fixture {
	t.Helper()
	env := localawstest.Start(t)
	s3c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	emu := fakehealthlake.New(fakehealthlake.Options{S3: s3c, Datastores: []string{"ds1"}, Manual: true})
	env.Gateway.Handle(localaws.ServiceHealthLake, emu)
	sl := &sleeps{}
	c, err := fhirrest.New(fhirrest.Options{
		Endpoint:    env.URL,
		Region:      env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, secret, ""),
		MaxAttempts: maxAttempts,
		Sleep:       sl.sleep,
	})
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	return &fixture{env: env, emu: emu, client: c, sleeps: sl, s3: s3c}
}

func startInput() fhirrest.StartExportInput {
	return fhirrest.StartExportInput{
		DatastoreID:       "ds1",
		JobName:           "cdc-run-1",
		Since:             time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Types:             []string{"Patient", "Observation"},
		S3URI:             "s3://artifacts/exports/",
		KMSKeyID:          "arn:aws:kms:us-east-1:000000000000:key/k1",
		DataAccessRoleARN: "arn:aws:iam::000000000000:role/export",
	}
}

func TestStartExportSendsSignedRESTRequest(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	out, err := f.client.StartExport(context.Background(), startInput())
	if err != nil {
		t.Fatalf("start export: %v", err)
	}
	reqs := f.emu.RequestsFor("StartExport")
	if len(reqs) != 1 {
		t.Fatalf("StartExport requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/datastore/ds1/r4/$export" || r.Status != http.StatusAccepted {
		t.Errorf("request = %s %s → %d", r.Method, r.Path, r.Status)
	}
	q, _ := url.ParseQuery(r.Query)
	if q.Get("_since") != "2026-11-21T10:00:00.000Z" || q.Get("_type") != "Patient,Observation" {
		t.Errorf("query = %q", r.Query)
	}
	if r.Prefer != "respond-async" || r.ContentType != "application/fhir+json" {
		t.Errorf("headers Prefer=%q Content-Type=%q", r.Prefer, r.ContentType)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("body: %v", err)
	}
	want := map[string]any{
		"JobName": "cdc-run-1",
		"OutputDataConfig": map[string]any{"S3Configuration": map[string]any{
			"S3Uri": "s3://artifacts/exports/", "KmsKeyId": "arn:aws:kms:us-east-1:000000000000:key/k1"}},
		"DataAccessRoleArn": "arn:aws:iam::000000000000:role/export",
	}
	if got, _ := json.Marshal(body); string(got) != mustJSON(want) {
		t.Errorf("body = %s\nwant   %s", got, mustJSON(want))
	}
	jobs := f.emu.Jobs()
	if len(jobs) != 1 || out.JobID != jobs[0].JobID || out.JobStatus != "SUBMITTED" || out.DatastoreID != "ds1" {
		t.Errorf("answer %+v, jobs %+v", out, jobs)
	}
	if got := f.env.Gateway.Calls()["healthlake:StartExport"]; got != 1 {
		t.Errorf("gateway counted %d StartExport calls", got)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestStartExportOmitsTypeWhenNoFilter(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	in := startInput()
	in.Types = nil
	if _, err := f.client.StartExport(context.Background(), in); err != nil {
		t.Fatalf("start export: %v", err)
	}
	q, _ := url.ParseQuery(f.emu.RequestsFor("StartExport")[0].Query)
	if _, ok := q["_type"]; ok {
		t.Errorf("query %v has _type without a filter", q)
	}
}

// Both throttles the emulator answers — 429, then 400 ThrottlingException
// (HealthLake documents no status for the FHIR REST API) — are retried.
func TestThrottlingIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 5)
	f.emu.ThrottleNext(2)
	out, err := f.client.StartExport(context.Background(), startInput())
	if err != nil {
		t.Fatalf("start export: %v", err)
	}
	var statuses []int
	for _, r := range f.emu.RequestsFor("StartExport") {
		statuses = append(statuses, r.Status)
	}
	if mustJSON(statuses) != "[429,400,202]" {
		t.Errorf("statuses = %v, want [429 400 202]", statuses)
	}
	if len(f.sleeps.d) != 2 {
		t.Fatalf("sleeps = %v, want 2", f.sleeps.d)
	}
	// StartFHIRExportJob is allowed once a second: a throttled attempt
	// waits that second, then attempt 1's backoff within [50ms, 200ms],
	// attempt 2's within [100ms, 400ms].
	if f.sleeps.d[0] < 1050*time.Millisecond || f.sleeps.d[0] > 1200*time.Millisecond ||
		f.sleeps.d[1] < 1100*time.Millisecond || f.sleeps.d[1] > 1400*time.Millisecond {
		t.Errorf("backoff = %v", f.sleeps.d)
	}
	if jobs := f.emu.Jobs(); len(jobs) != 1 || jobs[0].JobID != out.JobID {
		t.Errorf("jobs = %+v, want the one started", jobs)
	}
	// A throttle proves HealthLake refused the attempt: nothing else may have started.
	if out.Retried {
		t.Errorf("Retried after throttling only; want false")
	}
}

// After a 5xx the server may have acted on the attempt: the output says so,
// so the caller can look for a second job of the same name.
func TestStartExportReportsARetryAfterAServerError(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 5)
	f.emu.FailNextCalls(1, http.StatusBadGateway)
	out, err := f.client.StartExport(context.Background(), startInput())
	if err != nil {
		t.Fatalf("start export: %v", err)
	}
	if !out.Retried {
		t.Errorf("Retried = false after a 502; want true")
	}
	var statuses []int
	for _, r := range f.emu.RequestsFor("StartExport") {
		statuses = append(statuses, r.Status)
	}
	if mustJSON(statuses) != "[502,202]" {
		t.Errorf("statuses = %v, want [502 202]", statuses)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	f.emu.FailNextCalls(10, http.StatusServiceUnavailable)
	_, err := f.client.DescribeExport(context.Background(), "ds1", "job-x")
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != 503 || api.Code != "InternalServerException" {
		t.Fatalf("err = %v, want a 503 APIError", err)
	}
	if !fhirrest.IsRetryable(err) {
		t.Errorf("503 should be retryable")
	}
	if n := len(f.emu.RequestsFor("DescribeExport")); n != 3 {
		t.Errorf("describe requests = %d, want 3 (MaxAttempts)", n)
	}
	if len(f.sleeps.d) != 2 {
		t.Errorf("sleeps = %v, want 2", f.sleeps.d)
	}
}

func TestClientErrorIsNotRetriedAndCarriesOutcomeText(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 5)
	in := startInput()
	in.JobName = strings.Repeat("x", 70)
	_, err := f.client.StartExport(context.Background(), in)
	var api *fhirrest.APIError
	if !errors.As(err, &api) {
		t.Fatalf("err = %v, want APIError", err)
	}
	if api.StatusCode != 400 || api.Code != "invalid" || !strings.Contains(api.Message, "JobName must be 1 to 64 characters") {
		t.Errorf("api error = %+v", api)
	}
	if !strings.Contains(err.Error(), "HTTP 400") {
		t.Errorf("error text %q lacks the status", err)
	}
	if fhirrest.IsRetryable(err) {
		t.Errorf("400 must not be retryable")
	}
	if n := len(f.emu.RequestsFor("StartExport")); n != 1 || len(f.sleeps.d) != 0 {
		t.Errorf("requests = %d, sleeps = %v; want 1 request, no sleep", n, f.sleeps.d)
	}
}

func TestWrongSecretIsRefused(t *testing.T) {
	f := newFixture(t, "not-the-secret", 3)
	_, err := f.client.StartExport(context.Background(), startInput())
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusForbidden || !strings.Contains(api.Message, "signature") {
		t.Fatalf("err = %v, want a 403 naming the signature", err)
	}
	if n := len(f.emu.Jobs()); n != 0 {
		t.Errorf("%d jobs started with a bad signature", n)
	}
}

func TestDescribeAndCancelAgainstEmulator(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	in := startInput()
	in.Since = time.Time{}
	out, err := f.client.StartExport(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	job, err := f.client.DescribeExport(ctx, "ds1", out.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.JobStatus != fhirrest.StatusSubmitted || job.JobName != "cdc-run-1" || job.SubmitTime.IsZero() || len(job.Output) != 0 {
		t.Errorf("submitted job = %+v", job)
	}
	if err := f.emu.RunJobs(ctx); err != nil {
		t.Fatal(err)
	}
	job, err = f.client.DescribeExport(ctx, "ds1", out.JobID)
	if err != nil {
		t.Fatal(err)
	}
	wantURI := "s3://artifacts/exports/ds1-FHIR_EXPORT-" + out.JobID + "/"
	if job.JobStatus != fhirrest.StatusCompleted || job.S3URI != wantURI || len(job.Output) != 1 || job.Output[0].Type != "Patient" ||
		!strings.HasPrefix(job.Output[0].URL, wantURI+"Patient/Patient-") || job.EndTime.IsZero() {
		t.Errorf("completed job = %+v", job)
	}
	// A finished job cannot be cancelled: a 400, not retried.
	err = f.client.CancelExport(ctx, "ds1", out.JobID)
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != 400 {
		t.Errorf("cancel of a completed job: %v", err)
	}
	// A running job is.
	out2, err := f.client.StartExport(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.client.CancelExport(ctx, "ds1", out2.JobID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	cancels := f.emu.RequestsFor("CancelExport")
	if len(cancels) != 2 || cancels[1].Method != http.MethodDelete || cancels[1].Path != "/datastore/ds1/r4/export/"+out2.JobID || cancels[1].Status != 202 {
		t.Errorf("cancel requests = %+v", cancels)
	}
	if j, _ := f.emu.Job(out2.JobID); j.Status != "CANCEL_SUBMITTED" {
		t.Errorf("cancelled job status = %s", j.Status)
	}
}

// The status answer exactly as documented (aws-facts.md).
const realStatus = `{"exportJobProperties": {"jobId": "a1b2", "jobName": "cdc-x", "jobStatus": "COMPLETED",
   "submitTime": "Jul 18, 2023 8:53:26 PM", "endTime": "Jul 18, 2023 8:55:01 PM",
   "datastoreId": "ds9", "outputDataConfig": {"s3Configuration": {"s3Uri": "s3://bucket/prefix/ds9-FHIR_EXPORT-a1b2/", "kmsKeyId": "arn:aws:kms:k"}},
   "dataAccessRoleArn": "arn:aws:iam::1:role/r"},
 "transactionTime": "2023-07-25T15:09:37.951Z",
 "request": "https://healthlake.us-west-2.amazonaws.com/datastore/ds9/r4/$export?_type&_since=2023-07-18T00:00:00.461Z&_outputFormat=application/fhir+ndjson",
 "requiresAccessToken": false,
 "output": [{"type": "AllergyIntolerance", "url": "s3://bucket/prefix/ds9-FHIR_EXPORT-a1b2/AllergyIntolerance/AllergyIntolerance-2139805480920260259-3-0.ndjson"}],
 "error": []}`

func TestDescribeParsesRealShape(t *testing.T) {
	var gotPath, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(realStatus))
	}))
	defer srv.Close()
	c, err := fhirrest.New(fhirrest.Options{Endpoint: srv.URL, Region: "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", "")})
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.DescribeExport(context.Background(), "ds9", "a1b2")
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if gotPath != "/datastore/ds9/r4/export/a1b2" || !strings.Contains(gotAuth, "/us-west-2/healthlake/aws4_request") {
		t.Errorf("path %q auth %q", gotPath, gotAuth)
	}
	want := &fhirrest.ExportJob{
		JobID: "a1b2", JobName: "cdc-x", JobStatus: "COMPLETED", DatastoreID: "ds9",
		SubmitTime: time.Date(2023, 7, 18, 20, 53, 26, 0, time.UTC), EndTime: time.Date(2023, 7, 18, 20, 55, 1, 0, time.UTC),
		S3URI: "s3://bucket/prefix/ds9-FHIR_EXPORT-a1b2/", KMSKeyID: "arn:aws:kms:k", DataAccessRoleARN: "arn:aws:iam::1:role/r",
		TransactionTime: "2023-07-25T15:09:37.951Z",
		Request:         "https://healthlake.us-west-2.amazonaws.com/datastore/ds9/r4/$export?_type&_since=2023-07-18T00:00:00.461Z&_outputFormat=application/fhir+ndjson",
		Output: []fhirrest.OutputFile{{Type: "AllergyIntolerance",
			URL: "s3://bucket/prefix/ds9-FHIR_EXPORT-a1b2/AllergyIntolerance/AllergyIntolerance-2139805480920260259-3-0.ndjson"}},
		Errors: []fhirrest.OutputFile{},
	}
	if mustJSON(job) != mustJSON(want) {
		t.Errorf("job = %s\nwant  %s", mustJSON(job), mustJSON(want))
	}
}

func TestParseJobTime(t *testing.T) {
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"Jul 18, 2023 8:53:26 PM", time.Date(2023, 7, 18, 20, 53, 26, 0, time.UTC), true},
		{"Jan 2, 2024 12:05:09 AM", time.Date(2024, 1, 2, 0, 5, 9, 0, time.UTC), true},
		{"Jul 18, 2023 8:53:26\u202fPM", time.Date(2023, 7, 18, 20, 53, 26, 0, time.UTC), true},
		{"2023-07-25T15:09:37.951Z", time.Date(2023, 7, 25, 15, 9, 37, 951e6, time.UTC), true},
		{"", time.Time{}, true},
		{"yesterday", time.Time{}, false},
	}
	for _, c := range cases {
		got, err := fhirrest.ParseJobTime(c.in)
		if (err == nil) != c.ok || !got.Equal(c.want) {
			t.Errorf("ParseJobTime(%q) = %v, %v; want %v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	creds := aws.CredentialsProvider(credentials.NewStaticCredentialsProvider("a", "b", ""))
	for name, o := range map[string]fhirrest.Options{
		"no region":      {Credentials: creds},
		"no credentials": {Region: "us-east-1"},
		"bad endpoint":   {Region: "us-east-1", Credentials: creds, Endpoint: "not a url"},
	} {
		if _, err := fhirrest.New(o); err == nil {
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

// A POST retried after a 5xx that ends in a 4xx may still have started a job
// (the first attempt); a plain 4xx, or throttling only, did not.
func TestMayHaveActedAfterAnAmbiguousAttempt(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 5)
	f.emu.AcceptThenFailNext(1, http.StatusBadGateway)
	f.emu.RefuseNextStarts(1, http.StatusBadRequest, "refused after the retry")
	_, err := f.client.StartExport(context.Background(), startInput())
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != 400 || fhirrest.IsRetryable(err) || !fhirrest.MayHaveActed(err) {
		t.Errorf("5xx then 400: err = %v, want a non-retryable 400 that may have acted", err)
	}
	if len(f.emu.Jobs()) != 1 {
		t.Errorf("jobs = %d, want the one the first attempt started", len(f.emu.Jobs()))
	}

	f.emu.RefuseNextStarts(1, http.StatusBadRequest, "refused")
	if _, err := f.client.StartExport(context.Background(), startInput()); err == nil || fhirrest.MayHaveActed(err) {
		t.Errorf("plain 400: err = %v, want one that did not act", err)
	}
	f.emu.ThrottleNext(10)
	if _, err := f.client.StartExport(context.Background(), startInput()); err == nil || fhirrest.MayHaveActed(err) {
		t.Errorf("throttled: err = %v, want one that did not act", err)
	}
}

// A throttle is retried whatever its status: HealthLake's API reference gives
// ThrottlingException HTTP 400. It is known by X-Amzn-ErrorType, by the JSON
// error's __type, or by an OperationOutcome issue "throttled"; any other 400
// is final at once.
func TestThrottlingAnsweredWith400IsRetried(t *testing.T) {
	answers := map[string]func(w http.ResponseWriter){
		"X-Amzn-ErrorType": func(w http.ResponseWriter) {
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.healthlake/")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"Rate exceeded"}`))
		},
		"__type": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.healthlake#ThrottlingException","message":"Rate exceeded"}`))
		},
		"OperationOutcome": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"throttled","diagnostics":"Rate exceeded"}]}`))
		},
	}
	for name, throttle := range answers {
		t.Run(name, func(t *testing.T) {
			var calls int
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				if calls <= 2 {
					throttle(w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(realStatus))
			}))
			defer srv.Close()
			c := plainClient(t, srv.URL, 3)
			if _, err := c.DescribeExport(context.Background(), "ds9", "a1b2"); err != nil || calls != 3 {
				t.Fatalf("err = %v after %d calls, want success at the third", err, calls)
			}

			// Throttled past the attempts: retryable, and nothing was done.
			calls = -10
			_, err := c.DescribeExport(context.Background(), "ds9", "a1b2")
			var api *fhirrest.APIError
			if !errors.As(err, &api) || api.StatusCode != 400 || !api.Throttled() || !fhirrest.IsRetryable(err) || fhirrest.MayHaveActed(err) {
				t.Errorf("err = %v, want a retryable 400 throttle that did not act", err)
			}
		})
	}

	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("X-Amzn-ErrorType", "ValidationException")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"message":"bad"}`))
	}))
	defer srv.Close()
	_, err := plainClient(t, srv.URL, 3).DescribeExport(context.Background(), "ds9", "a1b2")
	if calls != 1 || err == nil || fhirrest.IsRetryable(err) {
		t.Errorf("ValidationException: %d calls, err %v; want one final answer", calls, err)
	}
}

// plainClient is a client of srv that retries at once.
func plainClient(t *testing.T, endpoint string, attempts int) *fhirrest.Client {
	t.Helper()
	c, err := fhirrest.New(fhirrest.Options{Endpoint: endpoint, Region: "us-west-2", MaxAttempts: attempts,
		Credentials: credentials.NewStaticCredentialsProvider("AK", "SK", ""),
		Sleep:       func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTraceReportsEachThrottledAttempt: a call made with WithTrace reports
// every attempt HealthLake throttled (a 429 and a 400 ThrottlingException),
// not a server error nor the attempt that succeeds; without a Trace the
// call behaves the same.
func TestTraceReportsEachThrottledAttempt(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		switch calls % 4 {
		case 1:
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		case 3:
			w.Header().Set("X-Amzn-ErrorType", "ThrottlingException")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"Rate exceeded"}`))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(realStatus))
		}
	}))
	defer srv.Close()
	c := plainClient(t, srv.URL, 4)
	var throttles int
	ctx := fhirrest.WithTrace(context.Background(), &fhirrest.Trace{Throttled: func() { throttles++ }})
	if _, err := c.DescribeExport(ctx, "ds9", "a1b2"); err != nil || calls != 4 {
		t.Fatalf("err = %v after %d calls, want success at the fourth", err, calls)
	}
	if throttles != 2 {
		t.Errorf("Trace.Throttled called %d times, want 2 (the 429 and the 400 ThrottlingException)", throttles)
	}
	if _, err := c.DescribeExport(context.Background(), "ds9", "a1b2"); err != nil || calls != 8 {
		t.Fatalf("without a Trace: err = %v after %d calls", err, calls)
	}
	if throttles != 2 {
		t.Errorf("a call without the Trace reported to it (%d)", throttles)
	}
}

// TestCallsOfAOnePerSecondQuotaAtOnceAllSucceed: with HealthLake's
// request-rate quotas on, three exports started one after another and
// cancelled at once, each on its own data store (StartFHIRExportJob and
// CancelFHIRExportJob are allowed once a second per account), all succeed:
// a throttled attempt of either waits the second the quota needs, so no
// caller spends its five attempts inside a second another took.
func TestCallsOfAOnePerSecondQuotaAtOnceAllSucceed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := localawstest.Start(t)
	s3c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	stores := []string{"ds1", "ds2", "ds3"}
	emu := fakehealthlake.New(fakehealthlake.Options{S3: s3c, Datastores: stores, Manual: true, Quotas: true})
	env.Gateway.Handle(localaws.ServiceHealthLake, emu)
	c, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region,
		Credentials: credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, localaws.SecretAccessKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	jobs := make([]string, len(stores))
	for i, ds := range stores {
		in := startInput()
		in.DatastoreID, in.JobName = ds, "cdc-run-"+ds
		out, err := c.StartExport(ctx, in)
		if err != nil {
			t.Fatalf("start on %s: %v", ds, err)
		}
		jobs[i] = out.JobID
	}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, ds := range stores {
		wg.Go(func() { errs[i] = c.CancelExport(ctx, ds, jobs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("cancel on %s: %v", stores[i], err)
		}
	}
	throttled := 0
	for _, r := range emu.RequestsFor("CancelExport") {
		if r.Status != http.StatusAccepted {
			throttled++
		}
	}
	if throttled == 0 {
		t.Error("no cancel was throttled: the quota was not in force")
	}
}
