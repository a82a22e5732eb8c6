package fastpath

import (
	"bytes"
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// The record object: what one invocation published, for the export path's
// windows to skip (and the reconciliation to count as delivered). One
// object per invocation that published anything, at
// delivered.FastPathKey(time of writing, Lambda request id): gzip-compressed
// TSV in the delivered index's form (delivered.Writer without locations),
// one line per version EventBridge accepted —
// "type\tid\tversionId\tlastUpdated" and "\tD" for a delete — encrypted
// with SSE-KMS under CDC_KMS_KEY_ID.

// RecordContentType and RecordContentEncoding describe a record object.
const (
	RecordContentType     = "text/tab-separated-values"
	RecordContentEncoding = "gzip"
)

// record is one invocation's record object in the making.
type record struct {
	entries []delivered.Entry
}

// add keeps one accepted version.
func (r *record) add(e delivered.Entry) { r.entries = append(r.entries, e) }

// write puts the record object under key; nothing is written without
// entries. Errors name the bucket and key, never a resource.
func (r *record) write(ctx context.Context, s3c S3API, bucket, kmsKeyID, key string) error {
	if len(r.entries) == 0 {
		return nil
	}
	var buf bytes.Buffer
	w := delivered.NewWriter(&buf, false)
	for i, e := range r.entries {
		if err := w.Write(e); err != nil {
			return fmt.Errorf("fast path: record entry %d: %w", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("fast path: record: %w", err)
	}
	in := &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes()),
		ContentLength: aws.Int64(int64(buf.Len())),
		ContentType:   aws.String(RecordContentType), ContentEncoding: aws.String(RecordContentEncoding),
	}
	if kmsKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(kmsKeyID)
	}
	if _, err := s3c.PutObject(ctx, in); err != nil {
		return fmt.Errorf("fast path: put record s3://%s/%s (%d versions): %w", bucket, key, len(r.entries), err)
	}
	return nil
}
