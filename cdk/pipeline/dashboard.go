package pipeline

import (
	"sort"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

// Metrics of the AWS/Events namespace the dashboard shows.
const (
	// EventsNamespace is EventBridge's CloudWatch namespace.
	EventsNamespace = "AWS/Events"
	// MetricPutEventsThrottled counts PutEvents requests EventBridge refused
	// for throttling, account-wide (no dimension): the quota the pipeline
	// shares with every other producer of the account and Region.
	MetricPutEventsThrottled = "PutEventsApproximateThrottledCount"
)

// dashboardInputs is what the dashboard shows.
type dashboardInputs struct {
	pipeline     string
	stateMachine awsstepfunctions.StateMachine
	// deadLetterQueues by the name their line carries.
	deadLetterQueues map[string]awssqs.IQueue
	// lagThreshold is the checkpoint-lag alarm's threshold (CheckpointLagThresholdSeconds).
	lagThreshold *float64
	alarms       []interfacesawscloudwatch.IAlarmRef
	// fastPath adds the Subscriptions fast path's row (FastPath setting).
	fastPath bool
}

// DashboardName is the CloudWatch dashboard of a pipeline.
func DashboardName(pipeline string) string { return pipeline + "-Pipeline" }

// pipelineMetric is one of the pipeline's own metrics (namespace
// MetricNamespace, dimension Pipeline) with its statistic and period.
func pipelineMetric(pipeline, name, stat string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{MetricDimension: jsii.String(pipeline)},
		Statistic:     jsii.String(stat),
		Period:        period,
	})
}

// newDashboard builds the operators' picture of a pipeline: its alarms,
// checkpoint lag, what each window published, the export wait, the lines
// that did not reach the bus, run outcomes, dead-letter queue depth and
// PutEvents throttling. Widgets show metrics only: no log query, so no
// resource identifier can appear on it.
func newDashboard(scope constructs.Construct, in dashboardInputs) awscloudwatch.Dashboard {
	five := awscdk.Duration_Minutes(jsii.Number(5))
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	labelled := func(name, stat, label string) awscloudwatch.IMetric {
		return pipelineMetric(in.pipeline, name, stat, five).With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
	}
	graph := func(title string, width float64, left []awscloudwatch.IMetric, ann ...*awscloudwatch.HorizontalAnnotation) awscloudwatch.IWidget {
		p := &awscloudwatch.GraphWidgetProps{
			Title:  jsii.String(title),
			Width:  jsii.Number(width),
			Height: jsii.Number(6),
			Left:   &left,
			Period: five,
		}
		if len(ann) > 0 {
			p.LeftAnnotations = &ann
		}
		return awscloudwatch.NewGraphWidget(p)
	}
	sfnOpts := func(label string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum"), Label: jsii.String(label)}
	}
	var dlqs []awscloudwatch.IMetric
	for _, name := range sortedQueueNames(in.deadLetterQueues) {
		dlqs = append(dlqs, in.deadLetterQueues[name].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(name),
		}))
	}
	throttled := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(EventsNamespace),
		MetricName: jsii.String(MetricPutEventsThrottled),
		Statistic:  jsii.String("Sum"),
		Period:     five,
		Label:      jsii.String("PutEvents throttled (account-wide)"),
	})

	d := awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName:   jsii.String(DashboardName(in.pipeline)),
		DefaultInterval: awscdk.Duration_Hours(jsii.Number(24)),
	})
	d.AddWidgets(awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
		Title:  jsii.String("healthlake-cdc " + in.pipeline + ": alarms (runbook: docs/OPERATIONS.md)"),
		Alarms: &in.alarms,
		Width:  jsii.Number(24),
		Height: jsii.Number(3),
	}))
	d.AddWidgets(
		graph("Checkpoint lag (seconds; line = alarm threshold)", 12,
			[]awscloudwatch.IMetric{labelled(metrics.CheckpointLagSeconds, "Maximum", "checkpoint lag")},
			&awscloudwatch.HorizontalAnnotation{Value: in.lagThreshold, Label: jsii.String("CheckpointLagThresholdSeconds")}),
		graph("Events per window (5 min)", 12, []awscloudwatch.IMetric{
			labelled(metrics.EventsPublished, "Sum", "events published"),
			labelled(metrics.ResourcesExported, "Sum", "resources exported"),
			labelled(metrics.ClaimChecks, "Sum", "claim-checked"),
		}),
	)
	d.AddWidgets(
		graph("Export wait (seconds)", 12, []awscloudwatch.IMetric{
			labelled(metrics.ExportWaitSeconds, "Maximum", "export wait, max"),
			labelled(metrics.ExportWaitSeconds, "Average", "export wait, average"),
			labelled(metrics.ExportNoticeSeconds, "Maximum", "end of export to notice, max"),
			labelled(metrics.ExportQueuedSeconds, "Maximum", "export queued behind another job, max"),
		}),
		graph("Lines that did not reach the bus", 12, []awscloudwatch.IMetric{
			labelled(metrics.QuarantinedLines, "Sum", "quarantined lines"),
			labelled(metrics.EntriesFailed, "Sum", "failed entries"),
			labelled(metrics.ExportErrors, "Sum", "export error entries"),
		}),
	)
	d.AddWidgets(
		graph("Run outcomes (executions per 5 min)", 8, []awscloudwatch.IMetric{
			in.stateMachine.MetricSucceeded(sfnOpts("succeeded")),
			in.stateMachine.MetricFailed(sfnOpts("failed")),
			in.stateMachine.MetricTimedOut(sfnOpts("timed out")),
			in.stateMachine.MetricAborted(sfnOpts("aborted")),
			labelled(metrics.SkippedRuns, "Sum", "skipped (lock held)"),
		}),
		graph("Dead-letter queues (messages)", 8, dlqs),
		graph("PutEvents throttling", 8, []awscloudwatch.IMetric{
			throttled,
			labelled(metrics.EntriesRetried, "Sum", "entries retried by prepare-change"),
		}),
	)
	if in.fastPath {
		// What the windows skipped because the fast path had published
		// it, and what they published that it had not delivered (the
		// FastPathMissedAlarm's metric).
		d.AddWidgets(graph("Fast path: versions the windows skipped and missed (5 min)", 24, []awscloudwatch.IMetric{
			labelled(metrics.FastPathSkipped, "Sum", "skipped (the fast path had published them)"),
			labelled(metrics.FastPathMissed, "Sum", "missed (published by a window, not by the fast path)"),
		}))
	}
	return d
}

func sortedQueueNames(m map[string]awssqs.IQueue) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
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
