package publish

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

// ClaimCheckPrefix is the S3 prefix of claim-checked resources.
const ClaimCheckPrefix = "claim-check/"

// PutObjectAPI is the part of the S3 client the claim-check uses.
type PutObjectAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// ClaimCheckKey returns the S3 key of a claim-checked resource version:
// "claim-check/{resourceType}/{id}/_history/{versionId}.json". Each segment is
// path-escaped, so FHIR ids ([A-Za-z0-9-.]) stand as they are and no segment
// can add a level.
func ClaimCheckKey(resourceType, id, versionID string) string {
	return ClaimCheckPrefix + url.PathEscape(resourceType) + "/" + url.PathEscape(id) + "/_history/" + url.PathEscape(versionID) + ".json"
}

// ClaimCheck stores resources too large for an event in S3, encrypted with
// SSE-KMS under KMSKeyID (no encryption header when KMSKeyID is empty, as
// with the local emulator). Storing is idempotent: a retried invocation
// writes the same bytes under the same key. With DryRun it computes the
// reference and stores nothing (S3 may be nil).
type ClaimCheck struct {
	S3       PutObjectAPI
	Bucket   string
	KMSKeyID string
	DryRun   bool
}

// Store writes raw, the exported line byte for byte, under the key of the
// resource version and returns the reference an event carries.
func (c *ClaimCheck) Store(ctx context.Context, resourceType, id, versionID string, raw []byte) (events.ResourceRef, error) {
	if c == nil || c.S3 == nil && !c.DryRun || c.Bucket == "" {
		return events.ResourceRef{}, errors.New("claim-check: no bucket configured")
	}
	key := ClaimCheckKey(resourceType, id, versionID)
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	ref := events.ResourceRef{Bucket: c.Bucket, Key: key, Size: int64(len(raw)), SHA256: digest}
	if c.DryRun {
		return ref, nil
	}
	in := &s3.PutObjectInput{
		Bucket:        aws.String(c.Bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(raw),
		ContentLength: aws.Int64(int64(len(raw))),
		ContentType:   aws.String("application/fhir+json"),
		Metadata:      map[string]string{"sha256": digest},
	}
	if c.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(c.KMSKeyID)
	}
	if _, err := c.S3.PutObject(ctx, in); err != nil {
		// The key holds the resource id: the error names the prefix only.
		return events.ResourceRef{}, fmt.Errorf("claim-check: put %d bytes under s3://%s/%s: %w", len(raw), c.Bucket, ClaimCheckPrefix, err)
	}
	return ref, nil
}
