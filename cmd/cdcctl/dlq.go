package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Environment variables naming the queues `cdcctl dlq` works on. cdc-local
// prints them; in AWS they come from the stack (see docs/OPERATIONS.md).
const (
	envStartQueueURL   = "CDC_START_QUEUE_URL"
	envStartDLQURL     = "CDC_START_DLQ_URL"
	envRecheckQueueURL = stackconfig.EnvRecheckQueueURL
	envRecheckDLQURL   = "CDC_RECHECK_DLQ_URL"
)

// Actions `cdcctl dlq` reports per message.
const (
	dlqListed   = "listed"
	dlqRedriven = "redriven"
	dlqSkipped  = "skipped"
	dlqPurged   = "purged"
	dlqFailed   = "failed"
)

func init() {
	register("dlq", command{
		summary: "list a dead-letter queue's messages (ids only); --redrive moves them back, --purge deletes them",
		run:     runDLQ,
	})
}

// dlqMessage is what `cdcctl dlq` shows of one message: ids and SQS
// attributes, never the body (the task token is shown as a digest only).
type dlqMessage struct {
	MessageID    string `json:"messageId"`
	SentAt       string `json:"sentAt,omitempty"`
	ReceiveCount int    `json:"receiveCount"`
	Kind         string `json:"kind"` // start, recheck or unknown
	RunID        string `json:"runId,omitempty"`
	ExecutionID  string `json:"executionId,omitempty"`
	JobID        string `json:"jobId,omitempty"`
	Attempt      int    `json:"attempt,omitempty"`
	Window       string `json:"window,omitempty"`
	TokenSHA256  string `json:"taskTokenSha256,omitempty"`
	Execution    string `json:"executionStatus,omitempty"` // RUNNING, FAILED, ... or "unknown"
	Action       string `json:"action"`
	Note         string `json:"note,omitempty"`
}

// dlqView is the JSON form of `cdcctl dlq`.
type dlqView struct {
	Queue     string       `json:"queue"`
	DLQURL    string       `json:"dlqUrl"`
	SourceURL string       `json:"sourceUrl,omitempty"`
	Mode      string       `json:"mode"` // list, redrive or purge
	Messages  []dlqMessage `json:"messages"`
	Redriven  int          `json:"redriven"`
	Skipped   int          `json:"skipped"`
	Purged    int          `json:"purged"`
	Failed    int          `json:"failed"`
}

// dlqBody holds the only fields of a start or re-check message cdcctl reads.
type dlqBody struct {
	TaskToken   string           `json:"taskToken"`
	ExecutionID string           `json:"executionId"`
	RunID       string           `json:"runId"`
	JobID       string           `json:"jobId"`
	Attempt     int              `json:"attempt"`
	Window      *envelope.Window `json:"window"`
}

// queueSQS is the part of the SQS client `cdcctl dlq` uses.
type queueSQS interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ListQueues(ctx context.Context, in *sqs.ListQueuesInput, opts ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ListDeadLetterSourceQueues(ctx context.Context, in *sqs.ListDeadLetterSourceQueuesInput, opts ...func(*sqs.Options)) (*sqs.ListDeadLetterSourceQueuesOutput, error)
}

