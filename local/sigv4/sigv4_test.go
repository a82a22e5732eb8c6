package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	testKey    = "AKIDTEST"
	testSecret = "secret-of-test"
)

func testVerifier(now time.Time) *Verifier {
	return &Verifier{
		Secret: func(id string) (string, bool) {
			if id == testKey {
				return testSecret, true
			}
			return "", false
		},
		Now: func() time.Time { return now },
	}
}

// serve sends req (signed by the caller) through a real HTTP server and
// returns what the verifier said there, with the body the handler read.
func serve(t *testing.T, v *Verifier, sign func(*http.Request)) (body string, err error) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err = v.Verify(r)
		if err == nil {
			b, rerr := io.ReadAll(r.Body)
			if rerr != nil {
				err = rerr
			}
			body = string(b)
		}
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	sign(req)
	resp, rerr := http.DefaultClient.Do(req)
	if rerr != nil {
		t.Fatal(rerr)
	}
	resp.Body.Close()
	return body, err
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Requests signed by aws-sdk-go-v2's signer, the way each service's client
// signs them, are accepted; the same requests signed with another secret,
// or changed after signing, are not.
func TestVerifiesWhatTheSDKSigns(t *testing.T) {
	now := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	type tc struct {
		name, service, method, path, query, body string
		headers                                  map[string]string
		s3                                       bool
		payloadHash                              string // default: the body's
	}
	cases := []tc{
		{name: "dynamodb json", service: "dynamodb", method: http.MethodPost, path: "/", body: `{"TableName":"t"}`,
			headers: map[string]string{"X-Amz-Target": "DynamoDB_20120810.GetItem", "Content-Type": "application/x-amz-json-1.0"}},
		{name: "healthlake path with escapes", service: "healthlake", method: http.MethodGet,
			path: "/datastore/ds1/r4/Patient/a%20b%2Fc", query: "_lastUpdated=ge2026-11-21T10%3A00%3A00Z&_count=10&_count=2"},
		{name: "sqs query protocol", service: "sqs", method: http.MethodPost, path: "/000000000000/q", body: "Action=SendMessage&MessageBody=a+b",
			headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}},
		{name: "s3 key with escapes, declared hash", service: "s3", method: http.MethodPut, path: "/bucket/dir/a%20b%2Bc%3D~.txt",
			body: "hello", s3: true, headers: map[string]string{"Content-Type": "text/plain"}},
		{name: "s3 unsigned payload", service: "s3", method: http.MethodPut, path: "/bucket/k", body: "x", s3: true, payloadHash: UnsignedPayload},
		{name: "s3 query flags", service: "s3", method: http.MethodPost, path: "/bucket/k", query: "uploads", s3: true},
		{name: "s3 list with prefix", service: "s3", method: http.MethodGet, path: "/bucket", query: "list-type=2&prefix=a%2Fb%20c&delimiter=%2F", s3: true},
		{name: "header with runs of spaces", service: "events", method: http.MethodPost, path: "/", body: "{}",
			headers: map[string]string{"X-Amz-Target": "AWSEvents.PutEvents", "X-Custom": "  a   b  c "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sign := func(secret string, tamper bool) func(*http.Request) {
				return func(req *http.Request) {
					req.Method = c.method
					// The path as it goes over the wire.
					u, err := url.Parse("http://" + req.URL.Host + c.path)
					if err != nil {
						t.Fatal(err)
					}
					u.RawQuery = c.query
					req.URL = u
					req.Body = io.NopCloser(strings.NewReader(c.body))
					req.ContentLength = int64(len(c.body))
					for k, v := range c.headers {
						req.Header.Set(k, v)
					}
					ph := c.payloadHash
					if ph == "" {
						ph = hashOf(c.body)
					}
					if c.s3 {
						req.Header.Set("X-Amz-Content-Sha256", ph)
					}
					err = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = c.s3 }).SignHTTP(context.Background(),
						aws.Credentials{AccessKeyID: testKey, SecretAccessKey: secret}, req, ph, c.service, "us-east-1", now)
					if err != nil {
						t.Fatal(err)
					}
					if tamper {
						req.Body = io.NopCloser(strings.NewReader(c.body + "!"))
						req.ContentLength++
					}
				}
			}
			if body, err := serve(t, testVerifier(now), sign(testSecret, false)); err != nil || body != c.body {
				t.Fatalf("right secret refused: %v (body %q)", err, body)
			}
			_, err := serve(t, testVerifier(now), sign("wrong", false))
			var e *Error
			if !errors.As(err, &e) || e.Kind != BadSignature {
				t.Fatalf("wrong secret: %v", err)
			}
			if e.CanonicalRequest == "" || !strings.HasPrefix(e.StringToSign, Algorithm+"\n") {
				t.Errorf("refusal without the canonical request: %+v", e)
			}
			if c.body != "" && c.payloadHash != UnsignedPayload {
				if _, err := serve(t, testVerifier(now), sign(testSecret, true)); err == nil {
					t.Errorf("body changed after signing accepted")
				}
			}
		})
	}
}

