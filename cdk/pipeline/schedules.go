// The EventBridge Scheduler schedules that start the runs and the
// reconciliation.

package pipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"
)

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

// schedules starts the reconciliation on its schedule (reconcileSchedule)
// and the pipeline every ScheduleMinutes.
func (b *builder) schedules() {
	expr := b.scheduleExpression(b.p.ScheduleMinutes)
	b.reconcileSchedule(b.rec, b.schedRole)
	schedule := awsscheduler.NewCfnSchedule(b.stack, b.s("Schedule"), &awsscheduler.CfnScheduleProps{
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
	b.afterDatastoreCheck(schedule)
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
