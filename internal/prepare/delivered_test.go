package prepare_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

// readDelivered returns the lines of the delivered-index object of the
// batch whose first file is fileKey.
func readDelivered(t *testing.T, r *rig, runID, fileKey string) []string {
	t.Helper()
	var got []string
	err := delivered.ReadAll(bytes.NewReader(r.get(t, delivered.DeliveredKey(time.Now(), runID, fileKey))), nil, func(e delivered.Entry) error {
		got = append(got, strings.Join([]string{e.Type, e.ID, e.VersionID, e.LastUpdated}, "|"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	return got
}

func TestDeliveredIndexRecordsOnlyAcceptedEvents(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, func(c *prepare.Config) { c.Validation = fhir.ValidateNone })
	broken := `{"resourceType":"Patient","id":"broken","meta":{"versionId":"1","lastUpdated":"2026-11-21T09:30:00Z"},"active":tru}`
	var first, second strings.Builder
	fmt.Fprintln(&first, patient("a0", "1", "2026-11-21T09:30:00Z", 0))
	fmt.Fprintln(&first, patient("old", "1", "2026-11-21T08:30:00Z", 0)) // outside the window: not published
	first.WriteString(broken + "\n")                                     // rejected by EventBridge: not delivered
	fmt.Fprintln(&first, patient("a1", "2", "2026-11-21T09:31:00.5+00:00", 0))
	k1, k2, k3 := "exports/x/Patient/Patient-1-0-0.ndjson", "exports/x/Patient/Patient-2-0-0.ndjson", "exports/x/Patient/Patient-3-0-0.ndjson"
	fmt.Fprintln(&second, patient("b0", "7", "2026-11-21T09:59:00Z", 0))
	r.put(t, k1, []byte(first.String()))
	r.put(t, k2, []byte(second.String()))
	r.put(t, k3, []byte(patient("old2", "1", "2026-11-21T08:00:00Z", 0)+"\n"))

	out, err := invoke(t, h, batchInput(k1, k2, k3))
	if err != nil {
		t.Fatal(err)
	}
	if out.Events != 3 || out.Rejected != 1 {
		t.Fatalf("summary %+v", out)
	}
	// One object for the batch, named by its first file, with every
	// accepted event of its files and nothing else.
	want := []string{"Patient|a0|1|2026-11-21T09:30:00Z", "Patient|a1|2|2026-11-21T09:31:00.5+00:00", "Patient|b0|7|2026-11-21T09:59:00Z"}
	if got := readDelivered(t, r, "run-1", k1); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("delivered index of the batch: %v, want %v", got, want)
	}
	if keys := r.list(t, delivered.DeliveredPrefix); len(keys) != 1 {
		t.Errorf("delivered objects %v, want one for the batch", keys)
	}
	// A batch that published nothing writes no object.
	r2 := newRig(t, 0)
	r2.put(t, k3, []byte(patient("old2", "1", "2026-11-21T08:00:00Z", 0)+"\n"))
	if out, err := invoke(t, r2.handler(t, nil), batchInput(k3)); err != nil || out.Events != 0 {
		t.Fatalf("batch of an old file: %+v, %v", out, err)
	}
	if keys := r2.list(t, delivered.DeliveredPrefix); len(keys) != 0 {
		t.Errorf("delivered objects %v for a batch without events", keys)
	}
}

func (r *rig) list(t *testing.T, prefix string) []string {
	t.Helper()
	out, err := r.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}
