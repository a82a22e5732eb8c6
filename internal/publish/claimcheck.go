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

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// ClaimCheckPrefix is the S3 prefix of claim-checked resources.
const ClaimCheckPrefix = "claim-check/"

// PutObjectAPI is the part of the S3 client the claim-check uses.
type PutObjectAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// ClaimCheckKey returns the S3 key of a claim-checked resource version:
// "claim-check/{resourceType}/{sha256}.json", content-addressed by the
// SHA-256 (hex) of the exported line. The key is stable across retries (the
// same line gives the same bytes) and holds no resource id: S3 keys are not
// encrypted with the object, and reach listings and access logs.
func ClaimCheckKey(resourceType, sha256Hex string) string {
	return ClaimCheckPrefix + url.PathEscape(resourceType) + "/" + url.PathEscape(sha256Hex) + ".json"
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

// Store writes raw, the exported line byte for byte, under its
// content-addressed key and returns the reference an event carries.
func (c *ClaimCheck) Store(ctx context.Context, resourceType string, raw []byte) (envelope.ResourceRef, error) {
	if c == nil || c.S3 == nil && !c.DryRun || c.Bucket == "" {
		return envelope.ResourceRef{}, errors.New("claim-check: no bucket configured")
	}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	key := ClaimCheckKey(resourceType, digest)
	ref := envelope.ResourceRef{Bucket: c.Bucket, Key: key, Size: int64(len(raw)), SHA256: digest}
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
		return envelope.ResourceRef{}, fmt.Errorf("claim-check: put %d bytes under s3://%s/%s: %w", len(raw), c.Bucket, ClaimCheckPrefix, err)
	}
	return ref, nil
}
