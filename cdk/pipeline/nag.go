package pipeline

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// ApplyNagPacks checks everything under scope with cdk-nag's AwsSolutions and
// HIPAA Security packs when it is synthesized: a finding at error level is
// an error annotation, which the CDK tests fail on. Suppressions live beside
// the resources they concern, each with the reason a reviewer reads.
func ApplyNagPacks(scope constructs.IConstruct) {
	aspects := awscdk.Aspects_Of(scope)
	aspects.Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	aspects.Add(cdknag.NewHIPAASecurityChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// suppress attaches cdk-nag suppressions to c (and its children), each rule
// with its reason; appliesTo, when given, narrows a rule to those findings.
func suppress(c constructs.IConstruct, rules ...nagRule) {
	var sup []*cdknag.NagPackSuppression
	for _, r := range rules {
		s := &cdknag.NagPackSuppression{Id: jsii.String(r.id), Reason: jsii.String(r.reason)}
		if len(r.appliesTo) > 0 {
			var at []any
			for _, a := range r.appliesTo {
				at = append(at, a)
			}
			s.AppliesTo = &at
		}
		sup = append(sup, s)
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &sup, jsii.Bool(true))
}

type nagRule struct {
	id, reason string
	appliesTo  []string
}

// suppressLambdaFindings records why a HIPAA check does not apply to the
// pipeline's functions, and, unless the ReservedConcurrency setting is on,
// why they have no reserved concurrency.
func suppressLambdaFindings(f awslambda.Function, set stackconfig.Config) {
	if !set.ReservedConcurrency {
		suppress(f, nagRule{id: "HIPAA.Security-LambdaConcurrency", reason: "Reserved concurrency is off by default (the ReservedConcurrency setting): Lambda keeps 100 units of an account's concurrency unreserved, and a new account's concurrency quota is below that, so reserving any (" + strconv.Itoa(set.ReservedConcurrencyTotal()) + " units for the stack's functions with these settings) fails the first deploy with \"Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below its minimum value\". The functions' concurrency is bounded without it: prepare-change and reconcile by the Distributed Map's MaxConcurrency, start-export and check-export by their queue mappings' MaximumConcurrency (" + strconv.Itoa(stackconfig.ExportQueueMaxConcurrency) + "), run-lock by the state machines. Set ReservedConcurrency=true where the account's quota allows (docs/DEPLOY.md, \"Account prerequisites and quotas\")."})
	}
	suppress(f,
		nagRule{id: "HIPAA.Security-LambdaDLQ", reason: "A function DLQ only receives failed asynchronous invocations, and none of these functions is invoked asynchronously: start-export and check-export are invoked by SQS event-source mappings, whose source queues have dead-letter queues with alarms; run-lock, prepare-change and reconcile are invoked synchronously by Step Functions, which retries and catches every failure into HandleFailure and the ExecutionFailedAlarm."},
	)
}

// accessLogBucket is the bucket receiving the artifact bucket's server
// access logs. S3 delivers access logs only to a bucket encrypted with
// S3-managed keys (SSE-S3), so this one is not under the stack's key; the
// logs hold requester identities, object keys and operations — the
// pipeline's object keys hold no resource ids (claim-checks are
// content-addressed) and no resource content.
func (b *builder) accessLogBucket() awss3.Bucket {
	logs := awss3.NewBucket(b.stack, b.s("AccessLogBucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Versioned:         jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                          b.s("expire-access-logs"),
			Expiration:                  awscdk.Duration_Days(b.p.AccessLogsExpiryDays),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})
	suppress(logs,
		nagRule{id: "AwsSolutions-S1", reason: "This is the access-log bucket itself: logging its own access to itself would log every log delivery, without end."},
		nagRule{id: "HIPAA.Security-S3BucketLoggingEnabled", reason: "This is the access-log bucket itself: logging its own access to itself would log every log delivery, without end."},
		nagRule{id: "HIPAA.Security-S3BucketReplicationEnabled", reason: "Access logs are kept in the stack's Region for AccessLogsExpiryDays; cross-Region replication is a data-residency decision the deploying organisation makes (add a replication rule in the app if required)."},
		nagRule{id: "HIPAA.Security-S3DefaultEncryptionKMS", reason: "S3 server access log delivery supports only SSE-S3 on the destination bucket; the logs carry no resource content and no resource ids."},
	)
	return logs
}

// suppressArtifactBucketFindings records why replication does not apply to
// the artifact bucket.
func suppressArtifactBucketFindings(bucket awss3.Bucket) {
	suppress(bucket,
		nagRule{id: "HIPAA.Security-S3BucketReplicationEnabled", reason: "Every object is a transient, reproducible working copy (exports, manifests, map results, claim-checks, quarantine) that expires within days; HealthLake remains the system of record. Replicating PHI to another Region is a data-residency decision the deploying organisation makes."},
	)
}

// suppressGeneratedStateMachineGrants records why the statements CDK adds
// to the state machine role for its logging and tracing configuration stay
// as they are.
func (b *builder) suppressGeneratedStateMachineGrants(role awsiam.Role) {
	suppress(role,
		nagRule{id: "HIPAA.Security-IAMNoInlinePolicy", reason: "The inline policy holds only what CDK adds for the state machine's logging and X-Ray tracing configuration (CloudWatch Logs vended log delivery, xray:PutTraceSegments and related); every statement the pipeline itself needs is in the customer-managed policy built from internal/iampolicy."},
		nagRule{id: "AwsSolutions-IAM5", reason: "CloudWatch Logs vended log delivery (logs:CreateLogDelivery, logs:GetLogDelivery, …) and X-Ray (xray:PutTraceSegments, xray:GetSamplingRules, …) support no resource-level permissions: AWS requires Resource \"*\" for them.", appliesTo: []string{"Resource::*"}},
	)
}
