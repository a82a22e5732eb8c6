package pipeline

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/eventpattern"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// ConsumerProps configures a Consumer: which change events it receives and
// how its queue keeps them.
type ConsumerProps struct {
	// Bus is the pipeline's change event bus (Pipeline.Bus, or
	// awsevents.EventBus_FromEventBusArn in another stack). Required.
	Bus awsevents.IEventBus
	// EventSource and DetailType are the pipeline's `source` and
	// `detail-type`; empty means cdcevent.DefaultSource and DefaultDetailType.
	// The rule always matches both, so it receives change events only.
	EventSource, DetailType string
	// Detail is the `detail` part of the event pattern, in EventBridge's
	// pattern language, e.g. {"resourceType": ["Patient"], "operation":
	// ["upsert"]}; nil receives every change event.
	Detail map[string]any
	// RuleName names the rule: 1–64 of [.-_A-Za-z0-9] (EventBridge PutRule
	// Name); empty lets CloudFormation name it.
	RuleName string
	// Key encrypts the queue and its dead-letter queue; nil creates a
	// customer-managed key with rotation for them. A key given here must
	// let events.amazonaws.com use kms:GenerateDataKey and kms:Decrypt (the
	// construct adds that statement to a key of the same stack; an imported
	// key's policy is the owner's to change).
	Key awskms.IKey
	// VisibilityTimeout of the queue: longer than the consumer takes for one
	// message (default 5 minutes).
	VisibilityTimeout awscdk.Duration
	// MaxReceiveCount is how many receives a message gets before the queue
	// moves it to the dead-letter queue (default 5).
	MaxReceiveCount int
	// RetentionPeriod of the queue (default 4 days); the dead-letter queue
	// keeps messages 14 days, SQS's maximum.
	RetentionPeriod awscdk.Duration
	// RemoteQueueARN, when set, is an SQS queue of ANOTHER account (in the
	// bus's Region) the rule delivers to instead of a queue of its own:
	// EventBridge assumes the consumer's execution role (Role, in this
	// account, as AWS requires for a target in another account) to send to
	// it. The other account's queue policy must let that role
	// sqs:SendMessage (docs/CONSUMERS.md, "A consumer in another account").
	// VisibilityTimeout, MaxReceiveCount and RetentionPeriod are then the
	// remote queue's owner's to set.
	RemoteQueueARN string
	// RemoteQueueKeyARN is the customer-managed KMS key the remote queue is
	// encrypted with, if any: the role may then use it (kms:GenerateDataKey,
	// kms:Decrypt), which that key's policy must allow too.
	RemoteQueueKeyARN string
}

