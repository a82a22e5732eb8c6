package fakehealthlake_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	hltypes "github.com/aws/aws-sdk-go-v2/service/healthlake/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

type fx struct {
	env *localaws.Env
	emu *fakehealthlake.Emulator
	s3  *s3.Client
	clk *clock
}

func setup(t *testing.T, mutate func(*fakehealthlake.Options)) *fx {
	t.Helper()
	env := localawstest.Start(t)
	s3c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	opts := fakehealthlake.Options{S3: s3c, Datastores: []string{"ds1"}, Manual: true, Now: clk.Now}
	if mutate != nil {
		mutate(&opts)
	}
	if strings.Contains(t.Name(), "/"+bodyDirStore) && opts.BodyDir == "" {
		opts.BodyDir = t.TempDir()
	}
	emu := fakehealthlake.New(opts)
	t.Cleanup(func() {
		if err := emu.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	env.Gateway.Handle(localaws.ServiceHealthLake, emu)
	return &fx{env: env, emu: emu, s3: s3c, clk: clk}
}

// bodyDirStore names the subtest of eachStore whose emulators (made by
// setup) keep bodies in Options.BodyDir.
const bodyDirStore = "bodydir"

// eachStore runs test twice: with bodies in memory and in BodyDir.
func eachStore(t *testing.T, test func(t *testing.T)) {
	t.Run("memory", test)
	t.Run(bodyDirStore, test)
}

// do sends a SigV4-signed request (service healthlake) with the given secret.
func (f *fx) do(t *testing.T, secret, method, path string, body []byte, hdr map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.env.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/fhir+json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: localaws.AccessKeyID, SecretAccessKey: secret}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "healthlake", f.env.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (f *fx) fhir(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	status, b := f.do(t, localaws.SecretAccessKey, method, "/datastore/ds1/r4/"+path, []byte(body), nil)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return status, m
}

func meta(m map[string]any) (string, string) {
	mm, _ := m["meta"].(map[string]any)
	v, _ := mm["versionId"].(string)
	lu, _ := mm["lastUpdated"].(string)
	return v, lu
}

func TestFHIRCrudVersionsAndHistory(t *testing.T) { eachStore(t, testFHIRCrudVersionsAndHistory) }

func testFHIRCrudVersionsAndHistory(t *testing.T) {
	f := setup(t, nil)
	st, p1 := f.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","meta":{"source":"x"},"active":true}`)
	if st != http.StatusCreated {
		t.Fatalf("PUT new = %d %v", st, p1)
	}
	v1, lu1 := meta(p1)
	if v1 != "1" || lu1 != "2026-11-21T10:00:00.000Z" || p1["meta"].(map[string]any)["source"] != "x" {
		t.Errorf("first version meta = %v", p1["meta"])
	}
	// Same clock reading: lastUpdated still strictly increases.
	st, p2 := f.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":false}`)
	v2, lu2 := meta(p2)
	if st != http.StatusOK || v2 != "2" || lu2 != "2026-11-21T10:00:00.001Z" {
		t.Errorf("update = %d, meta %v", st, p2["meta"])
	}
	st, got := f.fhir(t, http.MethodGet, "Patient/p1", "")
	if v, _ := meta(got); st != 200 || v != "2" || got["active"] != false {
		t.Errorf("read = %d %v", st, got)
	}
	st, hist := f.fhir(t, http.MethodGet, "Patient/p1/_history", "")
	entries, _ := hist["entry"].([]any)
	if st != 200 || hist["type"] != "history" || len(entries) != 2 {
		t.Fatalf("history = %d %v", st, hist)
	}
	if v, _ := meta(entries[0].(map[string]any)["resource"].(map[string]any)); v != "2" {
		t.Errorf("history is not newest first: %v", entries[0])
	}
	st, old := f.fhir(t, http.MethodGet, "Patient/p1/_history/1", "")
	if v, _ := meta(old); st != 200 || v != "1" || old["active"] != true {
		t.Errorf("vread 1 = %d %v", st, old)
	}
	st, created := f.fhir(t, http.MethodPost, "Observation", `{"resourceType":"Observation","status":"final","code":{"text":"x"}}`)
	if v, _ := meta(created); st != 201 || v != "1" || created["id"] == "" || created["id"] == nil {
		t.Errorf("create = %d %v", st, created)
	}
	st, _ = f.fhir(t, http.MethodDelete, "Patient/p1", "")
	if st != http.StatusNoContent {
		t.Errorf("delete = %d", st)
	}
	st, gone := f.fhir(t, http.MethodGet, "Patient/p1", "")
	if st != http.StatusGone || gone["resourceType"] != "OperationOutcome" {
		t.Errorf("read after delete = %d %v", st, gone)
	}
	st, _ = f.fhir(t, http.MethodGet, "Patient/nope", "")
	if st != http.StatusNotFound {
		t.Errorf("read absent = %d", st)
	}
	st, search := f.fhir(t, http.MethodGet, "Observation", "")
	if st != 200 || search["total"] != float64(1) {
		t.Errorf("search = %d %v", st, search)
	}
}

func TestFHIRInvalidResourcesGet400OperationOutcome(t *testing.T) {
	f := setup(t, nil)
	cases := map[string]struct{ path, body, want string }{
		"type mismatch":  {"Patient/p1", `{"resourceType":"Observation","id":"p1"}`, "does not match"},
		"id mismatch":    {"Patient/p1", `{"resourceType":"Patient","id":"p2"}`, "does not match the URL"},
		"not json":       {"Patient/p1", `{"resourceType":`, "not a JSON object"},
		"wrong type":     {"Patient/p1", `{"resourceType":"Patient","active":"yes"}`, "invalid Patient"},
		"bad enum":       {"Observation/o1", `{"resourceType":"Observation","status":"sort-of","code":{}}`, "invalid Observation"},
		"unknown type":   {"Spaceship/s1", `{"resourceType":"Spaceship"}`, "unsupported resource type"},
		"invalid the id": {"Patient/a_b", `{"resourceType":"Patient"}`, "invalid resource id"},
	}
	for name, c := range cases {
		st, oo := f.fhir(t, http.MethodPut, c.path, c.body)
		issues, _ := oo["issue"].([]any)
		diag := ""
		if len(issues) > 0 {
			diag, _ = issues[0].(map[string]any)["diagnostics"].(string)
		}
		if st != http.StatusBadRequest || oo["resourceType"] != "OperationOutcome" || !strings.Contains(diag, c.want) {
			t.Errorf("%s: %d %v", name, st, oo)
		}
	}
	if ds, _ := f.emu.Datastore("ds1"); ds.Count() != 0 {
		t.Errorf("invalid resources were stored")
	}
}

func TestSigV4IsVerified(t *testing.T) {
	f := setup(t, nil)
	st, body := f.do(t, "wrong-secret", http.MethodGet, "/datastore/ds1/r4/Patient/p1", nil, nil)
	if st != http.StatusForbidden || !strings.Contains(string(body), "signature") {
		t.Errorf("wrong secret: %d %s", st, body)
	}
	// Signed for healthlake, but the body was changed after signing.
	req, _ := http.NewRequest(http.MethodPut, f.env.URL+"/datastore/ds1/r4/Patient/p1", strings.NewReader(`{"resourceType":"Patient","id":"p1"}`))
	sum := sha256.Sum256([]byte(`{"resourceType":"Patient","id":"p2"}`))
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: localaws.AccessKeyID, SecretAccessKey: localaws.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "healthlake", f.env.Region, time.Now())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("tampered body: %d", resp.StatusCode)
	}
	// SDK client with the wrong secret.
	cfg := f.env.Config()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(localaws.AccessKeyID, "wrong", "")
	_, err = hlsdk.NewFromConfig(cfg).ListFHIRExportJobs(context.Background(), &hlsdk.ListFHIRExportJobsInput{DatastoreId: aws.String("ds1")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("SDK with wrong secret: %v", err)
	}
	if ds, _ := f.emu.Datastore("ds1"); ds.Count() != 0 {
		t.Errorf("refused requests changed the store")
	}
}

func startExport(t *testing.T, f *fx, query, name string) string {
	t.Helper()
	body := `{"JobName":"` + name + `","OutputDataConfig":{"S3Configuration":{"S3Uri":"s3://art/exports","KmsKeyId":"k"}},"DataAccessRoleArn":"arn:aws:iam::0:role/r"}`
	st, b := f.do(t, localaws.SecretAccessKey, http.MethodPost, "/datastore/ds1/r4/$export"+query, []byte(body), map[string]string{"Prefer": "respond-async"})
	var out map[string]string
	_ = json.Unmarshal(b, &out)
	if st != http.StatusAccepted || out["jobStatus"] != "SUBMITTED" || out["datastoreId"] != "ds1" || out["jobId"] == "" {
		t.Fatalf("$export = %d %s", st, b)
	}
	return out["jobId"]
}

func describe(t *testing.T, f *fx, jobID string) (map[string]any, map[string]any) {
	t.Helper()
	st, b := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/export/"+jobID, nil, nil)
	if st != http.StatusOK {
		t.Fatalf("describe = %d %s", st, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, m["exportJobProperties"].(map[string]any)
}

func TestExportWritesCurrentVersionsInHealthLakeLayout(t *testing.T) {
	eachStore(t, testExportWritesCurrentVersionsInHealthLakeLayout)
}

func testExportWritesCurrentVersionsInHealthLakeLayout(t *testing.T) {
	ctx := context.Background()
	f := setup(t, func(o *fakehealthlake.Options) { o.ResourcesPerFile = 2 })
	ds, _ := f.emu.Datastore("ds1")
	mustLoad(t, ds, "Patient", "old", `{"resourceType":"Patient"}`)
	f.clk.Set(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC))
	for _, id := range []string{"a", "b", "c"} {
		mustLoad(t, ds, "Patient", id, `{"resourceType":"Patient","active":true}`)
	}
	mustLoad(t, ds, "Patient", "a", `{"resourceType":"Patient","active":false}`) // version 2
	mustLoad(t, ds, "Observation", "o1", `{"resourceType":"Observation","status":"final","code":{}}`)
	mustLoad(t, ds, "Encounter", "e1", `{"resourceType":"Encounter","status":"finished","class":{}}`)

	jobID := startExport(t, f, "?_since=2026-11-21T11:00:00.000Z&_type=Patient,Observation", "cdc-r1")
	_, p := describe(t, f, jobID)
	if p["jobStatus"] != "SUBMITTED" || p["submitTime"] != "Nov 21, 2026 11:00:00 AM" {
		t.Errorf("submitted = %v", p)
	}
	if err := f.emu.Advance(ctx); err != nil {
		t.Fatal(err)
	}
	if _, p = describe(t, f, jobID); p["jobStatus"] != "IN_PROGRESS" {
		t.Errorf("after one step: %v", p["jobStatus"])
	}
	if err := f.emu.Advance(ctx); err != nil {
		t.Fatal(err)
	}
	full, p := describe(t, f, jobID)
	folder := "exports/ds1-FHIR_EXPORT-" + jobID + "/"
	if p["jobStatus"] != "COMPLETED" || p["jobName"] != "cdc-r1" || p["endTime"] == nil ||
		p["outputDataConfig"].(map[string]any)["s3Configuration"].(map[string]any)["s3Uri"] != "s3://art/"+folder {
		t.Errorf("completed = %v", p)
	}
	out, _ := full["output"].([]any)
	var keys []string
	lines := map[string]int{}
	for _, o := range out {
		m := o.(map[string]any)
		url := m["url"].(string)
		key := strings.TrimPrefix(url, "s3://art/")
		keys = append(keys, m["type"].(string)+" "+key)
		obj, err := f.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("art"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		b, _ := io.ReadAll(obj.Body)
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var r map[string]any
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("bad NDJSON line in %s", key)
			}
			lines[r["resourceType"].(string)+"/"+r["id"].(string)]++
			if r["id"] == "a" {
				if v, _ := meta(r); v != "2" {
					t.Errorf("Patient/a exported at version %s, want the current 2", v)
				}
			}
		}
	}
	sort.Strings(keys)
	if len(keys) != 3 {
		t.Fatalf("output = %v, want 2 Patient files (3 at 2 per file) and 1 Observation file", keys)
	}
	for _, k := range keys {
		typ, key, _ := strings.Cut(k, " ")
		if !strings.HasPrefix(key, folder+typ+"/"+typ+"-") || !strings.HasSuffix(key, "-0.ndjson") {
			t.Errorf("key %s not in HealthLake layout", key)
		}
	}
	want := map[string]int{"Patient/a": 1, "Patient/b": 1, "Patient/c": 1, "Observation/o1": 1}
	if mustJSONs(lines) != mustJSONs(want) {
		t.Errorf("exported %v, want %v", lines, want)
	}
}

func mustJSONs(v any) string { b, _ := json.Marshal(v); return string(b) }

func mustLoad(t *testing.T, ds *fakehealthlake.Datastore, typ, id, body string) {
	t.Helper()
	if _, err := ds.Load(typ, id, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func TestExportWithNothingChangedHasNoOutput(t *testing.T) {
	f := setup(t, nil)
	jobID := startExport(t, f, "?_since=2030-01-01T00:00:00.000Z", "cdc-empty")
	if err := f.emu.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	full, p := describe(t, f, jobID)
	if _, has := full["output"]; has || p["jobStatus"] != "COMPLETED" {
		t.Errorf("empty export answer = %v", full)
	}
}

func TestOneJobAtATimeOthersQueued(t *testing.T) {
	ctx := context.Background()
	f := setup(t, nil)
	j1 := startExport(t, f, "", "one")
	j2 := startExport(t, f, "", "two")
	_ = f.emu.Advance(ctx)
	s1, _ := f.emu.Job(j1)
	s2, _ := f.emu.Job(j2)
	if s1.Status != "IN_PROGRESS" || s2.Status != "QUEUED" {
		t.Errorf("after step 1: %s %s", s1.Status, s2.Status)
	}
	_ = f.emu.Advance(ctx)
	s1, _ = f.emu.Job(j1)
	s2, _ = f.emu.Job(j2)
	if s1.Status != "COMPLETED" || s2.Status != "IN_PROGRESS" {
		t.Errorf("after step 2: %s %s", s1.Status, s2.Status)
	}
	_ = f.emu.Advance(ctx)
	if f.emu.MaxConcurrentExports() != 1 {
		t.Errorf("max concurrent = %d", f.emu.MaxConcurrentExports())
	}
}

func TestProcessingDelayKeepsJobsVisible(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.Manual = false; o.ProcessingDelay = time.Minute })
	j := startExport(t, f, "", "slow")
	if _, p := describe(t, f, j); p["jobStatus"] != "SUBMITTED" {
		t.Errorf("before the delay: %v", p["jobStatus"])
	}
	f.clk.Set(f.clk.Now().Add(time.Minute))
	if _, p := describe(t, f, j); p["jobStatus"] != "IN_PROGRESS" {
		t.Errorf("after one delay: %v", p["jobStatus"])
	}
	f.clk.Set(f.clk.Now().Add(time.Minute))
	if _, p := describe(t, f, j); p["jobStatus"] != "COMPLETED" {
		t.Errorf("after two delays: %v", p["jobStatus"])
	}
}

func TestJobFaultKnobs(t *testing.T) { eachStore(t, testJobFaultKnobs) }

func testJobFaultKnobs(t *testing.T) {
	ctx := context.Background()
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	mustLoad(t, ds, "Patient", "p", `{"resourceType":"Patient"}`)

	f.emu.FailNextJob("Access denied to bucket")
	j := startExport(t, f, "", "failing")
	_ = f.emu.RunJobs(ctx)
	if _, p := describe(t, f, j); p["jobStatus"] != "FAILED" || p["message"] != "Access denied to bucket" {
		t.Errorf("failed job = %v", p)
	}

	f.emu.CompleteNextJobWithErrors("2 resources could not be exported")
	j = startExport(t, f, "", "partial")
	_ = f.emu.RunJobs(ctx)
	full, p := describe(t, f, j)
	errs, _ := full["error"].([]any)
	if p["jobStatus"] != "COMPLETED_WITH_ERRORS" || len(errs) != 1 || len(full["output"].([]any)) != 1 {
		t.Errorf("completed with errors = %v", full)
	}

	f.emu.FailNextCancel()
	j = startExport(t, f, "", "uncancellable")
	st, _ := f.do(t, localaws.SecretAccessKey, http.MethodDelete, "/datastore/ds1/r4/export/"+j, nil, nil)
	if st != http.StatusAccepted {
		t.Fatalf("cancel = %d", st)
	}
	if _, p := describe(t, f, j); p["jobStatus"] != "CANCEL_SUBMITTED" {
		t.Errorf("after cancel: %v", p["jobStatus"])
	}
	_ = f.emu.RunJobs(ctx)
	if _, p := describe(t, f, j); p["jobStatus"] != "CANCEL_FAILED" {
		t.Errorf("cancel fault: %v", p["jobStatus"])
	}

	j = startExport(t, f, "", "cancelled")
	f.do(t, localaws.SecretAccessKey, http.MethodDelete, "/datastore/ds1/r4/export/"+j, nil, nil)
	_ = f.emu.Advance(ctx)
	if _, p := describe(t, f, j); p["jobStatus"] != "CANCEL_IN_PROGRESS" {
		t.Errorf("cancel step: %v", p["jobStatus"])
	}
	_ = f.emu.Advance(ctx)
	if _, p := describe(t, f, j); p["jobStatus"] != "CANCEL_COMPLETED" {
		t.Errorf("cancel done: %v", p["jobStatus"])
	}

	// The FHIR REST API's throttles take Options.ThrottleStatuses in turn:
	// 429, then 400, both ThrottlingException.
	f.emu.ThrottleNext(2)
	for _, want := range []int{http.StatusTooManyRequests, http.StatusBadRequest} {
		st, b := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/export/"+j, nil, nil)
		if st != want || !strings.Contains(string(b), "Rate exceeded") || !strings.Contains(string(b), `"throttled"`) {
			t.Errorf("throttle knob: %d %s, want %d", st, b, want)
		}
	}
	f.emu.FailNextCalls(1, 502)
	if st, _ := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/export/"+j, nil, nil); st != 502 {
		t.Errorf("5xx knob: %d", st)
	}
	if st, _ := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/export/"+j, nil, nil); st != 200 {
		t.Errorf("after the knobs: %d", st)
	}
}

