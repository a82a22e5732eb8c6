package iam

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Mode is how strictly the Authorizer enforces.
type Mode int

const (
	// Enforce denies what no statement allows (the default).
	Enforce Mode = iota
	// Audit allows every call but still counts what would be denied.
	Audit
)

// Identity is one principal's local credentials and statements.
type Identity struct {
	Principal iampolicy.Principal
	// ARN is the principal's (assumed-role) ARN, named in denial messages.
	ARN        string
	Statements []iampolicy.Statement
}

// Authorizer evaluates every call against its principal's statements.
// Callers signing with an admin key are allowed everything (the AWS CLI user
// of cdc-local's banner, and the stack's own setup).
type Authorizer struct {
	mapper *Mapper
	mode   Mode

	mu     sync.Mutex
	keys   map[string]*Identity // access key id → identity
	byName map[iampolicy.Principal]*Identity
	admins map[string]bool
	// allowed counts calls per principal and statement; denied per
	// principal and action.
	allowed map[string]int64
	denied  map[string]int64
	denials []Denial
}

// Denial is one refused check, kept for tests and the report.
type Denial struct {
	Principal iampolicy.Principal
	Action    string
	Resource  string
}

// NewAuthorizer returns an authorizer that maps requests with m.
func NewAuthorizer(m *Mapper, mode Mode) *Authorizer {
	return &Authorizer{
		mapper: m, mode: mode,
		keys: map[string]*Identity{}, byName: map[iampolicy.Principal]*Identity{}, admins: map[string]bool{},
		allowed: map[string]int64{}, denied: map[string]int64{},
	}
}

// AddAdmin lets callers signing with accessKeyID do anything.
func (a *Authorizer) AddAdmin(accessKeyID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.admins[accessKeyID] = true
}

// AddIdentity registers a principal; accessKeyID may be "" for a principal
// that makes no HTTP calls of its own (it is still checked through Check).
func (a *Authorizer) AddIdentity(accessKeyID string, id Identity) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cp := id
	if accessKeyID != "" {
		a.keys[accessKeyID] = &cp
	}
	a.byName[id.Principal] = &cp
}

// SetStatements replaces a principal's statements (tests remove one at a time).
func (a *Authorizer) SetStatements(p iampolicy.Principal, stmts []iampolicy.Statement) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id := a.byName[p]; id != nil {
		id.Statements = stmts
	}
}

// Statements returns a principal's statements.
func (a *Authorizer) Statements(p iampolicy.Principal) []iampolicy.Statement {
	a.mu.Lock()
	defer a.mu.Unlock()
	if id := a.byName[p]; id != nil {
		return append([]iampolicy.Statement(nil), id.Statements...)
	}
	return nil
}

// DeniedError is a refused call, worded as AWS words it.
type DeniedError struct {
	PrincipalARN, Action, Resource string
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s because no identity-based policy allows the %s action",
		e.PrincipalARN, e.Action, e.Resource, e.Action)
}

// ErrorCode is the code AWS's JSON-protocol services return.
func (e *DeniedError) ErrorCode() string { return "AccessDeniedException" }

// Check evaluates checks made by principal p (a check's As overrides the
// principal) and returns the first denial, or nil. Allowed checks are
// counted per statement, denied ones per action.
func (a *Authorizer) Check(p iampolicy.Principal, checks ...Check) *DeniedError {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first *DeniedError
	for _, c := range checks {
		who := p
		if c.As != "" {
			who = c.As
		}
		id := a.byName[who]
		if id == nil {
			d := &DeniedError{PrincipalARN: string(who), Action: c.Action, Resource: c.Resource}
			a.recordDenial(who, c)
			if first == nil {
				first = d
			}
			continue
		}
		dec := Evaluate(id.Statements, c.Request)
		if dec.Allowed {
			a.allowed[string(who)+"/"+dec.Sid]++
			continue
		}
		a.recordDenial(who, c)
		if first == nil {
			first = &DeniedError{PrincipalARN: id.ARN, Action: c.Action, Resource: c.Resource}
		}
	}
	if a.mode == Audit {
		return nil
	}
	return first
}

