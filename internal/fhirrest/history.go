package fhirrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrNoHistory is returned by History when the data store has no history
// for the resource (404): it never existed, or it was hard deleted.
var ErrNoHistory = errors.New("healthlake: resource has no history")

// maxHistoryPages bounds how many `next` links History follows.
const maxHistoryPages = 1000

// HistoryEntry is one version in a resource's instance history.
type HistoryEntry struct {
	// VersionID is the version's meta.versionId (for a deletion, the
	// version the DELETE created).
	VersionID string
	// LastUpdated is the version's meta.lastUpdated (for a deletion, the
	// time of the DELETE), a FHIR instant as HealthLake wrote it.
	LastUpdated string
	// Deleted marks a deletion: request.method DELETE, no resource.
	Deleted bool
	// Created marks a version that created the resource (or re-created it
	// after a deletion): request.method POST, or response.status 201 (an
	// update-as-create with PUT).
	Created bool
	// ResourceType and ID name the resource (type-level history holds many):
	// from the resource, else from the entry's fullUrl or request.url.
	ResourceType, ID string
}

// HistoryPath returns the path of a resource's instance history.
func HistoryPath(datastoreID, resourceType, id string) string {
	return "/datastore/" + url.PathEscape(datastoreID) + "/r4/" + url.PathEscape(resourceType) + "/" + url.PathEscape(id) + "/_history"
}

// History reads `GET …/r4/{type}/{id}/_history` (a FHIR Bundle of type
// history, newest first, deletions included) and returns its entries in
// that order, following `next` links. A 404 returns ErrNoHistory. Errors
// never carry the resource id or any resource content.
func (c *Client) History(ctx context.Context, datastoreID, resourceType, id string) ([]HistoryEntry, error) {
	if datastoreID == "" || resourceType == "" || id == "" {
		return nil, errors.New("history: datastore id, resource type and id are required")
	}
	path, query := HistoryPath(datastoreID, resourceType, id), url.Values(nil)
	var out []HistoryEntry
	for page := 1; ; page++ {
		a, err := c.do(ctx, "History", http.MethodGet, path, query, nil)
		if err != nil {
			return nil, fmt.Errorf("history of a %s: %w", resourceType, err)
		}
		switch {
		case a.status == http.StatusNotFound:
			return nil, fmt.Errorf("history of a %s: %w", resourceType, ErrNoHistory)
		case a.status != http.StatusOK:
			// The OperationOutcome may name the resource: keep only its code.
			return nil, fmt.Errorf("history of a %s: %w", resourceType, a.failure().codeOnly())
		}
		entries, next, err := parseHistory(a.body)
		if err != nil {
			return nil, fmt.Errorf("history of a %s, page %d: %w", resourceType, page, err)
		}
		out = append(out, entries...)
		if next == "" {
			return out, nil
		}
		if page >= maxHistoryPages {
			return nil, fmt.Errorf("history of a %s: more than %d pages", resourceType, maxHistoryPages)
		}
		if path, query, err = c.nextPage(datastoreID, next); err != nil {
			return nil, fmt.Errorf("history of a %s, page %d: %w", resourceType, page, err)
		}
	}
}

// nextPage turns a `next` link (absolute, or relative to the data store's
// FHIR base) into a path and query under the client's endpoint. A link to
// another host is refused: the request would be signed for it.
func (c *Client) nextPage(datastoreID, link string) (string, url.Values, error) {
	fhirBase := *c.base
	fhirBase.Path = strings.TrimRight(c.base.Path, "/") + "/datastore/" + datastoreID + "/r4/"
	fhirBase.RawPath = ""
	ref, err := url.Parse(link)
	if err != nil {
		return "", nil, errors.New("next link is not a URL")
	}
	u := fhirBase.ResolveReference(ref)
	basePath := strings.TrimRight(c.base.Path, "/")
	if u.Scheme != c.base.Scheme || u.Host != c.base.Host || !strings.HasPrefix(u.Path, basePath+"/datastore/") {
		return "", nil, errors.New("next link leaves the HealthLake endpoint")
	}
	return strings.TrimPrefix(u.Path, basePath), u.Query(), nil
}

