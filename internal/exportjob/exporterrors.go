package exportjob

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// maxErrorLine bounds one line of an export error file; maxRawError bounds
// the copy of it kept in the quarantine record.
const (
	maxErrorLine = 1 << 20
	maxRawError  = 64 << 10
)

// ErrorRecord is one quarantined entry of an export error file, in the
// shape of prepare-change's quarantine records (file, line, offset, length,
// reason, raw) so `cdcctl quarantine` lists both. Reason is built from the
// OperationOutcome's issue code only: never from its text, which may name a
// resource.
type ErrorRecord struct {
	File   string `json:"file"`
	Line   int64  `json:"line"`
	Offset int64  `json:"offset"`
	Length int    `json:"length"`
	Reason string `json:"reason"`
	Raw    string `json:"raw,omitempty"`
	// Truncated is true when Raw holds only the start of the line.
	Truncated bool `json:"truncated,omitempty"`
}

// ErrorReason is the quarantine reason of one line of an export error file.
func ErrorReason(line []byte) string {
	var oo struct {
		ResourceType string `json:"resourceType"`
		Issue        []struct {
			Severity string `json:"severity"`
			Code     string `json:"code"`
		} `json:"issue"`
	}
	if err := json.Unmarshal(line, &oo); err != nil || oo.ResourceType != "OperationOutcome" || len(oo.Issue) == 0 {
		return "export error: HealthLake reported an entry that is not a readable OperationOutcome"
	}
	code := oo.Issue[0].Code
	if !fhirCode(code) {
		code = "unknown"
	}
	return "export error: HealthLake could not export a resource (issue code " + code + ")"
}

// fhirCode reports whether s looks like a FHIR issue code (lower-case
// letters and dashes), so that a reason never carries free text.
func fhirCode(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c == '-') {
			return false
		}
	}
	return true
}

// quarantineExportErrors copies every entry of the job's error files into the
// run's quarantine, one object per error file at
// {QuarantinePrefix}{runId}/{error file key}.ndjson, and returns how many
// entries it quarantined. S3 errors are returned for a retry (the objects are
// rewritten whole, so a retry never duplicates records); an error file that
// does not exist is a *ManifestError.
func (h *CheckHandler) quarantineExportErrors(ctx context.Context, runID string, job *fhirrest.ExportJob) (int64, error) {
	var total int64
	for _, f := range job.Errors {
		bucket, key, err := ParseS3URL(f.URL)
		if err != nil {
			return total, err
		}
		records, err := h.readErrorFile(ctx, bucket, key)
		if err != nil {
			return total, err
		}
		if len(records) == 0 {
			continue
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, r := range records {
			if err := enc.Encode(r); err != nil {
				return total, fmt.Errorf("encode quarantine record: %w", err)
			}
		}
		qkey := h.cfg.QuarantinePrefix + runID + "/" + key + ".ndjson"
		in := &s3.PutObjectInput{
			Bucket: aws.String(h.cfg.Bucket), Key: aws.String(qkey),
			Body: bytes.NewReader(buf.Bytes()), ContentType: aws.String("application/x-ndjson"),
		}
		if h.cfg.KMSKeyID != "" {
			in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
			in.SSEKMSKeyId = aws.String(h.cfg.KMSKeyID)
		}
		if _, err := h.d.S3.PutObject(ctx, in); err != nil {
			return total, fmt.Errorf("write quarantine s3://%s/%s: %w", h.cfg.Bucket, qkey, err)
		}
		total += int64(len(records))
	}
	return total, nil
}

// objectMissing reports whether a failed read found no object at key: S3's
// 404 NoSuchKey, or its 403 AccessDenied when a listing of the key (which
// the role may make under the export prefix) does not hold it. S3 answers a
// missing key 403 to a caller without s3:ListBucket on the bucket, and
// check-export may list the export prefix only (GetObject API reference,
// Permissions).
func objectMissing(ctx context.Context, store ObjectStore, bucket, key string, err error) bool {
	var missing *s3types.NoSuchKey
	if errors.As(err, &missing) {
		return true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		return false
	}
	_, found, lerr := listKey(ctx, store, bucket, key)
	return lerr == nil && !found
}

// readErrorFile reads one NDJSON error file into quarantine records.
func (h *CheckHandler) readErrorFile(ctx context.Context, bucket, key string) ([]ErrorRecord, error) {
	body, err := s3read.Object(ctx, h.d.S3, bucket, key)
	if err != nil {
		if objectMissing(ctx, h.d.S3, bucket, key, err) {
			return nil, &ManifestError{Problem: "an error file listed by the job does not exist"}
		}
		return nil, fmt.Errorf("read export error file s3://%s/%s: %w", bucket, key, err)
	}
	defer body.Close()
	var records []ErrorRecord
	rd := bufio.NewReaderSize(body, 64<<10)
	var offset int64
	for n := int64(1); ; n++ {
		line, length, err := readLine(rd)
		if length > 0 {
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 {
				r := ErrorRecord{File: key, Line: n, Offset: offset, Length: length, Reason: ErrorReason(trimmed)}
				raw := trimmed
				if len(raw) > maxRawError {
					raw, r.Truncated = raw[:maxRawError], true
				}
				if utf8.Valid(raw) {
					r.Raw = string(raw)
				}
				records = append(records, r)
			}
			offset += int64(length)
		}
		if err == io.EOF {
			return records, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read export error file s3://%s/%s line %s: %w", bucket, key, strconv.FormatInt(n, 10), err)
		}
	}
}

// readLine reads one line (with its terminator counted in length), keeping
// at most maxErrorLine bytes of it.
func readLine(rd *bufio.Reader) ([]byte, int, error) {
	var line []byte
	length := 0
	for {
		chunk, err := rd.ReadSlice('\n')
		length += len(chunk)
		if room := maxErrorLine - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, length, err
	}
}
