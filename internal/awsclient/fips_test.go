package awsclient

import (
	"context"
	"path/filepath"
	"testing"
)

// TestHealthLakeEndpointFollowsFIPS: a function's configuration (Load: the
// environment) with AWS_USE_FIPS_ENDPOINT=true, as the FIPSEndpoints
// setting gives every function, names HealthLake's FIPS host; without it
// (or with false) the Regional one.
func TestHealthLakeEndpointFollowsFIPS(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "us-west-2")
	for v, want := range map[string]string{
		"true":  "https://healthlake-fips.us-west-2.amazonaws.com",
		"false": "https://healthlake.us-west-2.amazonaws.com",
		"":      "https://healthlake.us-west-2.amazonaws.com",
	} {
		t.Setenv("AWS_USE_FIPS_ENDPOINT", v)
		cfg, err := Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := HealthLakeEndpoint(cfg); got != want || UsesFIPS(cfg) != (v == "true") {
			t.Errorf("AWS_USE_FIPS_ENDPOINT=%q: %s (FIPS %v), want %s", v, got, UsesFIPS(cfg), want)
		}
	}
}
