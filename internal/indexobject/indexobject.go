// Package indexobject puts delivered-index objects to S3: gzip-compressed
// TSV in internal/delivered's form ("type\tid\tversionId\tlastUpdated",
// "\tD" for a delete), encrypted with SSE-KMS under the stack's key. The
// windows' delivered and overlap objects (prepare-change) and the delete
// scan's record are written here; internal/delivered itself stays free of
// AWS types.
package indexobject

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// ContentType and ContentEncoding describe an index object.
const (
	ContentType     = "text/tab-separated-values"
	ContentEncoding = "gzip"
)

// PutAPI is the part of the S3 client Put uses.
type PutAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Put writes entries as one index object at key; nothing is written
// without entries. Errors name the bucket and key, never a resource.
func Put(ctx context.Context, api PutAPI, bucket, kmsKeyID, key string, entries []delivered.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	body, err := delivered.Encode(entries)
	if err != nil {
		return err
	}
	return PutEncoded(ctx, api, bucket, kmsKeyID, key, body)
}

// PutEncoded writes body, an encoded index object, at key, with SSE-KMS
// under kmsKeyID when it is set.
func PutEncoded(ctx context.Context, api PutAPI, bucket, kmsKeyID, key string, body []byte) error {
	in := &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String(ContentType), ContentEncoding: aws.String(ContentEncoding),
	}
	if kmsKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(kmsKeyID)
	}
	if _, err := api.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put index object s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}