// historyBundle is the part of a history Bundle History reads.
type historyBundle struct {
	ResourceType string       `json:"resourceType"`
	Type         string       `json:"type"`
	Link         []bundleLink `json:"link"`
	Entry        []struct {
		FullURL string `json:"fullUrl"`
		// Resource is decoded in the same pass as the Bundle, to the
		// members History needs: a page is scanned once.
		Resource *historyResource `json:"resource"`
		Request  *struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"request"`
		Response *struct {
			Status       string `json:"status"`
			Etag         string `json:"etag"`
			LastModified string `json:"lastModified"`
		} `json:"response"`
	} `json:"entry"`
}

// historyResource is the part of an entry's resource History reads.
type historyResource struct {
	ResourceType string `json:"resourceType"`
	ID           string `json:"id"`
	Meta         struct {
		VersionID   string `json:"versionId"`
		LastUpdated string `json:"lastUpdated"`
	} `json:"meta"`
}

// parseHistory reads one page of a history Bundle: its entries and the
// `next` link ("" on the last page). A version is taken from the resource's
// meta, else from response.etag (W/"n") or a fullUrl ending in
// /_history/n; a time from meta.lastUpdated, else response.lastModified.
func parseHistory(body []byte) ([]HistoryEntry, string, error) {
	var b historyBundle
	if err := json.Unmarshal(body, &b); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && strings.HasPrefix(te.Field, "entry.resource") {
			return nil, "", errors.New("an entry's resource is not a JSON object")
		}
		return nil, "", errors.New("answer is not a JSON Bundle")
	}
	if b.ResourceType != "Bundle" || b.Type != "history" {
		return nil, "", fmt.Errorf("answer is a %.40q of type %.40q, not a history Bundle", b.ResourceType, b.Type)
	}
	out := make([]HistoryEntry, 0, len(b.Entry))
	for i, e := range b.Entry {
		var h HistoryEntry
		hasResource := e.Resource != nil
		h.Deleted = (e.Request != nil && strings.EqualFold(e.Request.Method, http.MethodDelete)) || !hasResource
		h.Created = !h.Deleted && ((e.Request != nil && strings.EqualFold(e.Request.Method, http.MethodPost)) ||
			(e.Response != nil && strings.HasPrefix(strings.TrimSpace(e.Response.Status), "201")))
		if hasResource {
			r := e.Resource
			h.VersionID, h.LastUpdated = r.Meta.VersionID, r.Meta.LastUpdated
			h.ResourceType, h.ID = r.ResourceType, r.ID
		}
		if h.ResourceType == "" || h.ID == "" {
			ref := ""
			if e.Request != nil {
				ref = e.Request.URL
			}
			h.ResourceType, h.ID = entryResource(e.FullURL, ref)
		}
		if e.Response != nil {
			if h.VersionID == "" {
				h.VersionID = etagVersion(e.Response.Etag)
			}
			if h.LastUpdated == "" {
				h.LastUpdated = e.Response.LastModified
			}
		}
		if h.VersionID == "" {
			if _, v, ok := strings.Cut(e.FullURL, "/_history/"); ok && v != "" && !strings.Contains(v, "/") {
				h.VersionID = v
			}
		}
		if h.VersionID == "" || h.LastUpdated == "" {
			return nil, "", fmt.Errorf("entry %d has no versionId or no lastUpdated", i+1)
		}
		out = append(out, h)
	}
	return out, nextLink(b.Link), nil
}

// entryResource returns the type and id a history entry names: from its
// fullUrl ("…/{Type}/{id}/_history/{vid}" or "…/{Type}/{id}"), else from its
// request.url ("{Type}/{id}"). Either is "" when neither says.
func entryResource(fullURL, requestURL string) (string, string) {
	for _, s := range []string{fullURL, requestURL} {
		if before, _, ok := strings.Cut(s, "/_history"); ok {
			s = before
		}
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		parts := strings.Split(strings.Trim(s, "/"), "/")
		if n := len(parts); n >= 2 && parts[n-2] != "" && parts[n-1] != "" {
			return parts[n-2], parts[n-1]
		}
	}
	return "", ""
}

// TypeHistoryPath returns the path of a resource type's history.
func TypeHistoryPath(datastoreID, resourceType string) string {
	return "/datastore/" + url.PathEscape(datastoreID) + "/r4/" + url.PathEscape(resourceType) + "/_history"
}

// TypeHistoryPage reads one page of a resource type's history (`GET
// …/r4/{type}/_history`, FHIR R4 history-type; HealthLake documents `_since`
// and `_count` for history): with next == "" the first page of the versions
// written at or after since (count per page, 0 = the data store's default),
// else the page the `next` link of the previous page names. It returns the
// page's entries (newest first, deletions included, each naming its
// resource) and the next link ("" on the last page). Every history read
// asks for strong consistency. Errors never carry a resource id.
func (c *Client) TypeHistoryPage(ctx context.Context, datastoreID, resourceType string, since time.Time, count int, next string) ([]HistoryEntry, string, error) {
	if datastoreID == "" || resourceType == "" {
		return nil, "", errors.New("type history: datastore id and resource type are required")
	}
	path, query := TypeHistoryPath(datastoreID, resourceType), url.Values{}
	if next != "" {
		var err error
		if path, query, err = c.nextPage(datastoreID, next); err != nil {
			return nil, "", fmt.Errorf("history of %s: %w", resourceType, err)
		}
	} else {
		if !since.IsZero() {
			query.Set("_since", since.UTC().Format("2006-01-02T15:04:05.000Z"))
		}
		if count > 0 {
			query.Set("_count", strconv.Itoa(count))
		}
	}
	a, err := c.do(ctx, "TypeHistory", http.MethodGet, path, query, nil)
	if err != nil {
		return nil, "", fmt.Errorf("history of %s: %w", resourceType, err)
	}
	if a.status != http.StatusOK {
		return nil, "", fmt.Errorf("history of %s: %w", resourceType, a.failure().codeOnly())
	}
	entries, link, err := parseHistory(a.body)
	if err != nil {
		return nil, "", fmt.Errorf("history of %s: %w", resourceType, err)
	}
	for i, h := range entries {
		if h.ResourceType != resourceType || h.ID == "" {
			return nil, "", fmt.Errorf("history of %s: entry %d names no resource of that type", resourceType, i+1)
		}
	}
	return entries, link, nil
}

// HistoryConsistencyHeader asks HealthLake for strongly consistent history
// reads (HealthLake, "FHIR Search Consistency Levels"): versions whose index
// update is still pending are included.
const HistoryConsistencyHeader = "x-amz-fhir-history-consistency-level"

// etagVersion returns the version of a FHIR ETag W/"n" (or "n"), or "".
func etagVersion(etag string) string {
	s := strings.TrimPrefix(strings.TrimSpace(etag), "W/")
	if len(s) < 3 || s[0] != '"' || s[len(s)-1] != '"' {
		return ""
	}
	v := s[1 : len(s)-1]
	if strings.ContainsAny(v, "\"/ ") {
		return ""
	}
	return v
}

// Exists reads `GET …/r4/{type}/{id}` and reports whether the resource is
// live: 200 → true; 404 (never existed, or erased) and 410 (deleted) →
// false. The reconciliation confirms a missing history with it before it
// publishes a delete: HealthLake does not document what history answers
// for a type a customer opted out of history, so a 404 on history alone
// never makes a delete. Errors never carry the resource id.
func (c *Client) Exists(ctx context.Context, datastoreID, resourceType, id string) (bool, error) {
	if datastoreID == "" || resourceType == "" || id == "" {
		return false, errors.New("read: datastore id, resource type and id are required")
	}
	path := "/datastore/" + url.PathEscape(datastoreID) + "/r4/" + url.PathEscape(resourceType) + "/" + url.PathEscape(id)
	a, err := c.do(ctx, "ReadResource", http.MethodGet, path, nil, nil)
	if err != nil {
		return false, fmt.Errorf("read a %s: %w", resourceType, err)
	}
	switch a.status {
	case http.StatusOK:
		return true, nil
	case http.StatusNotFound, http.StatusGone:
		return false, nil
	}
	return false, fmt.Errorf("read a %s: %w", resourceType, a.failure().codeOnly())
}
