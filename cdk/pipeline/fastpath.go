package pipeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// The Subscriptions fast path (docs/FASTPATH.md), deployed only with the
// FastPath setting: a HealthLake Subscription on the pipeline's types
// delivers each change to the notification bus, a rule routes the
// notifications to the fast-path queue, and the fast-path Lambda publishes
// them as change events; the windows skip what it published and count what
// it missed (FastPathMissed).

// What HealthLake's Subscription notifications carry on the bus (the
// EventBridge envelope of HealthLake's "Example notification payloads"):
// not "aws.healthlake", which its data store and job events use.
const (
	NotificationSource     = "healthlake"
	NotificationDetailType = "FHIR Subscription Notification"
)

// NotificationBusName is the fast path's notification bus of a pipeline:
// the bus HealthLake's Subscription delivers to.
func NotificationBusName(pipeline string) string { return pipeline + "-notifications" }

// FastPathQueueName is the fast-path queue of a pipeline.
func FastPathQueueName(pipeline string) string { return pipeline + "-fast-path" }

// FastPathDeadLetterName is the fast-path queue's dead-letter queue.
func FastPathDeadLetterName(pipeline string) string { return pipeline + "-fast-path-dlq" }

// FastPath is what the fast path deploys (Pipeline.FastPath; nil without
// the FastPath setting).
type FastPath struct {
	// NotificationBus is the bus HealthLake's Subscription delivers to.
	NotificationBus awsevents.EventBus
	// Rule routes the notifications to Queue.
	Rule awsevents.CfnRule
	// Queue feeds the fast-path Lambda; DeadLetterQueue holds what it
	// failed MaxReceiveCount times and what the rule could not deliver.
	Queue, DeadLetterQueue awssqs.Queue
	// Function is the fast-path Lambda; SetupFunction the custom
	// resource's, which keeps the SubscriptionTopic and Subscription.
	Function, SetupFunction awslambda.Function
	// Subscription is the custom resource; CheckRule the schedule of the
	// setup Lambda's check between deploys.
	Subscription awscdk.CustomResource
	CheckRule    awsevents.CfnRule
}

// fastPathLogging is the fast-path Lambda's LoggingConfig beside its log
// group: JSON, its own lines from INFO, Lambda's platform lines from WARN.
// With an invocation every few notifications, the START, END and REPORT
// lines Lambda writes at INFO for each would cost about as much in
// CloudWatch Logs ingestion as the function's compute (docs/COST.md, "The
// fast path"); WARN keeps the platform's errors and timeouts, and Lambda's
// metrics keep durations.
var fastPathLogging = map[string]string{
	"LogFormat":           "JSON",
	"SystemLogLevel":      "WARN",
	"ApplicationLogLevel": "INFO",
}

// fastPath is the builder's view of the fast path.
type fastPath struct {
	out          FastPath
	fn, setup    fn
	busArn       *string
	deadLetterQs map[string]awssqs.IQueue
	// keyStatement is what the notification bus's key policy must allow
	// when that key is not the stack's (the data store's: DatastoreKey), else nil.
	keyStatement awsiam.PolicyStatement
}

// fastPathLambdas are the fast path's Lambdas (<LambdaDir>/<name>/bootstrap),
// needed only with the FastPath setting.
var fastPathLambdas = []string{stackconfig.FastPath, stackconfig.FastPathSetup}

// LambdasOf lists the Lambdas a pipeline with these settings deploys:
// Lambdas, and the fast path's two with the FastPath setting.
func LambdasOf(set Settings) []string {
	out := append([]string{}, Lambdas...)
	if set.FastPath {
		out = append(out, fastPathLambdas...)
	}
	return out
}

