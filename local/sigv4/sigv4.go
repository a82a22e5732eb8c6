// Package sigv4 verifies AWS Signature Version 4 on requests a local
// emulator receives, as AWS endpoints do: the canonical request rebuilt from
// the request (method, URI, query, the headers it names as signed, the
// payload hash), the string to sign over it, and the HMAC chain of the
// secret of the access key that signed it ("Create a signed AWS API
// request", "Elements of an AWS API request signature", AWS IAM User
// Guide). Both forms are read: the Authorization header and presigned query
// strings (X-Amz-Algorithm, X-Amz-Credential, …, X-Amz-Signature).
//
// S3's specifics: the path is used as sent (AWS URI-encodes every other
// service's path segments a second time), the payload hash is the
// x-amz-content-sha256 header's value (a hex SHA-256, UNSIGNED-PAYLOAD or a
// STREAMING-… marker), and a presigned URL's payload is UNSIGNED-PAYLOAD.
// Other services sign the SHA-256 of the body.
package sigv4

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

// Payload hash markers of the x-amz-content-sha256 header.
const (
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// StreamingPrefix starts the markers of aws-chunked bodies
	// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, …).
	StreamingPrefix = "STREAMING-"
)

// DefaultMaxSkew is how far a request's signing time may be from the
// server's clock: 15 minutes, AWS's limit.
const DefaultMaxSkew = 15 * time.Minute

// DefaultMaxBufferedBody is the largest body whose declared SHA-256 is
// checked before the request goes on; a larger one is checked as the
// service reads it.
const DefaultMaxBufferedBody = 8 << 20

// TimeFormat is the layout of X-Amz-Date.
const TimeFormat = "20060102T150405Z"

const dateFormat = "20060102"

// Kind classifies a refusal; each service words each kind its own way.
type Kind int

const (
	// Malformed: no usable Authorization header or presigned query
	// (missing elements, another algorithm, a bad date).
	Malformed Kind = iota + 1
	// UnknownKey: no secret is known for the access key id.
	UnknownKey
	// BadSignature: the signature is not the one the secret gives.
	BadSignature
	// Skewed: the signing time is more than MaxSkew from the server's clock.
	Skewed
	// Expired: a presigned URL used after X-Amz-Expires.
	Expired
	// PayloadMismatch: the body's SHA-256 is not the declared
	// x-amz-content-sha256.
	PayloadMismatch
)

// Error is a refused request.
type Error struct {
	Kind    Kind
	Message string
	// AccessKeyID, SignatureProvided, CanonicalRequest and StringToSign
	// are what S3 echoes in its SignatureDoesNotMatch answer.
	AccessKeyID       string
	SignatureProvided string
	CanonicalRequest  string
	StringToSign      string
	// RequestTime is the request's X-Amz-Date as sent; ServerTime the
	// server's clock when it was checked.
	RequestTime string
	ServerTime  time.Time
	// Expires is a presigned URL's X-Amz-Expires.
	Expires time.Duration
	// DeclaredHash and ComputedHash are the payload hashes that differ.
	DeclaredHash, ComputedHash string
}

func (e *Error) Error() string { return e.Message }

// Auth is a request's parsed signature.
type Auth struct {
	AccessKeyID, Date, Region, Service string
	SignedHeaders                      []string
	Signature                          string
	// Time is the signing time (X-Amz-Date); RawTime as sent.
	Time    time.Time
	RawTime string
	// Presigned is set for query-string authentication; Expires is then
	// X-Amz-Expires.
	Presigned bool
	Expires   time.Duration
	// SessionToken is X-Amz-Security-Token, if any (not checked: there is
	// no local STS).
	SessionToken string
}

// Scope is the credential scope "date/region/service/aws4_request".
func (a *Auth) Scope() string {
	return a.Date + "/" + a.Region + "/" + a.Service + "/aws4_request"
}

