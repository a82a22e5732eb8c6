// Package s3getter adapts the AWS SDK for Go v2's S3 client to
// cdcevent.ObjectGetter, so that cdcevent.Resolve can fetch claim-checked
// resources from the pipeline's artifact bucket. Only this package imports
// the S3 SDK; consumers fetching objects another way never link it.
//
// A body S3 ends part way ("unexpected EOF", a reset) is read on from the
// byte it reached, of the same object version, as the pipeline reads its
// own objects (pkg/s3read): the SDK's retries end when a response's
// headers arrive, and without this a large claim-checked resource would
// fail its message on a cut connection.
package s3getter

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// ErrNotFound is wrapped when the object does not exist (S3 NoSuchKey): a
// claim-check that expired (the artifact bucket's lifecycle) or was never
// written. Test with errors.Is.
var ErrNotFound = errors.New("s3getter: object not found")

// API is the part of *s3.Client the adapter uses.
type API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// Getter is a cdcevent.ObjectGetter over S3 GetObject.
type Getter struct {
	client API
}

var _ cdcevent.ObjectGetter = Getter{}

// New returns a Getter that reads through client (an *s3.Client).
func New(client API) Getter { return Getter{client: client} }

// GetObject returns the body of s3://bucket/key; the caller closes it. A
// body cut short is reopened at the byte it reached (If-Match the first
// response's ETag, so an object replaced meanwhile ends the read with an
// error rather than splicing two versions).
func (g Getter) GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	if g.client == nil {
		return nil, errors.New("s3getter: no S3 client")
	}
	r, err := s3read.Object(ctx, g.client, bucket, key)
	if err != nil {
		var nsk *s3types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
		}
		return nil, err
	}
	return r, nil
}
