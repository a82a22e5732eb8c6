package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

func (h *Handler) put(ctx context.Context, key string, body []byte) error {
	in := &s3.PutObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if h.cfg.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(h.cfg.KMSKeyID)
	}
	if _, err := h.s3.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return h.put(ctx, key, b)
}

func (h *Handler) getJSON(ctx context.Context, key string, v any) error {
	body, err := s3read.Object(ctx, h.s3, h.cfg.Bucket, key)
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer body.Close()
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("decode s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) read(ctx context.Context, key string, files func(delivered.FileRef), fn func(delivered.Entry) error) error {
	body, err := s3read.Object(ctx, h.s3, h.cfg.Bucket, key)
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer body.Close()
	if err := delivered.ReadAll(body, files, fn); err != nil {
		return fmt.Errorf("s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) writeIndex(ctx context.Context, key string, es []delivered.Entry) error {
	var buf bytes.Buffer
	w := delivered.NewWriter(&buf, false)
	for _, e := range es {
		if e.Type == "" {
			continue // dropped
		}
		if err := w.Write(e); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return h.put(ctx, key, buf.Bytes())
}

func (h *Handler) listKeys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	var token *string
	for {
		out, err := h.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket), Prefix: aws.String(prefix), ContinuationToken: token})
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", h.cfg.Bucket, prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return keys, nil
		}
		token = out.NextContinuationToken
	}
}
