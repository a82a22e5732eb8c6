package s3getter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

// TestAClaimCheckReadCutPartWayResolves: S3 ends the claim-check object's
// body half way (a connection closed mid-read); the getter reads on from
// the byte it reached, and Resolve returns the verified resource.
// A missing object is ErrNotFound.
func TestAClaimCheckReadCutPartWayResolves(t *testing.T) {
	env := localawstest.Start(t)
	ctx := context.Background()
	c := localawstest.Bucket(t, env, "art")
	resource := []byte(`{"resourceType":"Binary","id":"b1","data":"` + string(bytes.Repeat([]byte("QUJD"), 80_000)) + `"}`)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("art"), Key: aws.String("claim-checks/b1.json"), Body: bytes.NewReader(resource)}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		return 0.5, service == localaws.ServiceS3 && op == "GETObject" && calls.Add(1) == 1
	})
	defer env.Gateway.SetBodyCuts(nil)

	sum := sha256.Sum256(resource)
	d := &cdcevent.Detail{Operation: "upsert", ResourceRef: &cdcevent.ResourceRef{Bucket: "art", Key: "claim-checks/b1.json", Size: int64(len(resource)), SHA256: hex.EncodeToString(sum[:])}}
	got, err := cdcevent.Resolve(ctx, s3getter.New(c), d)
	if err != nil || !bytes.Equal(got, resource) {
		t.Fatalf("resolve: %d bytes, err %v; want the %d-byte resource", len(got), err, len(resource))
	}
	if env.Gateway.BodyCutsMade() != 1 || calls.Load() != 2 {
		t.Fatalf("%d bodies cut in %d requests, want 1 in 2", env.Gateway.BodyCutsMade(), calls.Load())
	}

	_, err = s3getter.New(c).GetObject(ctx, "art", "claim-checks/none.json")
	if !errors.Is(err, s3getter.ErrNotFound) {
		t.Fatalf("missing object: %v, want ErrNotFound", err)
	}
}
