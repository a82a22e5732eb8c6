package localaws

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// TestS3GetWithAWrongIfMatchIsRefused: GetObject and HeadObject serve the
// object when If-Match names its ETag (or *), and answer 412
// PreconditionFailed, as S3 does, when it names another.
func TestS3GetWithAWrongIfMatchIsRefused(t *testing.T) {
	ctx := context.Background()
	_, c, etag := withObject(t, "conds", "k", []byte("version one"))
	for _, tag := range []string{etag, "*"} {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("conds"), Key: aws.String("k"), IfMatch: aws.String(tag), Range: aws.String("bytes=8-")})
		if err != nil {
			t.Fatalf("If-Match %s: %v", tag, err)
		}
		b, _ := io.ReadAll(out.Body)
		_ = out.Body.Close()
		if string(b) != "one" {
			t.Fatalf("If-Match %s: read %q, want the range", tag, b)
		}
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("conds"), Key: aws.String("k"), Body: strings.NewReader("version two")}); err != nil {
		t.Fatalf("put again: %v", err)
	}
	_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("conds"), Key: aws.String("k"), IfMatch: aws.String(etag)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "PreconditionFailed" {
		t.Fatalf("GetObject of a replaced version: %v, want PreconditionFailed", err)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("conds"), Key: aws.String("k"), IfMatch: aws.String(etag)})
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != 412 {
		t.Fatalf("HeadObject of a replaced version: %v, want 412", err)
	}
}