// Signed reports whether the request carries a SigV4 signature of either
// form (a bare Authorization header of another scheme counts as signed, and
// is refused as malformed).
func Signed(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" {
		return true
	}
	return strings.Contains(r.URL.RawQuery, "X-Amz-Signature=") || strings.Contains(r.URL.RawQuery, "X-Amz-Credential=")
}

// Parse reads the request's signature: the Authorization header, else the
// presigned query. It does not check it.
func Parse(r *http.Request) (*Auth, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		return parseHeader(r, h)
	}
	return parseQuery(r)
}

func malformed(format string, args ...any) *Error {
	return &Error{Kind: Malformed, Message: fmt.Sprintf(format, args...)}
}

func parseHeader(r *http.Request, h string) (*Auth, error) {
	if !strings.HasPrefix(h, Algorithm+" ") {
		alg, _, _ := strings.Cut(h, " ")
		return nil, malformed("Unsupported Authorization Type: %s; only %s is supported", alg, Algorithm)
	}
	a := &Auth{}
	var cred string
	for _, part := range strings.Split(h[len(Algorithm)+1:], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			a.SignedHeaders = strings.Split(v, ";")
		case "Signature":
			a.Signature = v
		}
	}
	if cred == "" || len(a.SignedHeaders) == 0 || a.Signature == "" {
		return nil, malformed("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters. Authorization=%s", h)
	}
	if err := a.setCredential(cred); err != nil {
		return nil, err
	}
	a.RawTime = r.Header.Get("X-Amz-Date")
	if a.RawTime == "" {
		// SigV4 allows the Date header instead.
		if d := r.Header.Get("Date"); d != "" {
			t, err := http.ParseTime(d)
			if err != nil {
				return nil, malformed("Date header %q is not an HTTP date", d)
			}
			a.Time, a.RawTime = t.UTC(), d
		} else {
			return nil, malformed("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header")
		}
	} else {
		t, err := time.Parse(TimeFormat, a.RawTime)
		if err != nil {
			return nil, malformed("X-Amz-Date %q is not in ISO 8601 basic format (%s)", a.RawTime, TimeFormat)
		}
		a.Time = t
	}
	a.SessionToken = r.Header.Get("X-Amz-Security-Token")
	return a, nil
}

func parseQuery(r *http.Request) (*Auth, error) {
	q := r.URL.Query()
	if alg := q.Get("X-Amz-Algorithm"); alg != Algorithm {
		if alg == "" {
			return nil, malformed("Query-string authentication requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters")
		}
		return nil, malformed("X-Amz-Algorithm only supports %q", Algorithm)
	}
	a := &Auth{Presigned: true, Signature: q.Get("X-Amz-Signature"), RawTime: q.Get("X-Amz-Date")}
	cred, signed, exp := q.Get("X-Amz-Credential"), q.Get("X-Amz-SignedHeaders"), q.Get("X-Amz-Expires")
	if cred == "" || signed == "" || a.Signature == "" || a.RawTime == "" {
		return nil, malformed("Query-string authentication requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters")
	}
	if err := a.setCredential(cred); err != nil {
		return nil, err
	}
	a.SignedHeaders = strings.Split(signed, ";")
	t, err := time.Parse(TimeFormat, a.RawTime)
	if err != nil {
		return nil, malformed("X-Amz-Date %q is not in ISO 8601 basic format (%s)", a.RawTime, TimeFormat)
	}
	a.Time = t
	if exp != "" {
		secs, err := strconv.Atoi(exp)
		if err != nil || secs < 0 {
			return nil, malformed("X-Amz-Expires should be a number")
		}
		if secs > 7*24*3600 {
			return nil, malformed("X-Amz-Expires must be less than a week (in seconds) that is; 604800")
		}
		a.Expires = time.Duration(secs) * time.Second
	}
	a.SessionToken = q.Get("X-Amz-Security-Token")
	return a, nil
}

func (a *Auth) setCredential(cred string) error {
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" || parts[0] == "" {
		return malformed("the Credential %q is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"", cred)
	}
	a.AccessKeyID, a.Date, a.Region, a.Service = parts[0], parts[1], parts[2], parts[3]
	return nil
}

