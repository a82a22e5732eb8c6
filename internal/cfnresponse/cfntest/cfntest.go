// Package cfntest is CloudFormation's side of a custom resource for tests:
// an HTTP endpoint shaped like the pre-signed S3 ResponseURL that records
// every response PUT to it.
package cfntest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
)

// Endpoint records the responses PUT to its URL; it answers the first
// FailFirst of them with HTTP 500, and notes any request CloudFormation's
// pre-signed URL would refuse (another method, no signature, a
// Content-Type the URL was not signed with).
type Endpoint struct {
	srv       *httptest.Server
	mu        sync.Mutex
	got       []cfn.Response
	failFirst int
	bad       []string
}

// New starts an Endpoint, closed when t ends.
func New(t *testing.T) *Endpoint {
	t.Helper()
	e := &Endpoint{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		defer e.mu.Unlock()
		if r.Method != http.MethodPut || r.URL.Query().Get("X-Amz-Signature") != "sig" || r.Header.Get("Content-Type") != "" {
			e.bad = append(e.bad, r.Method+" "+r.URL.String()+" Content-Type="+r.Header.Get("Content-Type"))
		}
		if e.failFirst > 0 {
			e.failFirst--
			http.Error(w, "<Error>InternalError</Error>", http.StatusInternalServerError)
			return
		}
		var resp cfn.Response
		if err := json.NewDecoder(r.Body).Decode(&resp); err != nil {
			e.bad = append(e.bad, "undecodable body: "+err.Error())
		}
		e.got = append(e.got, resp)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// SetFailFirst makes the next n PUTs answer HTTP 500.
func (e *Endpoint) SetFailFirst(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failFirst = n
}

// Close stops the endpoint: later PUTs cannot connect.
func (e *Endpoint) Close() { e.srv.Close() }

// URL is a ResponseURL shaped like S3's pre-signed ones.
func (e *Endpoint) URL() string {
	return e.srv.URL + "/cloudformation-custom-resource-response-useast1/arn%3Aaws%3Acloudformation?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=sig"
}

// Last returns the one response received since the previous call, failing
// t when there is not exactly one or a request was malformed.
func (e *Endpoint) Last(t *testing.T) cfn.Response {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.bad) > 0 {
		t.Errorf("bad response requests: %q", e.bad)
	}
	if len(e.got) != 1 {
		t.Fatalf("%d responses, want 1: %+v", len(e.got), e.got)
	}
	r := e.got[0]
	e.got = nil
	return r
}
