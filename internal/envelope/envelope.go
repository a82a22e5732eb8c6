// Package envelope defines the event detail schema v1 of healthlake-cdc: the
// envelope around one exported resource version, its stable event id, the
// content-hash version of resources without meta.versionId, and a byte-exact
// builder that copies the exported line into the detail without re-encoding it.
package envelope

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// SchemaVersion is the value of the detail's schemaVersion field.
const SchemaVersion = "1"

// Operations of schema v1 (the values are defined once, in pkg/cdcevent).
const (
	// OperationUpsert: the resource version was created or updated (state
	// transfer of the latest version in the window).
	OperationUpsert = cdcevent.OperationUpsert
	// OperationDelete: the resource was deleted; the event carries neither
	// resource nor resourceRef.
	OperationDelete = cdcevent.OperationDelete
)

// SnapshotSince is the since of a first run's snapshot window: the zero time,
// 0001-01-01T00:00:00.000Z. An export window starting at (or before) it is a
// full export, without _since.
var SnapshotSince = time.Time{}

// IsSnapshotSince reports whether t is SnapshotSince or earlier: a window
// starting there covers the whole store.
func IsSnapshotSince(t time.Time) bool {
	return !t.After(SnapshotSince)
}

// SchemaJSON is the JSON Schema (draft 2020-12) of the detail, version 1.
//
//go:embed schema/detail-v1.schema.json
var SchemaJSON []byte

// timeLayout is RFC 3339 in UTC with exactly three fraction digits.
const timeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime formats t as RFC 3339 in UTC with millisecond precision
// (sub-millisecond digits are truncated), e.g. "2026-11-21T10:00:00.000Z".
func FormatTime(t time.Time) string {
	return t.UTC().Format(timeLayout)
}

// ParseTime parses a FHIR instant or RFC 3339 time: any number of fraction
// digits, "Z" or a numeric offset. The result is in UTC. The error does not
// repeat the input, which may come from a resource.
func ParseTime(s string) (time.Time, error) {
	if !instantShape(s) {
		return time.Time{}, fmt.Errorf("parse time: %d-byte value is not an RFC 3339 instant", len(s))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse time: %d-byte value is not an RFC 3339 instant", len(s))
	}
	return t.UTC(), nil
}

// instantShape reports whether s has the shape of a FHIR instant:
// YYYY-MM-DDThh:mm:ss, then optionally "." and 1 to 9 digits, then "Z" or an
// offset ±hh:mm no larger than 14:00. time.Parse checks the ranges.
func instantShape(s string) bool {
	if len(s) < 20 {
		return false
	}
	for i := 0; i < 19; i++ {
		c := s[i]
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if n := j - i - 1; n < 1 || n > 9 {
			return false
		}
		i = j
	}
	rest := s[i:]
	if rest == "Z" {
		return true
	}
	if len(rest) != 6 || (rest[0] != '+' && rest[0] != '-') || rest[3] != ':' {
		return false
	}
	for _, k := range []int{1, 2, 4, 5} {
		if rest[k] < '0' || rest[k] > '9' {
			return false
		}
	}
	hh := int(rest[1]-'0')*10 + int(rest[2]-'0')
	return hh < 14 || hh == 14 && rest[4:] == "00"
}

// Window is the half-open interval (Since, Until] on meta.lastUpdated that one
// run covers. Its JSON form is {"since": T, "until": T} with T formatted by
// FormatTime.
type Window struct {
	Since time.Time
	Until time.Time
}

// Contains reports whether t lies in the window: Since < t <= Until.
func (w Window) Contains(t time.Time) bool {
	return t.After(w.Since) && !t.After(w.Until)
}

// Empty reports whether no instant lies in the window (Until <= Since).
func (w Window) Empty() bool {
	return !w.Until.After(w.Since)
}

// String returns the window in interval notation: "(since, until]".
func (w Window) String() string {
	return "(" + FormatTime(w.Since) + ", " + FormatTime(w.Until) + "]"
}

