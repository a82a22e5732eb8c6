package stack

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// sigCall is one read-only call per service, made with the given config.
type sigCall struct {
	service string
	call    func(context.Context, aws.Config) error
}

func sigCalls(st *Stack) []sigCall {
	return []sigCall{
		{localaws.ServiceS3, func(ctx context.Context, cfg aws.Config) error {
			_, err := awsclient.NewS3(cfg).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(st.Res.Bucket), MaxKeys: aws.Int32(1)})
			return err
		}},
		{localaws.ServiceSQS, func(ctx context.Context, cfg aws.Config) error {
			_, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(st.Res.StartQueueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
			return err
		}},
		{localaws.ServiceDynamoDB, func(ctx context.Context, cfg aws.Config) error {
			_, err := dynamodb.NewFromConfig(cfg).DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(st.Res.Table)})
			return err
		}},
		{localaws.ServiceEventBridge, func(ctx context.Context, cfg aws.Config) error {
			_, err := eventbridge.NewFromConfig(cfg).DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(st.Res.Bus)})
			return err
		}},
		{localaws.ServiceSFN, func(ctx context.Context, cfg aws.Config) error {
			_, err := sfnapi.NewFromConfig(cfg).DescribeStateMachine(ctx, &sfnapi.DescribeStateMachineInput{StateMachineArn: aws.String(st.Res.StateMachineARN)})
			return err
		}},
		{localaws.ServiceHealthLake, func(ctx context.Context, cfg aws.Config) error {
			_, err := hlsdk.NewFromConfig(cfg).DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String(st.Res.DatastoreID)})
			return err
		}},
	}
}