// remoteQueueRE is an SQS queue's ARN (a KMS key's: stackconfig.IsKMSKeyARN).
var remoteQueueRE = regexp.MustCompile(`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

// Consumer is an EventBridge rule on the change bus that delivers matching
// change events to an SQS queue encrypted with a customer-managed key, with
// a dead-letter queue for messages the consumer fails to process (SQS
// redrive) and for events EventBridge fails to deliver (the target's
// dead-letter queue). Both queues' policies admit EventBridge only for
// this rule (aws:SourceArn) and only over TLS.
type Consumer struct {
	// Construct is the scope of the consumer's resources.
	Construct constructs.Construct
	Rule      awsevents.CfnRule
	// Queue is the consumer's queue; nil with RemoteQueueARN.
	Queue           awssqs.Queue
	DeadLetterQueue awssqs.Queue
	Key             awskms.IKey
	// Role is the execution role EventBridge assumes to send to a remote
	// queue (RemoteQueueARN); nil otherwise.
	Role awsiam.Role
	// Pattern is the rule's event pattern as deployed.
	Pattern map[string]any
}

// ConsumerPattern returns the event pattern of a consumer of source and
// detailType whose detail filter is detail (nil: none), checked with
// EventBridge's pattern rules.
func ConsumerPattern(source, detailType string, detail map[string]any) (map[string]any, error) {
	if source == "" {
		source = cdcevent.DefaultSource
	}
	if detailType == "" {
		detailType = cdcevent.DefaultDetailType
	}
	pattern := map[string]any{"source": []any{source}, "detail-type": []any{detailType}}
	if detail != nil {
		pattern["detail"] = detail
	}
	text, err := json.Marshal(pattern)
	if err != nil {
		return nil, fmt.Errorf("consumer pattern: %w", err)
	}
	if _, err := eventpattern.Parse(string(text)); err != nil {
		return nil, fmt.Errorf("consumer pattern: %w", err)
	}
	return pattern, nil
}

// ruleNameRE is what EventBridge accepts as a rule name (PutRule Name).
var ruleNameRE = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)

// NewConsumer adds a Consumer under scope. An invalid detail pattern or a
// missing bus is an error.
func NewConsumer(scope constructs.Construct, id string, props ConsumerProps) (*Consumer, error) {
	if props.Bus == nil {
		return nil, fmt.Errorf("consumer %s: no bus", id)
	}
	pattern, err := ConsumerPattern(props.EventSource, props.DetailType, props.Detail)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", id, err)
	}
	if props.RuleName != "" && !ruleNameRE.MatchString(props.RuleName) {
		return nil, fmt.Errorf("consumer %s: RuleName %q: want 1–64 letters, digits, '.', '-' or '_' (EventBridge PutRule Name)", id, props.RuleName)
	}
	if props.RemoteQueueARN != "" && !remoteQueueRE.MatchString(props.RemoteQueueARN) {
		return nil, fmt.Errorf("consumer %s: RemoteQueueARN %q: want an SQS queue ARN (arn:aws:sqs:REGION:ACCOUNT:NAME)", id, props.RemoteQueueARN)
	}
	if props.RemoteQueueKeyARN != "" && (props.RemoteQueueARN == "" || !stackconfig.IsKMSKeyARN(props.RemoteQueueKeyARN)) {
		return nil, fmt.Errorf("consumer %s: RemoteQueueKeyARN %q: want a KMS key ARN, with RemoteQueueARN", id, props.RemoteQueueKeyARN)
	}
	if props.MaxReceiveCount == 0 {
		props.MaxReceiveCount = 5
	}
	if props.MaxReceiveCount < 1 || props.MaxReceiveCount > 1000 {
		return nil, fmt.Errorf("consumer %s: MaxReceiveCount %d outside SQS's 1–1000", id, props.MaxReceiveCount)
	}
	if props.VisibilityTimeout == nil {
		props.VisibilityTimeout = awscdk.Duration_Minutes(jsii.Number(5))
	}
	if props.RetentionPeriod == nil {
		props.RetentionPeriod = awscdk.Duration_Days(jsii.Number(4))
	}

	node := constructs.NewConstruct(scope, jsii.String(id))
	c := &Consumer{Construct: node, Pattern: pattern}
	c.Key = props.Key
	if c.Key == nil {
		c.Key = awskms.NewKey(node, jsii.String("Key"), &awskms.KeyProps{
			Description:       jsii.String("healthlake-cdc consumer " + id + ": its queue and dead-letter queue"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		})
	}
	c.DeadLetterQueue = awssqs.NewQueue(node, jsii.String("DeadLetterQueue"), &awssqs.QueueProps{
		Encryption:          awssqs.QueueEncryption_KMS,
		EncryptionMasterKey: c.Key,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
	})
	target := &awsevents.CfnRule_TargetProperty{
		Id: jsii.String("Queue"),
		// EventBridge retries a failed delivery for up to a day (its
		// maximum), then hands the event to the dead-letter queue.
		RetryPolicy:      &awsevents.CfnRule_RetryPolicyProperty{MaximumEventAgeInSeconds: jsii.Number(86400), MaximumRetryAttempts: jsii.Number(185)},
		DeadLetterConfig: &awsevents.CfnRule_DeadLetterConfigProperty{Arn: c.DeadLetterQueue.QueueArn()},
	}
	if props.RemoteQueueARN != "" {
		c.Role = remoteQueueRole(node, props)
		target.Arn, target.RoleArn = jsii.String(props.RemoteQueueARN), c.Role.RoleArn()
		suppress(c.DeadLetterQueue, nagRule{id: "AwsSolutions-SQS3", reason: "This queue is the dead-letter queue of the rule's target (DeadLetterConfig): EventBridge puts there the events it could not deliver to the consumer's queue in the other account, whose own redrive is that account's."})
	} else {
		c.Queue = awssqs.NewQueue(node, jsii.String("Queue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: c.Key,
			EnforceSSL:          jsii.Bool(true),
			VisibilityTimeout:   props.VisibilityTimeout,
			RetentionPeriod:     props.RetentionPeriod,
			DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: c.DeadLetterQueue, MaxReceiveCount: jsii.Number(props.MaxReceiveCount)},
		})
		target.Arn = c.Queue.QueueArn()
	}
	ruleProps := &awsevents.CfnRuleProps{
		Description:  jsii.String("healthlake-cdc consumer " + id + ": matching change events to its queue"),
		EventBusName: props.Bus.EventBusName(),
		EventPattern: pattern,
		State:        jsii.String("ENABLED"),
		Targets:      []any{target},
	}
	if props.RuleName != "" {
		ruleProps.Name = jsii.String(props.RuleName)
	}
	c.Rule = awsevents.NewCfnRule(node, jsii.String("Rule"), ruleProps)

	// Only this rule may send, to either queue, on EventBridge's behalf.
	queues := []awssqs.Queue{c.DeadLetterQueue}
	if c.Queue != nil {
		queues = append(queues, c.Queue)
	}
	for _, q := range queues {
		q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyTheConsumerRule"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{q.QueueArn()},
			Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": c.Rule.AttrArn()}},
		}))
	}
	// EventBridge sends to SSE-KMS queues with the queue's key (SQS key
	// management). AWS documents no source condition that holds for these
	// calls, so the statement has none; the queue policies above limit
	// who may send, and the key protects only this consumer's two queues.
	c.Key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("EventBridgeToConsumerQueues"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
	}), jsii.Bool(true))
	return c, nil
}

// remoteQueueRole is the execution role EventBridge assumes to deliver to
// the remote queue: trusted by events.amazonaws.com for this account's
// rules only (aws:SourceAccount: naming the rule would make the role and
// the rule depend on each other), allowed sqs:SendMessage on that queue
// and, with RemoteQueueKeyARN, the key's use (EventBridge User Guide,
// "Sending events to AWS services in other accounts"). Its statements are
// a customer-managed policy (HIPAA Security IAMNoInlinePolicy).
func remoteQueueRole(scope constructs.Construct, props ConsumerProps) awsiam.Role {
	role := awsiam.NewRole(scope, jsii.String("DeliveryRole"), &awsiam.RoleProps{
		Description: jsii.String("EventBridge delivers this consumer's change events to its queue in another account"),
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
	})
	stmts := []awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String("SendToRemoteQueue"), Actions: jsii.Strings("sqs:SendMessage"), Resources: jsii.Strings(props.RemoteQueueARN),
	})}
	if props.RemoteQueueKeyARN != "" {
		stmts = append(stmts, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("UseRemoteQueueKey"), Actions: jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"), Resources: jsii.Strings(props.RemoteQueueKeyARN),
		}))
	}
	awsiam.NewManagedPolicy(role, jsii.String("Policy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("healthlake-cdc consumer: send to the remote queue"),
		Statements:  &stmts,
		Roles:       &[]awsiam.IRole{role},
	})
	return role
}

// AddConsumer adds a Consumer of this pipeline's change events under scope:
// props.Bus, EventSource and DetailType are the pipeline's.
func (p *Pipeline) AddConsumer(scope constructs.Construct, id string, props ConsumerProps) (*Consumer, error) {
	props.Bus = p.Bus
	props.EventSource, props.DetailType = p.Props.EventSource, p.Props.DetailType
	return NewConsumer(scope, id, props)
}
