// Package s3objects adapts the S3 client to the object opener the run-lock
// actions read the Distributed Map's results with.
package s3objects

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// GetObjectAPI is the part of the S3 client Opener uses.
type GetObjectAPI interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Opener opens S3 objects for streaming reads.
type Opener struct {
	Client GetObjectAPI
}

// Open returns the body of s3://bucket/key, read on past a connection S3
// ends part way (pkg/s3read); the caller closes it.
func (o Opener) Open(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	body, err := s3read.Object(ctx, o.Client, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("get s3://%s/%s: %w", bucket, key, err)
	}
	return body, nil
}
