package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

// unquotedToken matches a flattened reference standing for a number in the
// dashboard body (the alarm threshold parameter), so the body parses.
var unquotedToken = regexp.MustCompile(`([:\[,])(\$\{[^}"]+\})`)

// dashboardBody returns the one dashboard's body, parsed, with references
// rendered as ${Logical.Attr} strings.
func dashboardBody(t *testing.T) map[string]any {
	t.Helper()
	_, d := oneOfType(t, "AWS::CloudWatch::Dashboard", "Dashboard")
	text := unquotedToken.ReplaceAllString(flatten(props(d)["DashboardBody"]), `$1"$2"`)
	var body map[string]any
	if err := json.Unmarshal([]byte(text), &body); err != nil {
		t.Fatalf("dashboard body is not JSON: %v\n%s", err, text)
	}
	return body
}

// dashMetric is one metric line of a widget: namespace, name, dimensions.
type dashMetric struct {
	widget, namespace, name string
	dims                    map[string]string
	stat                    string
}

func dashboardMetrics(t *testing.T) []dashMetric {
	var out []dashMetric
	for _, w := range asList(dashboardBody(t)["widgets"]) {
		title, _ := path(w, "properties", "title").(string)
		for _, m := range asList(path(w, "properties", "metrics")) {
			line, _ := m.([]any)
			dm := dashMetric{widget: title, dims: map[string]string{}}
			var plain []string
			for _, x := range line {
				switch x := x.(type) {
				case string:
					plain = append(plain, x)
				case map[string]any:
					dm.stat, _ = x["stat"].(string)
				}
			}
			if len(plain) < 2 {
				t.Fatalf("widget %q: metric line %v", title, line)
			}
			dm.namespace, dm.name = plain[0], plain[1]
			for i := 2; i+1 < len(plain); i += 2 {
				dm.dims[plain[i]] = plain[i+1]
			}
			out = append(out, dm)
		}
	}
	return out
}

// The dashboard shows what an operator needs in one place: checkpoint lag,
// events per window, the export wait and notice, the lines that did not
// reach the bus, run outcomes, both dead-letter queues and PutEvents
// throttling; pipeline metrics carry this pipeline's dimension.
func TestDashboardShowsThePipeline(t *testing.T) {
	_, d := oneOfType(t, "AWS::CloudWatch::Dashboard", "Dashboard")
	if got := path(props(d), "DashboardName"); got != DashboardName(stackName) {
		t.Errorf("dashboard name = %v", got)
	}
	smID, _ := stateMachine(t)
	startDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartDeadLetterQueue")
	recheckDLQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckDeadLetterQueue")
	type want struct{ namespace, name, dimKey, dimValue string }
	pipe := func(name string) want { return want{MetricNamespace, name, MetricDimension, stackName} }
	sfn := func(name string) want { return want{"AWS/States", name, "StateMachineArn", flatten(ref(smID))} }
	dlq := func(id string) want {
		return want{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", flatten(getAtt(id, "QueueName"))}
	}
	wants := []want{
		pipe(metrics.CheckpointLagSeconds), pipe(metrics.EventsPublished), pipe(metrics.ExportWaitSeconds),
		pipe(metrics.ExportNoticeSeconds), pipe(metrics.QuarantinedLines), pipe(metrics.EntriesFailed),
		pipe(metrics.ExportErrors), pipe(metrics.EntriesRetried),
		sfn("ExecutionsSucceeded"), sfn("ExecutionsFailed"), sfn("ExecutionsTimedOut"),
		dlq(startDLQ), dlq(recheckDLQ),
		{EventsNamespace, MetricPutEventsThrottled, "", ""},
	}
	got := dashboardMetrics(t)
	for _, w := range wants {
		found := false
		for _, m := range got {
			if m.namespace == w.namespace && m.name == w.name && (w.dimKey == "" && len(m.dims) == 0 || m.dims[w.dimKey] == w.dimValue) {
				found = true
			}
		}
		if !found {
			t.Errorf("dashboard lacks %s %s (%s=%s)", w.namespace, w.name, w.dimKey, w.dimValue)
		}
	}
	for _, m := range got {
		if m.namespace == MetricNamespace && (len(m.dims) != 1 || m.dims[MetricDimension] != stackName) {
			t.Errorf("widget %q: %s has dimensions %v, want only %s=%s", m.widget, m.name, m.dims, MetricDimension, stackName)
		}
	}
	// The checkpoint-lag widget draws the alarm's threshold parameter.
	body := fmt.Sprint(dashboardBody(t))
	if !strings.Contains(body, "${"+ParamCheckpointLagThreshold+"}") {
		t.Errorf("the checkpoint lag widget does not draw the %s parameter", ParamCheckpointLagThreshold)
	}
	// Every alarm of the stack is on the alarm status widget.
	alarmIDs, _ := ofType("AWS::CloudWatch::Alarm")
	for _, id := range alarmIDs {
		if !strings.Contains(body, "${"+id+".Arn}") {
			t.Errorf("alarm %s is not on the dashboard", id)
		}
	}
	// Metrics only: a log query widget could show resource identifiers.
	if strings.Contains(body, "SOURCE ") {
		t.Errorf("the dashboard holds a log query")
	}
}

// The cost model's footprint counts the stack's dashboards (docs/COST.md).
func TestCostModelCountsTheDashboards(t *testing.T) {
	ids, _ := ofType("AWS::CloudWatch::Dashboard")
	if want := cost.ThisFootprint().Dashboards; len(ids) != want {
		t.Errorf("the stack has %d dashboards, the cost model assumes %d: update internal/cost.ThisFootprint", len(ids), want)
	}
}
