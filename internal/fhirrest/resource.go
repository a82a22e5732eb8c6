package fhirrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The FHIR R4 instance and type interactions on one resource (create, read,
// update, delete) and a plain type search, each the generic HealthLake IAM
// action of its name (healthlake:CreateResource, ReadResource,
// UpdateResource, DeleteResource, SearchWithGet). They are signed,
// retried and reported as the client's other calls: throttling, 5xx answers
// and transport errors are retried, other answers are an *APIError.

// maxSearchPages bounds how many `next` links SearchResources follows.
const maxSearchPages = 100

// ResourcePath returns the path of one resource of a data store,
// `/datastore/{id}/r4/{type}/{resourceId}`.
func ResourcePath(datastoreID, resourceType, id string) string {
	return searchPath(datastoreID, resourceType) + "/" + url.PathEscape(id)
}

// Written is HealthLake's answer to a create or an update.
type Written struct {
	// ID and VersionID name the version written: from the answer's
	// resource (id, meta.versionId), else its Location header
	// (`…/{type}/{id}/_history/{vid}`), else its ETag (W/"{vid}").
	ID, VersionID string
	// Created is true for a create, and for an update that created the
	// resource (201).
	Created bool
	// Body is the resource as HealthLake answered it; nil when the answer
	// carried none.
	Body []byte
	// Retried is true when an earlier attempt of this call failed in a way
	// that does not prove HealthLake refused it (a 5xx or a transport
	// error): that attempt may have written too, so a create may have made
	// a second resource.
	Retried bool
}

// CreateResource creates a resource with a server-assigned id,
// `POST …/r4/{type}` with `Prefer: return=representation`. body is the
// resource's JSON (its resourceType must be resourceType; an id in it is
// ignored by FHIR create). The answer must be 201 (or 200). A refusal is an
// *APIError carrying HealthLake's OperationOutcome text (never the request
// body).
func (c *Client) CreateResource(ctx context.Context, datastoreID, resourceType string, body []byte) (*Written, error) {
	if datastoreID == "" || resourceType == "" || len(body) == 0 {
		return nil, errors.New("create resource: datastore id, resource type and body are required")
	}
	return c.write(ctx, "CreateResource", http.MethodPost, searchPath(datastoreID, resourceType), resourceType, body)
}

// UpdateResource writes a resource under its id, `PUT …/r4/{type}/{id}`
// with `Prefer: return=representation` (FHIR update: a new version, or the
// resource's creation when it does not exist). body's id must be id. The
// answer must be 200 or 201. A refusal is an *APIError carrying HealthLake's
// OperationOutcome text (never the request body).
func (c *Client) UpdateResource(ctx context.Context, datastoreID, resourceType, id string, body []byte) (*Written, error) {
	if datastoreID == "" || resourceType == "" || id == "" || len(body) == 0 {
		return nil, errors.New("update resource: datastore id, resource type, id and body are required")
	}
	w, err := c.write(ctx, "UpdateResource", http.MethodPut, ResourcePath(datastoreID, resourceType, id), resourceType, body)
	if err != nil {
		return nil, err
	}
	if w.ID == "" {
		w.ID = id
	}
	return w, nil
}

// write sends a create or an update and reads the version it wrote.
func (c *Client) write(ctx context.Context, op, method, path, resourceType string, body []byte) (*Written, error) {
	call := &callOptions{prefer: "return=representation"}
	a, err := c.do(withCall(ctx, call), op, method, path, nil, body)
	if err != nil {
		return nil, fmt.Errorf("%s a %s: %w", verb(op), resourceType, markAmbiguous(err, a.ambiguous))
	}
	status := a.status
	if status != http.StatusOK && status != http.StatusCreated {
		return nil, fmt.Errorf("%s a %s: %w", verb(op), resourceType, markAmbiguous(a.failure(), a.ambiguous))
	}
	w := writtenOf(resourceType, a.body, call.header)
	w.Created = status == http.StatusCreated || method == http.MethodPost
	w.Retried = a.ambiguous
	if w.ID == "" && method == http.MethodPost {
		return nil, fmt.Errorf("%s a %s: the %d answer names no resource id (no resource, Location or Content-Location)", verb(op), resourceType, status)
	}
	return w, nil
}

func verb(op string) string {
	switch op {
	case "CreateResource":
		return "create"
	case "UpdateResource":
		return "update"
	}
	return op
}

// writtenOf reads the id and version of a create's or update's answer.
func writtenOf(resourceType string, body []byte, h http.Header) *Written {
	w := &Written{}
	var doc struct {
		ResourceType string `json:"resourceType"`
		ID           string `json:"id"`
		Meta         struct {
			VersionID string `json:"versionId"`
		} `json:"meta"`
	}
	if len(body) > 0 && json.Unmarshal(body, &doc) == nil && doc.ResourceType == resourceType {
		w.ID, w.VersionID, w.Body = doc.ID, doc.Meta.VersionID, body
	}
	for _, name := range []string{"Location", "Content-Location"} {
		if w.ID != "" && w.VersionID != "" {
			break
		}
		id, vid := parseLocation(h.Get(name), resourceType)
		if w.ID == "" {
			w.ID = id
		}
		if w.VersionID == "" && id == w.ID {
			w.VersionID = vid
		}
	}
	if w.VersionID == "" {
		if et := strings.TrimPrefix(h.Get("ETag"), "W/"); len(et) > 2 && et[0] == '"' && et[len(et)-1] == '"' {
			w.VersionID = et[1 : len(et)-1]
		}
	}
	return w
}

// parseLocation reads `[…/]{type}/{id}[/_history/{vid}]`, absolute or
// relative, as HealthLake's Location names a version written.
func parseLocation(loc, resourceType string) (id, versionID string) {
	if loc == "" {
		return "", ""
	}
	if u, err := url.Parse(loc); err == nil {
		loc = u.Path
	}
	segs := strings.Split(strings.Trim(loc, "/"), "/")
	for i := len(segs) - 2; i >= 0; i-- {
		if segs[i] != resourceType {
			continue
		}
		id = segs[i+1]
		if i+3 < len(segs) && segs[i+2] == "_history" {
			versionID = segs[i+3]
		}
		return id, versionID
	}
	return "", ""
}

// ReadResource reads a resource's current version, `GET …/r4/{type}/{id}`,
// and returns its bytes as HealthLake answered them. An absent resource is
// an *APIError with status 404, a deleted one 410 (IsAbsent reports both).
// Errors never carry the resource id or any resource content.
func (c *Client) ReadResource(ctx context.Context, datastoreID, resourceType, id string) ([]byte, error) {
	if datastoreID == "" || resourceType == "" || id == "" {
		return nil, errors.New("read resource: datastore id, resource type and id are required")
	}
	a, err := c.do(ctx, "ReadResource", http.MethodGet, ResourcePath(datastoreID, resourceType, id), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("read a %s: %w", resourceType, err)
	}
	if a.status != http.StatusOK {
		// The OperationOutcome may name the resource: keep only its code.
		return nil, fmt.Errorf("read a %s: %w", resourceType, a.failure().codeOnly())
	}
	if len(a.body) == 0 {
		return nil, fmt.Errorf("read a %s: an empty 200 answer", resourceType)
	}
	return a.body, nil
}

// DeleteResource deletes a resource, `DELETE …/r4/{type}/{id}` (FHIR
// delete: a deletion version kept in the history). 200, 202 and 204 are
// success. A 404 or 410 answer (nothing to delete, or already deleted) is
// an *APIError IsAbsent reports; a caller to whom absence is success tests
// it. Errors never carry the resource id.
func (c *Client) DeleteResource(ctx context.Context, datastoreID, resourceType, id string) error {
	if datastoreID == "" || resourceType == "" || id == "" {
		return errors.New("delete resource: datastore id, resource type and id are required")
	}
	a, err := c.do(ctx, "DeleteResource", http.MethodDelete, ResourcePath(datastoreID, resourceType, id), nil, nil)
	if err != nil {
		return fmt.Errorf("delete a %s: %w", resourceType, markAmbiguous(err, a.ambiguous))
	}
	switch a.status {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	case http.StatusNotFound, http.StatusGone:
		return fmt.Errorf("delete a %s: %w", resourceType, a.failure().codeOnly())
	}
	return fmt.Errorf("delete a %s: %w", resourceType, a.failure())
}

// IsAbsent reports whether err is a 404 or 410 answer: the resource does
// not exist, or its current version is a deletion.
func IsAbsent(err error) bool {
	var api *APIError
	return errors.As(err, &api) && (api.StatusCode == http.StatusNotFound || api.StatusCode == http.StatusGone)
}

// SearchResources searches a type, `GET …/r4/{type}?{params}`, read with
// strong consistency, and returns the resource of every entry of the
// searchset Bundle as HealthLake answered it, following `next` links (at
// most 100 pages). An entry may be an OperationOutcome (search mode
// outcome), and the server decides which parameters it honours: a caller
// that needs an exact match checks each resource's type and fields itself.
// Errors never carry resource content.
func (c *Client) SearchResources(ctx context.Context, datastoreID, resourceType string, params url.Values) ([]json.RawMessage, error) {
	if datastoreID == "" || resourceType == "" {
		return nil, errors.New("search: datastore id and resource type are required")
	}
	path, q := searchPath(datastoreID, resourceType), url.Values{}
	for k, vs := range params {
		q[k] = append([]string(nil), vs...)
	}
	var out []json.RawMessage
	for page := 1; ; page++ {
		b, err := c.search(ctx, "SearchWithGet", datastoreID, resourceType, path, q)
		if err != nil {
			return nil, err
		}
		out = append(out, b.resources()...)
		next := nextLink(b.Link)
		if next == "" {
			return out, nil
		}
		if page >= maxSearchPages {
			return nil, fmt.Errorf("search of %s: more than %d pages", resourceType, maxSearchPages)
		}
		if path, q, err = c.nextPage(datastoreID, next); err != nil {
			return nil, fmt.Errorf("search of %s: %w", resourceType, err)
		}
	}
}

// callOptions are one call's request settings and what it keeps of the
// answer, carried to once by the context.
type callOptions struct {
	// prefer is the Prefer header; "" leaves the default (respond-async on
	// a POST, which `$export` needs; none otherwise).
	prefer string
	// header receives the headers of the last answer.
	header http.Header
}

type callKey struct{}

func withCall(ctx context.Context, o *callOptions) context.Context {
	return context.WithValue(ctx, callKey{}, o)
}

// preferHeader is the Prefer header of a request: the call's own, else
// respond-async on a POST.
func preferHeader(ctx context.Context, method string) string {
	if o, ok := ctx.Value(callKey{}).(*callOptions); ok && o.prefer != "" {
		return o.prefer
	}
	if method == http.MethodPost {
		return "respond-async"
	}
	return ""
}

// keepAnswerHeader gives the call the answer's headers, when it asked.
func keepAnswerHeader(ctx context.Context, h http.Header) {
	if o, ok := ctx.Value(callKey{}).(*callOptions); ok {
		o.header = h.Clone()
	}
}