// executionDescriber is the part of the Step Functions client `cdcctl dlq` uses.
type executionDescriber interface {
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

func runDLQ(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("dlq", stderr)
	queue := fs.String("queue", "", "start, recheck, or a dead-letter queue URL or name (required)")
	source := fs.String("source", "", "source queue URL for --redrive (default: from $CDC_START_QUEUE_URL / $CDC_RECHECK_QUEUE_URL or the queue's redrive policy)")
	redrive := fs.Bool("redrive", false, "move the messages whose execution still waits back to the source queue")
	purge := fs.Bool("purge", false, "delete the messages (when their runs have ended: the next run retries the window)")
	maxN := fs.Int("max", 100, "handle at most N messages")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *queue == "" {
		fmt.Fprintln(stderr, "cdcctl dlq: --queue is required: start, recheck, or a dead-letter queue URL")
		return exitUsage
	}
	if *redrive && *purge {
		fmt.Fprintln(stderr, "cdcctl dlq: choose one of --redrive and --purge")
		return exitUsage
	}
	if *maxN <= 0 {
		fmt.Fprintln(stderr, "cdcctl dlq: --max must be at least 1")
		return exitUsage
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "dlq", err.Error())
	}
	q := sqs.NewFromConfig(cfg)
	dlqURL, sourceURL, err := resolveQueues(ctx, q, *queue, *source)
	if err != nil {
		return fail(stderr, "dlq", f.explain(err))
	}
	if *redrive && sourceURL == "" {
		sourceURL, err = sourceFromRedrivePolicy(ctx, q, dlqURL)
		if err != nil {
			return fail(stderr, "dlq", err.Error())
		}
	}
	d := &dlqRun{sqs: q, sfn: sfn.NewFromConfig(cfg), dlqURL: dlqURL, sourceURL: sourceURL, max: *maxN, status: map[string]string{}}
	v := dlqView{Queue: *queue, DLQURL: dlqURL, SourceURL: sourceURL, Mode: "list"}
	switch {
	case *redrive:
		v.Mode = "redrive"
		v.Messages, err = d.redrive(ctx)
	case *purge:
		v.Mode = "purge"
		v.Messages, err = d.purge(ctx)
	default:
		v.Messages, err = d.list(ctx)
	}
	for _, m := range v.Messages {
		switch m.Action {
		case dlqRedriven:
			v.Redriven++
		case dlqSkipped:
			v.Skipped++
		case dlqPurged:
			v.Purged++
		case dlqFailed:
			v.Failed++
		}
	}
	if v.Messages == nil {
		v.Messages = []dlqMessage{}
	}
	if f.json {
		if werr := writeJSON(stdout, v); werr != nil {
			return fail(stderr, "dlq", werr.Error())
		}
	} else {
		printDLQ(stdout, v)
	}
	if err != nil {
		return fail(stderr, "dlq", f.explain(err)+"\nnothing is lost: a message is deleted from the dead-letter queue only after it was sent to the source; run the command again")
	}
	if v.Failed > 0 {
		return fail(stderr, "dlq", fmt.Sprintf("%d message(s) could not be handled; they are still in the dead-letter queue: run the command again", v.Failed))
	}
	return exitOK
}

// resolveQueues turns --queue (start, recheck, URL or name) into the
// dead-letter queue URL and, when known, its source queue URL.
func resolveQueues(ctx context.Context, q queueSQS, queue, source string) (dlqURL, sourceURL string, err error) {
	switch queue {
	case "start", "recheck":
		dlqEnv, srcEnv := envStartDLQURL, envStartQueueURL
		if queue == "recheck" {
			dlqEnv, srcEnv = envRecheckDLQURL, envRecheckQueueURL
		}
		dlqURL, sourceURL = os.Getenv(dlqEnv), os.Getenv(srcEnv)
		if dlqURL == "" {
			if dlqURL, err = findQueue(ctx, q, queue, true); err != nil {
				return "", "", fmt.Errorf("%w; %s (and %s for --redrive)", err, setHint(dlqEnv), setHint(srcEnv))
			}
		}
		if sourceURL == "" {
			sourceURL, _ = findQueue(ctx, q, queue, false)
		}
	default:
		dlqURL = queue
		if !strings.HasPrefix(queue, "https://") && !strings.HasPrefix(queue, "http://") {
			out, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
			if err != nil {
				return "", "", fmt.Errorf("find queue %q: %w (pass start, recheck or the dead-letter queue URL)", queue, err)
			}
			dlqURL = aws.ToString(out.QueueUrl)
		}
		// A known dead-letter queue given by URL keeps its known source.
		for _, p := range [][2]string{{envStartDLQURL, envStartQueueURL}, {envRecheckDLQURL, envRecheckQueueURL}} {
			if u := os.Getenv(p[0]); u != "" && u == dlqURL {
				sourceURL = os.Getenv(p[1])
			}
		}
	}
	if source != "" {
		sourceURL = source
	}
	return dlqURL, sourceURL, nil
}

// findQueue looks a queue up by the names the stacks give it: cdc-local's
// "{name}-start-dlq" / "{name}-start", CDK's "…StartDeadLetterQueue…" /
// "…StartQueue…". It succeeds only on exactly one match.
func findQueue(ctx context.Context, q queueSQS, which string, dead bool) (string, error) {
	title := strings.ToUpper(which[:1]) + which[1:]
	match := func(name string) bool {
		if dead {
			return strings.HasSuffix(name, "-"+which+"-dlq") || strings.Contains(name, title+"DeadLetterQueue")
		}
		return strings.HasSuffix(name, "-"+which) || strings.Contains(name, title+"Queue")
	}
	var found []string
	var token *string
	for {
		out, err := q.ListQueues(ctx, &sqs.ListQueuesInput{NextToken: token})
		if err != nil {
			return "", fmt.Errorf("list queues to find the %s queue: %w", which, err)
		}
		for _, u := range out.QueueUrls {
			if match(lastPathSegment(u)) {
				found = append(found, u)
			}
		}
		if out.NextToken == nil || aws.ToString(out.NextToken) == "" {
			break
		}
		token = out.NextToken
	}
	kind := "queue"
	if dead {
		kind = "dead-letter queue"
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("no %s %s found by name", which, kind)
	}
	return "", fmt.Errorf("%d %s %ss found (%s): cannot tell which one", len(found), which, kind, strings.Join(found, ", "))
}