// checkFastPath refuses, before anything is built, a fast path that could
// not work: a literal empty type list (the SubscriptionTopic needs one
// resourceTrigger per type, and an empty list means "every type" to the
// export, which a topic cannot express), and the ReservedConcurrency
// setting while the configuration reserves nothing for the fast-path
// Lambda (cdk-nag's HIPAA LambdaConcurrency would fail the deploy).
func (p Props) checkFastPath() error {
	set := p.Settings
	if !set.FastPath {
		return nil
	}
	if !unresolved(p.ResourceTypes) && strings.TrimSpace(*p.ResourceTypes) == "" {
		return fmt.Errorf("pipeline %s: the FastPath setting needs ResourceTypes: the HealthLake SubscriptionTopic "+
			"has one resourceTrigger per resource type and cannot subscribe to \"every type\" (an empty list); "+
			"set ResourceTypes (e.g. Patient,Observation) or turn FastPath off", p.Name)
	}
	return nil
}

// fastPathResourceTypes refuses at deploy time an empty ResourceTypes
// parameter (a literal empty list is refused at synth, checkFastPath): a
// CloudFormation Rule on the parameter the prop refers to. A token that is
// not a parameter of the stack cannot be checked by a Rule (Rules see
// parameters only): an empty list is then the setup Lambda's to refuse.
func (b *builder) fastPathResourceTypes() {
	if !unresolved(b.p.ResourceTypes) {
		return
	}
	stack := awscdk.Stack_Of(b.stack)
	ref, ok := stack.Resolve(b.p.ResourceTypes).(map[string]any)
	if !ok || len(ref) != 1 {
		return
	}
	name, ok := ref["Ref"].(string)
	if !ok {
		return
	}
	isParam := false
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if p, ok := c.(awscdk.CfnParameter); ok && stack.Resolve(p.LogicalId()) == name {
			isParam = true
			break
		}
	}
	if !isParam {
		return
	}
	awscdk.NewCfnRule(b.stack, b.s("FastPathNeedsResourceTypes"), &awscdk.CfnRuleProps{
		Assertions: &[]*awscdk.CfnRuleAssertion{{
			Assert: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(b.p.ResourceTypes, jsii.String(""))),
			AssertDescription: b.s("The FastPath setting needs ResourceTypes: the HealthLake SubscriptionTopic has one " +
				"resourceTrigger per resource type and cannot subscribe to every type (an empty list)."),
		}},
	})
}

