package prepare

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// recorder is an index object being built: one line
// "type\tid\tversionId\tlastUpdated" per version, kept gzip-compressed in
// memory (about 15 bytes a line) and written with SSE-KMS. Each file has
// one for its delivered-index object (contract D4: every event EventBridge
// accepted, at delivered.DeliveredKey(today, runId, file key), written once
// every event of the file has its outcome; the reconciliation reads them);
// each batch one for its overlap object (overlap.go).
type recorder struct {
	buf bytes.Buffer
	w   *delivered.Writer
}

// add records one accepted event.
func (r *recorder) add(e delivered.Entry) error {
	if r.w == nil {
		r.w = delivered.NewWriter(&r.buf, false)
	}
	return r.w.Write(e)
}

// write puts the object at key; a recorder without entries writes none.
func (r *recorder) write(ctx context.Context, s3c S3WriteAPI, bucket, kmsKeyID, key string) error {
	if r.w == nil || r.w.Count() == 0 {
		return nil
	}
	if err := r.w.Close(); err != nil {
		return fmt.Errorf("index object %s: %w", key, err)
	}
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(r.buf.Bytes()),
		ContentType: aws.String("text/tab-separated-values"), ContentEncoding: aws.String("gzip")}
	if kmsKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(kmsKeyID)
	}
	if _, err := s3c.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put index object s3://%s/%s: %w", bucket, key, err)
	}
	r.buf, r.w = bytes.Buffer{}, nil
	return nil
}
