package awsclient

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// loadAsAFunction loads the configuration as a function of the stack does
// (Load: the environment, no shared files) with AWS_USE_FIPS_ENDPOINT=v.
func loadAsAFunction(t *testing.T, v string) aws.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	for _, k := range []string{"AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CDC_S3_PATH_STYLE", "AWS_USE_DUALSTACK_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_USE_FIPS_ENDPOINT", v)
	cfg, err := Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestHealthLakeEndpointFollowsFIPS: a function's configuration with
// AWS_USE_FIPS_ENDPOINT=true, as the FIPSEndpoints setting gives every
// function, names HealthLake's FIPS host; without it (or with false) the
// Regional one.
func TestHealthLakeEndpointFollowsFIPS(t *testing.T) {
	for v, want := range map[string]string{
		"true":  "https://healthlake-fips.us-west-2.amazonaws.com",
		"false": "https://healthlake.us-west-2.amazonaws.com",
		"":      "https://healthlake.us-west-2.amazonaws.com",
	} {
		cfg := loadAsAFunction(t, v)
		if got := HealthLakeEndpoint(cfg); got != want || UsesFIPS(cfg) != (v == "true") {
			t.Errorf("AWS_USE_FIPS_ENDPOINT=%q: %s (FIPS %v), want %s", v, got, UsesFIPS(cfg), want)
		}
	}
}

// recorder records each request's host and answers none.
type recorder struct {
	mu    sync.Mutex
	hosts []string
}

var errRecorded = errors.New("recorded, not sent")

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts = append(r.hosts, req.URL.Host)
	r.mu.Unlock()
	return nil, errRecorded
}

// TestEveryClientCallsItsFIPSHost: with AWS_USE_FIPS_ENDPOINT=true the
// clients the functions build from their configuration — S3 (NewS3), SQS,
// DynamoDB, EventBridge and Step Functions — call their service's FIPS
// host in the Region (docs/DEPLOY.md, "FIPS endpoints").
func TestEveryClientCallsItsFIPSHost(t *testing.T) {
	cfg := loadAsAFunction(t, "true")
	rec := &recorder{}
	cfg.HTTPClient = &http.Client{Transport: rec}
	cfg.RetryMaxAttempts = 1
	ctx := context.Background()
	calls := map[string]func() error{
		"bucket.s3-fips.us-west-2.amazonaws.com": func() error {
			_, err := NewS3(cfg).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bucket")})
			return err
		},
		"sqs-fips.us-west-2.amazonaws.com": func() error {
			_, err := sqs.NewFromConfig(cfg).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("q")})
			return err
		},
		"dynamodb-fips.us-west-2.amazonaws.com": func() error {
			_, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("t")})
			return err
		},
		"events-fips.us-west-2.amazonaws.com": func() error {
			_, err := eventbridge.NewFromConfig(cfg).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String("b")})
			return err
		},
		"states-fips.us-west-2.amazonaws.com": func() error {
			_, err := sfn.NewFromConfig(cfg).DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String("arn:aws:states:us-west-2:111122223333:execution:m:e")})
			return err
		},
	}
	for want, call := range calls {
		rec.mu.Lock()
		rec.hosts = nil
		rec.mu.Unlock()
		if err := call(); !errors.Is(err, errRecorded) {
			t.Errorf("%s: %v, want the request recorded", want, err)
			continue
		}
		rec.mu.Lock()
		got := strings.Join(rec.hosts, " ")
		rec.mu.Unlock()
		if got != want {
			t.Errorf("called %q, want %s", got, want)
		}
	}
}