// MarshalJSON encodes the window as {"since": T, "until": T}.
func (w Window) MarshalJSON() ([]byte, error) {
	return appendWindow(make([]byte, 0, 64), w), nil
}

// UnmarshalJSON decodes {"since": T, "until": T}; both fields are required.
func (w *Window) UnmarshalJSON(b []byte) error {
	var raw struct {
		Since *string `json:"since"`
		Until *string `json:"until"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode window: %w", err)
	}
	if raw.Since == nil || raw.Until == nil {
		return fmt.Errorf("decode window: since and until are required")
	}
	since, err := ParseTime(*raw.Since)
	if err != nil {
		return fmt.Errorf("decode window since: %w", err)
	}
	until, err := ParseTime(*raw.Until)
	if err != nil {
		return fmt.Errorf("decode window until: %w", err)
	}
	w.Since, w.Until = since, until
	return nil
}

func appendWindow(dst []byte, w Window) []byte {
	dst = append(dst, `{"since":"`...)
	dst = w.Since.UTC().AppendFormat(dst, timeLayout)
	dst = append(dst, `","until":"`...)
	dst = w.Until.UTC().AppendFormat(dst, timeLayout)
	return append(dst, `"}`...)
}

// ExportRef names the HealthLake export job an event came from. The event
// types are defined once, in the public consumer package pkg/cdcevent.
type ExportRef = cdcevent.Export

// ResourceRef points at a claim-checked resource: the exported line stored
// byte for byte as an S3 object, with its size and lowercase hex SHA-256.
type ResourceRef = cdcevent.ResourceRef

// Detail is the decoded event detail, schema v1 (cdcevent.Detail). An upsert
// sets exactly one of Resource and ResourceRef; a delete sets neither.
type Detail = cdcevent.Detail

// Resource is what the builder needs from one exported line: the peeked
// top-level fields and the line itself (without its line terminator).
type Resource struct {
	ResourceType string
	ID           string
	VersionID    string
	LastUpdated  string
	Raw          []byte
}

// EventID returns the stable event id "{resourceType}/{id}/_history/{versionId}".
func EventID(resourceType, id, versionID string) string {
	return resourceType + "/" + id + "/_history/" + versionID
}

// ContentVersion returns the version of a resource without meta.versionId:
// "h-" followed by the first 16 lowercase hex digits of the SHA-256 of line.
func ContentVersion(line []byte) string {
	sum := sha256.Sum256(line)
	var b [18]byte
	b[0], b[1] = 'h', '-'
	hex.Encode(b[2:], sum[:8])
	return string(b[:])
}

// VersionOf returns the version an event carries for r: its meta.versionId,
// or ContentVersion(r.Raw) when the resource has none.
func VersionOf(r Resource) string {
	if r.VersionID != "" {
		return r.VersionID
	}
	return ContentVersion(r.Raw)
}

// AppendDetail appends the detail JSON (schema v1) of the event for r to dst
// and returns the extended slice. r.Raw is copied byte for byte as the
// resource; when ref is non-nil the detail carries resourceRef instead. String
// fields are JSON-escaped (invalid UTF-8 becomes U+FFFD). r.Raw must be one
// JSON object; the caller (the reader) has checked that.
func AppendDetail(dst []byte, r Resource, w Window, exp ExportRef, ref *ResourceRef) []byte {
	version := VersionOf(r)
	dst = append(dst, `{"schemaVersion":"`+SchemaVersion+`","eventId":"`...)
	dst = appendEscaped(dst, r.ResourceType)
	dst = append(dst, '/')
	dst = appendEscaped(dst, r.ID)
	dst = append(dst, "/_history/"...)
	dst = appendEscaped(dst, version)
	dst = append(dst, `","operation":"`+OperationUpsert+`","resourceType":`...)
	dst = AppendString(dst, r.ResourceType)
	dst = append(dst, `,"resourceId":`...)
	dst = AppendString(dst, r.ID)
	dst = append(dst, `,"versionId":`...)
	dst = AppendString(dst, version)
	dst = append(dst, `,"lastUpdated":`...)
	dst = AppendString(dst, r.LastUpdated)
	dst = append(dst, `,"window":`...)
	dst = appendWindow(dst, w)
	dst = append(dst, `,"export":{"datastoreId":`...)
	dst = AppendString(dst, exp.DatastoreID)
	dst = append(dst, `,"jobId":`...)
	dst = AppendString(dst, exp.JobID)
	dst = append(dst, '}')
	if ref != nil {
		dst = append(dst, `,"resourceRef":{"bucket":`...)
		dst = AppendString(dst, ref.Bucket)
		dst = append(dst, `,"key":`...)
		dst = AppendString(dst, ref.Key)
		dst = append(dst, `,"size":`...)
		dst = appendInt(dst, ref.Size)
		dst = append(dst, `,"sha256":`...)
		dst = AppendString(dst, ref.SHA256)
		dst = append(dst, '}')
	} else {
		dst = append(dst, `,"resource":`...)
		dst = append(dst, r.Raw...)
	}
	return append(dst, '}')
}

func appendInt(dst []byte, n int64) []byte {
	var b [20]byte
	i := len(b)
	neg := n < 0
	u := uint64(n)
	if neg {
		u = uint64(-n)
	}
	for {
		i--
		b[i] = byte('0' + u%10)
		u /= 10
		if u == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return append(dst, b[i:]...)
}

// Deletion is what the delete builder needs: the deleted resource and the
// deletion's version and time. For a deletion recorded in the instance history
// VersionID and LastUpdated are those of the DELETE entry; for a hard delete
// (history gone) VersionID is HardDeleteVersion(last delivered version) and
// LastUpdated the time the reconciliation's full export started.
type Deletion struct {
	ResourceType string
	ResourceID   string
	VersionID    string
	LastUpdated  string
	Window       Window
	Export       ExportRef
}

// HardDeleteVersion returns the versionId of the delete event of a resource
// whose history is gone: "{last delivered versionId}-deleted". It is stable (the
// same hard delete always yields the same eventId) and fits the versionId
// pattern whenever the delivered version leaves 8 characters to spare.
func HardDeleteVersion(lastDelivered string) string {
	return lastDelivered + "-deleted"
}

// AppendDeleteDetail appends the detail JSON (schema v1) of the delete event
// for d to dst and returns the extended slice: the same fields, in the same
// order, as AppendDetail, with operation "delete" and neither resource nor
// resourceRef. String fields are JSON-escaped (invalid UTF-8 becomes U+FFFD).
func AppendDeleteDetail(dst []byte, d Deletion) []byte {
	dst = append(dst, `{"schemaVersion":"`+SchemaVersion+`","eventId":"`...)
	dst = appendEscaped(dst, d.ResourceType)
	dst = append(dst, '/')
	dst = appendEscaped(dst, d.ResourceID)
	dst = append(dst, "/_history/"...)
	dst = appendEscaped(dst, d.VersionID)
	dst = append(dst, `","operation":"`+OperationDelete+`","resourceType":`...)
	dst = AppendString(dst, d.ResourceType)
	dst = append(dst, `,"resourceId":`...)
	dst = AppendString(dst, d.ResourceID)
	dst = append(dst, `,"versionId":`...)
	dst = AppendString(dst, d.VersionID)
	dst = append(dst, `,"lastUpdated":`...)
	dst = AppendString(dst, d.LastUpdated)
	dst = append(dst, `,"window":`...)
	dst = appendWindow(dst, d.Window)
	dst = append(dst, `,"export":{"datastoreId":`...)
	dst = AppendString(dst, d.Export.DatastoreID)
	dst = append(dst, `,"jobId":`...)
	dst = AppendString(dst, d.Export.JobID)
	return append(dst, `}}`...)
}
