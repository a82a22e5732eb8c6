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
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventschemas"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/statemachine"
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

// S3 prefixes of the artifact bucket (docs/ARCHITECTURE.md, "S3 layout"):
// the ones the roles are granted (internal/iampolicy).
const (
	PrefixExports    = iampolicy.PrefixExports
	PrefixManifests  = iampolicy.PrefixManifests
	PrefixMapResults = iampolicy.PrefixMapResults
	PrefixClaimCheck = iampolicy.PrefixClaimCheck
	PrefixQuarantine = iampolicy.PrefixQuarantine
	// PrefixDelivered holds what was published (the reconciliation's
	// delivered index); PrefixReconcile the reconciliation's own objects;
	// PrefixOverlap what each window published in its last overlap.
	PrefixDelivered = iampolicy.PrefixDelivered
	PrefixReconcile = iampolicy.PrefixReconcile
	PrefixOverlap   = iampolicy.PrefixOverlap
	// LegacyPrefixFastPath is where the fast path wrote its record objects
	// before its record moved to the table: expired (with FastPath), read
	// by nothing.
	LegacyPrefixFastPath = "fastpath/"
)

// StateMachineName returns the state machine's name for a stack name. It is
// fixed (not generated) so that the state machine role can name its own
// child executions without a dependency cycle.
func StateMachineName(stackName string) string { return stackName + "-Pipeline" }

// executionsArn matches the executions of the named state machine.
func executionsArn(smName string) *string {
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"+smName+":*"), nil)
}

