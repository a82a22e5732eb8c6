package prepare

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// QuarantinePrefix is the S3 prefix of quarantine objects.
const QuarantinePrefix = "quarantine/"

// QuarantineKey returns the key of a run's quarantine object for one export
// file, or one byte range of it (fileKey: its manifest.File.Name):
// "quarantine/{runId}/{file key}.ndjson".
func QuarantineKey(runID, fileKey string) string {
	return QuarantinePrefix + runID + "/" + fileKey + ".ndjson"
}

// QuarantineRecord is one line of a quarantine object: a bad line of an
// export file, where it is and why it could not become an event. Raw holds
// the line (up to the cap) when it is valid UTF-8, RawBase64 otherwise;
// neither is set for a line too long to read, which an operator fetches from
// the export file by Offset.
type QuarantineRecord struct {
	File string `json:"file"`
	// Line is the line's number in the file, or, with LineFrom, counted
	// from the first line that begins at or after byte LineFrom (a byte
	// range of a large file that did not count the lines before it:
	// prepare.Config.LineCountMaxBytes). Offset is the file's either way.
	Line      int64  `json:"line"`
	LineFrom  int64  `json:"lineFrom,omitempty"`
	Offset    int64  `json:"offset"`
	Length    int    `json:"length,omitempty"`
	Reason    string `json:"reason"`
	Raw       string `json:"raw,omitempty"`
	RawBase64 string `json:"rawBase64,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// S3WriteAPI is the part of the S3 client the quarantine and claim-check writers use.
type S3WriteAPI interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
}

// quarantine writes the quarantine object of one file. Nothing is written
// unless a record is added. Memory is bounded by the part size plus one
// record: past the part size the buffer goes to S3 as a multipart part.
type quarantine struct {
	s3       S3WriteAPI
	bucket   string
	key      string
	kmsKeyID string
	rawCap   int
	partSize int
	lineFrom int64 // > 0: records number lines from this byte's line (QuarantineRecord.LineFrom)

	buf      bytes.Buffer
	count    int64
	uploadID *string
	parts    []s3types.CompletedPart
}

// add appends the record of one quarantined line.
func (q *quarantine) add(ctx context.Context, l *fhir.Line, reason string) error {
	b := q.buf.AvailableBuffer()
	b = append(b, `{"file":`...)
	b = envelope.AppendString(b, l.File)
	b = append(b, `,"line":`...)
	b = strconv.AppendInt(b, l.Number, 10)
	if q.lineFrom > 0 {
		b = append(b, `,"lineFrom":`...)
		b = strconv.AppendInt(b, q.lineFrom, 10)
	}
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, l.Offset, 10)
	if l.Raw != nil {
		b = append(b, `,"length":`...)
		b = strconv.AppendInt(b, int64(len(l.Raw)), 10)
	}
	b = append(b, `,"reason":`...)
	b = envelope.AppendString(b, reason)
	if l.Raw != nil {
		raw, truncated := l.Raw, false
		if len(raw) > q.rawCap {
			raw, truncated = raw[:q.rawCap], true
			raw = trimPartialRune(raw)
		}
		if utf8.Valid(raw) {
			b = append(b, `,"raw":`...)
			b = envelope.AppendString(b, string(raw))
		} else {
			b = append(b, `,"rawBase64":"`...)
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		}
		if truncated {
			b = append(b, `,"truncated":true`...)
		}
	}
	b = append(b, "}\n"...)
	q.buf.Write(b)
	q.count++
	if q.buf.Len() >= q.partSize {
		return q.flushPart(ctx)
	}
	return nil
}

func (q *quarantine) flushPart(ctx context.Context) error {
	if q.uploadID == nil {
		in := &s3.CreateMultipartUploadInput{Bucket: aws.String(q.bucket), Key: aws.String(q.key), ContentType: aws.String("application/x-ndjson")}
		if q.kmsKeyID != "" {
			in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
			in.SSEKMSKeyId = aws.String(q.kmsKeyID)
		}
		out, err := q.s3.CreateMultipartUpload(ctx, in)
		if err != nil {
			return fmt.Errorf("quarantine: start multipart upload of s3://%s/%s: %w", q.bucket, q.key, err)
		}
		q.uploadID = out.UploadId
	}
	n := int32(len(q.parts) + 1)
	out, err := q.s3.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(q.bucket), Key: aws.String(q.key), UploadId: q.uploadID,
		PartNumber: aws.Int32(n), Body: bytes.NewReader(q.buf.Bytes()), ContentLength: aws.Int64(int64(q.buf.Len())),
	})
	if err != nil {
		q.abort(ctx)
		return fmt.Errorf("quarantine: upload part %d of s3://%s/%s: %w", n, q.bucket, q.key, err)
	}
	q.parts = append(q.parts, s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	q.buf.Reset()
	return nil
}

func (q *quarantine) abort(ctx context.Context) {
	if q.uploadID != nil {
		_, _ = q.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(q.bucket), Key: aws.String(q.key), UploadId: q.uploadID})
		q.uploadID = nil
	}
}

// close writes what is buffered: one PutObject, or the last part and the
// completion of a multipart upload. It returns the key, or "" when nothing
// was quarantined.
func (q *quarantine) close(ctx context.Context) (string, error) {
	if q.count == 0 {
		return "", nil
	}
	if q.uploadID == nil {
		in := &s3.PutObjectInput{
			Bucket: aws.String(q.bucket), Key: aws.String(q.key), Body: bytes.NewReader(q.buf.Bytes()),
			ContentLength: aws.Int64(int64(q.buf.Len())), ContentType: aws.String("application/x-ndjson"),
		}
		if q.kmsKeyID != "" {
			in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
			in.SSEKMSKeyId = aws.String(q.kmsKeyID)
		}
		if _, err := q.s3.PutObject(ctx, in); err != nil {
			return "", fmt.Errorf("quarantine: put s3://%s/%s (%d records): %w", q.bucket, q.key, q.count, err)
		}
		q.buf.Reset()
		return q.key, nil
	}
	if q.buf.Len() > 0 {
		if err := q.flushPart(ctx); err != nil {
			return "", err
		}
	}
	_, err := q.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(q.bucket), Key: aws.String(q.key), UploadId: q.uploadID,
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: q.parts},
	})
	if err != nil {
		q.abort(ctx)
		return "", fmt.Errorf("quarantine: complete multipart upload of s3://%s/%s (%d parts): %w", q.bucket, q.key, len(q.parts), err)
	}
	q.uploadID = nil
	return q.key, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, left
// there by cutting b at a byte count.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
