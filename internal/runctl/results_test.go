package runctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl/s3objects"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func put(t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// child renders one ResultWriter entry the way Step Functions does: Output
// is the child's output as a JSON string.
func child(name, status string, summary map[string]any) map[string]any {
	out, _ := json.Marshal(summary)
	return map[string]any{
		"ExecutionArn": "arn:aws:states:us-east-1:0:express:cdc/PublishChanges:" + name, "Name": name,
		"Input": `{"file":{"bucket":"art","key":"exports/x.ndjson"}}`, "InputDetails": map[string]any{"Included": true},
		"Output": string(out), "OutputDetails": map[string]any{"Included": true},
		"StartDate": "2026-11-21T10:00:00.000Z", "StopDate": "2026-11-21T10:00:01.000Z",
		"StateMachineArn": "arn:aws:states:us-east-1:0:stateMachine:cdc/PublishChanges", "Status": status,
		"RedriveCount": 0, "RedriveStatus": "NOT_REDRIVABLE",
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMapResultsOverS3(t *testing.T) {
	env := localawstest.Start(t)
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("art")}); err != nil {
		t.Fatal(err)
	}
	sum := func(file string, lines, events, outside, quarantined, claim, bytes int) map[string]any {
		return map[string]any{"file": file, "lines": lines, "events": events, "outsideWindow": outside,
			"quarantined": quarantined, "claimChecked": claim, "bytes": bytes, "quarantineKey": ""}
	}
	prefix := "map-results/run-1/0f9e"
	put(t, c, "art", prefix+"/SUCCEEDED_0.json", jsonOf([]any{
		child("a", "SUCCEEDED", sum("exports/Patient-1.ndjson", 10, 9, 1, 0, 0, 5000)),
		child("b", "SUCCEEDED", sum("exports/Observation-1.ndjson", 20, 18, 0, 2, 1, 7000)),
	}))
	// A second file written as JSON Lines, with Output as an object; a
	// window with the fast path on counts what it skipped and missed.
	fast := sum("exports/Encounter-1.ndjson", 5, 5, 0, 0, 0, 100)
	fast["fastPathSkipped"], fast["fastPathMissed"] = 7, 2
	put(t, c, "art", prefix+"/SUCCEEDED_1.json", jsonOf(map[string]any{"Name": "c", "Status": "SUCCEEDED",
		"Output": fast})+"\n")
	manifest := map[string]any{
		"DestinationBucket": "art", "MapRunArn": "arn:aws:states:us-east-1:0:mapRun:cdc/PublishChanges:0f9e",
		"ResultFiles": map[string]any{
			"FAILED":    []any{},
			"PENDING":   []any{},
			"SUCCEEDED": []any{map[string]any{"Key": prefix + "/SUCCEEDED_0.json", "Size": 1}, map[string]any{"Key": prefix + "/SUCCEEDED_1.json", "Size": 1}},
		},
	}
	put(t, c, "art", prefix+"/manifest.json", jsonOf(manifest))
	r := MapResults{Objects: s3objects.Opener{Client: c}}
	got, err := r.Summaries(context.Background(), "art", prefix+"/manifest.json")
	if err != nil {
		t.Fatalf("summaries: %v", err)
	}
	want := runlock.Counts{Files: 3, Lines: 35, Events: 32, OutsideWindow: 1, Quarantined: 2, ClaimChecked: 1, Bytes: 12100,
		FastPathSkipped: 7, FastPathMissed: 2}
	if got != want {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}

	// Failed children are counted, never summed.
	put(t, c, "art", prefix+"/FAILED_0.json", jsonOf([]any{map[string]any{"Name": "d", "Status": "FAILED",
		"Error": "States.TaskFailed", "Cause": "boom"}}))
	manifest["ResultFiles"].(map[string]any)["FAILED"] = []any{map[string]any{"Key": prefix + "/FAILED_0.json", "Size": 1}}
	put(t, c, "art", prefix+"/manifest.json", jsonOf(manifest))
	got, err = r.Summaries(context.Background(), "art", prefix+"/manifest.json")
	if err != nil || got.FailedFiles != 1 || got.Files != 3 {
		t.Fatalf("with a failed child: %+v, %v", got, err)
	}

	// A missing result file and a malformed output are errors.
	if _, err := r.Summaries(context.Background(), "art", "map-results/none/manifest.json"); err == nil {
		t.Errorf("a missing manifest gave no error")
	}
	put(t, c, "art", prefix+"/SUCCEEDED_0.json", `[{"Name":"a","Status":"SUCCEEDED","Output":"not json"}]`)
	if _, err := r.Summaries(context.Background(), "art", prefix+"/manifest.json"); err == nil || !strings.Contains(err.Error(), "child a") {
		t.Errorf("malformed output: err = %v, want one naming child a", err)
	}
}

