package iam

import (
	"net/http"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Install makes a the gateway's authorizer and answer filter: every call
// is checked (Authorize) and answered as AWS answers that caller
// (MissingKeys).
func (a *Authorizer) Install(g *localaws.Gateway) {
	g.SetAuthorizer(a.Authorize)
	g.SetAnswerFilter(a.MissingKeys)
}

// MissingKeys is the gateway's answer filter (localaws.AnswerFilter) for
// S3's answer to an object that does not exist. The GetObject and
// HeadObject API references: "If you have the s3:ListBucket permission on
// the bucket, Amazon S3 returns an HTTP status code 404 Not Found error. If
// you don't have the s3:ListBucket permission, Amazon S3 returns an HTTP
// status code 403". A caller whose policy does not allow s3:ListBucket on
// the bucket — evaluated without condition keys, so a statement that allows
// it only for some prefixes (s3:prefix) does not count: modelled, AWS does
// not say — gets 403 AccessDenied in place of 404 NoSuchKey. Admins, unknown
// keys and the Audit mode get S3's answer as it is.
func (a *Authorizer) MissingKeys(service string, w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if service != localaws.ServiceS3 || (r.Method != http.MethodGet && r.Method != http.MethodHead) || a.mode == Audit {
		return w
	}
	segs := splitPath(r.URL.Path)
	if len(segs) < 2 {
		return w // a bucket, not an object
	}
	if rt, ok := restRoute("s3", r); !ok || rt.Query != "" {
		return w // a subresource (?uploadId, ?tagging…), not the object
	}
	key, _ := localaws.Credential(r)
	a.mu.Lock()
	admin, id := a.admins[key], a.keys[key]
	a.mu.Unlock()
	if admin || id == nil {
		return w
	}
	if Evaluate(id.Statements, Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::" + segs[0]}).Allowed {
		return w
	}
	return &missingAsDenied{ResponseWriter: w, r: r}
}

// missingAsDenied turns a 404 answer into S3's 403 AccessDenied.
type missingAsDenied struct {
	http.ResponseWriter
	r      *http.Request
	denied bool // the 404 was replaced: the service's body is dropped
	wrote  bool
}

func (m *missingAsDenied) WriteHeader(code int) {
	if m.wrote {
		return
	}
	m.wrote = true
	if code != http.StatusNotFound {
		m.ResponseWriter.WriteHeader(code)
		return
	}
	m.denied = true
	h := m.ResponseWriter.Header()
	h.Del("Content-Length")
	if m.r.Method == http.MethodHead {
		m.ResponseWriter.WriteHeader(http.StatusForbidden)
		return
	}
	writeDenied(m.ResponseWriter, m.r, "s3", "AccessDenied", http.StatusForbidden, "Access Denied")
}

func (m *missingAsDenied) Write(b []byte) (int, error) {
	if m.denied {
		return len(b), nil
	}
	m.wrote = true
	return m.ResponseWriter.Write(b)
}

// Flush sends what the service wrote so far (a body cut, for one, flushes
// the share it sends before it ends the connection); a replaced answer has
// nothing of the service's to send.
func (m *missingAsDenied) Flush() {
	if f, ok := m.ResponseWriter.(http.Flusher); ok && !m.denied {
		f.Flush()
	}
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (m *missingAsDenied) Unwrap() http.ResponseWriter { return m.ResponseWriter }
