package fhirrest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// ErrVersionGone matches (errors.Is) every *VersionGoneError: the version
// read answered 404 or 410.
var ErrVersionGone = errors.New("healthlake: resource version is gone")

// VersionGoneError is VRead's error for a version HealthLake does not
// return: 410 Gone (FHIR's answer for a version that is a deletion) or 404
// Not Found (no such version or resource: never written, not visible yet,
// or erased). errors.Is(err, ErrVersionGone) matches both; StatusCode
// tells them apart. It names no resource.
type VersionGoneError struct {
	// StatusCode is http.StatusGone or http.StatusNotFound.
	StatusCode int
}

// Error implements error.
func (e *VersionGoneError) Error() string {
	if e.Deleted() {
		return "healthlake: the resource version is a deletion (HTTP 410)"
	}
	return "healthlake: the resource version was not found (HTTP 404)"
}

// Is reports whether target is ErrVersionGone.
func (e *VersionGoneError) Is(target error) bool { return target == ErrVersionGone }

// Deleted reports whether HealthLake answered 410 Gone: the version is a
// deletion kept in the history.
func (e *VersionGoneError) Deleted() bool { return e.StatusCode == http.StatusGone }

// VersionPath returns the path of one version of a resource (FHIR vread).
func VersionPath(datastoreID, resourceType, id, versionID string) string {
	return HistoryPath(datastoreID, resourceType, id) + "/" + url.PathEscape(versionID)
}

// VRead reads one version of a resource, `GET …/r4/{type}/{id}/_history/{vid}`
// (FHIR vread; IAM action healthlake:VersionReadResource), and returns the
// resource's bytes exactly as HealthLake answered them. A 410 or 404 answer
// is a *VersionGoneError (errors.Is ErrVersionGone). Throttling, 5xx answers
// and transport errors are retried as the client's other calls are; other
// answers are an *APIError. Errors never carry the resource id or content.
func (c *Client) VRead(ctx context.Context, datastoreID, resourceType, id, versionID string) ([]byte, error) {
	if datastoreID == "" || resourceType == "" || id == "" || versionID == "" {
		return nil, errors.New("vread: datastore id, resource type, id and version id are required")
	}
	a, err := c.do(ctx, "VersionReadResource", http.MethodGet, VersionPath(datastoreID, resourceType, id, versionID), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("vread a %s: %w", resourceType, err)
	}
	switch a.status {
	case http.StatusOK:
		if len(a.body) == 0 {
			return nil, fmt.Errorf("vread a %s: an empty 200 answer", resourceType)
		}
		return a.body, nil
	case http.StatusGone, http.StatusNotFound:
		return nil, fmt.Errorf("vread a %s: %w", resourceType, &VersionGoneError{StatusCode: a.status})
	}
	// The OperationOutcome may name the resource: keep only its code.
	return nil, fmt.Errorf("vread a %s: %w", resourceType, a.failure().codeOnly())
}
