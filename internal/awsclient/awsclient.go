// Package awsclient loads the AWS configuration every binary shares and
// builds clients from it, so that code running in AWS and code running against
// the local emulators differ only in configuration.
package awsclient

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Load returns the default configuration: region and credentials from the
// environment or the default credential chain, endpoints from AWS_ENDPOINT_URL
// and AWS_ENDPOINT_URL_<SERVICE> when set. The SDK's own log lines go to
// stdout as JSON, like the pipeline's. Request bodies go out through
// ReadOnlyBodies.
func Load(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(sdkLogger{log: logging.New(os.Stdout, "aws-sdk")}))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("load AWS configuration: no region: set AWS_REGION")
	}
	cfg.APIOptions = append(cfg.APIOptions, ReadOnlyBodies)
	return cfg, nil
}

// NewS3 builds an S3 client. Path-style addressing is used when the
// configuration points at a custom endpoint (the local emulators need it) or
// when CDC_S3_PATH_STYLE=true.
func NewS3(cfg aws.Config) *s3.Client {
	pathStyle := cfg.BaseEndpoint != nil || os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("CDC_S3_PATH_STYLE") == "true"
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
}

// UsesFIPS reports whether cfg asks for the services' FIPS endpoints
// (AWS_USE_FIPS_ENDPOINT, use_fips_endpoint in the shared config, or the
// load option), as the SDK's clients resolve it: the first of cfg's
// sources that sets it.
func UsesFIPS(cfg aws.Config) bool {
	type fipsSource interface {
		GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error)
	}
	for _, s := range cfg.ConfigSources {
		if fs, ok := s.(fipsSource); ok {
			if v, found, err := fs.GetUseFIPSEndpoint(context.Background()); err == nil && found {
				return v == aws.FIPSEndpointStateEnabled
			}
		}
	}
	return false
}

// HealthLakeEndpoint is HealthLake's endpoint in cfg's Region for a client
// that builds its own requests (the FHIR REST API): the FIPS host,
// healthlake-fips.{region}.amazonaws.com, when cfg asks for FIPS endpoints
// (UsesFIPS), else healthlake.{region}.amazonaws.com — the hosts the SDK's
// HealthLake client resolves.
func HealthLakeEndpoint(cfg aws.Config) string {
	return "https://" + stackconfig.HealthLakeHost(UsesFIPS(cfg)) + "." + cfg.Region + ".amazonaws.com"
}
