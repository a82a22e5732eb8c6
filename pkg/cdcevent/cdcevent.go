// Package cdcevent is the consumer side of healthlake-cdc events: it decodes
// an EventBridge event (as a rule target receives it) into the detail of
// schema version 1, gives the key to deduplicate it by, and resolves a
// claim-checked resource through any object store (an ObjectGetter; the
// subpackage s3getter adapts the AWS SDK's S3 client), checking its size and
// SHA-256. The package itself depends on no AWS SDK.
//
// Delivery is at least once: a window that is retried or replayed sends the
// same resource version again, always with the same eventId. Keep the
// DedupeKey of what you processed and skip repeats.
//
// Each upsert event carries the latest state of one resource changed in the
// window (state transfer), not every intermediate version. A delete event
// (Operation "delete") means "remove this resource" and carries no resource; a
// later upsert of the same id (a re-creation) has a higher version and wins.
package cdcevent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// SchemaVersion is the detail schema version this package decodes.
const SchemaVersion = "1"

// Defaults the pipeline publishes with (both configurable per deployment).
const (
	DefaultSource     = "healthlake.cdc"
	DefaultDetailType = "FHIR Resource Changed"
)

// Operations of schema version 1: Detail.Operation is one of these.
const (
	// OperationUpsert: the resource was created or updated; the event carries
	// its latest version in the window (resource or resourceRef).
	OperationUpsert = "upsert"
	// OperationDelete: the resource was deleted; remove it. The event carries
	// neither resource nor resourceRef. VersionID and LastUpdated are those of
	// the deletion.
	OperationDelete = "delete"
)

// Errors Decode and Resolve wrap; test with errors.Is. No error names a
// resource (ids may be identifiers such as MRNs): a consumer may log them.
var (
	ErrMalformed         = errors.New("cdcevent: malformed event")
	ErrUnsupportedSchema = errors.New("cdcevent: unsupported detail schema version")
	// ErrUnsupportedOperation: the detail's operation is not one this package
	// knows (a newer producer); do not treat the event as an upsert.
	ErrUnsupportedOperation = errors.New("cdcevent: unsupported operation")
	// ErrDeleted: Resolve was asked for the resource of a delete event.
	ErrDeleted          = errors.New("cdcevent: delete event carries no resource")
	ErrSizeMismatch     = errors.New("cdcevent: claim-checked object size differs from resourceRef.size")
	ErrChecksumMismatch = errors.New("cdcevent: claim-checked object SHA-256 differs from resourceRef.sha256")
)

// Event is an EventBridge event as a rule target receives it, with the
// healthlake-cdc detail decoded.
type Event struct {
	Version    string    `json:"version"`
	ID         string    `json:"id"`
	DetailType string    `json:"detail-type"`
	Source     string    `json:"source"`
	Account    string    `json:"account"`
	Time       time.Time `json:"time"`
	Region     string    `json:"region"`
	Resources  []string  `json:"resources"`
	Detail     Detail    `json:"detail"`
}

// Window is the run's interval (Since, Until] on meta.lastUpdated.
type Window struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// Export names the HealthLake export job a resource came from.
type Export struct {
	DatastoreID string `json:"datastoreId"`
	JobID       string `json:"jobId"`
}

// ResourceRef points at a claim-checked resource: the exported line stored
// byte for byte in S3, Size bytes long, with the lowercase hex SHA-256 SHA256.
type ResourceRef struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Detail is the event detail, schema version 1. An upsert sets exactly one of
// Resource and ResourceRef (use Resolve to get the resource either way); a
// delete sets neither.
type Detail struct {
	SchemaVersion string `json:"schemaVersion"`
	// EventID is "{resourceType}/{resourceId}/_history/{versionId}", stable
	// for a resource version.
	EventID string `json:"eventId"`
	// Operation is OperationUpsert or OperationDelete.
	Operation    string `json:"operation"`
	ResourceType string `json:"resourceType"`
	ResourceID   string `json:"resourceId"`
	VersionID    string `json:"versionId"`
	// LastUpdated is meta.lastUpdated as exported (a FHIR instant).
	LastUpdated string `json:"lastUpdated"`
	Window      Window `json:"window"`
	Export      Export `json:"export"`
	// Resource is the exported resource, byte for byte.
	Resource    json.RawMessage `json:"resource,omitempty"`
	ResourceRef *ResourceRef    `json:"resourceRef,omitempty"`
}

// DedupeKey returns the key to deduplicate deliveries by: the eventId.
func (d *Detail) DedupeKey() string { return d.EventID }

// IsDelete reports whether the event is a delete: remove the resource.
func (d *Detail) IsDelete() bool { return d.Operation == OperationDelete }

// LastUpdatedTime parses LastUpdated.
func (d *Detail) LastUpdatedTime() (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, d.LastUpdated)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: lastUpdated is not an RFC 3339 instant", ErrMalformed)
	}
	return t, nil
}

