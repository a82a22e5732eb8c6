package localaws

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"
)

// docs/LOCAL.md's key table is the keys an Env knows.
func TestDocumentedKeysAreTheKeys(t *testing.T) {
	doc, err := os.ReadFile("../../docs/LOCAL.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 {
			continue
		}
		id, secret := strings.Trim(strings.TrimSpace(cells[2]), "`"), strings.Trim(strings.TrimSpace(cells[3]), "`")
		if strings.HasPrefix(id, principalKeyPrefix) || id == ConventionalAccessKeyID {
			rows[id] = secret
		}
	}
	keys := DefaultAccessKeys()
	if len(rows) != len(keys) {
		t.Errorf("docs/LOCAL.md lists %d key pairs, the Env knows %d", len(rows), len(keys))
	}
	for _, k := range keys {
		if rows[k.AccessKeyID] != k.SecretAccessKey {
			t.Errorf("%s (%s): documented secret %q, real %q", k.Principal, k.AccessKeyID, rows[k.AccessKeyID], k.SecretAccessKey)
		}
	}
}

// The built-in services refuse a wrong secret with their own errors, and
// ConfigFor signs with the key's own secret.
func TestBuiltInServicesVerifySignatures(t *testing.T) {
	env := startTest(t)
	ctx := context.Background()
	as := func(key, secret string) aws.Config {
		cfg := env.Config()
		cfg.Credentials = credentials.NewStaticCredentialsProvider(key, secret, "")
		cfg.RetryMaxAttempts = 1
		return cfg
	}
	code := func(err error) string {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return ae.ErrorCode()
		}
		return ""
	}
	calls := map[string]func(aws.Config) error{
		ServiceS3: func(cfg aws.Config) error {
			_, err := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }).ListBuckets(ctx, &s3.ListBucketsInput{})
			return err
		},
		ServiceSQS: func(cfg aws.Config) error {
			_, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{})
			return err
		},
		ServiceDynamoDB: func(cfg aws.Config) error {
			_, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("no-such-table")})
			if code(err) == "ResourceNotFoundException" {
				return nil
			}
			return err
		},
	}
	wrong := map[string]string{ServiceS3: "SignatureDoesNotMatch", ServiceSQS: "SignatureDoesNotMatch", ServiceDynamoDB: "InvalidSignatureException"}
	unknown := map[string]string{ServiceS3: "InvalidAccessKeyId", ServiceSQS: "InvalidClientTokenId", ServiceDynamoDB: "UnrecognizedClientException"}
	for svc, call := range calls {
		if err := call(env.Config()); err != nil {
			t.Errorf("%s as admin: %v", svc, err)
		}
		if err := call(env.ConfigFor(PrincipalAccessKeyID("run-lock"))); err != nil {
			t.Errorf("%s with ConfigFor: %v", svc, err)
		}
		if got := code(call(as(AccessKeyID, "wrong"))); got != wrong[svc] {
			t.Errorf("%s with a wrong secret: %q, want %q", svc, got, wrong[svc])
		}
		if got := code(call(as(PrincipalAccessKeyID("run-lock"), SecretAccessKey))); got != wrong[svc] {
			t.Errorf("%s as run-lock with the admin's secret: %q, want %q", svc, got, wrong[svc])
		}
		if got := code(call(as("AKIDNOSUCHKEY", "x"))); got != unknown[svc] {
			t.Errorf("%s with an unknown key: %q, want %q", svc, got, unknown[svc])
		}
	}
}