// typeList is ResourceTypes as the custom resource's Types: a list, split
// at synth for a literal, by Fn::Split for a token.
func typeList(types *string) any {
	if unresolved(types) {
		return awscdk.Fn_Split(jsii.String(","), types, nil)
	}
	var out []any
	for _, t := range strings.Split(*types, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// fastPathMaxMessageBytes is the fast-path queues' MaximumMessageSize:
// SQS's maximum, 1 MiB.
const fastPathMaxMessageBytes = 1 << 20

// fastPathInfra creates the notification bus with its policy, the fast-path
// queue and its dead-letter queue, the rule between them, the two Lambdas
// and the mapping. The roles get their statements in iamPolicies; the
// custom resource comes last (fastPathSubscription).
func (b *builder) fastPathInfra() {
	if !b.set.FastPath {
		return
	}
	fp := &fastPath{}
	b.fp = fp
	name := b.cfg.Name
	busName := NotificationBusName(name)
	fp.busArn = arn("events", "event-bus/", b.s(busName))

	// The bus is under the stack's key, like the change bus, or under the
	// data store's customer-managed key (DatastoreKey, or FastPathBusKey: HealthLake
	// requires the same key); EventBridge may use it only with this bus's
	// ARN as encryption context. The stack cannot change another key's
	// policy: the statement goes out as NotificationBusKeyPolicyStatement.
	keyStatement := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeNotificationBusEncryption"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt", "kms:ReEncrypt*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:EncryptionContext:aws:events:event-bus:arn": fp.busArn,
		}},
	})
	busKey := b.key.KeyArn()
	if k := b.set.DatastoreKeyARN(); k != "" {
		busKey = b.s(k)
		fp.keyStatement = keyStatement
		awscdk.Annotations_Of(b.stack).AddWarningV2(b.s("healthlake-cdc:FastPathBusKey"), b.s(
			"The data store's key (DatastoreKey, FastPathBusKey): the notification bus is encrypted with "+k+", a key this stack does not manage. Before "+
				"HealthLake can deliver, that key's policy must let events.amazonaws.com use it for the bus: add the "+
				"statement of the stack output NotificationBusKeyPolicyStatement (docs/DEPLOY.md, \"Prerequisites\")."))
	} else {
		b.key.AddToResourcePolicy(keyStatement, nil)
	}
	bus := awsevents.NewEventBus(b.stack, b.s("NotificationBus"), &awsevents.EventBusProps{
		EventBusName: b.s(busName),
		Description:  b.s("HealthLake FHIR Subscription notifications of " + name + " (the fast path)"),
	})
	cfnBus := bus.Node().DefaultChild().(awsevents.CfnEventBus)
	cfnBus.SetKmsKeyIdentifier(busKey)
	// Notifications EventBridge cannot encrypt or decrypt go to the events
	// dead-letter queue, as the change bus's do (EventsDeadLetterAlarm).
	cfnBus.SetDeadLetterConfig(&awsevents.CfnEventBus_DeadLetterConfigProperty{Arn: b.eventsDLQ.QueueArn()})
	b.eventsDLQ.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("NotificationBus"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{b.eventsDLQ.QueueArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": bus.EventBusArn()}},
	}))
	// HealthLake puts the notifications on the bus as its service
	// principal, for this account's data stores only (confused deputy).
	// (An AWS::Events::EventBusPolicy under the bus: the custom resource,
	// depending on the bus, is created after it.)
	bus.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("HealthLakeSubscriptionNotifications"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("healthlake.amazonaws.com"), nil)},
		Actions:    jsii.Strings("events:PutEvents"),
		Resources:  &[]*string{bus.EventBusArn()},
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
	}))

	// Both queues take messages up to SQS's maximum, 1 MiB (the default is
	// 256 KiB): HealthLake keeps a full-resource notification's detail
	// within 256 KB, and EventBridge's envelope around it would push the
	// largest past 256 KiB into the dead-letter queue.
	dlq := awssqs.NewQueue(b.stack, b.s("FastPathDeadLetterQueue"), &awssqs.QueueProps{
		QueueName:           b.s(FastPathDeadLetterName(name)),
		MaxMessageSizeBytes: jsii.Number(fastPathMaxMessageBytes),
		Encryption:          awssqs.QueueEncryption_KMS,
		EncryptionMasterKey: b.key,
		EnforceSSL:          jsii.Bool(true),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
	})
	q := awssqs.NewQueue(b.stack, b.s("FastPathQueue"), &awssqs.QueueProps{
		QueueName:           b.s(FastPathQueueName(name)),
		MaxMessageSizeBytes: jsii.Number(fastPathMaxMessageBytes),
		Encryption:          awssqs.QueueEncryption_KMS,
		EncryptionMasterKey: b.key,
		EnforceSSL:          jsii.Bool(true),
		VisibilityTimeout:   seconds(b.set.FastPathVisibility()),
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(b.set.MaxReceiveCount)},
	})
	rule := awsevents.NewCfnRule(b.stack, b.s("FastPathNotificationRule"), &awsevents.CfnRuleProps{
		Description:  b.s("HealthLake Subscription notifications to the fast-path queue"),
		EventBusName: bus.EventBusName(),
		State:        b.s("ENABLED"),
		EventPattern: map[string]any{
			"source":      []any{NotificationSource},
			"detail-type": []any{NotificationDetailType},
		},
		Targets: []any{&awsevents.CfnRule_TargetProperty{
			Id:  b.s("FastPathQueue"),
			Arn: q.QueueArn(),
			// As a consumer's rule: retried for a day (EventBridge's
			// maximum), then kept in the dead-letter queue; the windows
			// deliver what never arrives (FastPathMissed).
			RetryPolicy:      &awsevents.CfnRule_RetryPolicyProperty{MaximumEventAgeInSeconds: jsii.Number(86400), MaximumRetryAttempts: jsii.Number(185)},
			DeadLetterConfig: &awsevents.CfnRule_DeadLetterConfigProperty{Arn: dlq.QueueArn()},
		}},
	})
	// Only this rule may send, to either queue, on EventBridge's behalf.
	// EventBridge encrypts the messages with the stack's key under the
	// statement jobEventRule adds (no source condition holds for it).
	for _, queue := range []awssqs.Queue{q, dlq} {
		queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        b.s("FastPathNotificationRule"),
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{queue.QueueArn()},
			Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": rule.AttrArn()}},
		}))
	}

	res := b.lambdaResources()
	fp.fn = b.newLambda("FastPath", stackconfig.FastPath, "healthlake-cdc: HealthLake Subscription notifications to change events (the fast path)", res)
	suppressFastPathFindings(fp.fn.f, b.set)
	// Overrides beside the LogGroup the L2 sets, which they keep.
	cfnFn := fp.fn.f.Node().DefaultChild().(awslambda.CfnFunction)
	for k, v := range fastPathLogging {
		cfnFn.AddPropertyOverride(b.s("LoggingConfig."+k), v)
	}
	fp.setup = b.newLambda("FastPathSetup", stackconfig.FastPathSetup, "healthlake-cdc: keeps the fast path's SubscriptionTopic and Subscription (custom resource)", res)
	suppressFastPathSetupFindings(fp.setup.f, b.set)
	// A plain mapping, not SqsEventSource: the role's statements all come
	// from internal/iampolicy. Created after the role's policy, which
	// Lambda checks for sqs:ReceiveMessage when it creates the mapping.
	esm := fp.fn.f.AddEventSourceMapping(b.s("FastPathQueueMapping"), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          q.QueueArn(),
		BatchSize:               jsii.Number(b.set.FastPathBatch()),
		MaxBatchingWindow:       seconds(b.set.FastPathBatchingWindow),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(b.set.FastPathMaxConcurrency()),
	})
	esm.Node().AddDependency(fp.fn.role)

	fp.out = FastPath{NotificationBus: bus, Rule: rule, Queue: q, DeadLetterQueue: dlq,
		Function: fp.fn.f, SetupFunction: fp.setup.f}
	fp.deadLetterQs = map[string]awssqs.IQueue{"fast-path DLQ": dlq}
	b.fastPathResourceTypes()
}

