package exportjob_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

func TestBuildManifestListsTheJobFolderPageByPage(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	folder := "exports/ds1-FHIR_EXPORT-j9/"
	var want []string
	for i := 1; i <= 5; i++ {
		key := fmt.Sprintf("%sPatient/Patient-77-%d-0.ndjson", folder, i)
		want = append(want, key)
		put(t, w, key)
	}
	want = append(want, folder+"Observation/Observation-5-1-0.ndjson")
	put(t, w, folder+"Observation/Observation-5-1-0.ndjson")
	put(t, w, folder+"manifest.json")                                     // not an NDJSON file
	put(t, w, "exports/ds1-FHIR_EXPORT-j10/Patient/Patient-1-1-0.ndjson") // another job
	job := &fhirrest.ExportJob{JobID: "j9", DatastoreID: dsID, JobStatus: "COMPLETED", S3URI: "s3://artifacts/exports/"}
	before := w.calls("s3:ListObjects")
	items, err := exportjob.BuildManifest(ctx, w.s3, job, 2)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
		typ := "Patient"
		if strings.Contains(it.Key, "Observation") {
			typ = "Observation"
		}
		if it.Bucket != bucket || it.ResourceType != typ {
			t.Errorf("item %+v", it)
		}
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("manifest keys = %v\nwant            %v", keys, want)
	}
	if calls := w.calls("s3:ListObjects") - before; calls != 4 {
		t.Errorf("list calls = %d, want 4 pages of 2 (7 keys under the prefix)", calls)
	}
	// The job's own s3Uri (ending in its folder) gives the same listing.
	job.S3URI = "s3://artifacts/" + folder
	again, err := exportjob.BuildManifest(ctx, w.s3, job, 0)
	if err != nil || mustJSON(again) != mustJSON(items) {
		t.Errorf("with the folder URI: %v %v", err, again)
	}
}

func put(t *testing.T, w *world, key string) {
	t.Helper()
	if _, err := w.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("{}\n")}); err != nil {
		t.Fatal(err)
	}
}

func TestBuildManifestUsesOutputURLsWithoutSplittingWords(t *testing.T) {
	job := &fhirrest.ExportJob{JobID: "j", Output: []fhirrest.OutputFile{
		{Type: "Patient", URL: "s3://my-bucket/exports/ds-FHIR_EXPORT-j/Patient/Patient-1-1-0.ndjson"},
		{Type: "Observation", URL: "s3://my-bucket/a%20b/s3:/Observation/Observation-1-1-0.ndjson"},
	}}
	items, err := exportjob.BuildManifest(context.Background(), nil, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"bucket":"my-bucket","key":"exports/ds-FHIR_EXPORT-j/Patient/Patient-1-1-0.ndjson","resourceType":"Patient"},` +
		`{"bucket":"my-bucket","key":"a b/s3:/Observation/Observation-1-1-0.ndjson","resourceType":"Observation"}]`
	if mustJSON(items) != want {
		t.Errorf("items = %s", mustJSON(items))
	}
	job.Output = []fhirrest.OutputFile{{Type: "Patient", URL: "https://my-bucket.s3.amazonaws.com/x.ndjson"}}
	_, err = exportjob.BuildManifest(context.Background(), nil, job, 0)
	var me *exportjob.ManifestError
	if !errors.As(err, &me) {
		t.Errorf("https URL: err = %v, want ManifestError", err)
	}
}

func TestCheckBadOutputURLFailsWithManifestFailed(t *testing.T) {
	w := newWorld(t, nil)
	token, m := w.startedRun("run-badurl")
	// A HealthLake answer whose output URL is not s3://bucket/key.
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(rw, `{"exportJobProperties":{"jobId":%q,"jobStatus":"COMPLETED","datastoreId":"ds1","submitTime":"Nov 21, 2026 10:05:00 AM",`+
			`"outputDataConfig":{"s3Configuration":{"s3Uri":"s3://artifacts/exports/"}}},`+
			`"output":[{"type":"Patient","url":"https://artifacts.s3.amazonaws.com/exports/Patient-1.ndjson"}]}`, m.JobID)
	}))
	defer srv.Close()
	hl, err := fhirrest.New(fhirrest.Options{Endpoint: srv.URL, Region: "us-east-1", Credentials: w.env.Config().Credentials})
	if err != nil {
		t.Fatal(err)
	}
	w.deps.Export = hl
	resp := w.invoke(w.checkHandler().Handle, record("c1", m))
	o := w.outcome(token)
	if len(resp.BatchItemFailures) != 0 || o.Status != "FAILED" || o.Error != "ManifestFailed" || !contains(o.Cause, m.JobID, "not s3://bucket/key") {
		t.Errorf("resp %+v outcome %+v", resp, o)
	}
}
