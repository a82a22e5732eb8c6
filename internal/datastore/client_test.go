package datastore

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
)

// hosts records the host of every request and answers none: where a
// client's calls would go in AWS.
type hosts struct {
	mu   sync.Mutex
	seen []string
}

var errNoNetwork = errors.New("no network in this test")

func (h *hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r.URL.Host)
	h.mu.Unlock()
	return nil, errNoNetwork
}

// lambdaConfig loads the configuration as a Lambda of the stack does
// (awsclient.Load: the environment), with AWS_USE_FIPS_ENDPOINT set as the
// FIPSEndpoints setting sets it, and no shared files or endpoint variables.
func lambdaConfig(t *testing.T, fips bool, rt http.RoundTripper) aws.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_HEALTHLAKE", "AWS_PROFILE", "AWS_USE_DUALSTACK_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_USE_FIPS_ENDPOINT", map[bool]string{true: "true", false: "false"}[fips])
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-2"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "secret", "")),
		config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPClient = &http.Client{Transport: rt}
	return cfg
}

// TestNewClientFollowsFIPS: with AWS_USE_FIPS_ENDPOINT (the FIPSEndpoints
// setting) and no endpoint given — the data store check's Lambda, cdcctl —
// the client calls HealthLake's FIPS host; without it, the Regional one.
// An endpoint given (CDC_HEALTHLAKE_ENDPOINT, which the stack sets to the
// FIPS host with that setting) is called as it is, where the SDK alone
// refuses a FIPS resolution of a custom endpoint.
func TestNewClientFollowsFIPS(t *testing.T) {
	for _, c := range []struct {
		name     string
		fips     bool
		endpoint string
		want     string
	}{
		{"regional", false, "", "healthlake.us-east-2.amazonaws.com"},
		{"fips", true, "", "healthlake-fips.us-east-2.amazonaws.com"},
		{"fips, the stack's endpoint", true, "https://healthlake-fips.us-east-2.amazonaws.com", "healthlake-fips.us-east-2.amazonaws.com"},
		{"fips, the emulator", true, "http://127.0.0.1:4566", "127.0.0.1:4566"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rt := &hosts{}
			api := NewClient(lambdaConfig(t, c.fips, rt), c.endpoint)
			_, err := api.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
			if !errors.Is(err, errNoNetwork) {
				t.Fatalf("describe: %v, want the request sent (and refused by the test)", err)
			}
			if len(rt.seen) != 1 || rt.seen[0] != c.want {
				t.Errorf("requests to %v, want one to %s", rt.seen, c.want)
			}
		})
	}
	// What NewClient mends: the SDK alone refuses a custom endpoint with FIPS.
	rt := &hosts{}
	api := hlsdk.NewFromConfig(lambdaConfig(t, true, rt), func(o *hlsdk.Options) { o.BaseEndpoint = aws.String("https://healthlake-fips.us-east-2.amazonaws.com") })
	if _, err := api.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")}); err == nil || errors.Is(err, errNoNetwork) || len(rt.seen) != 0 {
		t.Errorf("the SDK's own client with FIPS and an endpoint: %v, %v; want its refusal before any request", err, rt.seen)
	}
}