// Verifier checks signatures with the secrets it looks up by access key id.
type Verifier struct {
	// Secret returns the secret access key of an access key id, or false
	// for a key it does not know.
	Secret func(accessKeyID string) (string, bool)
	// Now is the server's clock; default time.Now (which, inside a
	// testing/synctest bubble, is the bubble's fake clock).
	Now func() time.Time
	// MaxSkew is how far the signing time may be from Now; 0 means
	// DefaultMaxSkew, < 0 turns the check off.
	MaxSkew time.Duration
	// MaxBufferedBody: see DefaultMaxBufferedBody; 0 means the default.
	MaxBufferedBody int64

	keys sync.Map // secret/date/region/service → signing key
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew == 0 {
		return DefaultMaxSkew
	}
	return v.MaxSkew
}

// Verify checks the request's signature. It returns nil, nil for an
// unsigned request (anonymous access is the caller's decision). A body it
// must hash is read and put back as r.Body; a large S3 body with a declared
// SHA-256 is checked as it is read (the read then fails with an *Error of
// kind PayloadMismatch).
func (v *Verifier) Verify(r *http.Request) (*Auth, error) {
	return v.verify(r, nil, false)
}

// VerifyBody is Verify for a request whose body the caller has already
// read (r.Body is not touched).
func (v *Verifier) VerifyBody(r *http.Request, body []byte) (*Auth, error) {
	return v.verify(r, body, true)
}

func (v *Verifier) verify(r *http.Request, body []byte, haveBody bool) (*Auth, error) {
	if !Signed(r) {
		return nil, nil
	}
	a, err := Parse(r)
	if err != nil {
		return nil, err
	}
	secret, ok := v.Secret(a.AccessKeyID)
	if !ok {
		return a, &Error{Kind: UnknownKey, AccessKeyID: a.AccessKeyID,
			Message: "The security token included in the request is invalid: unknown access key id " + a.AccessKeyID}
	}
	if a.Time.Format(dateFormat) != a.Date {
		return a, &Error{Kind: BadSignature, AccessKeyID: a.AccessKeyID, SignatureProvided: a.Signature,
			Message: "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '" + a.Date + "' != '" + a.Time.Format(dateFormat) + "'"}
	}
	if err := v.checkTime(a); err != nil {
		return a, err
	}

	// The payload hash the client signed.
	declared := r.Header.Get("X-Amz-Content-Sha256")
	if declared == "" && a.Presigned {
		declared = r.URL.Query().Get("X-Amz-Content-Sha256")
	}
	payloadHash := declared
	switch {
	case declared == "" && a.Presigned && a.Service == "s3":
		payloadHash = UnsignedPayload
	case declared == "" || (a.Service != "s3" && isHexHash(declared)):
		// Other services sign the body's hash (x-amz-content-sha256, when
		// a client sends it anyway, must then match it).
		if !haveBody {
			if body, err = readBody(r); err != nil {
				return a, malformed("cannot read the request body: %v", err)
			}
			haveBody = true
		}
		payloadHash = hashHex(body)
		if declared != "" && declared != payloadHash {
			return a, mismatch(declared, payloadHash)
		}
	}

	key := v.signingKey(secret, a)
	canonical := CanonicalRequest(r, a, payloadHash)
	sts := StringToSign(a, canonical)
	want := hex.EncodeToString(hmacSHA256(key, sts))
	if !hmac.Equal([]byte(want), []byte(a.Signature)) {
		return a, &Error{Kind: BadSignature, AccessKeyID: a.AccessKeyID, SignatureProvided: a.Signature,
			CanonicalRequest: canonical, StringToSign: sts,
			Message: "The request signature we calculated does not match the signature you provided."}
	}

	// S3's declared SHA-256 must be the body's.
	if a.Service == "s3" && isHexHash(declared) {
		if haveBody {
			if got := hashHex(body); got != declared {
				return a, mismatch(declared, got)
			}
		} else if r.Body != nil && r.Body != http.NoBody {
			if r.ContentLength >= 0 && r.ContentLength <= v.maxBufferedBody() {
				b, err := readBody(r)
				if err != nil {
					return a, malformed("cannot read the request body: %v", err)
				}
				if got := hashHex(b); got != declared {
					return a, mismatch(declared, got)
				}
			} else {
				r.Body = &checkedBody{rc: r.Body, h: sha256.New(), want: declared}
			}
		} else if declared != emptyHash {
			return a, mismatch(declared, emptyHash)
		}
	}
	return a, nil
}