// fastPathSubscription creates the custom resource whose Lambda creates,
// updates and deletes the SubscriptionTopic (one resourceTrigger per type)
// and the Subscription (channel event-bridge to the notification bus). It
// is created once the bus admits HealthLake and has a rule for its
// notifications (HealthLake's prerequisites), and once the setup role has
// its statements.
func (b *builder) fastPathSubscription() {
	fp := b.fp
	if fp == nil {
		return
	}
	setupTimeout := b.set.FastPathSetupFunction.Timeout
	cr := awscdk.NewCustomResource(b.stack, b.s("FastPathSubscription"), &awscdk.CustomResourceProps{
		ServiceToken: fp.setup.f.FunctionArn(),
		ResourceType: b.s("Custom::HealthLakeSubscription"),
		Properties: &map[string]any{
			"DatastoreId": b.p.DatastoreID,
			"Types":       typeList(b.p.ResourceTypes),
			"BusArn":      fp.out.NotificationBus.EventBusArn(),
			"Payload":     b.set.FastPathPayload,
			"Name":        b.cfg.Name,
		},
		// CloudFormation invokes the function asynchronously: Lambda
		// retries a failed invocation twice (after about 1 and 2 minutes).
		// A handler that never answers fails the stack operation after
		// these three attempts instead of CloudFormation's hour.
		ServiceTimeout: seconds(3*setupTimeout + 3*time.Minute),
	})
	// The bus with its policy, the rule, the setup role with its policy.
	cr.Node().AddDependency(fp.out.NotificationBus, fp.out.Rule, fp.setup.role)
	b.afterDatastoreCheck(cr)
	fp.out.Subscription = cr
	b.fastPathCheck()
}