// batchChild renders a ResultWriter entry of an ItemBatcher child: its Input
// is the batch, its Output a batch summary with "files".
func batchChild(name, status string, keys []string, summary map[string]any) map[string]any {
	c := child(name, status, summary)
	items := make([]any, len(keys))
	for i, k := range keys {
		items[i] = map[string]any{"bucket": "art", "key": k, "resourceType": "Patient"}
	}
	c["Input"] = jsonOf(map[string]any{"BatchInput": map[string]any{"runId": "run-1"}, "Items": items})
	if status != "SUCCEEDED" {
		delete(c, "Output")
		c["Error"], c["Cause"] = "Lambda.ServiceException", "boom"
	}
	return c
}

func TestMapResultsSumsBatchAndSingleFileOutputs(t *testing.T) {
	env := localawstest.Start(t)
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("art")}); err != nil {
		t.Fatal(err)
	}
	prefix := "map-results/run-2/1a2b"
	put(t, c, "art", prefix+"/SUCCEEDED_0.json", jsonOf([]any{
		// A batch of 10 files and one of 3.
		batchChild("a", "SUCCEEDED", make([]string, 10), map[string]any{"files": 10, "lines": 100, "events": 90, "outsideWindow": 5,
			"quarantined": 5, "claimChecked": 1, "bytes": 50000, "quarantineKeys": []string{"quarantine/run-2/x.ndjson"}, "quarantineObjects": 1}),
		batchChild("b", "SUCCEEDED", make([]string, 3), map[string]any{"files": 3, "lines": 30, "events": 30, "bytes": 9000}),
		// The older single-file output: no "files", one file.
		child("c", "SUCCEEDED", map[string]any{"file": "exports/Encounter-1.ndjson", "lines": 5, "events": 5, "bytes": 100}),
	}))
	// A failed batch of 4 files and a failed single-file child.
	put(t, c, "art", prefix+"/FAILED_0.json", jsonOf([]any{
		batchChild("d", "FAILED", []string{"k1", "k2", "k3", "k4"}, nil),
		map[string]any{"Name": "e", "Status": "FAILED", "Input": `{"file":{"bucket":"art","key":"k5"}}`, "Error": "States.TaskFailed", "Cause": "boom"},
	}))
	put(t, c, "art", prefix+"/manifest.json", jsonOf(map[string]any{
		"DestinationBucket": "art", "MapRunArn": "arn:aws:states:us-east-1:0:mapRun:cdc/PublishChanges:1a2b",
		"ResultFiles": map[string]any{
			"FAILED":    []any{map[string]any{"Key": prefix + "/FAILED_0.json", "Size": 1}},
			"PENDING":   []any{},
			"SUCCEEDED": []any{map[string]any{"Key": prefix + "/SUCCEEDED_0.json", "Size": 1}},
		},
	}))
	got, err := MapResults{Objects: s3objects.Opener{Client: c}}.Summaries(context.Background(), "art", prefix+"/manifest.json")
	if err != nil {
		t.Fatalf("summaries: %v", err)
	}
	want := runlock.Counts{Files: 14, Lines: 135, Events: 125, OutsideWindow: 5, Quarantined: 5, ClaimChecked: 1, Bytes: 59100, FailedFiles: 5}
	if got != want {
		t.Fatalf("counts = %+v, want %+v", got, want)
	}

	// A negative file count is not a prepare-change summary.
	put(t, c, "art", prefix+"/SUCCEEDED_0.json", jsonOf([]any{child("f", "SUCCEEDED", map[string]any{"files": -1})}))
	if _, err := (MapResults{Objects: s3objects.Opener{Client: c}}).Summaries(context.Background(), "art", prefix+"/manifest.json"); err == nil || !strings.Contains(err.Error(), "child f") {
		t.Fatalf("negative files: err = %v", err)
	}
}
