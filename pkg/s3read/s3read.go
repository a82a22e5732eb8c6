// Package s3read opens S3 objects, whole or a byte range of them, as one
// stream that survives a connection S3 ends part way: the body is read on
// from the byte it reached, of the same object version (pkg/resume).
//
// Every reader of the pipeline's own objects goes through it, and so do
// consumers' claim-check reads (pkg/cdcevent/s3getter). The SDK's retries
// end when a response's headers arrive, so before it a body cut short
// ("unexpected EOF", a reset) failed the Lambda that read it, and Step
// Functions ran the whole task again.
package s3read

import (
	"context"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/resume"
)

// GetObjectAPI is the part of the S3 client a read uses.
type GetObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Object opens s3://bucket/key to its end. The error of the first
// GetObject is returned as the SDK gave it (a caller may test it for
// NoSuchKey); the caller closes the reader.
func Object(ctx context.Context, c GetObjectAPI, bucket, key string) (*resume.Reader, error) {
	return Range(ctx, c, bucket, key, 0, -1)
}

// Range opens bytes from to to (inclusive; to < 0: to the object's end) of
// s3://bucket/key. A reopened body asks for the version the first one
// served (If-Match its ETag), so that an object replaced during the read
// ends it with a *resume.ChangedError rather than splicing two versions.
func Range(ctx context.Context, c GetObjectAPI, bucket, key string, from, to int64) (*resume.Reader, error) {
	in := func(at int64, etag string) *s3.GetObjectInput {
		get := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
		if at > 0 || to >= 0 {
			rng := "bytes=" + strconv.FormatInt(at, 10) + "-"
			if to >= 0 {
				rng += strconv.FormatInt(to, 10)
			}
			get.Range = aws.String(rng)
		}
		if etag != "" {
			get.IfMatch = aws.String(etag)
		}
		return get
	}
	obj, err := c.GetObject(ctx, in(from, ""))
	if err != nil {
		return nil, err
	}
	etag := aws.ToString(obj.ETag)
	reopen := func(ctx context.Context, offset int64) (io.ReadCloser, string, error) {
		o, err := c.GetObject(ctx, in(from+offset, etag))
		if err != nil {
			return nil, "", err
		}
		return o.Body, aws.ToString(o.ETag), nil
	}
	return resume.New(ctx, obj.Body, etag, reopen, resume.Options{}), nil
}