// fastPathCheck schedules the setup Lambda's check of the Subscription
// between deploys (subscription.CheckEvent, every
// stackconfig.FastPathCheckEvery): the custom resource's properties as the
// rule's constant input, the Types parameter as its comma-separated
// string. The rule depends on the custom resource, so a stack deletion
// removes the schedule before the Subscription (and the check creates
// nothing for a pipeline that has neither topic nor Subscription).
func (b *builder) fastPathCheck() {
	fp := b.fp
	stack := awscdk.Stack_Of(b.stack)
	input := stack.ToJsonString(map[string]any{"check": map[string]any{
		"DatastoreId": b.p.DatastoreID,
		"Types":       b.p.ResourceTypes,
		"BusArn":      fp.out.NotificationBus.EventBusArn(),
		"Payload":     b.set.FastPathPayload,
		"Name":        b.cfg.Name,
	}}, nil)
	rule := awsevents.NewCfnRule(b.stack, b.s("FastPathSubscriptionCheck"), &awsevents.CfnRuleProps{
		Description:        b.s("Checks and repairs the fast path's HealthLake Subscription between deploys"),
		ScheduleExpression: b.s(fmt.Sprintf("rate(%d minutes)", int(stackconfig.FastPathCheckEvery.Minutes()))),
		State:              b.s("ENABLED"),
		Targets: []any{&awsevents.CfnRule_TargetProperty{
			Id:    b.s("FastPathSetup"),
			Arn:   fp.setup.f.FunctionArn(),
			Input: input,
		}},
	})
	rule.Node().AddDependency(fp.out.Subscription)
	awslambda.NewCfnPermission(b.stack, b.s("FastPathSubscriptionCheckPermission"), &awslambda.CfnPermissionProps{
		Action:        b.s("lambda:InvokeFunction"),
		FunctionName:  fp.setup.f.FunctionArn(),
		Principal:     b.s("events.amazonaws.com"),
		SourceArn:     rule.AttrArn(),
		SourceAccount: awscdk.Aws_ACCOUNT_ID(),
	})
	fp.out.CheckRule = rule
}

