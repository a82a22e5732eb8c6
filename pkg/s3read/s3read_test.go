package s3read_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

const bucket, key = "art", "index/big.tsv"

// rig puts a 1.1 MB object in the emulated S3 and returns a real S3 client,
// the gateway (to cut bodies) and the object's bytes.
func rig(t *testing.T) (*localaws.Env, *s3.Client, []byte) {
	t.Helper()
	env := localawstest.Start(t)
	c := localawstest.Bucket(t, env, bucket)
	ctx := context.Background()
	var b bytes.Buffer
	for i := 0; b.Len() < 1_100_000; i++ {
		b.WriteString("Patient\tp")
		b.WriteString(strings.Repeat("x", i%17))
		b.WriteString("\n")
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(b.Bytes())}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Gateway.SetBodyCuts(nil) })
	return env, c, b.Bytes()
}

// cutEach cuts every GetObject body after share of its bytes, for the
// first n requests, calling before (when set) with the request's number
// first; it returns the count of requests seen.
func cutEach(env *localaws.Env, n int64, share float64, before func(call int64)) *atomic.Int64 {
	var calls atomic.Int64
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		if service != localaws.ServiceS3 || op != "GETObject" {
			return 0, false
		}
		call := calls.Add(1)
		if before != nil {
			before(call)
		}
		return share, call <= n
	})
	return &calls
}

// TestAReadS3EndsPartWayGoesOnToTheEnd: the whole object and a byte range of
// it come back byte for byte though S3 ends each of the first three bodies
// a third of the way through, each reopen asking for the bytes after the
// last one read.
func TestAReadS3EndsPartWayGoesOnToTheEnd(t *testing.T) {
	env, c, data := rig(t)
	ctx := context.Background()

	calls := cutEach(env, 3, 1.0/3, nil)
	r, err := s3read.Object(ctx, c, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d of %d bytes, err %v; want the whole object", len(got), len(data), err)
	}
	if r.Resumed() != 3 || calls.Load() != 4 {
		t.Fatalf("resumed %d times in %d requests, want 3 in 4", r.Resumed(), calls.Load())
	}
	if made := env.Gateway.BodyCutsMade(); made != 3 {
		t.Fatalf("BodyCutsMade = %d, want 3", made)
	}

	calls = cutEach(env, 2, 0.5, nil)
	const from, to = 1000, 700_000
	r, err = s3read.Range(ctx, c, bucket, key, from, to)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(r)
	_ = r.Close()
	if err != nil || !bytes.Equal(got, data[from:to+1]) {
		t.Fatalf("range: read %d bytes, err %v; want bytes %d–%d (%d)", len(got), err, from, to, to-from+1)
	}
	if r.Resumed() != 2 || calls.Load() != 3 {
		t.Fatalf("range: resumed %d times in %d requests, want 2 in 3", r.Resumed(), calls.Load())
	}
}

// TestAnObjectReplacedDuringARead: an object replaced between a cut and
// the reopen ends the read with an error (S3's 412 to the reopen's
// If-Match); no byte of the new version follows the old one's.
func TestAnObjectReplacedDuringARead(t *testing.T) {
	env, c, data := rig(t)
	ctx := context.Background()
	other := bytes.ToUpper(data)
	cutEach(env, 1, 0.5, func(call int64) {
		if call == 2 {
			_, _ = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(other)})
		}
	})
	r, err := s3read.Object(ctx, c, bucket, key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	_ = r.Close()
	if err == nil || !strings.Contains(err.Error(), "PreconditionFailed") {
		t.Fatalf("read %d bytes, err %v; want PreconditionFailed", len(got), err)
	}
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("the bytes read are not all of the version the read began with")
	}
}

// TestAMissingObjectIsTheSDKsError: the first request's error comes back as
// the SDK gave it, so a caller tells a missing object from a failure.
func TestAMissingObjectIsTheSDKsError(t *testing.T) {
	_, c, _ := rig(t)
	_, err := s3read.Object(context.Background(), c, bucket, "index/none.tsv")
	var nsk *s3types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("err = %v, want NoSuchKey", err)
	}
}
