package fakehealthlake_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Standalone (no gateway in front), the emulator checks signatures itself
// with local/sigv4, against its own keys.
func TestStandaloneEmulatorVerifiesSignatures(t *testing.T) {
	emu := fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"ds1"},
		MoreAccessKeys: map[string]string{"AKIDOTHER": "other-secret"}})
	t.Cleanup(func() { _ = emu.Close() })
	srv := httptest.NewServer(emu)
	defer srv.Close()
	do := func(key, secret string, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/datastore/ds1/r4/Patient/p1", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/fhir+json")
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
			req, hex.EncodeToString(sum[:]), "healthlake", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType") + " " + string(b)
	}
	patient := `{"resourceType":"Patient","id":"p1"}`
	if st, b := do(localaws.AccessKeyID, localaws.SecretAccessKey, patient); st/100 != 2 {
		t.Errorf("default key: %d %s", st, b)
	}
	if st, b := do("AKIDOTHER", "other-secret", patient); st/100 != 2 {
		t.Errorf("MoreAccessKeys key: %d %s", st, b)
	}
	if st, b := do(localaws.AccessKeyID, "wrong", patient); st != http.StatusForbidden || !strings.HasPrefix(b, "InvalidSignatureException") {
		t.Errorf("wrong secret: %d %s", st, b)
	}
	if st, b := do("AKIDNOSUCHKEY", "x", patient); st != http.StatusForbidden || !strings.HasPrefix(b, "UnrecognizedClientException") {
		t.Errorf("unknown key: %d %s", st, b)
	}
	// Unsigned.
	resp, err := http.Post(srv.URL+"/datastore/ds1/r4/Patient", "application/fhir+json", bytes.NewReader([]byte(patient)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("unsigned: %d", resp.StatusCode)
	}
}
