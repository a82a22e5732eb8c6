package fastpath

import (
	"context"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/indexobject"
)

// The record object: what one invocation published, for the export path's
// windows to skip (and the reconciliation to count as delivered). One
// object per invocation that published anything, at
// delivered.FastPathKey(time of writing, Lambda request id): gzip-compressed
// TSV in the delivered index's form (delivered.Writer without locations),
// one line per version EventBridge accepted —
// "type\tid\tversionId\tlastUpdated" and "\tD" for a delete — encrypted
// with SSE-KMS under CDC_KMS_KEY_ID.

// record is one invocation's record object in the making.
type record struct {
	entries []delivered.Entry
}

// add keeps one accepted version.
func (r *record) add(e delivered.Entry) { r.entries = append(r.entries, e) }

// write puts the record object under key; nothing is written without
// entries. Errors name the bucket and key, never a resource.
func (r *record) write(ctx context.Context, s3c S3API, bucket, kmsKeyID, key string) error {
	if err := indexobject.Put(ctx, s3c, bucket, kmsKeyID, key, r.entries); err != nil {
		return fmt.Errorf("fast path: record of %d versions: %w", len(r.entries), err)
	}
	return nil
}
