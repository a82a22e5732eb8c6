package fhirrest

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// TestNewFromConfigDefaultsToTheRegionsHost: without an endpoint the client
// calls the Region's HealthLake host, or its FIPS host when the
// configuration asks for FIPS endpoints (the FIPSEndpoints setting); an
// endpoint given is kept.
func TestNewFromConfigDefaultsToTheRegionsHost(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("AKID", "secret", "")
	fips := []any{config.LoadOptions{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled}}
	for _, c := range []struct {
		name     string
		sources  []any
		endpoint string
		want     string
	}{
		{"regional", nil, "", "https://healthlake.us-east-1.amazonaws.com"},
		{"fips", fips, "", "https://healthlake-fips.us-east-1.amazonaws.com"},
		{"given", fips, "http://127.0.0.1:4566", "http://127.0.0.1:4566"},
	} {
		cl, err := NewFromConfig(aws.Config{Region: "us-east-1", Credentials: creds, ConfigSources: c.sources}, c.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := cl.base.String(); got != c.want {
			t.Errorf("%s: base %s, want %s", c.name, got, c.want)
		}
	}
}
