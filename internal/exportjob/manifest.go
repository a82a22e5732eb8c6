package exportjob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
)

// ManifestError is a permanent problem building the manifest (a URL that
// is not s3://bucket/key, a listing under no usable prefix).
type ManifestError struct{ Problem string }

// Error implements error.
func (e *ManifestError) Error() string { return "manifest: " + e.Problem }

// ParseS3URL parses s3://bucket/key with net/url: scheme s3, host = bucket,
// path = key (percent-decoded).
func ParseS3URL(raw string) (bucket, key string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", &ManifestError{Problem: "unparseable S3 URL"}
	}
	if u.Scheme != "s3" || u.Host == "" {
		return "", "", &ManifestError{Problem: fmt.Sprintf("URL with scheme %q is not s3://bucket/key", u.Scheme)}
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}

// BuildManifest returns the NDJSON files of a finished job with their sizes:
// the files are the job's output list when it has one, otherwise every
// {Type}/{Type}-….ndjson object of the job's S3 folder; the sizes come from a
// paginated listing of that folder, pageSize keys a page (S3's default of
// 1000 when pageSize ≤ 0). The job's error files are never part of it. The
// result is never nil. An output file the folder's listing does not hold
// (one outside the job's folder) is sized by a listing of its own key, so
// that a large one is still cut into ranges (manifest.Plan); one S3 does
// not hold, or that check-export may not list, is a *ManifestError.
// Without a store (or an s3Uri) sizes are 0, unknown.
func BuildManifest(ctx context.Context, store ObjectStore, job *fhirrest.ExportJob, pageSize int32) ([]manifest.File, error) {
	errorKeys := map[string]bool{}
	for _, f := range job.Errors {
		if b, k, err := ParseS3URL(f.URL); err == nil {
			errorKeys[b+"/"+k] = true
		}
	}
	if len(job.Output) == 0 {
		listed, _, err := listJobFolder(ctx, store, job, pageSize, errorKeys)
		return listed, err
	}
	sizes := map[string]int64{}
	if _, _, perr := jobPrefix(job); perr == nil && store != nil {
		_, listedSizes, err := listJobFolder(ctx, store, job, pageSize, errorKeys)
		if err != nil {
			return nil, err
		}
		sizes = listedSizes
	}
	files := make([]manifest.File, 0, len(job.Output))
	for _, f := range job.Output {
		bucket, key, err := ParseS3URL(f.URL)
		if err != nil {
			return nil, err
		}
		if key == "" || f.Type == "" {
			return nil, &ManifestError{Problem: "output entry without a key or a type"}
		}
		size, listed := sizes[bucket+"/"+key]
		if !listed && store != nil {
			if size, err = keySize(ctx, store, bucket, key); err != nil {
				return nil, err
			}
		}
		files = append(files, manifest.File{Bucket: bucket, Key: key, ResourceType: f.Type, Bytes: size})
	}
	return files, nil
}

// keySize returns the size of s3://bucket/key from a listing of the key.
// A listing, not HeadObject: HEAD needs s3:GetObject, which check-export
// holds for the export's error files only, not for its resources (PHI).
// S3 not holding the key, or refusing the listing (a file outside the
// export prefix, which prepare-change could not read either), is a
// *ManifestError: the run fails with ManifestFailed rather than at every
// batch's read.
func keySize(ctx context.Context, store ObjectStore, bucket, key string) (int64, error) {
	size, found, err := listKey(ctx, store, bucket, key)
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "AccessDenied" {
			return 0, &ManifestError{Problem: "an output file outside the prefix check-export may list"}
		}
		return 0, fmt.Errorf("list s3://%s/%s: %w", bucket, key, err)
	}
	if !found {
		return 0, &ManifestError{Problem: "an output file listed by the job does not exist"}
	}
	return size, nil
}

// listKey lists key itself (its prefix, one key): whether S3 holds it, and
// its size. A listing needs only s3:ListBucket on the prefix, which
// check-export holds for the whole export prefix.
func listKey(ctx context.Context, store ObjectStore, bucket, key string) (size int64, found bool, err error) {
	out, err := store.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(key), MaxKeys: aws.Int32(1)})
	if err != nil {
		return 0, false, err
	}
	if len(out.Contents) == 0 || aws.ToString(out.Contents[0].Key) != key {
		return 0, false, nil
	}
	return aws.ToInt64(out.Contents[0].Size), true, nil
}

// listJobFolder lists the job's folder: its resource files (sorted by key)
// and the size of every object by "bucket/key".
func listJobFolder(ctx context.Context, store ObjectStore, job *fhirrest.ExportJob, pageSize int32, skip map[string]bool) ([]manifest.File, map[string]int64, error) {
	files := []manifest.File{}
	sizes := map[string]int64{}
	bucket, prefix, err := jobPrefix(job)
	if err != nil {
		return nil, nil, err
	}
	var token, maxKeys = (*string)(nil), (*int32)(nil)
	if pageSize > 0 {
		maxKeys = aws.Int32(pageSize)
	}
	for {
		out, err := store.ListObjectsV2(ctx, &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String(prefix), ContinuationToken: token, MaxKeys: maxKeys,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range out.Contents {
			key := aws.ToString(o.Key)
			sizes[bucket+"/"+key] = aws.ToInt64(o.Size)
			rel := strings.TrimPrefix(key, prefix)
			dir, file := path.Split(rel)
			typ := strings.TrimSuffix(dir, "/")
			if skip[bucket+"/"+key] || !strings.HasSuffix(file, ".ndjson") || typ == "" || strings.Contains(typ, "/") || !strings.HasPrefix(file, typ+"-") {
				continue
			}
			files = append(files, manifest.File{Bucket: bucket, Key: key, ResourceType: typ, Bytes: aws.ToInt64(o.Size)})
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			break
		}
		token = out.NextContinuationToken
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Key < files[j].Key })
	return files, sizes, nil
}

// jobPrefix is the job's folder: the job's s3Uri, with
// "{datastoreId}-FHIR_EXPORT-{jobId}/" appended unless it already ends there.
func jobPrefix(job *fhirrest.ExportJob) (bucket, prefix string, err error) {
	bucket, prefix, err = ParseS3URL(job.S3URI)
	if err != nil {
		return "", "", err
	}
	folder := job.DatastoreID + "-FHIR_EXPORT-" + job.JobID
	trimmed := strings.TrimSuffix(prefix, "/")
	if path.Base(trimmed) != folder {
		if trimmed != "" {
			trimmed += "/"
		}
		trimmed += folder
	}
	return bucket, trimmed + "/", nil
}
