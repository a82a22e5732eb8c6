package prepare

import (
	"bytes"
	"context"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/indexobject"
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
	if err := indexobject.PutEncoded(ctx, s3c, bucket, kmsKeyID, key, r.buf.Bytes()); err != nil {
		return err
	}
	r.buf, r.w = bytes.Buffer{}, nil
	return nil
}