// sourceFromRedrivePolicy asks SQS which queue sends to dlqURL.
func sourceFromRedrivePolicy(ctx context.Context, q queueSQS, dlqURL string) (string, error) {
	out, err := q.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlqURL)})
	if err == nil && len(out.QueueUrls) == 1 {
		return out.QueueUrls[0], nil
	}
	return "", fmt.Errorf("no source queue to redrive %s to: pass --source URL, or %s / %s", dlqURL, setHint(envStartQueueURL), setHint(envRecheckQueueURL))
}

func lastPathSegment(u string) string {
	if i := strings.LastIndexByte(u, '/'); i >= 0 {
		return u[i+1:]
	}
	return u
}

// dlqRun handles the messages of one dead-letter queue.
type dlqRun struct {
	sqs               queueSQS
	sfn               executionDescriber
	dlqURL, sourceURL string
	max               int
	status            map[string]string // execution ARN → status, asked once
}

// receive returns the next messages of the DLQ not seen yet, hidden for
// visibility seconds; none when the queue has no more.
func (d *dlqRun) receive(ctx context.Context, seen map[string]bool, visibility int32) ([]sqstypes.Message, error) {
	n := min(10, d.max-len(seen))
	if n <= 0 {
		return nil, nil
	}
	out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(d.dlqURL),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           visibility,
		WaitTimeSeconds:             2,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", d.dlqURL, err)
	}
	// Messages seen already came back when their visibility ran out: once
	// only those come, the queue has been gone through.
	var fresh []sqstypes.Message
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if !seen[id] {
			seen[id] = true
			fresh = append(fresh, m)
			continue
		}
		// Handled already (a skipped message): make it visible again.
		d.release(ctx, m)
	}
	return fresh, nil
}

// release makes a received message visible again at once, for a later
// --purge; an error only delays that until its visibility timeout ends.
func (d *dlqRun) release(ctx context.Context, m sqstypes.Message) {
	_, _ = d.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(d.dlqURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
	})
}

// each goes once through the dead-letter queue: every message is received
// (hidden for visibility seconds), described, and handed to act, which
// returns what was done with it.
func (d *dlqRun) each(ctx context.Context, visibility int32, act func(sqstypes.Message, dlqMessage) dlqMessage) ([]dlqMessage, error) {
	seen := map[string]bool{}
	var out []dlqMessage
	for {
		msgs, err := d.receive(ctx, seen, visibility)
		if err != nil || len(msgs) == 0 {
			return out, err
		}
		for _, m := range msgs {
			out = append(out, act(m, d.describe(ctx, m)))
		}
	}
}

// list shows the messages; each stays hidden for one second only.
func (d *dlqRun) list(ctx context.Context) ([]dlqMessage, error) {
	return d.each(ctx, 1, func(_ sqstypes.Message, v dlqMessage) dlqMessage {
		v.Action = dlqListed
		if v.Note == "" {
			v.Note = advice(v.Execution)
		}
		return v
	})
}

// redrive sends every message whose execution still waits to the source
// queue and then deletes it from the DLQ. A message is deleted only after
// it was sent, so a crash in between leaves it in both queues: the
// consumers are idempotent (export ledger, task token answered once), and
// running the command again is safe.
func (d *dlqRun) redrive(ctx context.Context) ([]dlqMessage, error) {
	if d.sourceURL == "" {
		return nil, errors.New("no source queue: pass --source URL")
	}
	return d.each(ctx, 30, func(m sqstypes.Message, v dlqMessage) dlqMessage {
		if v.Execution != "" && v.Execution != "RUNNING" && v.Execution != "unknown" {
			v.Action = dlqSkipped
			v.Note = "execution " + v.Execution + ": a redrive cannot help; the next run retries the window. Delete with --purge"
			d.release(ctx, m)
			return v
		}
		in := &sqs.SendMessageInput{QueueUrl: aws.String(d.sourceURL), MessageBody: m.Body}
		if len(m.MessageAttributes) > 0 {
			in.MessageAttributes = m.MessageAttributes
		}
		if _, err := d.sqs.SendMessage(ctx, in); err != nil {
			v.Action, v.Note = dlqFailed, "send to the source queue failed: "+err.Error()
			return v
		}
		if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			v.Action, v.Note = dlqFailed, "sent, but the delete from the dead-letter queue failed (a duplicate is harmless): "+err.Error()
			return v
		}
		v.Action = dlqRedriven
		return v
	})
}