func (v *Verifier) maxBufferedBody() int64 {
	if v.MaxBufferedBody > 0 {
		return v.MaxBufferedBody
	}
	return DefaultMaxBufferedBody
}

// checkTime refuses a signing time too far from the server's clock, and a
// presigned URL past its expiry.
func (v *Verifier) checkTime(a *Auth) error {
	now := v.now().UTC()
	if a.Presigned {
		if a.Expires > 0 && now.After(a.Time.Add(a.Expires)) {
			return &Error{Kind: Expired, AccessKeyID: a.AccessKeyID, RequestTime: a.RawTime, ServerTime: now, Expires: a.Expires,
				Message: "Request has expired"}
		}
		// A URL signed in the future is refused like a header.
		if skew := v.maxSkew(); skew > 0 && a.Time.After(now.Add(skew)) {
			return skewed(a, now, skew)
		}
		return nil
	}
	skew := v.maxSkew()
	if skew < 0 {
		return nil
	}
	if d := now.Sub(a.Time); d > skew || d < -skew {
		return skewed(a, now, skew)
	}
	return nil
}

// skewed words the refusal as AWS's JSON and query services do:
// "Signature expired: T is now earlier than N-15 (N - 15 min.)" or
// "Signature not yet current: T is still later than N+15 (N + 15 min.)".
func skewed(a *Auth, now time.Time, skew time.Duration) *Error {
	mins := int(skew / time.Minute)
	reqTime := a.Time.Format(TimeFormat)
	var msg string
	if a.Time.Before(now) {
		msg = fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - %d min.)",
			reqTime, now.Add(-skew).Format(TimeFormat), now.Format(TimeFormat), mins)
	} else {
		msg = fmt.Sprintf("Signature not yet current: %s is still later than %s (%s + %d min.)",
			reqTime, now.Add(skew).Format(TimeFormat), now.Format(TimeFormat), mins)
	}
	return &Error{Kind: Skewed, AccessKeyID: a.AccessKeyID, RequestTime: a.RawTime, ServerTime: now, Message: msg}
}

func mismatch(declared, computed string) *Error {
	return &Error{Kind: PayloadMismatch, DeclaredHash: declared, ComputedHash: computed,
		Message: "The provided 'x-amz-content-sha256' header does not match what was computed."}
}

// signingKey derives (and caches) HMAC("AWS4"+secret, date, region,
// service, "aws4_request").
func (v *Verifier) signingKey(secret string, a *Auth) []byte {
	id := secret + "/" + a.Scope()
	if k, ok := v.keys.Load(id); ok {
		return k.([]byte)
	}
	k := SigningKey(secret, a.Date, a.Region, a.Service)
	v.keys.Store(id, k)
	return k
}

// SigningKey is the SigV4 signing key of a secret for one credential scope.
func SigningKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// StringToSign is "AWS4-HMAC-SHA256\n<X-Amz-Date>\n<scope>\n<hex SHA-256 of
// the canonical request>".
func StringToSign(a *Auth, canonicalRequest string) string {
	sum := sha256.Sum256([]byte(canonicalRequest))
	return Algorithm + "\n" + a.Time.Format(TimeFormat) + "\n" + a.Scope() + "\n" + hex.EncodeToString(sum[:])
}

