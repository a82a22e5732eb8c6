package prepare_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// cutFirst cuts the bodies of the first n GetObject calls at fraction.
func cutFirst(r *rig, n int, fraction float64, before func(call int)) {
	var mu sync.Mutex
	calls := 0
	r.env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		if service != localaws.ServiceS3 || op != "GETObject" {
			return 0, false
		}
		mu.Lock()
		calls++
		call := calls
		mu.Unlock()
		if before != nil {
			before(call)
		}
		return fraction, call <= n
	})
}

// TestAnExportReadCutPartWayGoesOnFromWhereItStopped: S3 ends an export
// file's body part way (a connection closed mid-read, which the SDK does
// not retry) three times in a row. The invocation reads on from the byte
// it had reached, each time, and publishes every line once, quarantines
// its bad line with its own line number, and counts the resumed reads. A
// range of a file resumes the same way, within its range.
func TestAnExportReadCutPartWayGoesOnFromWhereItStopped(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	var b strings.Builder
	for n := 1; n <= 300; n++ {
		if n == 250 {
			b.WriteString("{oops\n")
			continue
		}
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", n), "1", "2026-11-21T09:30:00Z", n%9*30))
	}
	data := []byte(b.String())
	r.put(t, exportKey, data)

	cutFirst(r, 3, 0.3, nil)
	defer r.env.Gateway.SetBodyCuts(nil)
	out, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("a cut read failed the invocation: %v", err)
	}
	ids := eventIDs(t, r.sink)
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if out.Events != 299 || len(ids) != 299 || len(seen) != 299 || out.Quarantined != 1 || out.ReadsResumed != 3 {
		t.Fatalf("events %d (%d delivered, %d distinct), quarantined %d, readsResumed %d; want 299 once each, 1, 3",
			out.Events, len(ids), len(seen), out.Quarantined, out.ReadsResumed)
	}
	if out.Bytes != int64(len(data)) {
		t.Fatalf("read %d bytes, want the file's %d", out.Bytes, len(data))
	}
	recs := quarantineRecords(t, r.get(t, out.QuarantineKeys[0]))
	if len(recs) != 1 || recs[0].Line != 250 || recs[0].Offset != int64(bytes.Index(data, []byte("{oops"))) {
		t.Fatalf("quarantine records %+v, want line 250 at its offset", recs)
	}

	// A range: the resumed read stays within it and its lines go out once.
	r.sink.Reset()
	file := manifest.File{Bucket: bucket, Key: exportKey, ResourceType: "Patient", Bytes: int64(len(data))}
	ranges := manifest.Plan([]manifest.File{file}, manifest.Limits{MaxFiles: 10, MaxBytes: int64(len(data))/3 + 1})
	cutFirst(r, 2, 0.5, nil)
	var events int64
	for _, out := range invokeRanges(t, h, "run-2", ranges) {
		events += out.Events
	}
	if got := eventIDs(t, r.sink); events != 299 || len(got) != 299 {
		t.Fatalf("the ranges published %d events (%d delivered), want 299", events, len(got))
	}
}

// TestAnExportObjectChangedDuringItsReadFailsTheBatch: the object has been
// replaced when a cut read is reopened. The reopen asks for the version it
// began with (If-Match its ETag), which S3 refuses with 412
// PreconditionFailed: the batch fails with ReadFailed, which Step Functions
// retries from the first line, rather than publish a mixture of two
// objects. (A store that ignored If-Match would serve the new ETag, which
// the reader refuses too: pkg/resume.)
func TestAnExportObjectChangedDuringItsReadFailsTheBatch(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	var b strings.Builder
	for n := 1; n <= 100; n++ {
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", n), "1", "2026-11-21T09:30:00Z", 40))
	}
	r.put(t, exportKey, []byte(b.String()))
	other := r.s3
	cutFirst(r, 1, 0.5, func(call int) {
		if call == 2 { // the reopen: the object has been replaced meanwhile
			_, _ = other.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(exportKey),
				Body: strings.NewReader(strings.ReplaceAll(b.String(), `"1"`, `"2"`))})
		}
	})
	defer r.env.Gateway.SetBodyCuts(nil)
	_, err := invoke(t, h, input(exportKey))
	var rf *prepare.ReadFailed
	if !errors.As(err, &rf) || !strings.Contains(err.Error(), "PreconditionFailed") {
		t.Fatalf("invoke = %v, want ReadFailed: PreconditionFailed", err)
	}
}