func TestUnknownKeySkewAndUnsigned(t *testing.T) {
	now := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	signAt := func(key string, at time.Time) func(*http.Request) {
		return func(req *http.Request) {
			_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: testSecret},
				req, hashOf(""), "dynamodb", "us-east-1", at)
		}
	}
	var e *Error
	if _, err := serve(t, testVerifier(now), signAt("AKIDOTHER", now)); !errors.As(err, &e) || e.Kind != UnknownKey {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := serve(t, testVerifier(now), signAt(testKey, now.Add(-14*time.Minute))); err != nil {
		t.Errorf("14 minutes old refused: %v", err)
	}
	_, err := serve(t, testVerifier(now), signAt(testKey, now.Add(-20*time.Minute)))
	if !errors.As(err, &e) || e.Kind != Skewed ||
		e.Message != "Signature expired: 20261125T014000Z is now earlier than 20261125T014500Z (20261125T020000Z - 15 min.)" {
		t.Errorf("20 minutes old: %v", err)
	}
	_, err = serve(t, testVerifier(now), signAt(testKey, now.Add(20*time.Minute)))
	if !errors.As(err, &e) || e.Kind != Skewed || !strings.HasPrefix(e.Message, "Signature not yet current: 20261125T022000Z is still later than 20261125T021500Z") {
		t.Errorf("20 minutes ahead: %v", err)
	}
	if _, err := serve(t, testVerifier(now), func(*http.Request) {}); err != nil {
		t.Errorf("unsigned request: %v", err)
	}
	if _, err := serve(t, testVerifier(now), func(r *http.Request) { r.Header.Set("Authorization", "AWS AKID:sig") }); !errors.As(err, &e) || e.Kind != Malformed {
		t.Errorf("SigV2 header: %v", err)
	}
}

func TestPresignedURLs(t *testing.T) {
	now := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	presign := func(secret string, at time.Time, expires string) func(*http.Request) {
		return func(req *http.Request) {
			req.URL.Path = "/bucket/a b.txt"
			q := req.URL.Query()
			q.Set("X-Amz-Expires", expires)
			req.URL.RawQuery = q.Encode()
			u, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).PresignHTTP(context.Background(),
				aws.Credentials{AccessKeyID: testKey, SecretAccessKey: secret}, req, UnsignedPayload, "s3", "us-east-1", at)
			if err != nil {
				t.Fatal(err)
			}
			nu, _ := http.NewRequest(http.MethodGet, u, nil)
			*req.URL = *nu.URL
		}
	}
	if _, err := serve(t, testVerifier(now), presign(testSecret, now.Add(-time.Hour), "7200")); err != nil {
		t.Errorf("presigned URL refused: %v", err)
	}
	var e *Error
	if _, err := serve(t, testVerifier(now), presign("wrong", now, "60")); !errors.As(err, &e) || e.Kind != BadSignature {
		t.Errorf("presigned with the wrong secret: %v", err)
	}
	if _, err := serve(t, testVerifier(now), presign(testSecret, now.Add(-time.Hour), "60")); !errors.As(err, &e) || e.Kind != Expired {
		t.Errorf("expired presigned URL: %v", err)
	}
}

// A large S3 body is checked as it is read.
func TestLargeS3BodyCheckedWhileRead(t *testing.T) {
	now := time.Now()
	v := testVerifier(now)
	v.MaxBufferedBody = 4
	body := "0123456789"
	req := httptest.NewRequest(http.MethodPut, "http://h/bucket/k", strings.NewReader(body))
	req.Header.Set("X-Amz-Content-Sha256", hashOf("something else"))
	_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}, req, hashOf("something else"), "s3", "us-east-1", now)
	if _, err := v.Verify(req); err != nil {
		t.Fatalf("verify: %v", err)
	}
	_, err := io.Copy(io.Discard, req.Body)
	var e *Error
	if !errors.As(err, &e) || e.Kind != PayloadMismatch {
		t.Errorf("read of a body that is not the declared one: %v", err)
	}
	// Small bodies are checked at once.
	v.MaxBufferedBody = 0
	req = httptest.NewRequest(http.MethodPut, "http://h/bucket/k", bytes.NewReader([]byte(body)))
	req.Header.Set("X-Amz-Content-Sha256", hashOf("something else"))
	_ = v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret}, req, hashOf("something else"), "s3", "us-east-1", now)
	if _, err := v.Verify(req); !errors.As(err, &e) || e.Kind != PayloadMismatch {
		t.Errorf("small body not the declared one: %v", err)
	}
}

func BenchmarkVerifyDynamoDB(b *testing.B) {
	now := time.Now()
	v := testVerifier(now)
	body := []byte(`{"TableName":"runs","Key":{"pk":{"S":"RUN#1"},"sk":{"S":"META"}}}`)
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:4566/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	_ = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testKey, SecretAccessKey: testSecret},
		req, hashOf(string(body)), "dynamodb", "us-east-1", now)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		req.Body = io.NopCloser(bytes.NewReader(body))
		if _, err := v.Verify(req); err != nil {
			b.Fatal(err)
		}
	}
}
