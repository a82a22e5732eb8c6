package datastore

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient/awsclienttest"
)

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
			rec := &awsclienttest.Recorder{}
			api := NewClient(awsclienttest.FunctionConfig(t, "us-east-2", c.fips, rec), c.endpoint)
			_, err := api.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
			if !errors.Is(err, awsclienttest.ErrRecorded) {
				t.Fatalf("describe: %v, want the request recorded", err)
			}
			if got := rec.Take(); len(got) != 1 || got[0] != c.want {
				t.Errorf("requests to %v, want one to %s", got, c.want)
			}
		})
	}
	// What NewClient mends: the SDK alone refuses a custom endpoint with FIPS.
	rec := &awsclienttest.Recorder{}
	api := hlsdk.NewFromConfig(awsclienttest.FunctionConfig(t, "us-east-2", true, rec), func(o *hlsdk.Options) { o.BaseEndpoint = aws.String("https://healthlake-fips.us-east-2.amazonaws.com") })
	if _, err := api.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")}); err == nil || errors.Is(err, awsclienttest.ErrRecorded) {
		t.Errorf("the SDK's own client with FIPS and an endpoint: %v; want its refusal before any request", err)
	}
	if got := rec.Take(); len(got) != 0 {
		t.Errorf("the SDK's refused client sent requests to %v", got)
	}
}