// purge deletes the messages.
func (d *dlqRun) purge(ctx context.Context) ([]dlqMessage, error) {
	return d.each(ctx, 30, func(m sqstypes.Message, v dlqMessage) dlqMessage {
		if _, err := d.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.dlqURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			v.Action, v.Note = dlqFailed, "delete failed: "+err.Error()
			return v
		}
		v.Action = dlqPurged
		if v.Execution == "RUNNING" {
			v.Note = "its execution still waits: it fails at HeartbeatSeconds and the next run retries the window"
		}
		return v
	})
}

// describe reads the ids of a message and the state of its execution.
func (d *dlqRun) describe(ctx context.Context, m sqstypes.Message) dlqMessage {
	v := dlqMessage{MessageID: aws.ToString(m.MessageId), Kind: "unknown"}
	if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
		v.SentAt = envelope.FormatTime(time.UnixMilli(ms))
	}
	v.ReceiveCount, _ = strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)])
	var b dlqBody
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &b); err != nil {
		v.Note = fmt.Sprintf("body is not a start or re-check message (%d bytes, not shown)", len(aws.ToString(m.Body)))
		return v
	}
	v.RunID, v.ExecutionID, v.JobID, v.Attempt = b.RunID, b.ExecutionID, b.JobID, b.Attempt
	if b.Window != nil {
		v.Window = b.Window.String()
	}
	if b.TaskToken != "" {
		sum := sha256.Sum256([]byte(b.TaskToken))
		v.TokenSHA256 = hex.EncodeToString(sum[:6])
	}
	switch {
	case b.JobID != "":
		v.Kind = "recheck"
	case b.TaskToken != "":
		v.Kind = "start"
	}
	if b.ExecutionID != "" {
		v.Execution = d.executionStatus(ctx, b.ExecutionID)
	}
	return v
}

func (d *dlqRun) executionStatus(ctx context.Context, arn string) string {
	if s, ok := d.status[arn]; ok {
		return s
	}
	s := "unknown"
	out, err := d.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err == nil {
		s = string(out.Status)
	}
	d.status[arn] = s
	return s
}

// advice says what to do with a listed message, from its execution's state.
func advice(status string) string {
	switch status {
	case "RUNNING":
		return "execution still waits for its task token: --redrive (before HeartbeatSeconds run out)"
	case "", "unknown":
		return "execution state unknown: see `cdcctl status`"
	}
	return "execution " + status + ": the next run retries the window; delete with --purge"
}

func printDLQ(w io.Writer, v dlqView) {
	fmt.Fprintf(w, "dead-letter queue %s\n", v.DLQURL)
	if len(v.Messages) == 0 {
		fmt.Fprintln(w, "no messages")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE\tSENT\tRECEIVES\tKIND\tRUN\tJOB\tTOKEN\tEXECUTION\tACTION\tNOTE")
	for _, m := range v.Messages {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.MessageID, orDash(m.SentAt), m.ReceiveCount, m.Kind,
			orDash(m.RunID), orDash(m.JobID), tokenOrDash(m.TokenSHA256), orDash(m.Execution), m.Action, m.Note)
	}
	_ = tw.Flush()
	switch v.Mode {
	case "redrive":
		fmt.Fprintf(w, "redriven %d to %s, skipped %d, failed %d\n", v.Redriven, v.SourceURL, v.Skipped, v.Failed)
	case "purge":
		fmt.Fprintf(w, "purged %d, failed %d\n", v.Purged, v.Failed)
	default:
		fmt.Fprintf(w, "%d message(s); executions are listed by id: see them with `cdcctl status`\n", len(v.Messages))
	}
}

func tokenOrDash(sum string) string {
	if sum == "" {
		return "-"
	}
	return "sha256:" + sum
}
