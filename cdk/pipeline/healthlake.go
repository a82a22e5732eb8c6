// What HealthLake needs from the stack: the role its export jobs write with,
// and the rule that hears their job events.

package pipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
)

// healthLakeExportRole creates the role HealthLake assumes to write the
// export, trusted only for the stack's data store.
func (b *builder) healthLakeExportRole() {
	b.exportRole = awsiam.NewRole(b.stack, b.s("HealthLakeExportRole"), &awsiam.RoleProps{
		Description: b.s("Assumed by HealthLake to write $export output to exports/ of the artifact bucket"),
		AssumedBy: awsiam.NewServicePrincipal(b.s("healthlake.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
				"ArnEquals":    map[string]any{"aws:SourceArn": b.datastoreArn},
			},
		}),
	})
}

// jobEventRule routes HealthLake's export job events of the stack's data
// store from the default bus to the re-check queue as {"kind":"jobEvent",
// "datastoreId","jobId","jobStatus"} messages, so check-export notices a
// finished export at once instead of at the next re-check.
func (b *builder) jobEventRule(recheckQ awssqs.Queue) {
	ruleName := JobEventRuleName(b.cfg.Name)
	ruleArn := awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/"+ruleName), nil)
	awsevents.NewCfnRule(b.stack, b.s("HealthLakeJobEventRule"), &awsevents.CfnRuleProps{
		Name:        b.s(ruleName),
		Description: b.s("HealthLake export job ends of the data store to the re-check queue"),
		State:       b.s("ENABLED"),
		EventPattern: map[string]any{
			"source":      []any{exportjob.JobEventSource},
			"detail-type": exportjob.JobEventDetailTypes,
			"detail":      map[string]any{"datastoreId": []any{b.p.DatastoreID}},
		},
		Targets: []any{&awsevents.CfnRule_TargetProperty{
			Id:  b.s("RecheckQueue"),
			Arn: recheckQ.QueueArn(),
			InputTransformer: &awsevents.CfnRule_InputTransformerProperty{
				// The transformer check-export's JobEventMessage is read from,
				// which cdc-local applies too.
				InputPathsMap: cdkEnv(exportjob.JobEventInputPathsMap),
				InputTemplate: b.s(exportjob.JobEventInputTemplate),
			},
			RetryPolicy: &awsevents.CfnRule_RetryPolicyProperty{MaximumEventAgeInSeconds: jsii.Number(3600), MaximumRetryAttempts: jsii.Number(20)},
			// A job event still undelivered after the retries (or refused: a
			// missing permission) is kept, not dropped; eventsDeadLetterAccess
			// lets this rule send there.
			DeadLetterConfig: &awsevents.CfnRule_DeadLetterConfigProperty{Arn: b.eventsDLQ.QueueArn()},
		}},
	})
	// Only this rule may send to the queue on EventBridge's behalf.
	recheckQ.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("HealthLakeJobEventRule"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{recheckQ.QueueArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": ruleArn}},
	}))
	// The queue (and the events dead-letter queue) is SSE-KMS with the
	// stack's key: EventBridge needs the key to send to it (SQS key management). AWS documents no source condition
	// that holds for these calls, so the statement has none; the queue
	// policy above limits who may send.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeToEncryptedRecheckQueue"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
	}), nil)
}

// JobEventRuleName is the name of the rule on the default bus that routes
// HealthLake's export job events to the re-check queue.
func JobEventRuleName(pipeline string) string { return pipeline + "-HealthLakeJobEvents" }
