package prepare

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// recorder is one file's delivered-index object (contract D4): one line
// "type\tid\tversionId\tlastUpdated" per event EventBridge accepted, kept
// gzip-compressed in memory (about 15 bytes a line) and written to
// delivered.DeliveredKey(today, runId, file key) with SSE-KMS once every event of
// the file has its outcome. The reconciliation reads these objects.
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

// write puts the object; a file without accepted events writes none.
func (r *recorder) write(ctx context.Context, s3c S3WriteAPI, bucket, kmsKeyID, runID, fileKey string) error {
	if r.w == nil || r.w.Count() == 0 {
		return nil
	}
	if err := r.w.Close(); err != nil {
		return fmt.Errorf("delivered index of %s: %w", fileKey, err)
	}
	key := delivered.DeliveredKey(time.Now(), runID, fileKey)
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(r.buf.Bytes()),
		ContentType: aws.String("text/tab-separated-values"), ContentEncoding: aws.String("gzip")}
	if kmsKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(kmsKeyID)
	}
	if _, err := s3c.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put delivered index s3://%s/%s: %w", bucket, key, err)
	}
	r.buf, r.w = bytes.Buffer{}, nil
	return nil
}