// CanonicalRequest builds the canonical request of r:
//
//	Method \n CanonicalURI \n CanonicalQueryString \n CanonicalHeaders \n SignedHeaders \n HashedPayload
func CanonicalRequest(r *http.Request, a *Auth, payloadHash string) string {
	var b strings.Builder
	b.Grow(256)
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r, a.Service))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, a.Presigned))
	b.WriteByte('\n')
	for _, name := range a.SignedHeaders {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(headerValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(a.SignedHeaders, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// canonicalURI is the path as it came over the wire: as is for S3, each
// character outside the unreserved set (and '/') escaped once more for
// every other service, as AWS's signers do.
func canonicalURI(r *http.Request, service string) string {
	path := ""
	if ru := r.RequestURI; strings.HasPrefix(ru, "/") {
		path, _, _ = strings.Cut(ru, "?")
	} else if ru != "" && ru != "*" {
		if u, err := url.ParseRequestURI(ru); err == nil {
			path = u.EscapedPath()
		}
	}
	if path == "" {
		path = r.URL.EscapedPath()
	}
	if path == "" {
		return "/"
	}
	if service == "s3" {
		return path
	}
	return escape(path, true)
}

// canonicalQuery sorts the decoded parameters by name, then value, and
// escapes each name and value (RFC 3986 unreserved characters kept, space
// as %20); a presigned URL's X-Amz-Signature is left out.
func canonicalQuery(raw string, presigned bool) string {
	if raw == "" {
		return ""
	}
	type kv struct{ k, v string }
	var pairs []kv
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		if presigned && k == "X-Amz-Signature" {
			continue
		}
		pairs = append(pairs, kv{escape(k, false), escape(v, false)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].k != pairs[j].k {
			return pairs[i].k < pairs[j].k
		}
		return pairs[i].v < pairs[j].v
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// headerValue is a signed header's canonical value: its values trimmed,
// runs of spaces folded to one, joined by commas. Go keeps Host and
// Transfer-Encoding outside the header map.
func headerValue(r *http.Request, name string) string {
	var vals []string
	switch name {
	case "host":
		return r.Host
	case "content-length":
		vals = r.Header.Values("Content-Length")
		if len(vals) == 0 && r.ContentLength >= 0 {
			return strconv.FormatInt(r.ContentLength, 10)
		}
	case "transfer-encoding":
		vals = r.Header.Values("Transfer-Encoding")
		if len(vals) == 0 {
			vals = r.TransferEncoding
		}
	default:
		vals = r.Header.Values(name)
	}
	if len(vals) == 1 {
		return foldSpaces(vals[0])
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = foldSpaces(v)
	}
	return strings.Join(out, ",")
}

func foldSpaces(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "  ") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

const upperhex = "0123456789ABCDEF"

// escape percent-encodes every byte outside A-Z a-z 0-9 - _ . ~ (and '/'
// when keepSlash), in upper-case hex.
func escape(s string, keepSlash bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i], keepSlash) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c, keepSlash) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperhex[c>>4], upperhex[c&15])
	}
	return string(b)
}

func unreserved(c byte, keepSlash bool) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	case c == '-', c == '_', c == '.', c == '~':
		return true
	case c == '/':
		return keepSlash
	}
	return false
}

var emptyHash = hashHex(nil)

func hashHex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	b, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, nil
}

// checkedBody hashes a body as it is read and fails the read that reaches
// its end when the hash is not the declared one.
type checkedBody struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	err  error
}

func (c *checkedBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.rc.Read(p)
	c.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want {
			c.err = mismatch(c.want, got)
			return n, c.err
		}
	}
	return n, err
}

func (c *checkedBody) Close() error { return c.rc.Close() }

type verifiedKey struct{}

// WithVerified marks a context as carrying a request whose signature a
// front end (the local gateway) has verified, so that an emulator behind it
// does not check it again.
func WithVerified(ctx context.Context, a *Auth) context.Context {
	return context.WithValue(ctx, verifiedKey{}, a)
}

// Verified returns the signature verified for the request, if any.
func Verified(ctx context.Context) (*Auth, bool) {
	a, ok := ctx.Value(verifiedKey{}).(*Auth)
	return a, ok && a != nil
}