// mapRunExecutionsArn matches the child executions a Distributed Map of the
// named state machine starts (execution:<name>/<map run label>:<id>).
func mapRunExecutionsArn(smName string) *string {
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"+smName+"/*"), nil)
}

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
}

func (b *builder) s(v string) *string { return jsii.String(v) }

var aslPlaceholderRE = regexp.MustCompile(`\$\{([A-Za-z][A-Za-z0-9_]*)\}`)

// knownPlaceholders are the placeholders the stack substitutes.
var knownPlaceholders = map[string]bool{
	statemachine.RunLockFunctionArn: true, statemachine.PrepareChangeFunctionArn: true,
	statemachine.StartQueueURL: true, statemachine.ArtifactBucket: true,
	statemachine.ExportHeartbeatSeconds: true, statemachine.ExportTimeoutSeconds: true,
	statemachine.RunTimeoutSeconds: true, statemachine.MapMaxConcurrency: true,
	// Only in the reconciliation's definition (reconcileMachine).
	statemachine.ReconcileFunctionArn: true,
}

// Placeholders returns the ${Name} placeholders of a definition.
func Placeholders(def string) map[string]bool {
	out := map[string]bool{}
	for _, m := range aslPlaceholderRE.FindAllStringSubmatch(def, -1) {
		out[m[1]] = true
	}
	return out
}

// substitutionsOf returns the values of exactly def's placeholders that subs
// has.
func substitutionsOf(def string, subs map[string]*string) map[string]*string {
	out := map[string]*string{}
	for name := range Placeholders(def) {
		if v, ok := subs[name]; ok {
			out[name] = v
		}
	}
	return out
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

// ArchiveName is the name of the pipeline's event archive (EventBridge
// allows 48 characters: CheckName refuses a longer pipeline name).
func ArchiveName(pipeline string) string { return pipeline + "-events" }

// JobEventRuleName is the name of the rule on the default bus that routes
// HealthLake's export job events to the re-check queue.
func JobEventRuleName(pipeline string) string { return pipeline + "-HealthLakeJobEvents" }

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

// vendedLogGroupName is the name of a state machine's log group: under
// /aws/vendedlogs/ (CloudWatch Logs then keeps one resource policy for all
// such groups instead of one statement each against its 5,120-character
// policy limit), ending in the id of this stack instance (the last part of
// AWS::StackId). The log groups are retained when the stack is deleted, so
// a fixed name would make the next create of the same stack fail with
// "already exists"; a recreated stack gets a new id and new groups, and the
// retained ones keep their history under the old name.
func vendedLogGroupName(stateMachine string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("/aws/vendedlogs/states/" + stateMachine + "-"),
		awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), awscdk.Aws_STACK_ID(), nil)),
	})
}

// logGroup creates a log group whose retention is the LogRetentionDays
// prop and whose data is encrypted with the stack's key. It is retained
// when the stack is deleted: its name must not be fixed (nil lets
// CloudFormation generate one; see vendedLogGroupName).
func (b *builder) logGroup(id string, name *string) awslogs.LogGroup {
	lg := awslogs.NewLogGroup(b.stack, b.s(id), &awslogs.LogGroupProps{
		LogGroupName:  name,
		EncryptionKey: b.key,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	lg.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(b.p.LogRetentionDays)
	return lg
}

// fn is one Lambda of the pipeline with its role and log group.
type fn struct {
	f    awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
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

// newKey creates the one customer-managed key, with the statements that let
// CloudWatch Logs and CloudWatch alarms use it.
func (b *builder) newKey() {
	b.key = awskms.NewKey(b.stack, b.s("Key"), &awskms.KeyProps{
		Description:       b.s("healthlake-cdc: bucket, table, queues, topic and log groups of " + b.cfg.Name),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	// CloudWatch Logs encrypts this stack's log groups with the key.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("CloudWatchLogsEncryption"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(awscdk.Fn_Sub(b.s("logs.${AWS::Region}.amazonaws.com"), nil), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{
			"kms:EncryptionContext:aws:logs:arn": awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*"), nil),
		}},
	}), nil)
	// CloudWatch alarms publish to the encrypted alarm topic.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("CloudWatchAlarmsToEncryptedTopic"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
	}), nil)
}

// artifactBucket creates the artifact bucket (with its access-log bucket):
// versioned, KMS, TLS only, each prefix expiring.
func (b *builder) artifactBucket() {
	p := b.p
	expire := func(id, prefix string, days *float64) *awss3.LifecycleRule {
		return &awss3.LifecycleRule{
			Id:                                  b.s(id),
			Prefix:                              b.s(prefix),
			Expiration:                          awscdk.Duration_Days(days),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			// The bucket is versioned: an expired or overwritten object's
			// previous version is kept one day, then removed.
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(1)),
		}
	}
	accessLogs := b.accessLogBucket()
	rules := []*awss3.LifecycleRule{
		expire("expire-exports", PrefixExports, p.ExportsExpiryDays),
		expire("expire-manifests", PrefixManifests, p.ManifestsExpiryDays),
		expire("expire-map-results", PrefixMapResults, p.MapResultsExpiryDays),
		expire("expire-claim-checks", PrefixClaimCheck, p.ClaimChecksExpiryDays),
		expire("expire-quarantine", PrefixQuarantine, p.QuarantineExpiryDays),
		// Read by the next window only; kept as long as manifests.
		expire("expire-overlap", PrefixOverlap, p.ManifestsExpiryDays),
		// Settings, not parameters: Validate holds them to the
		// reconciliation's interval (what the next one reads back).
		expire("expire-delivered", PrefixDelivered, jsii.Number(b.set.DeliveredExpiryDays)),
		expire("expire-reconcile", PrefixReconcile, jsii.Number(b.set.ReconcileExpiryDays)),
	}
	if b.set.FastPath {
		// Until stop 29 the fast path wrote its record as objects under
		// fastpath/; it now writes items of the table. The objects an
		// earlier version left (resource ids, under the stack's key) are
		// read by nothing: they expire a day after they were written.
		rules = append(rules, expire("expire-fastpath-objects", LegacyPrefixFastPath, jsii.Number(1)))
	}
	b.bucket = awss3.NewBucket(b.stack, b.s("ArtifactBucket"), &awss3.BucketProps{
		// Server access logs of the PHI bucket (exports, claim-checks,
		// quarantine); object keys in them carry no resource ids.
		ServerAccessLogsBucket: accessLogs,
		ServerAccessLogsPrefix: b.s("artifact-bucket/"),
		Versioned:              jsii.Bool(true),
		Encryption:             awss3.BucketEncryption_KMS,
		EncryptionKey:          b.key,
		BucketKeyEnabled:       jsii.Bool(true),
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		MinimumTLSVersion:      jsii.Number(1.2),
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN,
		LifecycleRules:         &rules,
	})
	suppressArtifactBucketFindings(b.bucket)
}

// newTable creates the table of the RUN record, history and export ledger.
func (b *builder) newTable() {
	b.table = awsdynamodb.NewTable(b.stack, b.s("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: b.s("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: b.s("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       b.key,
		TimeToLiveAttribute: b.s(stackconfig.TableTTLAttribute),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	suppress(b.table, nagRule{id: "HIPAA.Security-DynamoDBInBackupPlan", reason: "Point-in-time recovery keeps continuous backups of the table for 35 days and deletion protection is on; the table holds the pipeline's coordination state (run lock, checkpoint, run history, export ledger) and, with the fast path, a day of what it published (resource types, ids and versions: no resource content), under the stack's key, and an AWS Backup plan would add a second copy of that state without a recovery it does not already have."})
}

// queues creates the start and re-check queues, each with its dead-letter
// queue. Visibility timeouts (6 × the consumer's timeout) and
// maxReceiveCount come from the settings cdc-local runs with too.
func (b *builder) queues() {
	queue := func(id string, consumer stackconfig.Function) (awssqs.Queue, awssqs.Queue) {
		dlq := awssqs.NewQueue(b.stack, b.s(id+"DeadLetterQueue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		})
		q := awssqs.NewQueue(b.stack, b.s(id+"Queue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			VisibilityTimeout:   seconds(stackconfig.VisibilityTimeout(consumer)),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(4)),
			DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(b.set.MaxReceiveCount)},
		})
		return q, dlq
	}
	b.startQ, b.startDLQ = queue("Start", b.set.StartExport)
	b.recheckQ, b.recheckDLQ = queue("Recheck", b.set.CheckExport)
}

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

// lambdaResources are the values the Lambdas' environment names
// (stackconfig.Config.LambdaEnv): the stack's resources and the deploy-time
// props, as CloudFormation tokens.
func (b *builder) lambdaResources() stackconfig.Resources {
	p := b.p
	return stackconfig.Resources{
		Pipeline:           b.cfg.Name,
		Bucket:             *b.bucket.BucketName(),
		Table:              *b.table.TableName(),
		DatastoreID:        *p.DatastoreID,
		HealthLakeEndpoint: *awscdk.Fn_Sub(b.s("https://healthlake.${AWS::Region}.${AWS::URLSuffix}"), nil),
		ExportRoleARN:      *b.exportRole.RoleArn(),
		KMSKeyID:           *b.key.KeyArn(),
		RecheckQueueURL:    *b.recheckQ.QueueUrl(),
		EventBus:           *b.bus.EventBusName(),
		EventSource:        b.cfg.EventSource,
		DetailType:         b.cfg.DetailType,
		ResourceTypes:      *p.ResourceTypes,
		ExcludeTypes:       *p.ExcludeTypes,
		MaxEntryBytes:      *numString(p.MaxEntryBytes),
		Validate:           *p.ValidateLevel,
		SafetyLag:          *p.SafetyLag,
		InitialCheckpoint:  *p.InitialCheckpoint,
	}
}

// newFn creates a Lambda of the pipeline (newLambda) with the cdk-nag
// suppressions the five share.
func (b *builder) newFn(id, name, desc string, res stackconfig.Resources) fn {
	f := b.newLambda(id, name, desc, res)
	suppressLambdaFindings(f.f, b.set)
	return f
}

// newLambda creates a Lambda whose timeout, memory and environment (the one
// stackconfig.Config.LambdaEnv gives cdc-local too) come from the settings
// and res, with its own role (no statements: iamPolicies) and log group.
func (b *builder) newLambda(id, name, desc string, res stackconfig.Resources) fn {
	sf, ok := b.set.Function(name)
	if !ok {
		panic("no settings for Lambda " + name) // the builder and stackconfig name the same Lambdas
	}
	role := awsiam.NewRole(b.stack, b.s(id+"Role"), &awsiam.RoleProps{
		Description: b.s("Execution role of the " + name + " Lambda"),
		AssumedBy:   awsiam.NewServicePrincipal(b.s("lambda.amazonaws.com"), nil),
	})
	lg := b.logGroup(id+"Logs", nil)
	vars := cdkEnv(b.set.LambdaEnv(name, res))
	// Function-level concurrency (HIPAA Security LambdaConcurrency) only
	// with the ReservedConcurrency setting: a new account's quota cannot
	// hold it (nag.go).
	var reserved *float64
	if n := b.set.ReservedConcurrencyOf(name); n > 0 {
		reserved = jsii.Number(n)
	}
	f := awslambda.NewFunction(b.stack, b.s(id), &awslambda.FunctionProps{
		Description:  b.s(desc),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      b.s("bootstrap"),
		Code:         awslambda.Code_FromAsset(b.s(filepath.Join(b.cfg.LambdaDir, name)), nil),
		Role:         role,
		LogGroup:     lg,
		Timeout:      seconds(sf.Timeout),
		MemorySize:   jsii.Number(sf.MemoryMB),
		Environment:  &vars,
		// nil (none) unless ReservedConcurrency is on.
		ReservedConcurrentExecutions: reserved,
	})
	return fn{f: f, role: role, logs: lg}
}

// lambdas creates the five Lambdas and the start and re-check queues'
// event-source mappings.
func (b *builder) lambdas() {
	res := b.lambdaResources()
	b.runLock = b.newFn("RunLock", stackconfig.RunLock, "healthlake-cdc: lock, window, commit and failure of a run", res)
	b.startExport = b.newFn("StartExport", stackconfig.StartExport, "healthlake-cdc: starts the HealthLake $export of a run", res)
	b.checkExport = b.newFn("CheckExport", stackconfig.CheckExport, "healthlake-cdc: polls the export, writes the manifest, answers the task token", res)
	b.prepareChange = b.newFn("PrepareChange", stackconfig.PrepareChange, "healthlake-cdc: one batch of export files to change events", res)
	// The reconciliation's Lambda (docs/RECONCILE.md): plan, index, compare, finish.
	b.reconcileFn = b.newFn("Reconcile", reconcileLambda, "healthlake-cdc: reconciliation of the delivered index with a full export", res)

	// Event-source mappings (start queue → start-export, re-check queue →
	// check-export). Built without SqsEventSource so that CDK adds no grants
	// of its own: the roles' statements all come from internal/iampolicy.
	b.startExport.f.AddEventSourceMapping(b.s("StartQueueMapping"), &awslambda.EventSourceMappingOptions{
		EventSourceArn: b.startQ.QueueArn(), BatchSize: jsii.Number(1), ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency: jsii.Number(stackconfig.ExportQueueMaxConcurrency),
	})
	b.checkExport.f.AddEventSourceMapping(b.s("RecheckQueueMapping"), &awslambda.EventSourceMappingOptions{
		EventSourceArn: b.recheckQ.QueueArn(), BatchSize: jsii.Number(1), ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency: jsii.Number(stackconfig.ExportQueueMaxConcurrency),
	})
}

// stateMachines creates the pipeline's state machine from asl and the
// reconciliation's (reconcileMachine).
func (b *builder) stateMachines(asl string) {
	set := b.set
	b.smArn = awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"+b.smName), nil)
	b.smRole = awsiam.NewRole(b.stack, b.s("StateMachineRole"), &awsiam.RoleProps{
		Description: b.s("Role of the healthlake-cdc state machine " + b.smName),
		AssumedBy: awsiam.NewServicePrincipal(b.s("states.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
	})

	// The numeric placeholders come from the settings, so the export wait's
	// HeartbeatSeconds and TimeoutSeconds, the Map's MaxConcurrency (the
	// divisor of CDC_PUTEVENTS_RATE) and the execution's TimeoutSeconds
	// (below the run-lock lease) are the values Validate checked.
	num := func(d time.Duration) *string { return jsii.String(strconv.Itoa(stackconfig.Seconds(d))) }
	subs := map[string]*string{
		statemachine.RunLockFunctionArn:       b.runLock.f.FunctionArn(),
		statemachine.PrepareChangeFunctionArn: b.prepareChange.f.FunctionArn(),
		statemachine.StartQueueURL:            b.startQ.QueueUrl(),
		statemachine.ArtifactBucket:           b.bucket.BucketName(),
		statemachine.ExportHeartbeatSeconds:   num(set.HeartbeatSeconds()),
		statemachine.ExportTimeoutSeconds:     num(set.ExportTimeout),
		statemachine.RunTimeoutSeconds:        num(set.RunTimeout),
		statemachine.MapMaxConcurrency:        jsii.String(strconv.Itoa(set.MapMaxConcurrency)),
	}
	// Substitute exactly the placeholders of the file (New refused any
	// other); the reconciliation's definition takes its own from the same
	// values (and its Lambda).
	smSubs := substitutionsOf(asl, subs)

	b.sm = b.standardMachine("StateMachine", b.smName, asl, smSubs, b.smRole)
	b.rec = b.reconcileMachine(subs, b.reconcileFn.f.FunctionArn())
}

// standardMachine creates a STANDARD state machine named name from the
// definition def with its substitutions and role, as both of the stack's
// machines are made: every event logged to a log group of its own under the
// stack's key, without execution data (inputs and outputs could name export
// files; the runs' records and counts hold what operators need), traced.
func (b *builder) standardMachine(id, name, def string, subs map[string]*string, role awsiam.Role) awsstepfunctions.StateMachine {
	logs := b.logGroup(id+"Logs", vendedLogGroupName(name))
	sm := awsstepfunctions.NewStateMachine(b.stack, b.s(id), &awsstepfunctions.StateMachineProps{
		StateMachineName:        b.s(name),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(b.s(def)),
		DefinitionSubstitutions: &subs,
		Role:                    role,
		Logs: &awsstepfunctions.LogOptions{
			Destination:          logs,
			Level:                awsstepfunctions.LogLevel_ALL,
			IncludeExecutionData: jsii.Bool(false),
		},
		TracingEnabled: jsii.Bool(true),
	})
	b.suppressGeneratedStateMachineGrants(role)
	return sm
}

// schedulerRole creates the role EventBridge Scheduler starts both state
// machines with.
func (b *builder) schedulerRole() {
	b.schedRole = awsiam.NewRole(b.stack, b.s("SchedulerRole"), &awsiam.RoleProps{
		Description: b.s("Lets EventBridge Scheduler start " + b.smName),
		AssumedBy: awsiam.NewServicePrincipal(b.s("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
	})
}

// iamPolicies gives every role its statements from the one definition
// (internal/iampolicy).
func (b *builder) iamPolicies() {
	res := iampolicy.Resources{
		BucketARN:       *b.bucket.BucketArn(),
		TableARN:        *b.table.TableArn(),
		KeyARN:          *b.key.KeyArn(),
		DatastoreARN:    *b.datastoreArn,
		StartQueueARN:   *b.startQ.QueueArn(),
		RecheckQueueARN: *b.recheckQ.QueueArn(),
		EventBusARN:     *b.bus.EventBusArn(),
		// The state machine's ARN is built from its fixed name: its own
		// role may name it without a dependency cycle.
		StateMachineARN:          *b.smArn,
		ExecutionsARN:            *executionsArn(b.smName),
		MapRunExecutionsARN:      *mapRunExecutionsArn(b.smName),
		RunLockFunctionARN:       *b.runLock.f.FunctionArn(),
		PrepareChangeFunctionARN: *b.prepareChange.f.FunctionArn(),
		ExportRoleARN:            *b.exportRole.RoleArn(),
		LogGroupARNs: map[iampolicy.Principal]string{
			iampolicy.RunLock: *b.runLock.logs.LogGroupArn(), iampolicy.StartExport: *b.startExport.logs.LogGroupArn(),
			iampolicy.CheckExport: *b.checkExport.logs.LogGroupArn(), iampolicy.PrepareChange: *b.prepareChange.logs.LogGroupArn(),
			iampolicy.Reconcile: *b.reconcileFn.logs.LogGroupArn(),
		},
		ReconcileFunctionARN:         *b.reconcileFn.f.FunctionArn(),
		ReconcileStateMachineARN:     *b.rec.arn,
		ReconcileExecutionsARN:       *executionsArn(b.rec.name),
		ReconcileMapRunExecutionsARN: *mapRunExecutionsArn(b.rec.name),
	}
	roles := map[iampolicy.Principal]awsiam.Role{
		iampolicy.RunLock: b.runLock.role, iampolicy.StartExport: b.startExport.role, iampolicy.CheckExport: b.checkExport.role,
		iampolicy.PrepareChange: b.prepareChange.role, iampolicy.StateMachine: b.smRole, iampolicy.HealthLakeExport: b.exportRole,
		iampolicy.Scheduler: b.schedRole, iampolicy.Reconcile: b.reconcileFn.role, iampolicy.ReconcileStateMachine: b.rec.role,
	}
	if b.fp != nil {
		// Set only with the fast path: prepare-change then also reads its
		// record items (iampolicy, HasFastPath).
		res.FastPathQueueARN = *b.fp.out.Queue.QueueArn()
		res.LogGroupARNs[iampolicy.FastPath] = *b.fp.fn.logs.LogGroupArn()
		res.LogGroupARNs[iampolicy.FastPathSetup] = *b.fp.setup.logs.LogGroupArn()
		roles[iampolicy.FastPath] = b.fp.fn.role
		roles[iampolicy.FastPathSetup] = b.fp.setup.role
	}
	for p, role := range roles {
		applyPolicy(role, p, res)
	}
}

// schedules starts the reconciliation on its schedule (reconcileSchedule)
// and the pipeline every ScheduleMinutes.
func (b *builder) schedules() {
	expr := b.scheduleExpression(b.p.ScheduleMinutes)
	b.reconcileSchedule(b.rec, b.schedRole)
	awsscheduler.NewCfnSchedule(b.stack, b.s("Schedule"), &awsscheduler.CfnScheduleProps{
		Description:        b.s("Starts " + b.smName + " every ScheduleMinutes minutes"),
		ScheduleExpression: expr,
		State:              b.p.ScheduleState,
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: b.s("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     b.sm.StateMachineArn(),
			RoleArn: b.schedRole.RoleArn(),
			Input:   b.s("{}"),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumEventAgeInSeconds: jsii.Number(60),
				MaximumRetryAttempts:     jsii.Number(2),
			},
			// A start that failed after the retries (eventsDeadLetterAccess).
			DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: b.eventsDLQ.QueueArn()},
		},
	})
}

// alarms creates the alarm topic (with the optional e-mail subscription)
// and every alarm, each notifying the topic when it fires and when it ends.
func (b *builder) alarms() {
	p, stack, pipeline := b.p, b.stack, b.cfg.Name
	b.topic = awssns.NewTopic(stack, b.s("AlarmTopic"), &awssns.TopicProps{
		DisplayName: b.s("healthlake-cdc alarms " + pipeline),
		MasterKey:   b.key,
		EnforceSSL:  jsii.Bool(true),
	})
	// The e-mail subscription: for a literal address at synth, for a token
	// (a parameter) through a condition on it being empty.
	if unresolved(p.AlarmEmail) || *p.AlarmEmail != "" {
		sub := awssns.NewCfnSubscription(stack, b.s("AlarmEmailSubscription"), &awssns.CfnSubscriptionProps{
			TopicArn: b.topic.TopicArn(),
			Protocol: b.s("email"),
			Endpoint: p.AlarmEmail,
		})
		if unresolved(p.AlarmEmail) {
			hasEmail := awscdk.NewCfnCondition(stack, b.s("HasAlarmEmail"), &awscdk.CfnConditionProps{
				Expression: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(p.AlarmEmail, "")),
			})
			sub.CfnOptions().SetCondition(hasEmail)
		}
	}
	action := awscloudwatchactions.NewSnsAction(b.topic)
	alarm := func(id, desc string, metric awscloudwatch.IMetric, threshold *float64, periods float64, missing awscloudwatch.TreatMissingData) {
		a := awscloudwatch.NewAlarm(stack, b.s(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   b.s(desc),
			Metric:             metric,
			Threshold:          threshold,
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(periods),
			TreatMissingData:   missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
		b.alarmRefs = append(b.alarmRefs, a)
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	alarm("StartDeadLetterAlarm", "A start message reached the start dead-letter queue: a run's export never started.",
		b.startDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("RecheckDeadLetterAlarm", "A re-check message reached the re-check dead-letter queue: an export is no longer followed.",
		b.recheckDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	eventsDLQCauses := "a change event that failed to encrypt or decrypt with the key, a HealthLake job event the rule could " +
		"not send to the re-check queue, or a scheduled start of a state machine"
	if b.fp != nil {
		eventsDLQCauses += ", or a HealthLake Subscription notification the notification bus could not encrypt or decrypt"
	}
	alarm("EventsDeadLetterAlarm", "EventBridge or EventBridge Scheduler could not deliver something and put it in the events "+
		"dead-letter queue: "+eventsDLQCauses+". See docs/OPERATIONS.md, \"EventsDeadLetterAlarm\".",
		b.eventsDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("ExecutionFailedAlarm", "A pipeline execution failed; the checkpoint did not move and the next run retries the window.",
		b.sm.MetricFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: b.s("Sum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("CheckpointLagAlarm", "The checkpoint lags behind now by more than CheckpointLagThresholdSeconds.",
		pipelineMetric(pipeline, MetricCheckpointLag, "Maximum", five),
		// Every run, refused ones too, reports the lag: no data for three periods means the
		// pipeline stopped (schedule off, run-lock failing) — exactly what this alarm is for.
		p.CheckpointLagThresholdSeconds, 3, awscloudwatch.TreatMissingData_BREACHING)
	// Lines that did not reach the bus. The descriptions say where to look;
	// they name no resource (alarm notifications leave the account).
	pipelineSum := func(name string) awscloudwatch.IMetric { return pipelineMetric(pipeline, name, "Sum", five) }
	alarm("QuarantinedLinesAlarm", "prepare-change quarantined lines instead of publishing them (invalid JSON, failed validation, "+
		"entries EventBridge refused). List them with `cdcctl quarantine --run <run id>`; fix and re-run as in "+
		"docs/OPERATIONS.md, \"Re-run quarantined records after a fix\".",
		pipelineSum(MetricQuarantinedLines), jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("EntriesFailedAlarm", "PutEvents entries failed after every retry: their batch failed and the run retries the window. "+
		"Check the prepare-change log group and `cdcctl status`; see docs/OPERATIONS.md, \"ExecutionFailedAlarm\" "+
		"and \"Re-run quarantined records after a fix\" (`cdcctl quarantine --run <run id>`).",
		pipelineSum(MetricEntriesFailed), jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("ExportErrorsAlarm", "A HealthLake export ended COMPLETED_WITH_ERRORS: the good files were published and the entries of "+
		"HealthLake's error files were quarantined. List them with `cdcctl quarantine --run <run id>`; see docs/OPERATIONS.md, "+
		"\"Re-run quarantined records after a fix\".",
		pipelineSum(MetricExportErrors), jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	// A repair means a version the runs never delivered (docs/RECONCILE.md);
	// the reconciliation has re-published it, the alarm is about the cause.
	alarm("ReconcileRepairsAlarm", "The reconciliation re-published resource versions the runs never delivered (the feed is whole "+
		"again). See `cdcctl reconcile status` and docs/OPERATIONS.md, \"ReconcileRepairs\", for the causes to look for.",
		pipelineSum(metrics.ReconcileRepairs), jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	// A failed reconciliation leaves deletes unpublished and gaps unrepaired
	// until the next one (a day later); it released the lock, the runs go on.
	alarm("ReconcileFailedAlarm", "A reconciliation execution failed: deletes and repairs wait for the next one (daily). "+
		"See `cdcctl reconcile status` and docs/OPERATIONS.md, \"ReconcileFailedAlarm\".",
		b.rec.sm.MetricFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: b.s("Sum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	b.fastPathAlarms(alarm)
}

// dashboard creates the operators' dashboard (dashboard.go).
func (b *builder) dashboard() {
	dlqs := map[string]awssqs.IQueue{"start DLQ": b.startDLQ, "re-check DLQ": b.recheckDLQ, "events DLQ": b.eventsDLQ}
	if b.fp != nil {
		for k, q := range b.fp.deadLetterQs {
			dlqs[k] = q
		}
	}
	b.dash = newDashboard(b.stack, dashboardInputs{
		pipeline: b.cfg.Name, stateMachine: b.sm, alarms: b.alarmRefs,
		deadLetterQueues: dlqs,
		lagThreshold:     b.p.CheckpointLagThresholdSeconds,
		fastPath:         b.fp != nil,
	})
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

// scheduleExpression is rate(1 minute) or rate(N minutes): at synth for a
// literal, through a condition for a token (a parameter).
func (b *builder) scheduleExpression(minutes *float64) *string {
	if !unresolved(minutes) {
		if *minutes == 1 {
			return jsii.String("rate(1 minute)")
		}
		return jsii.String(fmt.Sprintf("rate(%d minutes)", int64(*minutes)))
	}
	n := numString(minutes)
	oneMinute := awscdk.NewCfnCondition(b.stack, b.s("ScheduleIsOneMinute"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionEquals(n, "1"),
	})
	return awscdk.Token_AsString(awscdk.Fn_ConditionIf(oneMinute.LogicalId(), "rate(1 minute)",
		awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("rate("), n, jsii.String(" minutes)")})), nil)
}
