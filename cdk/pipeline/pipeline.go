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

// S3 prefixes of the artifact bucket (docs/ARCHITECTURE.md, "S3 layout").
const (
	PrefixExports    = "exports/"
	PrefixManifests  = "manifests/"
	PrefixMapResults = "map-results/"
	PrefixClaimCheck = "claim-check/"
	PrefixQuarantine = "quarantine/"
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
	// ReconcileStateMachine is the reconciliation (docs/RECONCILE.md).
	ReconcileStateMachine awsstepfunctions.StateMachine
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
	for _, l := range Lambdas {
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
	ruleName := b.cfg.Name + "-HealthLakeJobEvents"
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
	// The queue is SSE-KMS with the stack's key: EventBridge needs the key
	// to send to it (SQS key management). AWS documents no source condition
	// that holds for these calls, so the statement has none; the queue
	// policy above limits who may send.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeToEncryptedRecheckQueue"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
	}), nil)
}

// archiveNameOf is the archive's name (EventBridge allows 48 characters).
func archiveNameOf(pipeline string) string {
	name := pipeline + "-events"
	if len(name) > 48 {
		name = name[:48]
	}
	return name
}

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

// logGroup creates a log group whose retention is the LogRetentionDays
// prop and whose data is encrypted with the stack's key.
func (b *builder) logGroup(id string, name *string) awslogs.LogGroup {
	lg := awslogs.NewLogGroup(b.stack, b.s(id), &awslogs.LogGroupProps{
		LogGroupName:  name,
		EncryptionKey: b.key,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	lg.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(b.p.LogRetentionDays)
	return lg
}

func (b *builder) build(asl string) {
	stack, p := b.stack, b.p
	account := awscdk.Aws_ACCOUNT_ID()
	pipeline := b.cfg.Name
	smName := StateMachineName(pipeline)
	b.datastoreArn = arn("healthlake", "datastore/fhir/", p.DatastoreID)

	// --- the one customer-managed key -------------------------------------
	b.key = awskms.NewKey(stack, b.s("Key"), &awskms.KeyProps{
		Description:       b.s("healthlake-cdc: bucket, table, queues, topic and log groups of " + pipeline),
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

	// --- artifact bucket -------------------------------------------------------
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
	b.bucket = awss3.NewBucket(stack, b.s("ArtifactBucket"), &awss3.BucketProps{
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
		LifecycleRules: &[]*awss3.LifecycleRule{
			expire("expire-exports", PrefixExports, p.ExportsExpiryDays),
			expire("expire-manifests", PrefixManifests, p.ManifestsExpiryDays),
			expire("expire-map-results", PrefixMapResults, p.MapResultsExpiryDays),
			expire("expire-claim-checks", PrefixClaimCheck, p.ClaimChecksExpiryDays),
			expire("expire-quarantine", PrefixQuarantine, p.QuarantineExpiryDays),
		},
	})
	suppressArtifactBucketFindings(b.bucket)

	// --- table -----------------------------------------------------------------
	b.table = awsdynamodb.NewTable(stack, b.s("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: b.s("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: b.s("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       b.key,
		TimeToLiveAttribute: b.s("ttl"),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	suppress(b.table, nagRule{id: "HIPAA.Security-DynamoDBInBackupPlan", reason: "Point-in-time recovery keeps continuous backups of the table for 35 days and deletion protection is on; the table holds only the pipeline's coordination state (run lock, checkpoint, run history, export ledger), no PHI, and an AWS Backup plan would add a second copy of that state without a recovery it does not already have."})

	// --- queues ----------------------------------------------------------------
	// Visibility timeouts (6 × the consumer's timeout) and maxReceiveCount
	// come from the settings cdc-local runs with too.
	set := b.set
	queue := func(id string, consumer stackconfig.Function) (awssqs.Queue, awssqs.Queue) {
		dlq := awssqs.NewQueue(stack, b.s(id+"DeadLetterQueue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		})
		q := awssqs.NewQueue(stack, b.s(id+"Queue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			VisibilityTimeout:   seconds(stackconfig.VisibilityTimeout(consumer)),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(4)),
			DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(set.MaxReceiveCount)},
		})
		return q, dlq
	}
	startQ, startDLQ := queue("Start", set.StartExport)
	recheckQ, recheckDLQ := queue("Recheck", set.CheckExport)

	// --- event bus and archive -----------------------------------------------------
	// The bus and its archive hold every resource in full (PHI): both are
	// encrypted with the stack's key. The key policy names the bus by an ARN
	// built from the EventBusName prop (the bus itself depends on the key).
	busArn := arn("events", "event-bus/", p.EventBusName)
	archiveName := archiveNameOf(pipeline)
	archiveArn := awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:archive/"+archiveName), nil)
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("EventBridgeDescribeKey"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("events.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:DescribeKey"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": account}},
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
	bus := awsevents.NewEventBus(stack, b.s("EventBus"), &awsevents.EventBusProps{
		EventBusName: p.EventBusName,
		Description:  b.s("healthlake-cdc change events of " + pipeline),
	})
	// Set on the resource itself, so the key policy is the one above and not
	// one CDK would derive.
	bus.Node().DefaultChild().(awsevents.CfnEventBus).SetKmsKeyIdentifier(b.key.KeyArn())
	awsevents.NewCfnArchive(stack, b.s("EventArchive"), &awsevents.CfnArchiveProps{
		ArchiveName:      b.s(archiveName),
		SourceArn:        bus.EventBusArn(),
		RetentionDays:    p.ArchiveRetentionDays,
		Description:      b.s("Every event of the healthlake-cdc bus, for replay"),
		KmsKeyIdentifier: b.key.KeyArn(),
	})

	// --- the change events' schema, for consumers ------------------------------------
	evSchema := newEventSchema(stack, pipeline, b.cfg.EventSource, b.cfg.DetailType, b.schemaContent)

	// --- role HealthLake assumes to write the export ---------------------------------
	exportRole := awsiam.NewRole(stack, b.s("HealthLakeExportRole"), &awsiam.RoleProps{
		Description: b.s("Assumed by HealthLake to write $export output to exports/ of the artifact bucket"),
		AssumedBy: awsiam.NewServicePrincipal(b.s("healthlake.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"aws:SourceAccount": account},
				"ArnEquals":    map[string]any{"aws:SourceArn": b.datastoreArn},
			},
		}),
	})

	// --- Lambdas ---------------------------------------------------------------------
	type fn struct {
		f    awslambda.Function
		role awsiam.Role
		logs awslogs.LogGroup
	}
	common := map[string]*string{
		"CDC_PIPELINE_NAME":       b.s(pipeline),
		"CDC_BUCKET":              b.bucket.BucketName(),
		"CDC_HEALTHLAKE_ENDPOINT": awscdk.Fn_Sub(b.s("https://healthlake.${AWS::Region}.${AWS::URLSuffix}"), nil),
	}
	// newFn creates a Lambda whose timeout, memory and derived environment
	// (stackconfig.Config.Env) come from the settings; env adds the rest.
	newFn := func(id, name, desc string, env map[string]*string) fn {
		sf, ok := set.Function(name)
		if !ok {
			panic("no settings for Lambda " + name) // Lambdas and stackconfig name the same four
		}
		role := awsiam.NewRole(stack, b.s(id+"Role"), &awsiam.RoleProps{
			Description: b.s("Execution role of the " + name + " Lambda"),
			AssumedBy:   awsiam.NewServicePrincipal(b.s("lambda.amazonaws.com"), nil),
		})
		lg := b.logGroup(id+"Logs", nil)
		vars := map[string]*string{"CDC_PIPELINE_NAME": common["CDC_PIPELINE_NAME"], "CDC_BUCKET": common["CDC_BUCKET"]}
		// From the settings: prepare-change's PutEvents rate and deadline
		// margin; check-export's batch and manifest limits, re-check cap
		// and export wait; run-lock's lease, overlap and window cap.
		for k, v := range cdkEnv(set.Env(name)) {
			vars[k] = v
		}
		for k, v := range env {
			vars[k] = v
		}
		f := awslambda.NewFunction(stack, b.s(id), &awslambda.FunctionProps{
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
			// Function-level concurrency (HIPAA Security LambdaConcurrency):
			// prepare-change at the Map's concurrency, so the pipeline's
			// PutEvents share holds; the others at what their callers need.
			ReservedConcurrentExecutions: jsii.Number(reservedConcurrency(name, set.MapMaxConcurrency)),
		})
		suppressLambdaFindings(f)
		return fn{f: f, role: role, logs: lg}
	}

	runLock := newFn("RunLock", "run-lock", "healthlake-cdc: lock, window, commit and failure of a run", map[string]*string{
		"CDC_TABLE":               b.table.TableName(),
		"CDC_DATASTORE_ID":        p.DatastoreID,
		"CDC_HEALTHLAKE_ENDPOINT": common["CDC_HEALTHLAKE_ENDPOINT"],
		"CDC_SAFETY_LAG":          p.SafetyLag,
		"CDC_INITIAL_CHECKPOINT":  p.InitialCheckpoint,
	})
	startExport := newFn("StartExport", "start-export", "healthlake-cdc: starts the HealthLake $export of a run", map[string]*string{
		"CDC_TABLE":               b.table.TableName(),
		"CDC_DATASTORE_ID":        p.DatastoreID,
		"CDC_HEALTHLAKE_ENDPOINT": common["CDC_HEALTHLAKE_ENDPOINT"],
		"CDC_EXPORT_ROLE_ARN":     exportRole.RoleArn(),
		"CDC_KMS_KEY_ID":          b.key.KeyArn(),
		"CDC_RECHECK_QUEUE_URL":   recheckQ.QueueUrl(),
		"CDC_RESOURCE_TYPES":      p.ResourceTypes,
	})
	checkExport := newFn("CheckExport", "check-export", "healthlake-cdc: polls the export, writes the manifest, answers the task token", map[string]*string{
		"CDC_TABLE":               b.table.TableName(),
		"CDC_DATASTORE_ID":        p.DatastoreID,
		"CDC_HEALTHLAKE_ENDPOINT": common["CDC_HEALTHLAKE_ENDPOINT"],
		"CDC_RECHECK_QUEUE_URL":   recheckQ.QueueUrl(),
	})
	prepareChange := newFn("PrepareChange", "prepare-change", "healthlake-cdc: one batch of export files to change events", map[string]*string{
		"CDC_EXPORT_ROLE_ARN": exportRole.RoleArn(),
		"CDC_KMS_KEY_ID":      b.key.KeyArn(),
		"CDC_RESOURCE_TYPES":  p.ResourceTypes,
		"CDC_EXCLUDE_TYPES":   p.ExcludeTypes,
		"CDC_EVENT_BUS":       bus.EventBusName(),
		"CDC_EVENT_SOURCE":    b.s(b.cfg.EventSource),
		"CDC_DETAIL_TYPE":     b.s(b.cfg.DetailType),
		"CDC_MAX_ENTRY_BYTES": numString(p.MaxEntryBytes),
		"CDC_VALIDATE":        p.ValidateLevel,
	})
	// The reconciliation's Lambda (docs/RECONCILE.md): plan, index, compare, finish.
	reconcileFn := newFn("Reconcile", reconcileLambda, "healthlake-cdc: reconciliation of the delivered index with a full export",
		b.reconcileEnv(common, bus.EventBusName()))

	// Event-source mappings (start queue → start-export, re-check queue →
	// check-export). Built without SqsEventSource so that CDK adds no grants
	// of its own: the roles' statements all come from internal/iampolicy.
	startExport.f.AddEventSourceMapping(b.s("StartQueueMapping"), &awslambda.EventSourceMappingOptions{
		EventSourceArn: startQ.QueueArn(), BatchSize: jsii.Number(1), ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency: jsii.Number(2),
	})
	checkExport.f.AddEventSourceMapping(b.s("RecheckQueueMapping"), &awslambda.EventSourceMappingOptions{
		EventSourceArn: recheckQ.QueueArn(), BatchSize: jsii.Number(1), ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency: jsii.Number(2),
	})

	// --- HealthLake job events: an immediate re-check (polling stays the fallback) ---
	b.jobEventRule(recheckQ)

	// --- state machine -----------------------------------------------------------
	smArn := awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"+smName), nil)
	smRole := awsiam.NewRole(stack, b.s("StateMachineRole"), &awsiam.RoleProps{
		Description: b.s("Role of the healthlake-cdc state machine " + smName),
		AssumedBy: awsiam.NewServicePrincipal(b.s("states.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": account}},
		}),
	})

	// The numeric placeholders come from the settings, so the export wait's
	// HeartbeatSeconds and TimeoutSeconds, the Map's MaxConcurrency (the
	// divisor of CDC_PUTEVENTS_RATE) and the execution's TimeoutSeconds
	// (below the run-lock lease) are the values Validate checked.
	num := func(d time.Duration) *string { return jsii.String(strconv.Itoa(stackconfig.Seconds(d))) }
	subs := map[string]*string{
		statemachine.RunLockFunctionArn:       runLock.f.FunctionArn(),
		statemachine.PrepareChangeFunctionArn: prepareChange.f.FunctionArn(),
		statemachine.StartQueueURL:            startQ.QueueUrl(),
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

	smLogs := b.logGroup("StateMachineLogs", b.s("/aws/vendedlogs/states/"+smName))
	sm := awsstepfunctions.NewStateMachine(stack, b.s("StateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        b.s(smName),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(b.s(asl)),
		DefinitionSubstitutions: &smSubs,
		Role:                    smRole,
		Logs: &awsstepfunctions.LogOptions{
			Destination:          smLogs,
			Level:                awsstepfunctions.LogLevel_ALL,
			IncludeExecutionData: jsii.Bool(false),
		},
		TracingEnabled: jsii.Bool(true),
	})
	b.suppressGeneratedStateMachineGrants(smRole)
	rec := b.reconcileMachine(subs, reconcileFn.f.FunctionArn())

	// --- schedule ----------------------------------------------------------------------
	expr := b.scheduleExpression(p.ScheduleMinutes)
	schedRole := awsiam.NewRole(stack, b.s("SchedulerRole"), &awsiam.RoleProps{
		Description: b.s("Lets EventBridge Scheduler start " + smName),
		AssumedBy: awsiam.NewServicePrincipal(b.s("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": account}},
		}),
	})

	// --- IAM: every role's statements from the one definition ---------------
	res := iampolicy.Resources{
		BucketARN:       *b.bucket.BucketArn(),
		TableARN:        *b.table.TableArn(),
		KeyARN:          *b.key.KeyArn(),
		DatastoreARN:    *b.datastoreArn,
		StartQueueARN:   *startQ.QueueArn(),
		RecheckQueueARN: *recheckQ.QueueArn(),
		EventBusARN:     *bus.EventBusArn(),
		// The state machine's ARN is built from its fixed name: its own
		// role may name it without a dependency cycle.
		StateMachineARN:          *smArn,
		ExecutionsARN:            *executionsArn(smName),
		MapRunExecutionsARN:      *mapRunExecutionsArn(smName),
		RunLockFunctionARN:       *runLock.f.FunctionArn(),
		PrepareChangeFunctionARN: *prepareChange.f.FunctionArn(),
		ExportRoleARN:            *exportRole.RoleArn(),
		LogGroupARNs: map[iampolicy.Principal]string{
			iampolicy.RunLock: *runLock.logs.LogGroupArn(), iampolicy.StartExport: *startExport.logs.LogGroupArn(),
			iampolicy.CheckExport: *checkExport.logs.LogGroupArn(), iampolicy.PrepareChange: *prepareChange.logs.LogGroupArn(),
			iampolicy.Reconcile: *reconcileFn.logs.LogGroupArn(),
		},
		ReconcileFunctionARN:         *reconcileFn.f.FunctionArn(),
		ReconcileStateMachineARN:     *rec.arn,
		ReconcileExecutionsARN:       *executionsArn(rec.name),
		ReconcileMapRunExecutionsARN: *mapRunExecutionsArn(rec.name),
	}
	for p, role := range map[iampolicy.Principal]awsiam.Role{
		iampolicy.RunLock: runLock.role, iampolicy.StartExport: startExport.role, iampolicy.CheckExport: checkExport.role,
		iampolicy.PrepareChange: prepareChange.role, iampolicy.StateMachine: smRole, iampolicy.HealthLakeExport: exportRole,
		iampolicy.Scheduler: schedRole, iampolicy.Reconcile: reconcileFn.role, iampolicy.ReconcileStateMachine: rec.role,
	} {
		applyPolicy(role, p, res)
	}
	b.reconcileSchedule(rec, schedRole)
	awsscheduler.NewCfnSchedule(stack, b.s("Schedule"), &awsscheduler.CfnScheduleProps{
		Description:        b.s("Starts " + smName + " every ScheduleMinutes minutes"),
		ScheduleExpression: expr,
		State:              p.ScheduleState,
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: b.s("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     sm.StateMachineArn(),
			RoleArn: schedRole.RoleArn(),
			Input:   b.s("{}"),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumEventAgeInSeconds: jsii.Number(60),
				MaximumRetryAttempts:     jsii.Number(2),
			},
		},
	})

	// --- alarms --------------------------------------------------------------------
	topic := awssns.NewTopic(stack, b.s("AlarmTopic"), &awssns.TopicProps{
		DisplayName: b.s("healthlake-cdc alarms " + pipeline),
		MasterKey:   b.key,
		EnforceSSL:  jsii.Bool(true),
	})
	// The e-mail subscription: for a literal address at synth, for a token
	// (a parameter) through a condition on it being empty.
	if unresolved(p.AlarmEmail) || *p.AlarmEmail != "" {
		sub := awssns.NewCfnSubscription(stack, b.s("AlarmEmailSubscription"), &awssns.CfnSubscriptionProps{
			TopicArn: topic.TopicArn(),
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
	action := awscloudwatchactions.NewSnsAction(topic)
	var alarms []interfacesawscloudwatch.IAlarmRef
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
		alarms = append(alarms, a)
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	alarm("StartDeadLetterAlarm", "A start message reached the start dead-letter queue: a run's export never started.",
		startDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("RecheckDeadLetterAlarm", "A re-check message reached the re-check dead-letter queue: an export is no longer followed.",
		recheckDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: b.s("Maximum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("ExecutionFailedAlarm", "A pipeline execution failed; the checkpoint did not move and the next run retries the window.",
		sm.MetricFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: b.s("Sum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	alarm("CheckpointLagAlarm", "The checkpoint lags behind now by more than CheckpointLagThresholdSeconds.",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     b.s(MetricNamespace),
			MetricName:    b.s(MetricCheckpointLag),
			DimensionsMap: &map[string]*string{MetricDimension: b.s(pipeline)},
			Statistic:     b.s("Maximum"),
			Period:        five,
		}),
		// Every run, refused ones too, reports the lag: no data for three periods means the
		// pipeline stopped (schedule off, run-lock failing) — exactly what this alarm is for.
		p.CheckpointLagThresholdSeconds, 3, awscloudwatch.TreatMissingData_BREACHING)
	// Lines that did not reach the bus. The descriptions say where to look;
	// they name no resource (alarm notifications leave the account).
	pipelineSum := func(name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     b.s(MetricNamespace),
			MetricName:    b.s(name),
			DimensionsMap: &map[string]*string{MetricDimension: b.s(pipeline)},
			Statistic:     b.s("Sum"),
			Period:        five,
		})
	}
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
		rec.sm.MetricFailed(&awscloudwatch.MetricOptions{Period: five, Statistic: b.s("Sum")}),
		jsii.Number(0), 1, awscloudwatch.TreatMissingData_NOT_BREACHING)

	// --- dashboard ----------------------------------------------------------------
	dash := newDashboard(stack, dashboardInputs{
		pipeline: pipeline, stateMachine: sm, alarms: alarms,
		deadLetterQueues: map[string]awssqs.IQueue{"start DLQ": startDLQ, "re-check DLQ": recheckDLQ},
		lagThreshold:     p.CheckpointLagThresholdSeconds,
	})

	*b.out = Pipeline{Construct: b.out.Construct, Props: b.out.Props,
		Key: b.key, Bucket: b.bucket, Table: b.table, Bus: bus, StateMachine: sm, AlarmTopic: topic, Dashboard: dash,
		SchemaRegistry: evSchema.registry, EventSchema: evSchema.schema,
		StartQueue: startQ, RecheckQueue: recheckQ, StartDeadLetterQueue: startDLQ, RecheckDeadLetterQueue: recheckDLQ,
		ReconcileStateMachine: rec.sm}

	// --- outputs ------------------------------------------------------------------
	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(stack, b.s(id), &awscdk.CfnOutputProps{Value: v, Description: b.s(desc)})
	}
	out("StateMachineArn", sm.StateMachineArn(), "The pipeline state machine")
	out("ReconcileStateMachineArn", rec.sm.StateMachineArn(), "CDC_RECONCILE_STATE_MACHINE_ARN for cdcctl reconcile")
	out("TableName", b.table.TableName(), "CDC_TABLE for cdcctl")
	out("BucketName", b.bucket.BucketName(), "CDC_BUCKET for cdcctl")
	out("EventBusArn", bus.EventBusArn(), "The change event bus")
	out("SchemaRegistryName", evSchema.registry.AttrRegistryName(), "Schema registry of the change events")
	out("EventSchemaArn", evSchema.schema.AttrSchemaArn(), "Registered schema of the change events (OpenAPI 3)")
	out("ExportRoleArn", exportRole.RoleArn(), "Role HealthLake assumes to write exports")
	out("AlarmTopicArn", topic.TopicArn(), "Alarm notifications")
	out("DashboardName", dash.DashboardName(), "CloudWatch dashboard of the pipeline")
	out("StartQueueUrl", startQ.QueueUrl(), "CDC_START_QUEUE_URL for cdcctl dlq")
	out("StartDeadLetterQueueUrl", startDLQ.QueueUrl(), "CDC_START_DLQ_URL for cdcctl dlq")
	out("RecheckQueueUrl", recheckQ.QueueUrl(), "CDC_RECHECK_QUEUE_URL for cdcctl dlq")
	out("RecheckDeadLetterQueueUrl", recheckDLQ.QueueUrl(), "CDC_RECHECK_DLQ_URL for cdcctl dlq")
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
