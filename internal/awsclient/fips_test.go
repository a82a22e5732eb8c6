package awsclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient/awsclienttest"
)

// TestHealthLakeEndpointFollowsFIPS: a function's configuration with
// AWS_USE_FIPS_ENDPOINT=true, as the FIPSEndpoints setting gives every
// function, names HealthLake's FIPS host; without it the Regional one.
func TestHealthLakeEndpointFollowsFIPS(t *testing.T) {
	for fips, want := range map[bool]string{
		true:  "https://healthlake-fips.us-west-2.amazonaws.com",
		false: "https://healthlake.us-west-2.amazonaws.com",
	} {
		cfg := awsclienttest.FunctionConfig(t, "us-west-2", fips, nil)
		if got := awsclient.HealthLakeEndpoint(cfg); got != want || awsclient.UsesFIPS(cfg) != fips {
			t.Errorf("FIPS %v: %s (UsesFIPS %v), want %s", fips, got, awsclient.UsesFIPS(cfg), want)
		}
	}
}

// TestEveryClientCallsItsFIPSHost: with AWS_USE_FIPS_ENDPOINT=true the
// clients the functions build from their configuration — S3 (NewS3), SQS,
// DynamoDB, EventBridge and Step Functions — call their service's FIPS
// host in the Region (docs/DEPLOY.md, "FIPS endpoints").
func TestEveryClientCallsItsFIPSHost(t *testing.T) {
	rec := &awsclienttest.Recorder{}
	cfg := awsclienttest.FunctionConfig(t, "us-west-2", true, rec)
	ctx := context.Background()
	calls := map[string]func() error{
		"bucket.s3-fips.us-west-2.amazonaws.com": func() error {
			_, err := awsclient.NewS3(cfg).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("bucket")})
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
		rec.Take()
		if err := call(); !errors.Is(err, awsclienttest.ErrRecorded) {
			t.Errorf("%s: %v, want the request recorded", want, err)
			continue
		}
		if got := strings.Join(rec.Take(), " "); got != want {
			t.Errorf("called %q, want %s", got, want)
		}
	}
}
