package localaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

func signedRequest(t testing.TB, service, method, target string, body []byte, secret string, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, "http://127.0.0.1:4566/", bytes.NewReader(body))
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:])
	if service == ServiceS3 {
		r.Header.Set("X-Amz-Content-Sha256", h)
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: secret},
		r, h, service, "us-east-1", at); err != nil {
		t.Fatal(err)
	}
	return r
}

// Each service's refusal is in its wire format.
func TestSignatureErrorsInEachServicesWireFormat(t *testing.T) {
	g := NewGateway()
	g.SetVerifySignatures(true)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, s := range []string{ServiceS3, ServiceSQS, ServiceDynamoDB, ServiceEventBridge, ServiceSFN, ServiceHealthLake} {
		g.Handle(s, ok)
	}
	now := time.Now()
	cases := []struct {
		service, target, secret string
		at                      time.Time
		status                  int
		contains                []string
		header                  map[string]string
	}{
		{ServiceS3, "", "wrong", now, 403, []string{"<Code>SignatureDoesNotMatch</Code>", "<StringToSign>AWS4-HMAC-SHA256", "<CanonicalRequest>GET&#xA;/&#xA;", "<AWSAccessKeyId>AKIDLOCALCDC</AWSAccessKeyId>"}, nil},
		{ServiceS3, "", SecretAccessKey, now.Add(-20 * time.Minute), 403, []string{"<Code>RequestTimeTooSkewed</Code>", "<MaxAllowedSkewMilliseconds>900000</MaxAllowedSkewMilliseconds>"}, nil},
		{ServiceSQS, "AmazonSQS.ListQueues", "wrong", now, 403, []string{`"__type":"com.amazon.coral.service#SignatureDoesNotMatch"`}, map[string]string{"x-amzn-query-error": "SignatureDoesNotMatch;Sender"}},
		{ServiceSQS, "", "wrong", now, 403, []string{"<Code>SignatureDoesNotMatch</Code>", "<Type>Sender</Type>"}, nil},
		{ServiceSQS, "AmazonSQS.ListQueues", SecretAccessKey, now.Add(20 * time.Minute), 403, []string{"Signature not yet current"}, map[string]string{"x-amzn-query-error": "SignatureDoesNotMatch;Sender"}},
		{ServiceDynamoDB, "DynamoDB_20120810.GetItem", "wrong", now, 400, []string{`"__type":"com.amazon.coral.service#InvalidSignatureException"`, "Consult the service documentation for details."}, map[string]string{"Content-Type": "application/x-amz-json-1.0"}},
		{ServiceDynamoDB, "DynamoDB_20120810.GetItem", SecretAccessKey, now.Add(-20 * time.Minute), 400, []string{"Signature expired:", "- 15 min.)"}, nil},
		{ServiceEventBridge, "AWSEvents.PutEvents", "wrong", now, 400, []string{"InvalidSignatureException"}, map[string]string{"Content-Type": "application/x-amz-json-1.1"}},
		{ServiceSFN, "AWSStepFunctions.StartExecution", "wrong", now, 400, []string{"InvalidSignatureException"}, map[string]string{"Content-Type": "application/x-amz-json-1.1"}},
		{ServiceHealthLake, "", "wrong", now, 403, []string{"signature"}, map[string]string{"X-Amzn-ErrorType": "InvalidSignatureException"}},
	}
	for _, c := range cases {
		method := http.MethodPost
		if c.service == ServiceS3 {
			method = http.MethodGet
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, signedRequest(t, c.service, method, c.target, []byte("{}"), c.secret, c.at))
		body := w.Body.String()
		if w.Code != c.status {
			t.Errorf("%s %s: status %d, want %d: %s", c.service, c.target, w.Code, c.status, body)
		}
		for _, s := range c.contains {
			if !strings.Contains(body, s) {
				t.Errorf("%s %s: answer lacks %q: %s", c.service, c.target, s, body)
			}
		}
		for k, v := range c.header {
			if got := w.Header().Get(k); got != v {
				t.Errorf("%s %s: header %s %q, want %q", c.service, c.target, k, got, v)
			}
		}
		if strings.HasPrefix(body, "<?xml") {
			if err := xml.Unmarshal([]byte(body), new(struct{})); err != nil {
				t.Errorf("%s: not XML: %v", c.service, err)
			}
		}
	}
}

// The cost of the check per call: a DynamoDB GetItem-sized request through
// the gateway to a handler that does nothing, with and without it.
func BenchmarkGatewaySignatureCheck(b *testing.B) {
	body := []byte(`{"TableName":"healthlake-cdc-runs","Key":{"pk":{"S":"RUN#2026-11-25T02:00:00Z"},"sk":{"S":"META"}},"ConsistentRead":true}`)
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			g := NewGateway()
			g.SetVerifySignatures(on)
			g.Handle(ServiceDynamoDB, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.WriteHeader(http.StatusOK)
			}))
			r := signedRequest(b, ServiceDynamoDB, http.MethodPost, "DynamoDB_20120810.GetItem", body, SecretAccessKey, time.Now())
			w := httptest.NewRecorder()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Body = io.NopCloser(bytes.NewReader(body))
				g.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
