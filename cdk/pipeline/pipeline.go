// Package pipeline is healthlake-cdc as a CDK construct for Go apps:
// New(scope, id, Props{...}) adds the whole change-data-capture pipeline
// (AWS HealthLake exports to change events on an EventBridge bus) to a
// user's stack, and NewConsumer / Pipeline.AddConsumer subscribe an
// encrypted SQS queue to its events. The CDK app in cdk/ is one user: it
// passes CloudFormation parameters as the deploy-time props.
package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventschemas"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Metric contract of docs/ARCHITECTURE.md ("Metrics").
const (
	// MetricNamespace is the CloudWatch namespace the Lambdas write EMF metrics to.
	MetricNamespace = metrics.Namespace
	// MetricDimension is the dimension every pipeline metric carries.
	MetricDimension = "Pipeline"
	// MetricCheckpointLag is the metric of the checkpoint lag alarm.
	MetricCheckpointLag = metrics.CheckpointLagSeconds
	// MetricQuarantinedLines counts lines prepare-change set aside instead
	// of publishing; MetricEntriesFailed PutEvents entries that failed after
	// the retries; MetricExportErrors entries of HealthLake's error files of
	// exports that ended COMPLETED_WITH_ERRORS.
	MetricQuarantinedLines = metrics.QuarantinedLines
	MetricEntriesFailed    = metrics.EntriesFailed
	MetricExportErrors     = metrics.ExportErrors
)

// Pipeline is the whole change-data-capture pipeline as one construct:
// KMS key, artifact bucket (with its access-log bucket), table, queues,
// four Lambdas, state machine, schedule, the reconciliation (its Lambda,
// state machine and schedule), event bus with archive, the
// registered event schema, the HealthLake export role, alarms, dashboard
// and log groups.
type Pipeline struct {
	// Construct is the scope of every resource of the pipeline.
	Construct constructs.Construct
	// Props as New completed them with defaults.
	Props Props

	Key                      awskms.Key
	Bucket                   awss3.Bucket
	Table                    awsdynamodb.Table
	Bus                      awsevents.EventBus
	StateMachine             awsstepfunctions.StateMachine
	AlarmTopic               awssns.Topic
	Dashboard                awscloudwatch.Dashboard
	SchemaRegistry           awseventschemas.CfnRegistry
	EventSchema              awseventschemas.CfnSchema
	StartQueue, RecheckQueue awssqs.Queue
	StartDeadLetterQueue     awssqs.Queue
	RecheckDeadLetterQueue   awssqs.Queue
	// EventsDeadLetterQueue receives what EventBridge and EventBridge
	// Scheduler could not deliver: events of the bus that fail to encrypt
	// or decrypt with the key, job events the rule could not send to the
	// re-check queue, scheduled starts of the state machines that failed.
	EventsDeadLetterQueue awssqs.Queue
	// ReconcileStateMachine is the reconciliation (docs/RECONCILE.md).
	ReconcileStateMachine awsstepfunctions.StateMachine
	// FastPath is the Subscriptions fast path (fastpath.go), nil unless
	// the FastPath setting is on.
	FastPath *FastPath
}

