package localaws

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestABodyCutEndsTheConnectionPartWay: with a body cut, an SDK client gets
// the response's headers (the request succeeds) and then the share of the
// body before the cut, and its read fails with unexpected EOF — what a
// connection closed mid-body looks like. Answers without a body to cut, and
// calls the cut does not choose, are served whole.
func TestABodyCutEndsTheConnectionPartWay(t *testing.T) {
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789\n"), 100_000) // 1.1 MB
	env, c, _ := withObject(t, "cuts", "big.ndjson", data)
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		return 0.25, service == ServiceS3 && op == "GETObject"
	})
	defer env.Gateway.SetBodyCuts(nil)

	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cuts"), Key: aws.String("big.ndjson")})
	if err != nil {
		t.Fatalf("get: %v (the headers should arrive)", err)
	}
	got, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %d bytes, err %v; want unexpected EOF", len(got), err)
	}
	if want := len(data) / 4; len(got) != want || !bytes.Equal(got, data[:want]) {
		t.Fatalf("read %d bytes before the cut, want the first %d", len(got), want)
	}

	// A ranged GET is cut at its share of the range.
	out, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cuts"), Key: aws.String("big.ndjson"), Range: aws.String("bytes=1000-")})
	if err != nil {
		t.Fatalf("ranged get: %v", err)
	}
	got, err = io.ReadAll(out.Body)
	_ = out.Body.Close()
	if want := (len(data) - 1000) / 4; !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Equal(got, data[1000:1000+want]) {
		t.Fatalf("ranged: read %d bytes, err %v; want the range's first %d and unexpected EOF", len(got), err, want)
	}

	if made := env.Gateway.BodyCutsMade(); made != 2 {
		t.Fatalf("BodyCutsMade = %d, want the 2 bodies cut", made)
	}

	// A missing key's error answer goes out whole.
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cuts"), Key: aws.String("missing")})
	var nsk interface{ ErrorCode() string }
	if !errors.As(err, &nsk) || nsk.ErrorCode() != "NoSuchKey" {
		t.Fatalf("missing key: %v, want NoSuchKey", err)
	}

	env.Gateway.SetBodyCuts(nil)
	out, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("cuts"), Key: aws.String("big.ndjson")})
	if err != nil {
		t.Fatalf("get without cuts: %v", err)
	}
	got, err = io.ReadAll(out.Body)
	_ = out.Body.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("without cuts: read %d bytes, err %v", len(got), err)
	}
}

// withObject starts an Env and stores one object in it through an S3
// client, which it returns with the object's ETag.
func withObject(t *testing.T, bucket, key string, body []byte) (*Env, *s3.Client, string) {
	t.Helper()
	env := startTest(t)
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	put, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	return env, c, aws.ToString(put.ETag)
}