// signedAs is the stack's SDK configuration with other credentials and no
// retries.
func signedAs(st *Stack, key, secret string) aws.Config {
	cfg := st.Config.Copy()
	cfg.Credentials = credentials.NewStaticCredentialsProvider(key, secret, "")
	cfg.RetryMaxAttempts = 1
	return cfg
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Every service verifies the signature with the secret of the key that
// signed it, and refuses a wrong secret or an unknown key with its own
// error, as AWS does.
func TestSignaturesAreVerifiedForEveryService(t *testing.T) {
	st := startStack(t, nil)
	ctx := context.Background()
	wrongSecret := map[string]string{
		localaws.ServiceS3: "SignatureDoesNotMatch", localaws.ServiceSQS: "SignatureDoesNotMatch",
		localaws.ServiceDynamoDB: "InvalidSignatureException", localaws.ServiceEventBridge: "InvalidSignatureException",
		localaws.ServiceSFN: "InvalidSignatureException", localaws.ServiceHealthLake: "InvalidSignatureException",
	}
	unknownKey := map[string]string{
		localaws.ServiceS3: "InvalidAccessKeyId", localaws.ServiceSQS: "InvalidClientTokenId",
		localaws.ServiceDynamoDB: "UnrecognizedClientException", localaws.ServiceEventBridge: "UnrecognizedClientException",
		localaws.ServiceSFN: "UnrecognizedClientException", localaws.ServiceHealthLake: "UnrecognizedClientException",
	}
	signatureCodes := map[string]bool{}
	for _, m := range []map[string]string{wrongSecret, unknownKey} {
		for _, c := range m {
			signatureCodes[c] = true
		}
	}
	for _, c := range sigCalls(st) {
		for _, k := range []struct{ key, secret string }{
			{localaws.AccessKeyID, localaws.SecretAccessKey},
			{localaws.ConventionalAccessKeyID, localaws.ConventionalSecretAccessKey},
		} {
			if err := c.call(ctx, signedAs(st, k.key, k.secret)); err != nil {
				t.Errorf("%s as admin %s: %v", c.service, k.key, err)
			}
		}
		for _, k := range []string{localaws.AccessKeyID, localaws.ConventionalAccessKeyID, localaws.PrincipalAccessKeyID("start-export")} {
			if got := errorCode(c.call(ctx, signedAs(st, k, "wrong-secret"))); got != wrongSecret[c.service] {
				t.Errorf("%s signed by %s with a wrong secret: error code %q, want %q", c.service, k, got, wrongSecret[c.service])
			}
		}
		if got := errorCode(c.call(ctx, signedAs(st, "AKIDNOSUCHKEY", "x"))); got != unknownKey[c.service] {
			t.Errorf("%s signed by an unknown key: error code %q, want %q", c.service, got, unknownKey[c.service])
		}
		// Each principal's documented pair gets past the signature check:
		// the call is served, or refused by IAM, never by SigV4.
		for _, k := range localaws.DefaultAccessKeys() {
			err := c.call(ctx, signedAs(st, k.AccessKeyID, k.SecretAccessKey))
			if code := errorCode(err); signatureCodes[code] || (err != nil && code == "") {
				t.Errorf("%s signed by %s (%s) with its documented secret: %v", c.service, k.Principal, k.AccessKeyID, err)
			}
		}
	}
	if st.IAM.DeniedTotal() == 0 {
		t.Errorf("no principal was refused by IAM: the loop above did not reach the authorizer")
	}
}

// A request signed 20 minutes away from the gateway's clock is refused with
// each service's time-skew error; aws-sdk-go-v2, retrying, corrects its
// clock from the answer's Date header, as it does against AWS.
func TestSignaturesTooFarFromTheClockAreRefused(t *testing.T) {
	t.Parallel()
	st := startStack(t, nil)
	ctx := context.Background()
	want := map[string]string{
		localaws.ServiceS3: "RequestTimeTooSkewed", localaws.ServiceSQS: "SignatureDoesNotMatch",
		localaws.ServiceDynamoDB: "InvalidSignatureException", localaws.ServiceEventBridge: "InvalidSignatureException",
		localaws.ServiceSFN: "InvalidSignatureException", localaws.ServiceHealthLake: "InvalidSignatureException",
	}
	for _, skew := range []time.Duration{20 * time.Minute, -20 * time.Minute} {
		st.Env.Gateway.SetClock(func() time.Time { return time.Now().Add(skew) })
		for _, c := range sigCalls(st) {
			err := c.call(ctx, signedAs(st, localaws.AccessKeyID, localaws.SecretAccessKey))
			if got := errorCode(err); got != want[c.service] {
				t.Errorf("%s signed %v from the gateway's clock: %v, want %s", c.service, -skew, err, want[c.service])
			}
			if c.service != localaws.ServiceS3 && !strings.Contains(err.Error(), "Signature expired") && !strings.Contains(err.Error(), "Signature not yet current") {
				t.Errorf("%s skew message: %v", c.service, err)
			}
			cfg := signedAs(st, localaws.AccessKeyID, localaws.SecretAccessKey)
			cfg.RetryMaxAttempts = 3
			if err := c.call(ctx, cfg); err != nil {
				t.Errorf("%s with retries (clock skew correction): %v", c.service, err)
			}
		}
		st.Env.Gateway.SetClock(nil)
	}
	// 14 minutes is within AWS's 15.
	st.Env.Gateway.SetClock(func() time.Time { return time.Now().Add(14 * time.Minute) })
	defer st.Env.Gateway.SetClock(nil)
	for _, c := range sigCalls(st) {
		if err := c.call(ctx, signedAs(st, localaws.AccessKeyID, localaws.SecretAccessKey)); err != nil {
			t.Errorf("%s signed 14 minutes off: %v", c.service, err)
		}
	}
}

// The AWS CLI (botocore's own signer) is verified like the SDK: its right
// secret works, a wrong one is refused with each service's error.
func TestAWSCLIWrongSecretIsRefused(t *testing.T) {
	t.Parallel()
	cli, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("aws CLI not on PATH")
	}
	st := startStack(t, nil)
	home := t.TempDir()
	run := func(key, secret string, args ...string) (string, error) {
		env := []string{"HOME=" + home, "AWS_ACCESS_KEY_ID=" + key, "AWS_SECRET_ACCESS_KEY=" + secret,
			"AWS_DEFAULT_REGION=" + st.Env.Region, "AWS_MAX_ATTEMPTS=1", "AWS_EC2_METADATA_DISABLED=true"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
				env = append(env, kv)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"--endpoint-url", st.Env.URL}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	cases := []struct {
		name         string
		args         []string
		wrongSecret  string
		unknownKeyID string
	}{
		{"s3", []string{"s3api", "list-objects-v2", "--bucket", st.Res.Bucket, "--max-items", "1"}, "SignatureDoesNotMatch", "InvalidAccessKeyId"},
		{"sqs", []string{"sqs", "get-queue-attributes", "--queue-url", st.Res.StartQueueURL, "--attribute-names", "QueueArn"}, "SignatureDoesNotMatch", "InvalidClientTokenId"},
		{"dynamodb", []string{"dynamodb", "describe-table", "--table-name", st.Res.Table}, "InvalidSignatureException", "UnrecognizedClientException"},
		{"events", []string{"events", "describe-event-bus", "--name", st.Res.Bus}, "InvalidSignatureException", "UnrecognizedClientException"},
		{"stepfunctions", []string{"stepfunctions", "describe-state-machine", "--state-machine-arn", st.Res.StateMachineARN}, "InvalidSignatureException", "UnrecognizedClientException"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if out, err := run(localaws.ConventionalAccessKeyID, localaws.ConventionalSecretAccessKey, c.args...); err != nil {
				t.Errorf("test/test: %v\n%s", err, out)
			}
			out, err := run(localaws.ConventionalAccessKeyID, "wrong", c.args...)
			if err == nil || !strings.Contains(out, "("+c.wrongSecret+")") {
				t.Errorf("wrong secret: %v, want %s\n%s", err, c.wrongSecret, out)
			}
			out, err = run("AKIDNOSUCHKEY", "wrong", c.args...)
			if err == nil || !strings.Contains(out, "("+c.unknownKeyID+")") {
				t.Errorf("unknown key: %v, want %s\n%s", err, c.unknownKeyID, out)
			}
		})
	}
	// A Lambda's documented key pair: the CLI acts as check-export.
	key := localaws.PrincipalAccessKeyID("check-export")
	if out, err := run(key, localaws.PrincipalSecretAccessKey(key), "dynamodb", "describe-table", "--table-name", st.Res.Table); err != nil &&
		!strings.Contains(out, "AccessDeniedException") {
		t.Errorf("as check-export: %v\n%s", err, out)
	}
}
