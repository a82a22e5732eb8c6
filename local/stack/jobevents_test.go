package stack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// A consumer's rule on the pipeline's bus, created with the SDK as a user
// would, receives the pipeline's events on its SQS queue; the stack's own
// job-event rule and archive exist as the CDK app deploys them.
func TestConsumerRuleOnThePipelineBusReceivesItsEvents(t *testing.T) {
	st := startStack(t, nil)
	ctx := context.Background()
	eb := eventbridge.NewFromConfig(st.Config)
	sq := sqs.NewFromConfig(st.Config)
	qname := st.Options().Name + "-consumer"
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(qname)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String("patients"), EventBusName: aws.String(st.Res.Bus),
		EventPattern: aws.String(`{"source":["healthlake.cdc"],"detail":{"resourceType":["Patient"]}}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String(st.Res.Bus),
		Targets: []ebtypes.Target{{Id: aws.String("q"), Arn: aws.String(st.Env.ARN("sqs", qname))}}}); err != nil {
		t.Fatal(err)
	}
	if w := runWindow(t, st); w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window = %+v", w)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := st.EventBridge.WaitIdle(wctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, d := range st.Delivered.Deliveries() {
		if dd := decodeDetail(t, d); dd.ResourceType == "Patient" {
			want[d.Event.ID] = true
		}
	}
	got := map[string]bool{}
	// Receive until every event came or three long polls in a row found
	// none (a receive may come back empty while messages are in flight).
	for empty := 0; empty < 3 && len(got) < len(want); {
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			var ev fakeeventbridge.Event
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || ev.Source != "healthlake.cdc" {
				t.Fatalf("message %s: %v", aws.ToString(m.Body), err)
			}
			got[ev.ID] = true
			_, _ = sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("consumer queue got %d Patient events, the bus carried %d", len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("event %s not delivered to the consumer queue", id)
		}
	}
	r, err := eb.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(st.JobEventRuleName())})
	if err != nil || !strings.Contains(aws.ToString(r.EventPattern), st.Res.DatastoreID) {
		t.Errorf("job-event rule = %+v, %v", r, err)
	}
	a, err := eb.DescribeArchive(ctx, &eventbridge.DescribeArchiveInput{ArchiveName: aws.String(st.ArchiveName())})
	if err != nil || int(a.EventCount) != len(st.Delivered.Deliveries()) {
		t.Errorf("archive = %+v, %v; want %d events", a, err, len(st.Delivered.Deliveries()))
	}
}

// Without the job-event rule the default bus has no rule.
func TestNoJobEventRuleLeavesTheDefaultBusEmpty(t *testing.T) {
	st := startStack(t, func(o *Options) { o.NoJobEventRule = true; o.SampleSize = -1 })
	out, err := eventbridge.NewFromConfig(st.Config).ListRules(context.Background(), &eventbridge.ListRulesInput{})
	if err != nil || len(out.Rules) != 0 {
		t.Errorf("default bus rules = %+v, %v", out, err)
	}
}

// HealthLake's "Export Job Completed" event, routed by the stack's rule to
// the re-check queue, finishes the wait at once: with the first poll 200 s
// away the window still commits (runWindow gives up after 2 minutes), and
// the report carries the delay from the job's end to its manifest.
func TestJobEventEndsTheWaitBeforeThePoll(t *testing.T) {
	st := startStack(t, func(o *Options) {
		o.RecheckDelay = 200 * time.Second
		o.ExportStartup = 300 * time.Millisecond
	})
	w := runWindow(t, st)
	if w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window = %+v", w)
	}
	d := st.Report.Snapshot().ExportNotice
	if d == nil || d.Count != 1 || d.Max < 0 {
		t.Errorf("export notice = %+v, want one window's delay", d)
	}
}
