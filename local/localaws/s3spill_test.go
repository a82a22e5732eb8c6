package localaws

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestSpilledObjectsReadBackAsStored: with SpillDir, a large object's bytes
// live in the spill file, and every S3 read — whole, ranged, head, listing,
// copy, delete — answers as the in-memory S3 does.
func TestSpilledObjectsReadBackAsStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	env, err := Start(Options{SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := env.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("Close left %v in the spill directory", left)
		}
	}()
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	bucket := aws.String("spill")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, SpillThreshold*3+17)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	small := []byte("small object")
	for key, body := range map[string][]byte{"x/big.ndjson": big, "x/small.json": small} {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("spill files %v, want one", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() != int64(len(big)) {
		t.Fatalf("spill file holds %v bytes (err %v), want the big body's %d", fi.Size(), err, len(big))
	}
	etag := func(b []byte) string { h := md5.Sum(b); return `"` + hex.EncodeToString(h[:]) + `"` }

	get := func(key, rng string) []byte {
		t.Helper()
		in := &s3.GetObjectInput{Bucket: bucket, Key: aws.String(key)}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			t.Fatalf("get %s %s: %v", key, rng, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		if rng == "" && aws.ToString(out.ETag) != etag(b) {
			t.Errorf("get %s: ETag %s, want %s", key, aws.ToString(out.ETag), etag(b))
		}
		return b
	}
	if got := get("x/big.ndjson", ""); !bytes.Equal(got, big) {
		t.Fatalf("big body: %d bytes back, want %d equal", len(got), len(big))
	}
	if got := get("x/big.ndjson", "bytes=100-199"); !bytes.Equal(got, big[100:200]) {
		t.Fatalf("ranged read = %q, want %q", got, big[100:200])
	}
	if got := get("x/small.json", "bytes=0-4"); string(got) != "small" {
		t.Fatalf("ranged small read = %q", got)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String("x/big.ndjson")})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(big)) || aws.ToString(head.ETag) != etag(big) {
		t.Fatalf("head = %v %v (err %v), want %d %s", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), err, len(big), etag(big))
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: bucket, Key: aws.String("y/copy.ndjson"), CopySource: aws.String("spill/x/big.ndjson")}); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if got := get("y/copy.ndjson", ""); !bytes.Equal(got, big) {
		t.Fatal("the copy's body differs")
	}
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, o := range list.Contents {
		sizes[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		if aws.ToString(o.Key) != "x/small.json" && aws.ToString(o.ETag) != etag(big) {
			t.Errorf("list %s: ETag %s, want %s", aws.ToString(o.Key), aws.ToString(o.ETag), etag(big))
		}
	}
	want := map[string]int64{"x/big.ndjson": int64(len(big)), "x/small.json": int64(len(small)), "y/copy.ndjson": int64(len(big))}
	for k, v := range want {
		if sizes[k] != v {
			t.Errorf("list size of %s = %d, want %d (all: %v)", k, sizes[k], v, sizes)
		}
	}
	// Overwriting a spilled key with a small body, and deleting one.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String("x/big.ndjson"), Body: bytes.NewReader(small)}); err != nil {
		t.Fatal(err)
	}
	if got := get("x/big.ndjson", ""); !bytes.Equal(got, small) {
		t.Fatalf("overwritten body = %q", got)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String("y/copy.ndjson")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: bucket, Key: aws.String("y/copy.ndjson")})
	var nsk *s3types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("get after delete: %v, want NoSuchKey", err)
	}
	list, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: aws.String("x/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range list.Contents {
		if aws.ToInt64(o.Size) != int64(len(small)) {
			t.Errorf("after overwrite, list size of %s = %d, want %d", aws.ToString(o.Key), aws.ToInt64(o.Size), len(small))
		}
	}
}