func (a *Authorizer) recordDenial(p iampolicy.Principal, c Check) {
	a.denied[string(p)+" "+c.Action]++
	if len(a.denials) < 1000 {
		a.denials = append(a.denials, Denial{Principal: p, Action: c.Action, Resource: c.Resource})
	}
}

// Allowed returns how many checks each statement allowed, keyed
// "principal/Sid".
func (a *Authorizer) Allowed() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int64, len(a.allowed))
	for k, v := range a.allowed {
		out[k] = v
	}
	return out
}

// Denied returns the count of denied checks, keyed "principal action".
func (a *Authorizer) Denied() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int64, len(a.denied))
	for k, v := range a.denied {
		out[k] = v
	}
	return out
}

// DeniedTotal is the number of denied checks.
func (a *Authorizer) DeniedTotal() int64 {
	var n int64
	for _, v := range a.Denied() {
		n += v
	}
	return n
}

// Denials returns the first refused checks in order.
func (a *Authorizer) Denials() []Denial {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Denial(nil), a.denials...)
}

// Reset clears the counters.
func (a *Authorizer) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.allowed, a.denied, a.denials = map[string]int64{}, map[string]int64{}, nil
}

// DeniedKeys returns the keys of Denied in order.
func (a *Authorizer) DeniedKeys() []string {
	d := a.Denied()
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Authorize decides one gateway request of the named service. When the call
// is refused it writes AWS's error in the service's wire format and returns
// true; otherwise the request (its body restored) goes on to the service.
func (a *Authorizer) Authorize(service string, w http.ResponseWriter, r *http.Request) bool {
	key, _ := localaws.Credential(r)
	a.mu.Lock()
	admin := a.admins[key]
	id := a.keys[key]
	a.mu.Unlock()
	if admin {
		return false
	}
	if id == nil {
		if a.mode == Audit {
			return false
		}
		writeDenied(w, r, service, "InvalidClientTokenId", http.StatusForbidden,
			"The security token included in the request is invalid: unknown access key id")
		return true
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			writeDenied(w, r, service, "InternalFailure", http.StatusInternalServerError, "cannot read request body")
			return true
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	d := a.Check(id.Principal, a.mapper.Checks(service, r, body)...)
	if d == nil {
		return false
	}
	writeDenied(w, r, service, "", 0, d.Error())
	return true
}

// writeDenied answers with AccessDenied as the service does: S3 as a REST-XML
// 403, HealthLake's FHIR REST as a JSON 403, the JSON-protocol services as
// AccessDeniedException with status 400 (SQS adds its query-compatible
// AccessDenied code).
func writeDenied(w http.ResponseWriter, r *http.Request, service, code string, status int, msg string) {
	h := w.Header()
	switch {
	case service == "s3":
		if code == "" {
			code, status = "AccessDenied", http.StatusForbidden
		}
		if status == 0 {
			status = http.StatusForbidden
		}
		type s3Error struct {
			XMLName   xml.Name `xml:"Error"`
			Code      string   `xml:"Code"`
			Message   string   `xml:"Message"`
			RequestID string   `xml:"RequestId"`
		}
		b, _ := xml.Marshal(s3Error{Code: code, Message: msg, RequestID: "local-iam"})
		h.Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = w.Write(append([]byte(xml.Header), b...))
	case r.Header.Get("X-Amz-Target") == "" && service == "healthlake":
		if code == "" {
			code, status = "AccessDeniedException", http.StatusForbidden
		}
		h.Set("X-Amzn-ErrorType", code)
		writeJSONBody(w, status, "application/json", map[string]string{"message": msg})
	default:
		if code == "" {
			code, status = "AccessDeniedException", http.StatusBadRequest
		}
		if service == "sqs" {
			query := code
			if code == "AccessDeniedException" {
				query = "AccessDenied"
			}
			h.Set("x-amzn-query-error", query+";Sender")
		}
		h.Set("X-Amzn-ErrorType", code)
		ct := "application/x-amz-json-1.0"
		if service == "events" || service == "states" || service == "healthlake" {
			ct = "application/x-amz-json-1.1"
		}
		writeJSONBody(w, status, ct, map[string]string{"__type": code, "message": msg, "Message": msg})
	}
}

func writeJSONBody(w http.ResponseWriter, status int, contentType string, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