func TestSDKListAndDescribeExportJobs(t *testing.T) {
	ctx := context.Background()
	f := setup(t, nil)
	j1 := startExport(t, f, "", "cdc-run-a")
	startExport(t, f, "", "cdc-run-b")
	client := hlsdk.NewFromConfig(f.env.Config())
	out, err := client.ListFHIRExportJobs(ctx, &hlsdk.ListFHIRExportJobsInput{DatastoreId: aws.String("ds1"), JobName: aws.String("cdc-run-a")})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(out.ExportJobPropertiesList) != 1 {
		t.Fatalf("list = %+v", out.ExportJobPropertiesList)
	}
	p := out.ExportJobPropertiesList[0]
	s3c, _ := p.OutputDataConfig.(*hltypes.OutputDataConfigMemberS3Configuration)
	if aws.ToString(p.JobId) != j1 || p.JobStatus != hltypes.JobStatusSubmitted || aws.ToString(p.JobName) != "cdc-run-a" ||
		!aws.ToTime(p.SubmitTime).Equal(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)) ||
		s3c == nil || aws.ToString(s3c.Value.S3Uri) != "s3://art/exports" {
		t.Errorf("listed job = %+v", p)
	}
	all, err := client.ListFHIRExportJobs(ctx, &hlsdk.ListFHIRExportJobsInput{DatastoreId: aws.String("ds1"), MaxResults: aws.Int32(1)})
	if err != nil || len(all.ExportJobPropertiesList) != 1 || all.NextToken == nil {
		t.Fatalf("page 1: %v %+v", err, all)
	}
	page2, err := client.ListFHIRExportJobs(ctx, &hlsdk.ListFHIRExportJobsInput{DatastoreId: aws.String("ds1"), MaxResults: aws.Int32(1), NextToken: all.NextToken})
	if err != nil || len(page2.ExportJobPropertiesList) != 1 || page2.NextToken != nil ||
		aws.ToString(page2.ExportJobPropertiesList[0].JobId) != j1 {
		t.Errorf("page 2: %v %+v", err, page2)
	}
	d, err := client.DescribeFHIRExportJob(ctx, &hlsdk.DescribeFHIRExportJobInput{DatastoreId: aws.String("ds1"), JobId: aws.String(j1)})
	if err != nil || aws.ToString(d.ExportJobProperties.JobId) != j1 {
		t.Errorf("describe: %v %+v", err, d)
	}
	reqs := f.emu.RequestsFor("ListFHIRExportJobs")
	if len(reqs) != 3 || !strings.Contains(string(reqs[0].Body), `"JobName":"cdc-run-a"`) {
		t.Errorf("recorded list requests = %+v", reqs)
	}
	if f.env.Gateway.Calls()["healthlake:ListFHIRExportJobs"] != 3 {
		t.Errorf("gateway calls = %v", f.env.Gateway.Calls())
	}
}

func TestGetExportWithoutBodyUsesDefaults(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.DefaultExportS3URI = "s3://art/get-exports/" })
	st, b := f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/$export?_type=Patient", nil, map[string]string{"Prefer": "respond-async"})
	if st != http.StatusAccepted {
		t.Fatalf("GET $export = %d %s", st, b)
	}
	jobs := f.emu.Jobs()
	if len(jobs) != 1 || jobs[0].S3URI != "s3://art/get-exports/" || mustJSONs(jobs[0].Types) != `["Patient"]` ||
		jobs[0].DataAccessRoleARN != "arn:aws:iam::000000000000:role/healthlake-export" {
		t.Errorf("jobs = %+v", jobs)
	}
	// Without Prefer: respond-async the request is refused.
	st, _ = f.do(t, localaws.SecretAccessKey, http.MethodGet, "/datastore/ds1/r4/$export", nil, nil)
	if st != http.StatusBadRequest {
		t.Errorf("without Prefer = %d", st)
	}
}
