package stack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// TestAnExportFileLargerThanABatchIsReadInRanges: with batches of 16 KB and
// export files of up to 10,000 resources, check-export cuts each large file
// into byte ranges, prepare-change reads each range from S3 (a ranged GET
// under the run's own IAM policy), and the window commits with every seeded
// resource delivered exactly once. Before, such a file was one batch that
// could fail at its deadline on every retry and hold the checkpoint back.
func TestAnExportFileLargerThanABatchIsReadInRanges(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(o *Options) {
		o.SampleSize, o.ResourcesPerFile = 300, 10000
		o.LambdaEnv = map[string]string{"CDC_BATCH_MAX_BYTES": "16384"}
	})
	w := commitsSeededOnce(t, st)
	ctx := context.Background()
	obj, err := st.s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(st.Res.Bucket), Key: aws.String(manifest.PartKey(w.RunID, 0))})
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	defer obj.Body.Close()
	raw, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	var batches []manifest.Batch
	if err := json.Unmarshal(raw, &batches); err != nil {
		t.Fatal(err)
	}
	ranges := 0
	for _, b := range batches {
		if b.Bytes > 16384 {
			t.Errorf("a batch of %d bytes, over the limit of 16384", b.Bytes)
		}
		for _, f := range b.Files {
			if f.Start > 0 {
				ranges++
				if !strings.HasSuffix(f.Key, ".ndjson") {
					t.Errorf("range of %s", f.Key)
				}
			}
		}
	}
	if ranges == 0 {
		t.Fatalf("no file was cut into ranges: %d batches", len(batches))
	}
}

// TestAnExportReadCutPartWayIsResumed: S3 ends the body of every export
// file's first read part way, as a connection closed mid-read does (the
// SDK does not retry a body). prepare-change reads each on from the byte it
// reached, under the run's own IAM policy (a ranged, If-Match GET is
// s3:GetObject), the window commits on its first attempt with every seeded
// resource delivered exactly once, and ReadsResumed counts the resumed
// reads.
func TestAnExportReadCutPartWayIsResumed(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(o *Options) { o.SampleSize = 300 })
	var mu sync.Mutex
	cut := map[string]bool{}
	st.Env.Gateway.SetBodyCuts(func(service, op string, r *http.Request) (float64, bool) {
		path := r.URL.Path
		if service != localaws.ServiceS3 || op != "GETObject" || !strings.HasSuffix(path, ".ndjson") || strings.Contains(path, "/quarantine/") {
			return 0, false
		}
		mu.Lock()
		defer mu.Unlock()
		if cut[path] {
			return 0, false
		}
		cut[path] = true
		return 0.5, true
	})
	commitsSeededOnce(t, st)
	mu.Lock()
	files := len(cut)
	mu.Unlock()
	if got := st.Metrics.Totals()[metrics.ReadsResumed]; files == 0 || got != float64(files) {
		t.Fatalf("ReadsResumed = %v, want one per export file cut (%d)", got, files)
	}
}

// commitsSeededOnce runs one window and requires it committed with every
// seeded resource delivered exactly once.
func commitsSeededOnce(t *testing.T, st *Stack) report.Run {
	t.Helper()
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" || w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window = %+v", w)
	}
	if ids := st.Delivered.EventIDs(); len(ids) != st.Seeded() || st.Delivered.Len() != st.Seeded() {
		t.Fatalf("%d distinct events in %d deliveries for %d seeded resources", len(ids), st.Delivered.Len(), st.Seeded())
	}
	return w
}
