// Package awsclienttest helps tests see where the pipeline's AWS clients
// would send their requests in AWS, without a network: a configuration
// loaded as a function of the stack loads it, and a transport that records
// each request's host and answers none.
package awsclienttest

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
)

// FunctionConfig loads the configuration as a function of the stack does
// (awsclient.Load: the environment, no shared files or endpoint variables)
// in region, with AWS_USE_FIPS_ENDPOINT set as the FIPSEndpoints setting
// sets it when fips, static credentials, one attempt a call, and rec as
// its transport.
func FunctionConfig(t *testing.T, region string, fips bool, rec *Recorder) aws.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	for _, k := range []string{"AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_HEALTHLAKE", "CDC_S3_PATH_STYLE", "AWS_USE_DUALSTACK_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", region)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_USE_FIPS_ENDPOINT", map[bool]string{true: "true", false: "false"}[fips])
	cfg, err := awsclient.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RetryMaxAttempts = 1
	if rec != nil {
		cfg.HTTPClient = &http.Client{Transport: rec}
	}
	return cfg
}

// ErrRecorded is what a Recorder answers every request with.
var ErrRecorded = errors.New("recorded, not sent")

// Recorder is an http.RoundTripper that records each request's host and
// answers ErrRecorded.
type Recorder struct {
	mu    sync.Mutex
	hosts []string
}

// RoundTrip records r's host.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts = append(r.hosts, req.URL.Host)
	r.mu.Unlock()
	return nil, ErrRecorded
}

// Take returns the hosts recorded since the last Take.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hosts
	r.hosts = nil
	return h
}
