package localaws

import (
	"net/http"
	"net/http/httptest"
	"strings"
)

// s3IfMatch answers a GetObject or HeadObject whose If-Match names none of
// the object's ETag with S3's 412 PreconditionFailed, which gofakes3 does
// not (it serves the object). "Return the object only if its entity tag
// (ETag) is the same as the one specified in this header; otherwise, return
// a 412 Precondition Failed error" (API_GetObject,
// https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html). It
// asks the emulator for the object's headers first; it returns true when it
// answered.
func s3IfMatch(h http.Handler, w http.ResponseWriter, r *http.Request) bool {
	want := r.Header.Get("If-Match")
	if want == "" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return false
	}
	head := r.Clone(r.Context())
	head.Method = http.MethodHead
	head.Header.Del("If-Match")
	head.Header.Del("Range")
	head.Body = http.NoBody
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, head)
	if rec.Code != http.StatusOK {
		return false // the request itself gets the emulator's answer (404, …)
	}
	etag := strings.Trim(rec.Header().Get("ETag"), `"`)
	for _, tag := range strings.Split(want, ",") {
		tag = strings.Trim(strings.TrimSpace(tag), `"`)
		if tag == "*" || tag == etag {
			return false
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusPreconditionFailed)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>` +
			`<Message>At least one of the pre-conditions you specified did not hold</Message><Condition>If-Match</Condition></Error>`))
	}
	return true
}
