// The event bus consumers subscribe to, its archive, and the dead-letter
// queue of its targets.

package pipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// eventBus creates the change event bus and its archive. They hold every
// resource in full (PHI): both are encrypted with the stack's key. The key
// policy names the bus by an ARN built from the EventBusName prop (the bus
// itself depends on the key).
func (b *builder) eventBus() {
	busArn := arn("events", "event-bus/", b.p.EventBusName)
	archiveName := ArchiveName(b.cfg.Name)
	archiveArn := awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:archive/"+archiveName), nil)
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeDescribeKey"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:DescribeKey"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
	}), nil)
	// EventBridge documents the bus ARN as the encryption context of the
	// bus and of its archives ("the archive ARN" in the archive page's text,
	// the bus ARN in its example): either is accepted, nothing else.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeBusAndArchiveEncryption"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt", "kms:ReEncrypt*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:EncryptionContext:aws:events:event-bus:arn": []any{busArn, archiveArn},
		}},
	}), nil)
	b.bus = awsevents.NewEventBus(b.stack, b.s("EventBus"), &awsevents.EventBusProps{
		EventBusName: b.p.EventBusName,
		Description:  b.s("healthlake-cdc change events of " + b.cfg.Name),
	})
	// Set on the resource itself, so the key policy is the one above and not
	// one CDK would derive.
	cfnBus := b.bus.Node().DefaultChild().(awsevents.CfnEventBus)
	cfnBus.SetKmsKeyIdentifier(b.key.KeyArn())
	// Events EventBridge cannot encrypt or decrypt with the key (a
	// non-retriable error: the key disabled, its policy changed) go to the
	// dead-letter queue instead of being lost (EventBridge User Guide,
	// "Using dead-letter queues to capture encrypted event errors").
	cfnBus.SetDeadLetterConfig(&awsevents.CfnEventBus_DeadLetterConfigProperty{Arn: b.eventsDLQ.QueueArn()})
	awsevents.NewCfnArchive(b.stack, b.s("EventArchive"), &awsevents.CfnArchiveProps{
		ArchiveName:      b.s(archiveName),
		SourceArn:        b.bus.EventBusArn(),
		RetentionDays:    b.p.ArchiveRetentionDays,
		Description:      b.s("Every event of the healthlake-cdc bus, for replay"),
		KmsKeyIdentifier: b.key.KeyArn(),
	})
}

// eventsDeadLetterQueue creates the one dead-letter queue of what EventBridge
// and EventBridge Scheduler deliver for the stack: the event bus (events
// that fail to encrypt or decrypt with the key), the job-event rule's
// target and the two schedules (deliveries that failed after their
// retries). Consumer rules (consumer.go) have their own.
func (b *builder) eventsDeadLetterQueue() {
	b.eventsDLQ = awssqs.NewQueue(b.stack, b.s("EventsDeadLetterQueue"), &awssqs.QueueProps{
		Encryption:          awssqs.QueueEncryption_KMS,
		EncryptionMasterKey: b.key,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
	})
	suppress(b.eventsDLQ, nagRule{id: "AwsSolutions-SQS3", reason: "This queue is a dead-letter queue: of the event bus, of the HealthLake job-event rule's target and of the two EventBridge Scheduler schedules (their DeadLetterConfig, which cdk-nag does not follow), with the EventsDeadLetterAlarm on its depth."})
}

// eventsDeadLetterAccess lets EventBridge (for the bus and the job-event
// rule only: aws:SourceArn) and the schedules' role send to the events
// dead-letter queue. EventBridge Scheduler sends a schedule's dead letters
// with the schedule's execution role (EventBridge Scheduler User Guide,
// "Configuring a dead-letter queue"), so the queue and key policies name
// the role: the identity statements of internal/iampolicy stay those of
// starting the state machines. EventBridge's use of the key for SQS is
// jobEventRule's statement.
func (b *builder) eventsDeadLetterAccess() {
	ruleArn := awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/"+JobEventRuleName(b.cfg.Name)), nil)
	b.eventsDLQ.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBusAndJobEventRule"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{b.eventsDLQ.QueueArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": []any{b.bus.EventBusArn(), ruleArn}}},
	}))
	b.eventsDLQ.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("SchedulesRole"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(b.schedRole.RoleArn())},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{b.eventsDLQ.QueueArn()},
	}))
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("SchedulesRoleToEncryptedDeadLetterQueue"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewArnPrincipal(b.schedRole.RoleArn())},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:ViaService": awscdk.Fn_Sub(b.s("sqs.${AWS::Region}.amazonaws.com"), nil),
		}},
	}), nil)
}

// ArchiveName is the name of the pipeline's event archive (EventBridge
// allows 48 characters: CheckName refuses a longer pipeline name).
func ArchiveName(pipeline string) string { return pipeline + "-events" }