// New adds a pipeline under scope. Its resources' logical ids include id,
// unless id is "Default", which CDK leaves out of logical ids (the app in
// cdk/ uses it, so the stack's ids are those it always had). A missing
// required prop, an invalid setting or literal, or a state machine
// definition with an unknown placeholder is an error.
func New(scope constructs.Construct, id string, props Props) (*Pipeline, error) {
	props, err := props.withDefaults()
	if err != nil {
		return nil, err
	}
	asl, err := os.ReadFile(props.ASLFile)
	if err != nil {
		return nil, fmt.Errorf("read state machine definition: %w", err)
	}
	for name := range Placeholders(string(asl)) {
		if !knownPlaceholders[name] {
			return nil, fmt.Errorf("state machine definition %s: placeholder ${%s} has no substitution", props.ASLFile, name)
		}
	}
	for _, l := range LambdasOf(*props.Settings) {
		p := filepath.Join(props.LambdaDir, l, "bootstrap")
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return nil, fmt.Errorf("pipeline %s: lambda %s: %s is missing", props.Name, l, p)
		}
	}
	schemaContent, err := registryContent(props.EventSource, props.DetailType)
	if err != nil {
		return nil, err
	}
	if err := checkFIPSRegion(scope, *props.Settings); err != nil {
		return nil, err
	}
	node := constructs.NewConstruct(scope, jsii.String(id))
	// S3 server access logs are delivered under a bucket policy for the
	// logging service (the log bucket enforces bucket-owner object
	// ownership, so ACL-based delivery is not possible).
	node.Node().SetContext(jsii.String("@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"), true)
	b := &builder{stack: node, cfg: props, p: props, set: *props.Settings, schemaContent: schemaContent,
		out: &Pipeline{Construct: node, Props: props}}
	b.build(string(asl))
	return b.out, nil
}

type builder struct {
	stack constructs.Construct
	cfg   Props
	p     Props
	set   Settings
	out   *Pipeline

	key          awskms.Key
	bucket       awss3.Bucket
	table        awsdynamodb.Table
	datastoreArn *string

	schemaContent string

	// What the sections of build create, for the later ones.
	smName                                 string
	smArn                                  *string
	startQ, startDLQ, recheckQ, recheckDLQ awssqs.Queue
	eventsDLQ                              awssqs.Queue
	bus                                    awsevents.EventBus
	evSchema                               eventSchema
	exportRole                             awsiam.Role
	runLock, startExport, checkExport      fn
	prepareChange, reconcileFn             fn
	sm                                     awsstepfunctions.StateMachine
	smRole                                 awsiam.Role
	rec                                    reconciliation
	schedRole                              awsiam.Role
	topic                                  awssns.Topic
	alarmRefs                              []interfacesawscloudwatch.IAlarmRef
	dash                                   awscloudwatch.Dashboard
	// fp is the fast path, nil without the FastPath setting.
	fp *fastPath
	// checkDatastore is the deploy's data store check's Lambda, dsCheck
	// its custom resource (datastorecheck.go).
	checkDatastore fn
	dsCheck        awscdk.CustomResource
	// accessLogs is the artifact bucket's access-log bucket (retained:
	// it waits for the data store check too).
	accessLogs awss3.Bucket
}

func (b *builder) s(v string) *string { return jsii.String(v) }

// seconds is d as a CDK duration of whole seconds.
func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(stackconfig.Seconds(d)))
}

// cdkEnv renders a stackconfig environment as CDK values.
func cdkEnv(vars map[string]string) map[string]*string {
	out := make(map[string]*string, len(vars))
	for k, v := range vars {
		out[k] = jsii.String(v)
	}
	return out
}

// checkFIPSRegion refuses FIPSEndpoints in a stack whose Region is known at
// synth and has no HealthLake FIPS endpoint: every HealthLake call would
// name a host that does not exist. A stack whose Region is resolved at
// deploy time is refused there, by the data store check (no such host).
func checkFIPSRegion(scope constructs.Construct, set Settings) error {
	if !set.FIPSEndpoints {
		return nil
	}
	region := awscdk.Stack_Of(scope).Region()
	if *awscdk.Token_IsUnresolved(region) {
		return nil
	}
	return set.CheckFIPSRegion(*region)
}

