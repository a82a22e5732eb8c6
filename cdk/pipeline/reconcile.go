package pipeline

import (
	"fmt"
	_ "time/tzdata" // ReconcileTimeZone is checked against the embedded IANA database

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
	// Execution data would hold the plan's keys and counts only, but the
	// export wait's output names export files: the same rule as the
	// pipeline's machine (standardMachine).
	r.sm = b.standardMachine("ReconcileStateMachine", name, def, rsubs, r.role)
	return r
}

// reconcileSchedule starts the reconciliation at ReconcileHour in
// ReconcileTimeZone, daily or every ReconcileEvery hours (settings:
// synth-time; stackconfig.Config.ReconcileCron), with the scheduler role,
// in the pipeline schedule's state (pausing the pipeline pauses the
// reconciliation too). A rate() would fire at whatever hour the stack was
// deployed.
func (b *builder) reconcileSchedule(r reconciliation, schedRole awsiam.Role) {
	schedule := awsscheduler.NewCfnSchedule(b.stack, b.s("ReconcileSchedule"), &awsscheduler.CfnScheduleProps{
		Description:                b.s("Starts " + r.name + " (the ReconcileEvery, ReconcileHour and ReconcileTimeZone settings)"),
		ScheduleExpression:         b.s(b.set.ReconcileCron()),
		ScheduleExpressionTimezone: b.s(b.set.ReconcileTimeZone),
		State:                      b.p.ScheduleState,
		FlexibleTimeWindow:         &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: b.s("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     r.sm.StateMachineArn(),
			RoleArn: schedRole.RoleArn(),
			Input:   b.s("{}"),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumEventAgeInSeconds: jsii.Number(3600),
				MaximumRetryAttempts:     jsii.Number(2),
			},
			DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: b.eventsDLQ.QueueArn()},
		},
	})
	b.afterDatastoreCheck(schedule)
}

// The reconcile Lambda's name in Lambdas and the settings.
const reconcileLambda = stackconfig.Reconcile
