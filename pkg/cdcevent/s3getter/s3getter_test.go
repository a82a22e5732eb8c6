package s3getter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

const bucket = "artifacts"

// claimCheck puts a 600 kB resource in the emulated S3 as the pipeline
// claim-checks it and returns the gateway, the client, the event detail
// that points at it and the resource's bytes.
func claimCheck(t *testing.T) (*localaws.Env, *s3.Client, *cdcevent.Detail, []byte) {
	t.Helper()
	env := localawstest.Start(t)
	c := localawstest.Bucket(t, env, bucket)
	res := []byte(`{"resourceType":"Binary","id":"b1","meta":{"versionId":"2"},"data":"` + strings.Repeat("QUJD", 150_000) + `"}`)
	sum := sha256.Sum256(res)
	key := "claim-check/Binary/" + hex.EncodeToString(sum[:]) + ".json"
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(res)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Gateway.SetBodyCuts(nil) })
	d := &cdcevent.Detail{
		SchemaVersion: "1", EventID: "Binary/b1/_history/2", Operation: cdcevent.OperationUpsert,
		ResourceType: "Binary", ResourceID: "b1", VersionID: "2",
		ResourceRef: &cdcevent.ResourceRef{Bucket: bucket, Key: key, Size: int64(len(res)), SHA256: hex.EncodeToString(sum[:])},
	}
	return env, c, d, res
}

// cutFirst makes S3 end the first n GetObject bodies after share of their
// bytes; it returns the count of GetObject requests.
func cutFirst(env *localaws.Env, n int64, share float64) *atomic.Int64 {
	var calls atomic.Int64
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		if service != localaws.ServiceS3 || op != "GETObject" {
			return 0, false
		}
		return share, calls.Add(1) <= n
	})
	return &calls
}

// TestAClaimCheckS3EndsPartWayResolves: a claim-checked resource resolves
// byte for byte (its SHA-256 checked by Resolve) though S3 ends the first
// two bodies part way; the getter read on with two more requests.
func TestAClaimCheckS3EndsPartWayResolves(t *testing.T) {
	env, c, d, res := claimCheck(t)
	calls := cutFirst(env, 2, 0.4)
	got, err := cdcevent.Resolve(context.Background(), s3getter.New(c), d)
	if err != nil || !bytes.Equal(got, res) {
		t.Fatalf("resolved %d of %d bytes, err %v; want the whole resource", len(got), len(res), err)
	}
	if calls.Load() != 3 || env.Gateway.BodyCutsMade() != 2 {
		t.Fatalf("%d GetObject requests and %d cuts, want 3 and 2", calls.Load(), env.Gateway.BodyCutsMade())
	}
}

// TestAClaimCheckReplacedMidReadFails: an object replaced between a cut and
// the reopen fails the resolve (S3's 412 to the reopen's If-Match) rather
// than splicing two objects.
func TestAClaimCheckReplacedMidReadFails(t *testing.T) {
	env, c, d, res := claimCheck(t)
	var calls atomic.Int64
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		if service != localaws.ServiceS3 || op != "GETObject" {
			return 0, false
		}
		if calls.Add(1) == 2 {
			_, _ = c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(d.ResourceRef.Key), Body: bytes.NewReader(bytes.ToUpper(res))})
		}
		return 0.5, calls.Load() == 1
	})
	if got, err := cdcevent.Resolve(context.Background(), s3getter.New(c), d); err == nil || !strings.Contains(err.Error(), "PreconditionFailed") {
		t.Fatalf("resolved %d bytes, err %v; want PreconditionFailed", len(got), err)
	}
}

// TestAMissingClaimCheckIsErrNotFound: NoSuchKey comes back as ErrNotFound,
// which a consumer tells from a failure to retry.
func TestAMissingClaimCheckIsErrNotFound(t *testing.T) {
	_, c, d, _ := claimCheck(t)
	d.ResourceRef.Key = "claim-check/Binary/none.json"
	if _, err := cdcevent.Resolve(context.Background(), s3getter.New(c), d); !errors.Is(err, s3getter.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := s3getter.New(nil).GetObject(context.Background(), bucket, d.ResourceRef.Key); err == nil {
		t.Fatal("a getter without a client returned no error")
	}
}
