// The Lambda functions: their shared settings, the pipeline's five and the data store check.

package pipeline

import (
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// fn is one Lambda of the pipeline with its role and log group.
type fn struct {
	f    awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
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
		HealthLakeEndpoint: *awscdk.Fn_Sub(b.s("https://"+stackconfig.HealthLakeHost(b.set.FIPSEndpoints)+".${AWS::Region}.${AWS::URLSuffix}"), nil),
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
// and res, with its own role (no statements: iamPolicies) and log group
// under the stack's key.
func (b *builder) newLambda(id, name, desc string, res stackconfig.Resources) fn {
	return b.function(id, name, desc, b.set.LambdaEnv(name, res), b.logGroup(id+"Logs", nil))
}

// function creates the Lambda name (its timeout and memory from the
// settings) with environment env and the stack's FunctionEnv, its own role
// and the log group lg.
func (b *builder) function(id, name, desc string, env map[string]string, lg awslogs.LogGroup) fn {
	sf, ok := b.set.Function(name)
	if !ok {
		panic("no settings for Lambda " + name) // the builder and stackconfig name the same Lambdas
	}
	role := awsiam.NewRole(b.stack, b.s(id+"Role"), &awsiam.RoleProps{
		Description: b.s("Execution role of the " + name + " Lambda"),
		AssumedBy:   awsiam.NewServicePrincipal(b.s("lambda.amazonaws.com"), nil),
	})
	all := b.set.FunctionEnv()
	for k, v := range env {
		all[k] = v
	}
	vars := cdkEnv(all)
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
	b.placeInVPC(f)
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
	b.datastoreCheckFunction()

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