// build adds the pipeline's resources, one section each, in the order the
// later ones need the earlier ones.
func (b *builder) build(asl string) {
	b.smName = StateMachineName(b.cfg.Name)
	b.datastoreArn = arn("healthlake", "datastore/fhir/", b.p.DatastoreID)

	b.newKey()
	b.artifactBucket()
	b.newTable()
	b.queues()
	b.eventsDeadLetterQueue()
	b.eventBus()
	// The change events' schema, for consumers.
	b.evSchema = newEventSchema(b.stack, b.cfg.Name, b.cfg.EventSource, b.cfg.DetailType, b.schemaContent)
	b.healthLakeExportRole()
	b.lambdas()
	// HealthLake job events: an immediate re-check (polling stays the fallback).
	b.jobEventRule(b.recheckQ)
	// The Subscriptions fast path, with the FastPath setting (fastpath.go).
	b.fastPathInfra()
	b.stateMachines(asl)
	b.schedulerRole()
	b.eventsDeadLetterAccess()
	b.iamPolicies()
	b.datastoreCheck()
	b.fastPathSubscription()
	b.schedules()
	b.alarms()
	b.dashboard()

	*b.out = Pipeline{Construct: b.out.Construct, Props: b.out.Props,
		Key: b.key, Bucket: b.bucket, Table: b.table, Bus: b.bus, StateMachine: b.sm, AlarmTopic: b.topic, Dashboard: b.dash,
		SchemaRegistry: b.evSchema.registry, EventSchema: b.evSchema.schema,
		StartQueue: b.startQ, RecheckQueue: b.recheckQ, StartDeadLetterQueue: b.startDLQ, RecheckDeadLetterQueue: b.recheckDLQ,
		EventsDeadLetterQueue: b.eventsDLQ, ReconcileStateMachine: b.rec.sm}
	if b.fp != nil {
		b.out.FastPath = &b.fp.out
	}

	b.outputs()
}

// outputs are the stack outputs cdcctl and operators read.
func (b *builder) outputs() {
	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(b.stack, b.s(id), &awscdk.CfnOutputProps{Value: v, Description: b.s(desc)})
	}
	out("StateMachineArn", b.sm.StateMachineArn(), "The pipeline state machine")
	out("ReconcileStateMachineArn", b.rec.sm.StateMachineArn(), "CDC_RECONCILE_STATE_MACHINE_ARN for cdcctl reconcile")
	out("TableName", b.table.TableName(), "CDC_TABLE for cdcctl")
	out("BucketName", b.bucket.BucketName(), "CDC_BUCKET for cdcctl")
	out("KeyArn", b.key.KeyArn(), "The stack's KMS key: a consumer resolving claim-checks needs kms:Decrypt on it")
	out("EventBusArn", b.bus.EventBusArn(), "The change event bus")
	out("SchemaRegistryName", b.evSchema.registry.AttrRegistryName(), "Schema registry of the change events")
	out("EventSchemaArn", b.evSchema.schema.AttrSchemaArn(), "Registered schema of the change events (OpenAPI 3)")
	out("ExportRoleArn", b.exportRole.RoleArn(), "Role HealthLake assumes to write exports")
	out("AlarmTopicArn", b.topic.TopicArn(), "Alarm notifications")
	out("DashboardName", b.dash.DashboardName(), "CloudWatch dashboard of the pipeline")
	out("StartQueueUrl", b.startQ.QueueUrl(), "CDC_START_QUEUE_URL for cdcctl dlq")
	out("StartDeadLetterQueueUrl", b.startDLQ.QueueUrl(), "CDC_START_DLQ_URL for cdcctl dlq")
	out("RecheckQueueUrl", b.recheckQ.QueueUrl(), "CDC_RECHECK_QUEUE_URL for cdcctl dlq")
	out("RecheckDeadLetterQueueUrl", b.recheckDLQ.QueueUrl(), "CDC_RECHECK_DLQ_URL for cdcctl dlq")
	out("EventsDeadLetterQueueUrl", b.eventsDLQ.QueueUrl(), "Dead-letter queue of the event bus, the job-event rule and the schedules")
	b.fastPathOutputs(out)
}

// arn builds the ARN of a resource of this stack's account and Region:
// arn:{partition}:{service}:{region}:{account}:{prefix}{name}; name may be
// a literal or a token.
func arn(service, prefix string, name *string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":" + service + ":"), awscdk.Aws_REGION(),
		jsii.String(":"), awscdk.Aws_ACCOUNT_ID(), jsii.String(":" + prefix), name,
	})
}
