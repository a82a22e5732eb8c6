// The alarms an operator is paged by, and their topic.

package pipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

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
