package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Environment variables the AWS-facing subcommands read as flag defaults.
const (
	envTable           = stackconfig.EnvTable
	envStateMachineARN = "CDC_STATE_MACHINE_ARN"
	envEndpoint        = "AWS_ENDPOINT_URL"
	envActor           = "CDC_ACTOR"
)

// stackOutputs names, for each variable cdcctl reads, the CloudFormation
// output of the deployed stack that holds its value (cdk/pipeline,
// builder.outputs; `aws cloudformation describe-stacks --stack-name
// HealthLakeCdc --query 'Stacks[0].Outputs'`).
var stackOutputs = map[string]string{
	envTable:                    "TableName",
	envStateMachineARN:          "StateMachineArn",
	envReconcileStateMachineARN: "ReconcileStateMachineArn",
	envBucket:                   "BucketName",
	envStartQueueURL:            "StartQueueUrl",
	envStartDLQURL:              "StartDeadLetterQueueUrl",
	envRecheckQueueURL:          "RecheckQueueUrl",
	envRecheckDLQURL:            "RecheckDeadLetterQueueUrl",
}

// setHint tells how to set a variable of stackOutputs and which output of
// the stack holds its value.
func setHint(env string) string {
	return "set " + env + " (the stack output " + stackOutputs[env] + ")"
}

// awsFlags are the flags shared by status, replay, unlock and run.
type awsFlags struct {
	endpoint        string
	region          string
	table           string
	stateMachineARN string
	json            bool
}

// newAWSFlagSet returns a flag set named cmd with the shared flags, their
// defaults read from the environment.
func newAWSFlagSet(cmd string, stderr io.Writer) (*flag.FlagSet, *awsFlags) {
	fs := flag.NewFlagSet("cdcctl "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &awsFlags{}
	fs.StringVar(&f.endpoint, "endpoint", os.Getenv(envEndpoint), "AWS endpoint URL of a local stack (default $AWS_ENDPOINT_URL; empty = AWS)")
	fs.StringVar(&f.region, "region", "", "AWS region (default from the environment / profile)")
	fs.StringVar(&f.table, "table", os.Getenv(envTable), "DynamoDB table of the RUN record (default $CDC_TABLE, the stack output TableName)")
	fs.StringVar(&f.stateMachineARN, "state-machine-arn", os.Getenv(envStateMachineARN), "state machine ARN (default $CDC_STATE_MACHINE_ARN, the stack output StateMachineArn)")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	return fs, f
}

// parseFlags parses args and reports a usage error (and the exit code) the
// way every subcommand does.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		return exitUsage, false // the flag package printed the error or -h usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// awsConfig loads the default configuration (credential chain, profile,
// region) and applies --endpoint and --region. Against a local endpoint
// without configured credentials it signs with the conventional local ones
// (test/test), which cdc-local takes as an administrator.
func (f *awsFlags) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if f.region != "" {
		opts = append(opts, config.WithRegion(f.region))
	}
	local := f.endpoint != ""
	if local && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	if local && f.region == "" && os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if local {
		// --endpoint names the one host every call goes to: a shell's
		// AWS_USE_FIPS_ENDPOINT (FIPS accounts set it) would make the SDK
		// refuse it ("FIPS and custom endpoint are not supported").
		opts = append(opts, config.WithUseFIPSEndpoint(aws.FIPSEndpointStateDisabled))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w (check AWS_PROFILE and ~/.aws/config)", err)
	}
	if local {
		cfg.BaseEndpoint = aws.String(f.endpoint)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: pass --region or set AWS_REGION")
	}
	cfg.APIOptions = append(cfg.APIOptions, awsclient.ReadOnlyBodies)
	return cfg, nil
}

// store opens the RUN record with an owner checker over Step Functions.
func (f *awsFlags) store(cfg aws.Config) (*runlock.Store, error) {
	if f.table == "" {
		return nil, errors.New("no table: pass --table NAME or " + setHint(envTable))
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// Local emulators send no X-Amz-Crc32 header, which this SDK version
		// would report as a checksum mismatch on every response.
		o.DisableValidateResponseChecksum = f.endpoint != ""
	})
	return runlock.New(db, runlock.Config{
		Table:  f.table,
		Owners: runlock.SFNOwnerChecker{Client: sfn.NewFromConfig(cfg)},
		// The stack's DatastoreId, when the runbook's environment names it:
		// status then says when the record belongs to another data store,
		// and replay --datastore refuses any other.
		DatastoreID: strings.TrimSpace(os.Getenv(stackconfig.EnvDatastoreID)),
	})
}

// explain turns an AWS error into a sentence that says what to do next.
func (f *awsFlags) explain(err error) string {
	msg := err.Error()
	var notFound *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return fmt.Sprintf("%s\ntable %q not found in region %s: check --table / CDC_TABLE and --region", msg, f.table, f.regionOr())
	case strings.Contains(msg, "failed to retrieve credentials") || strings.Contains(msg, "no EC2 IMDS role found"):
		return msg + "\nno AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID, or pass --endpoint URL for a local stack"
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host"):
		return msg + "\nthe endpoint does not answer: is the local stack (cdc-local) running, and is --endpoint right?"
	case strings.Contains(msg, "AccessDenied"):
		return msg + "\naccess denied: use a role allowed to read the table and describe executions"
	}
	return msg
}

func (f *awsFlags) regionOr() string {
	if f.region != "" {
		return f.region
	}
	if r := os.Getenv("AWS_REGION"); r != "" {
		return r
	}
	return "(default)"
}

// actor names who runs a command, for the audit items.
func actor() string {
	if a := os.Getenv(envActor); a != "" {
		return a
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return user
	}
	return user + "@" + host
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fail prints err and what to do next, and returns exitFailure.
func fail(stderr io.Writer, cmd string, msg string) int {
	fmt.Fprintf(stderr, "cdcctl %s: %s\n", cmd, msg)
	return exitFailure
}