// Decode decodes an EventBridge event (the JSON a rule target receives) and
// checks its detail; see DecodeDetail.
func Decode(eventBridgeEventJSON []byte) (*Event, error) {
	var raw struct {
		Event
		Detail json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(eventBridgeEventJSON, &raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(raw.Detail) == 0 {
		return nil, fmt.Errorf("%w: no detail", ErrMalformed)
	}
	d, err := DecodeDetail(raw.Detail)
	if err != nil {
		return nil, err
	}
	ev := raw.Event
	ev.Detail = *d
	return &ev, nil
}

// DecodeDetail decodes the detail alone (for targets whose input is
// "$.detail"). It requires schemaVersion "1", an eventId, an operation of
// "upsert" (with exactly one of resource and resourceRef) or "delete" (with
// neither); unknown fields are ignored, as the schema asks. Another operation
// yields ErrUnsupportedOperation.
func DecodeDetail(detailJSON []byte) (*Detail, error) {
	var d Detail
	if err := json.Unmarshal(detailJSON, &d); err != nil {
		return nil, fmt.Errorf("%w: detail: %v", ErrMalformed, err)
	}
	if d.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%w: %q (this package reads %q)", ErrUnsupportedSchema, d.SchemaVersion, SchemaVersion)
	}
	if d.EventID == "" || d.ResourceType == "" || d.ResourceID == "" || d.VersionID == "" {
		return nil, fmt.Errorf("%w: eventId, resourceType, resourceId and versionId are required", ErrMalformed)
	}
	hasResource := len(d.Resource) > 0 && string(d.Resource) != "null"
	switch d.Operation {
	case OperationUpsert:
	case OperationDelete:
		if hasResource || d.ResourceRef != nil {
			return nil, fmt.Errorf("%w: a delete event carries a resource", ErrMalformed)
		}
		d.Resource = nil
		return &d, nil
	default:
		return nil, fmt.Errorf("%w: %d-byte operation value", ErrUnsupportedOperation, len(d.Operation))
	}
	if hasResource == (d.ResourceRef != nil) {
		return nil, fmt.Errorf("%w: an upsert must carry exactly one of resource and resourceRef", ErrMalformed)
	}
	if !hasResource {
		d.Resource = nil
	}
	return &d, nil
}

// ObjectGetter fetches a claim-checked object: the body of bucket/key, which
// the caller closes. s3getter.New adapts an *s3.Client; any store holding the
// same bytes will do.
type ObjectGetter interface {
	GetObject(ctx context.Context, bucket, key string) (io.ReadCloser, error)
}

// Resolve returns the resource of d: the inline resource as it is, or the
// claim-checked object fetched through getter after checking that it has
// exactly resourceRef.size bytes (ErrSizeMismatch) and their SHA-256 is
// resourceRef.sha256 (ErrChecksumMismatch). It never reads more than size+1
// bytes of the object. An inline resource needs no getter (nil will do).
func Resolve(ctx context.Context, getter ObjectGetter, d *Detail) ([]byte, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil detail", ErrMalformed)
	}
	if d.IsDelete() {
		return nil, ErrDeleted
	}
	if d.ResourceRef == nil {
		if len(d.Resource) == 0 {
			return nil, fmt.Errorf("%w: the event has neither resource nor resourceRef", ErrMalformed)
		}
		return d.Resource, nil
	}
	ref := d.ResourceRef
	if ref.Bucket == "" || ref.Key == "" || ref.Size < 0 || len(ref.SHA256) != sha256.Size*2 {
		return nil, fmt.Errorf("%w: incomplete resourceRef", ErrMalformed)
	}
	if getter == nil {
		return nil, errors.New("cdcevent: resolve: no object getter")
	}
	body, err := getter.GetObject(ctx, ref.Bucket, ref.Key)
	if err != nil {
		return nil, fmt.Errorf("cdcevent: resolve: get s3://%s/%s: %w", ref.Bucket, ref.Key, err)
	}
	if body == nil {
		return nil, fmt.Errorf("cdcevent: resolve: get s3://%s/%s: no body", ref.Bucket, ref.Key)
	}
	defer body.Close()
	var buf bytes.Buffer
	if ref.Size < 64<<20 {
		buf.Grow(int(ref.Size) + 1)
	}
	if _, err := io.Copy(&buf, io.LimitReader(body, ref.Size+1)); err != nil {
		return nil, fmt.Errorf("cdcevent: resolve: read s3://%s/%s: %w", ref.Bucket, ref.Key, err)
	}
	if int64(buf.Len()) != ref.Size {
		return nil, fmt.Errorf("%w: s3://%s/%s has %s bytes, want %d", ErrSizeMismatch, ref.Bucket, ref.Key, sizeText(buf.Len(), ref.Size), ref.Size)
	}
	sum := sha256.Sum256(buf.Bytes())
	if hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("%w: s3://%s/%s", ErrChecksumMismatch, ref.Bucket, ref.Key)
	}
	return buf.Bytes(), nil
}

func sizeText(n int, want int64) string {
	if int64(n) > want {
		return "more than " + fmt.Sprint(want)
	}
	return fmt.Sprint(n)
}
