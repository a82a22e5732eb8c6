// The state machines: the definition's placeholders, the run and
// reconciliation machines and their log groups.

package pipeline

import (
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/statemachine"
)

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

// executionsArn matches the executions of the named state machine.
func executionsArn(smName string) *string {
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"+smName+":*"), nil)
}

// mapRunExecutionsArn matches the child executions a Distributed Map of the
// named state machine starts (execution:<name>/<map run label>:<id>).
func mapRunExecutionsArn(smName string) *string {
	return awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:"+smName+"/*"), nil)
}

// StateMachineName returns the state machine's name for a stack name. It is
// fixed (not generated) so that the state machine role can name its own
// child executions without a dependency cycle.
func StateMachineName(stackName string) string { return stackName + "-Pipeline" }