// fastPathAlarms adds the fast path's alarms through alarm (alarms).
func (b *builder) fastPathAlarms(alarm func(id, desc string, metric awscloudwatch.IMetric, threshold *float64, periods float64, missing awscloudwatch.TreatMissingData)) {
	if b.fp == nil {
		return
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	alarm("FastPathDeadLetterAlarm", "A HealthLake Subscription notification reached the fast-path dead-letter queue: the "+
		"fast-path Lambda failed on it MaxReceiveCount times, or EventBridge could not deliver it to the fast-path queue. "+
		"The windows still deliver its versions (counted as FastPathMissed). See docs/FASTPATH.md.",
		b.fp.out.DeadLetterQueue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	checks := awscdk.Duration_Minutes(jsii.Number(stackconfig.FastPathCheckEvery.Minutes()))
	alarm("FastPathSubscriptionAlarm", "The fast path's HealthLake Subscription has not been active for three checks in a row "+
		"(FastPathSubscriptionInactive, every 10 minutes), or no check reported: HealthLake stopped it (status error or "+
		"off) and the check's repair did not make it active again, or the check cannot run. The windows deliver every "+
		"change meanwhile, minutes later. See docs/OPERATIONS.md, FastPathSubscriptionAlarm.",
		pipelineMetric(b.cfg.Name, metrics.FastPathSubscriptionInactive, "Maximum", checks),
		jsii.Number(0), 3, awscloudwatch.TreatMissingData_BREACHING)
	alarm("FastPathMissedAlarm", "Windows published versions the Subscriptions fast path had not delivered (FastPathMissed > 0 "+
		"in three consecutive 5-minute periods): HealthLake notifications lost or late, the Subscription not active "+
		"(status error or off), or the fast-path Lambda failing. Consumers got every version, later than the fast path "+
		"would have delivered it. See docs/FASTPATH.md: the Subscription's status, the fast-path dead-letter queue and log group.",
		pipelineMetric(b.cfg.Name, metrics.FastPathMissed, "Sum", awscdk.Duration_Minutes(jsii.Number(5))),
		jsii.Number(0), 3, awscloudwatch.TreatMissingData_NOT_BREACHING)
}

// fastPathOutputs are the fast path's stack outputs.
func (b *builder) fastPathOutputs(out func(id string, v *string, desc string)) {
	if b.fp == nil {
		return
	}
	out("NotificationBusArn", b.fp.out.NotificationBus.EventBusArn(), "Bus of the HealthLake Subscription's notifications (the fast path)")
	out("FastPathQueueUrl", b.fp.out.Queue.QueueUrl(), "Queue of the fast-path Lambda")
	out("FastPathDeadLetterQueueUrl", b.fp.out.DeadLetterQueue.QueueUrl(), "Dead-letter queue of the fast path")
	if st := b.fp.keyStatement; st != nil {
		out("NotificationBusKeyPolicyStatement", awscdk.Stack_Of(b.stack).ToJsonString(st.ToStatementJson(), nil),
			"Statement to add to the policy of the notification bus's key (the data store's key: DatastoreKey), so that EventBridge can use it for that bus")
	}
}

// suppressFastPathFindings records why HIPAA checks do not apply to the
// fast-path Lambda: it is invoked by its queue's mapping only.
func suppressFastPathFindings(f awslambda.Function, set stackconfig.Config) {
	if set.ReservedConcurrencyOf(stackconfig.FastPath) == 0 {
		suppress(f, nagRule{id: "HIPAA.Security-LambdaConcurrency", reason: "Reserved concurrency is off by default (the ReservedConcurrency setting): Lambda keeps 100 units of an account's concurrency unreserved, and a new account's concurrency quota is below that, so reserving any fails the first deploy. The fast-path Lambda's concurrency is bounded without it by its queue mapping's MaximumConcurrency (MapMaxConcurrency, so that together its invocations publish within the pipeline's PutEvents share)."})
	}
	suppress(f,
		nagRule{id: "HIPAA.Security-LambdaDLQ", reason: "A function DLQ only receives failed asynchronous invocations, and the fast-path Lambda is invoked only by its SQS event-source mapping: a notification it fails on returns to the fast-path queue and moves after MaxReceiveCount receives to the fast-path dead-letter queue, which has an alarm (FastPathDeadLetterAlarm)."},
	)
}

// suppressFastPathSetupFindings records why HIPAA checks do not apply to
// the custom resource's Lambda, which CloudFormation invokes on the stack's
// create, update and delete only.
func suppressFastPathSetupFindings(f awslambda.Function, set stackconfig.Config) {
	if set.ReservedConcurrencyOf(stackconfig.FastPathSetup) == 0 {
		suppress(f, nagRule{id: "HIPAA.Security-LambdaConcurrency", reason: "CloudFormation invokes this custom resource's function once per create, update or delete of the stack, and its schedule once every 10 minutes to check the Subscription (and Lambda's retries of either): a reservation would hold account concurrency for a function that runs a few seconds an hour, and with the ReservedConcurrency setting off (the default) fail the first deploy into a new account."})
	}
	suppress(f,
		nagRule{id: "HIPAA.Security-LambdaDLQ", reason: "CloudFormation invokes the custom resource's function asynchronously with a request it must answer at the request's pre-signed URL; an invocation that fails after Lambda's two retries fails the stack operation (at the custom resource's ServiceTimeout), which CloudFormation shows and rolls back. A dead-letter queue would hold a request nothing can answer any more: the retry is the next deploy. Its scheduled check needs none either: a check that fails is the next one ten minutes later, and FastPathSubscriptionAlarm treats checks that report nothing as breaching."},
	)
}
