package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/statemachine"
)

// ReconcileStateMachineName returns the reconciliation state machine's name
// for a pipeline name; fixed, like StateMachineName, so its role can name
// its own child executions and run-lock can name its executions.
func ReconcileStateMachineName(pipeline string) string { return pipeline + "-Reconcile" }

// reconciliation is what reconcileMachine builds.
type reconciliation struct {
	name string
	arn  *string
	sm   awsstepfunctions.StateMachine
	role awsiam.Role
}

// reconcileMachine creates the reconciliation's state machine
// (statemachine/reconcile.asl.json, as embedded in the statemachine
// package: the definition cdc-local runs) with its own role and log group.
// subs are the pipeline's substitutions; the reconcile Lambda is added.
func (b *builder) reconcileMachine(subs map[string]*string, reconcileFnArn *string) reconciliation {
	stack := b.stack
	name := ReconcileStateMachineName(b.cfg.Name)
	r := reconciliation{name: name,
		arn: awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:"+name), nil)}
	r.role = awsiam.NewRole(stack, b.s("ReconcileStateMachineRole"), &awsiam.RoleProps{
		Description: b.s("Role of the healthlake-cdc reconciliation state machine " + name),
		AssumedBy: awsiam.NewServicePrincipal(b.s("states.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
	})
	def := string(statemachine.ReconcileDefinition())
	all := map[string]*string{statemachine.ReconcileFunctionArn: reconcileFnArn}
	for k, v := range subs {
		all[k] = v
	}
	rsubs := substitutionsOf(def, all)
	for k := range Placeholders(def) {
		if rsubs[k] == nil {
			// The embedded definition and this code are built together.
			panic(fmt.Sprintf("reconcile definition: placeholder ${%s} has no substitution", k))
		}
	}
	logs := b.logGroup("ReconcileStateMachineLogs", b.s("/aws/vendedlogs/states/"+name))
	r.sm = awsstepfunctions.NewStateMachine(stack, b.s("ReconcileStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        b.s(name),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(b.s(def)),
		DefinitionSubstitutions: &rsubs,
		Role:                    r.role,
		Logs: &awsstepfunctions.LogOptions{
			Destination: logs,
			Level:       awsstepfunctions.LogLevel_ALL,
			// Execution data would hold the plan's keys and counts only,
			// but the export wait's output names export files: keep the
			// same rule as the pipeline's machine.
			IncludeExecutionData: jsii.Bool(false),
		},
		TracingEnabled: jsii.Bool(true),
	})
	b.suppressGeneratedStateMachineGrants(r.role)
	return r
}

// reconcileSchedule starts the reconciliation every ReconcileEvery (a
// setting: synth-time), with the scheduler role, in the pipeline schedule's
// state (pausing the pipeline pauses the reconciliation too).
func (b *builder) reconcileSchedule(r reconciliation, schedRole awsiam.Role) {
	awsscheduler.NewCfnSchedule(b.stack, b.s("ReconcileSchedule"), &awsscheduler.CfnScheduleProps{
		Description:        b.s("Starts " + r.name + " (the ReconcileEvery setting)"),
		ScheduleExpression: b.s(rateExpression(b.set.ReconcileEvery)),
		State:              b.p.ScheduleState,
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: b.s("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     r.sm.StateMachineArn(),
			RoleArn: schedRole.RoleArn(),
			Input:   b.s("{}"),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumEventAgeInSeconds: jsii.Number(3600),
				MaximumRetryAttempts:     jsii.Number(2),
			},
		},
	})
}

// rateExpression is an EventBridge Scheduler rate expression for d (whole
// minutes; stackconfig.Validate checks): in days, hours or minutes,
// whichever divides it.
func rateExpression(d time.Duration) string {
	m := int64(d / time.Minute)
	unit, n := "minute", m
	switch {
	case m%(24*60) == 0:
		unit, n = "day", m/(24*60)
	case m%60 == 0:
		unit, n = "hour", m/60
	}
	if n != 1 {
		unit += "s"
	}
	return "rate(" + strconv.FormatInt(n, 10) + " " + unit + ")"
}

// reconcileEnv is the reconcile Lambda's environment besides the settings'
// (stackconfig Env: partitions and the publish rate).
func (b *builder) reconcileEnv(common map[string]*string, busName *string) map[string]*string {
	return map[string]*string{
		"CDC_TABLE":               b.table.TableName(),
		"CDC_DATASTORE_ID":        b.p.DatastoreID,
		"CDC_HEALTHLAKE_ENDPOINT": common["CDC_HEALTHLAKE_ENDPOINT"],
		"CDC_KMS_KEY_ID":          b.key.KeyArn(),
		"CDC_RESOURCE_TYPES":      b.p.ResourceTypes,
		"CDC_EXCLUDE_TYPES":       b.p.ExcludeTypes,
		"CDC_EVENT_BUS":           busName,
		"CDC_EVENT_SOURCE":        b.s(b.cfg.EventSource),
		"CDC_DETAIL_TYPE":         b.s(b.cfg.DetailType),
	}
}

// The reconcile Lambda's name in Lambdas and the settings.
const reconcileLambda = stackconfig.Reconcile
