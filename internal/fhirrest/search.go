package fhirrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

type strongKey struct{}

// withStrong marks ctx's reads as strongly consistent
// (HistoryConsistencyHeader: strong).
func withStrong(ctx context.Context) context.Context {
	return context.WithValue(ctx, strongKey{}, true)
}

func strongRead(ctx context.Context) bool { v, _ := ctx.Value(strongKey{}).(bool); return v }

// searchPath returns the path of a type's search.
func searchPath(datastoreID, resourceType string) string {
	return "/datastore/" + url.PathEscape(datastoreID) + "/r4/" + url.PathEscape(resourceType)
}

// rangeQuery is the `_lastUpdated` range (after, until] of a search;
// after zero = no lower bound.
func rangeQuery(after, until time.Time) url.Values {
	q := url.Values{}
	if !after.IsZero() {
		q.Add("_lastUpdated", "gt"+after.UTC().Format("2006-01-02T15:04:05.000Z"))
	}
	q.Add("_lastUpdated", "le"+until.UTC().Format("2006-01-02T15:04:05.000Z"))
	return q
}

// searchBundle is the part of a searchset Bundle the client reads.
type searchBundle struct {
	ResourceType string       `json:"resourceType"`
	Type         string       `json:"type"`
	Total        *int64       `json:"total"`
	Link         []bundleLink `json:"link"`
	Entry        []struct {
		Resource json.RawMessage `json:"resource"`
	} `json:"entry"`
}

// resources returns the resource of every entry that has one, as stored.
func (b *searchBundle) resources() []json.RawMessage {
	out := make([]json.RawMessage, 0, len(b.Entry))
	for _, e := range b.Entry {
		if len(e.Resource) > 0 {
			out = append(out, e.Resource)
		}
	}
	return out
}

// bundleLink is one of a Bundle's links.
type bundleLink struct {
	Relation string `json:"relation"`
	URL      string `json:"url"`
}

// nextLink returns the url of the "next" link, "" on a Bundle's last page.
func nextLink(links []bundleLink) string {
	next := ""
	for _, l := range links {
		if l.Relation == "next" && l.URL != "" {
			next = l.URL
		}
	}
	return next
}

func (c *Client) search(ctx context.Context, op, datastoreID, resourceType, path string, query url.Values) (*searchBundle, error) {
	a, err := c.do(withStrong(ctx), op, http.MethodGet, path, query, nil)
	if err != nil {
		return nil, fmt.Errorf("search of %s: %w", resourceType, err)
	}
	if a.status != http.StatusOK {
		return nil, fmt.Errorf("search of %s: %w", resourceType, a.failure().codeOnly())
	}
	var b searchBundle
	if err := json.Unmarshal(a.body, &b); err != nil {
		return nil, fmt.Errorf("search of %s: answer is not a JSON Bundle", resourceType)
	}
	if b.ResourceType != "Bundle" || b.Type != "searchset" {
		return nil, fmt.Errorf("search of %s: answer is a %.40q of type %.40q, not a searchset Bundle", resourceType, b.ResourceType, b.Type)
	}
	return &b, nil
}

// Count counts the live resources of a type whose current lastUpdated is in
// (after, until] (after zero: up to until): `GET …/r4/{type}?_lastUpdated=gt…&_lastUpdated=le…&_summary=count`
// (FHIR R4 search; HealthLake supports `_lastUpdated` with comparison
// prefixes and `_summary`), read with strong consistency (HealthLake, "FHIR
// Search Consistency Levels").
func (c *Client) Count(ctx context.Context, datastoreID, resourceType string, after, until time.Time) (int64, error) {
	if datastoreID == "" || resourceType == "" {
		return 0, errors.New("count: datastore id and resource type are required")
	}
	q := rangeQuery(after, until)
	q.Set("_summary", "count")
	b, err := c.search(ctx, "SearchCount", datastoreID, resourceType, searchPath(datastoreID, resourceType), q)
	if err != nil {
		return 0, err
	}
	if b.Total == nil || *b.Total < 0 {
		return 0, fmt.Errorf("search of %s: a count answer without a total", resourceType)
	}
	return *b.Total, nil
}

// SearchPage reads one page of the live resources of a type whose current
// lastUpdated is in (after, until]: with next == "" the first page (count
// per page, 0 = the data store's default), else the page the previous
// page's `next` link names. It returns each resource as stored and the next
// link ("" on the last page). Errors never carry resource content.
func (c *Client) SearchPage(ctx context.Context, datastoreID, resourceType string, after, until time.Time, count int, next string) ([]json.RawMessage, string, error) {
	if datastoreID == "" || resourceType == "" {
		return nil, "", errors.New("search: datastore id and resource type are required")
	}
	path, q := searchPath(datastoreID, resourceType), rangeQuery(after, until)
	if next != "" {
		var err error
		if path, q, err = c.nextPage(datastoreID, next); err != nil {
			return nil, "", fmt.Errorf("search of %s: %w", resourceType, err)
		}
	} else if count > 0 {
		q.Set("_count", strconv.Itoa(count))
	}
	b, err := c.search(ctx, "SearchWithGet", datastoreID, resourceType, path, q)
	if err != nil {
		return nil, "", err
	}
	return b.resources(), nextLink(b.Link), nil
}
