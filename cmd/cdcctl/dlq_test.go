package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func newQueue(t *testing.T, s *ctlStack, name string) string {
	t.Helper()
	out, err := sqs.NewFromConfig(s.env.Config()).CreateQueue(context.Background(), &sqs.CreateQueueInput{
		QueueName: aws.String(name), Attributes: map[string]string{"VisibilityTimeout": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

func sendBody(t *testing.T, s *ctlStack, url, body string) {
	t.Helper()
	if _, err := sqs.NewFromConfig(s.env.Config()).SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(body),
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDLQListsIDsRedrivesWaitingRunsAndPurges(t *testing.T) {
	s := newCtlStack(t)
	n := ctlTableSeq.Add(1) // unique names: goaws is process-wide
	src := newQueue(t, s, fmt.Sprintf("dlqtest%d-src", n))
	dlq := newQueue(t, s, fmt.Sprintf("dlqtest%d-dlq", n))
	running := s.env.ARN("states", "execution:cdc:run-waiting")
	failed := s.env.ARN("states", "execution:cdc:run-failed")
	s.sfn.Set(t, running, "RUNNING")
	s.sfn.Set(t, failed, "FAILED")
	const token = "AAAAKgAAAAIAAAAAAAAAAVeryLongOpaqueTaskToken0123456789"
	sendBody(t, s, dlq, `{"taskToken":"`+token+`","executionId":"`+running+`","runId":"run-waiting","window":{"since":"2026-11-21T09:55:00.000Z","until":"2026-11-21T10:00:00.000Z"}}`)
	sendBody(t, s, dlq, `{"taskToken":"`+token+`x","executionId":"`+failed+`","runId":"run-failed","jobId":"job-7","attempt":3,"datastoreId":"ds"}`)
	sendBody(t, s, dlq, `Jane Secretname born 1970-01-01`)

	code, out, stderr := s.cdcctl(t, "dlq", "--queue", dlq, "--json")
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	for _, leak := range []string{token, "Secretname", "1970-01-01", "datastoreId"} {
		if strings.Contains(out, leak) {
			t.Fatalf("the listing shows message content %q:\n%s", leak, out)
		}
	}
	var v dlqView
	decodeJSON(t, out, &v)
	byRun := map[string]dlqMessage{}
	for _, m := range v.Messages {
		byRun[m.RunID] = m
		if m.Action != dlqListed || m.MessageID == "" {
			t.Errorf("listed message %+v", m)
		}
	}
	if w := byRun["run-waiting"]; len(v.Messages) != 3 || w.Kind != "start" || w.Execution != "RUNNING" || len(w.TokenSHA256) != 12 ||
		w.Window == "" || !strings.Contains(w.Note, "--redrive") {
		t.Fatalf("listing = %+v", v.Messages)
	}
	if f := byRun["run-failed"]; f.Kind != "recheck" || f.JobID != "job-7" || f.Attempt != 3 || f.Execution != "FAILED" || !strings.Contains(f.Note, "--purge") {
		t.Fatalf("re-check message = %+v", f)
	}
	if u := byRun[""]; u.Kind != "unknown" || !strings.Contains(u.Note, "not shown") {
		t.Fatalf("unparsable message = %+v", u)
	}

	// A redrive without a known source says how to name it.
	code, _, stderr = s.cdcctl(t, "dlq", "--queue", dlq, "--redrive")
	if code != exitFailure || !strings.Contains(stderr, "--source") {
		t.Fatalf("redrive without a source: exit %d: %s", code, stderr)
	}
	code, out, stderr = s.cdcctl(t, "dlq", "--queue", dlq, "--source", src, "--redrive")
	if code != exitOK || !strings.Contains(out, "redriven 2") || !strings.Contains(out, "skipped 1") {
		t.Fatalf("redrive: exit %d\n%s%s", code, out, stderr)
	}
	if got := receiveAll(t, s, src); len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), `"runId":"run-waiting"`) {
		t.Fatalf("source queue holds %q", got)
	}
	// Running it again moves nothing twice.
	code, out, _ = s.cdcctl(t, "dlq", "--queue", dlq, "--source", src, "--redrive")
	if code != exitOK || !strings.Contains(out, "redriven 0") || !strings.Contains(out, "skipped 1") {
		t.Fatalf("second redrive:\n%s", out)
	}
	code, out, _ = s.cdcctl(t, "dlq", "--queue", dlq, "--purge")
	if code != exitOK || !strings.Contains(out, "purged 1") || !strings.Contains(out, "run-failed") {
		t.Fatalf("purge:\n%s", out)
	}
	if code, out, _ = s.cdcctl(t, "dlq", "--queue", dlq); code != exitOK || !strings.Contains(out, "no messages") {
		t.Fatalf("after the purge:\n%s", out)
	}
}

func receiveAll(t *testing.T, s *ctlStack, url string) []string {
	t.Helper()
	var bodies []string
	for {
		out, err := sqs.NewFromConfig(s.env.Config()).ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 30, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
	}
}

func TestDLQUsage(t *testing.T) {
	s := newCtlStack(t)
	for _, args := range [][]string{
		{"dlq"},
		{"dlq", "--queue", "start", "--redrive", "--purge"},
		{"dlq", "--queue", "start", "--max", "0"},
	} {
		if code, _, stderr := s.cdcctl(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// listQueuesOnly answers ListQueues with fixed URLs.
type listQueuesOnly struct {
	queueSQS
	urls []string
}

func (l listQueuesOnly) ListQueues(context.Context, *sqs.ListQueuesInput, ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error) {
	return &sqs.ListQueuesOutput{QueueUrls: l.urls}, nil
}

func TestQueuesAreFoundByTheNamesBothStacksGive(t *testing.T) {
	t.Setenv(envStartDLQURL, "")
	t.Setenv(envStartQueueURL, "")
	t.Setenv(envRecheckDLQURL, "")
	t.Setenv(envRecheckQueueURL, "")
	ctx := context.Background()
	local := listQueuesOnly{urls: []string{"http://h/0/cdc-start", "http://h/0/cdc-start-dlq", "http://h/0/cdc-recheck", "http://h/0/cdc-recheck-dlq"}}
	dlq, src, err := resolveQueues(ctx, local, "recheck", "")
	if err != nil || dlq != "http://h/0/cdc-recheck-dlq" || src != "http://h/0/cdc-recheck" {
		t.Fatalf("local names: %q %q %v", dlq, src, err)
	}
	cdk := listQueuesOnly{urls: []string{
		"https://sqs/1/HealthLakeCdc-StartQueueA1B2-xyz", "https://sqs/1/HealthLakeCdc-StartDeadLetterQueueC3D4-abc",
		"https://sqs/1/HealthLakeCdc-RecheckQueueE5-def", "https://sqs/1/HealthLakeCdc-RecheckDeadLetterQueueF6-ghi",
	}}
	dlq, src, err = resolveQueues(ctx, cdk, "start", "")
	if err != nil || !strings.Contains(dlq, "StartDeadLetterQueue") || !strings.Contains(src, "StartQueue") {
		t.Fatalf("CDK names: %q %q %v", dlq, src, err)
	}
	two := listQueuesOnly{urls: []string{"http://h/0/a-start-dlq", "http://h/0/b-start-dlq"}}
	if _, _, err := resolveQueues(ctx, two, "start", ""); err == nil || !strings.Contains(err.Error(), envStartDLQURL) {
		t.Fatalf("two candidates: %v", err)
	}
	t.Setenv(envStartDLQURL, "http://h/0/a-start-dlq")
	t.Setenv(envStartQueueURL, "http://h/0/a-start")
	if dlq, src, err := resolveQueues(ctx, two, "start", ""); err != nil || dlq != "http://h/0/a-start-dlq" || src != "http://h/0/a-start" {
		t.Fatalf("from the environment: %q %q %v", dlq, src, err)
	}
	if dlq, src, err := resolveQueues(ctx, two, "http://h/0/a-start-dlq", ""); err != nil || dlq != "http://h/0/a-start-dlq" || src != "http://h/0/a-start" {
		t.Fatalf("a known DLQ by URL: %q %q %v", dlq, src, err)
	}
}
