package fakehealthlake

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// unknownKeyError is a request signed with another access key id.
type unknownKeyError struct{ key string }

func (e unknownKeyError) Error() string {
	return "The security token included in the request is invalid (unknown access key " + e.key + ")."
}

type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

// parseAuthorization reads an `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…` header.
func parseAuthorization(h string) (sigV4Auth, error) {
	const alg = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(h, alg) {
		return sigV4Auth{}, errors.New("missing or unsupported Authorization header: SigV4 (AWS4-HMAC-SHA256) is required")
	}
	var a sigV4Auth
	for _, part := range strings.Split(h[len(alg):], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "Credential":
			scope := strings.Split(v, "/")
			if len(scope) != 5 || scope[4] != "aws4_request" {
				return sigV4Auth{}, fmt.Errorf("malformed credential scope %q", v)
			}
			a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	if a.accessKey == "" || len(a.signedHeaders) == 0 || a.signature == "" {
		return sigV4Auth{}, errors.New("incomplete Authorization header")
	}
	return a, nil
}

// requestAccessKey returns the access key id a request is signed with, or "".
func requestAccessKey(r *http.Request) string {
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return ""
	}
	return a.accessKey
}

// verifySigV4 recomputes the request's signature with aws-sdk-go-v2's signer
// over the headers it names as signed and the payload hash, and compares it.
func verifySigV4(r *http.Request, body []byte, accessKey, secret string) error {
	a, err := parseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	if a.accessKey != accessKey {
		return unknownKeyError{key: a.accessKey}
	}
	signingTime, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return errors.New("missing or malformed X-Amz-Date header")
	}
	if signingTime.Format("20060102") != a.date {
		return errors.New("credential scope date does not match X-Amz-Date")
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != "UNSIGNED-PAYLOAD" && h != payloadHash {
		return errors.New("X-Amz-Content-Sha256 does not match the payload")
	}

	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	clone, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("rebuild request: %w", err)
	}
	clone.URL = &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	clone.Host = r.Host
	token := ""
	for _, name := range a.signedHeaders {
		switch name {
		case "host", "x-amz-date":
			// set by the signer
		case "content-length":
			clone.ContentLength = r.ContentLength
		case "x-amz-security-token":
			token = r.Header.Get(name)
		default:
			clone.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secret, SessionToken: token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, clone, payloadHash, a.service, a.region, signingTime); err != nil {
		return fmt.Errorf("recompute signature: %w", err)
	}
	want, err := parseAuthorization(clone.Header.Get("Authorization"))
	if err != nil {
		return fmt.Errorf("recompute signature: %w", err)
	}
	if strings.Join(want.signedHeaders, ";") != strings.Join(a.signedHeaders, ";") {
		return errors.New("The request signature we calculated does not match the signature you provided (signed headers differ).")
	}
	if !hmac.Equal([]byte(want.signature), []byte(a.signature)) {
		return errors.New("The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.")
	}
	return nil
}
