package exportjob_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging/loggingtest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	table  = "cdc"
	bucket = "artifacts"
	dsID   = "ds1"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var queueSeq atomic.Int64

// world is one test's local AWS: gateway, emulators, real SDK clients.
type world struct {
	t         *testing.T
	env       *localaws.Env
	hl        *fakehealthlake.Emulator
	sfn       *fakesfn.Emulator
	s3        *s3.Client
	ddb       *dynamodb.Client
	sqs       *sqs.Client
	sfnClient *sfn.Client
	queueName string
	queueURL  string
	clk       *clock
	logs      *loggingtest.Buffer
	emf       *loggingtest.Buffer
	cfg       exportjob.Config
	deps      exportjob.Deps
	seen      int // queued messages already handed out by newMessages
}

func newWorld(t *testing.T, mutate func(*exportjob.Config)) *world {
	t.Helper()
	ctx := context.Background()
	env := localawstest.Start(t)
	awsCfg := env.Config()
	w := &world{t: t, env: env, logs: &loggingtest.Buffer{}, emf: &loggingtest.Buffer{}, clk: &clock{t: time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)}}
	w.s3 = s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	w.ddb = dynamodb.NewFromConfig(awsCfg)
	w.sqs = sqs.NewFromConfig(awsCfg)
	w.sfnClient = sfn.NewFromConfig(awsCfg)

	w.hl = fakehealthlake.New(fakehealthlake.Options{S3: w.s3, Datastores: []string{dsID}, Manual: true, Region: env.Region, AccountID: env.AccountID, Now: w.clk.Now})
	env.Gateway.Handle(localaws.ServiceHealthLake, w.hl)
	w.sfn = fakesfn.New(fakesfn.Options{Region: env.Region, AccountID: env.AccountID})
	t.Cleanup(w.sfn.Close)
	env.Gateway.Handle(localaws.ServiceSFN, w.sfn)

	if _, err := w.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	_, err := w.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		BillingMode: ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	w.queueName = fmt.Sprintf("recheck-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
	q, err := w.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(w.queueName)})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	w.queueURL = aws.ToString(q.QueueUrl)

	hl, err := fhirrest.New(fhirrest.Options{
		Endpoint: env.URL, Region: env.Region, Credentials: awsCfg.Credentials, MaxAttempts: 3,
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	w.cfg = exportjob.Config{
		Table: table, Bucket: bucket, DatastoreID: dsID,
		ExportRoleARN:   "arn:aws:iam::000000000000:role/healthlake-export",
		KMSKeyID:        "arn:aws:kms:us-east-1:000000000000:key/k1",
		RecheckQueueURL: w.queueURL,
		ResourceTypes:   []string{"Patient", "Observation"},
		MaxCheckDelay:   300 * time.Second,
	}
	if mutate != nil {
		mutate(&w.cfg)
	}
	w.deps = exportjob.Deps{
		Export:  hl,
		Jobs:    hlsdk.NewFromConfig(awsCfg),
		DB:      w.ddb,
		S3:      w.s3,
		SQS:     w.sqs,
		SFN:     w.sfnClient,
		Now:     w.clk.Now,
		Logger:  slog.New(slog.NewJSONHandler(w.logs, nil)),
		Metrics: metrics.New(w.emf, "test-pipeline"),
	}
	return w
}

// invoke runs a handler through the Lambda runtime's handler wrapper.
func (w *world) invoke(handler any, records ...events.SQSMessage) events.SQSEventResponse {
	w.t.Helper()
	payload, err := json.Marshal(events.SQSEvent{Records: records})
	if err != nil {
		w.t.Fatal(err)
	}
	out, err := lambda.NewHandler(handler).Invoke(context.Background(), payload)
	if err != nil {
		w.t.Fatalf("invoke: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		w.t.Fatalf("decode response %s: %v", out, err)
	}
	return resp
}

func (w *world) startHandler() *exportjob.StartHandler {
	w.t.Helper()
	h, err := exportjob.NewStartHandler(w.cfg, w.deps)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

func (w *world) checkHandler() *exportjob.CheckHandler {
	w.t.Helper()
	h, err := exportjob.NewCheckHandler(w.cfg, w.deps)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// queued is a message as goaws holds it.
type queued struct {
	Body      string
	DelaySecs int
}

// queuedMessages reads the re-check queue's messages from goaws's state,
// delayed ones included.
func (w *world) queuedMessages() []queued {
	models.SyncQueues.RLock()
	defer models.SyncQueues.RUnlock()
	q := models.SyncQueues.Queues[w.queueName]
	if q == nil {
		w.t.Fatalf("queue %s does not exist", w.queueName)
	}
	var out []queued
	for _, m := range q.Messages {
		out = append(out, queued{Body: m.MessageBody, DelaySecs: m.DelaySecs})
	}
	return out
}

// newMessages returns the messages queued since the last call.
func (w *world) newMessages() []queued {
	all := w.queuedMessages()
	fresh := all[w.seen:]
	w.seen = len(all)
	return fresh
}

// oneRecheck asserts exactly one new re-check message and decodes it.
func (w *world) oneRecheck() (exportjob.RecheckMessage, queued) {
	w.t.Helper()
	msgs := w.newMessages()
	if len(msgs) != 1 {
		w.t.Fatalf("new re-check messages = %d (%+v), want 1", len(msgs), msgs)
	}
	var m exportjob.RecheckMessage
	if err := json.Unmarshal([]byte(msgs[0].Body), &m); err != nil {
		w.t.Fatalf("re-check body %s: %v", msgs[0].Body, err)
	}
	return m, msgs[0]
}

func record(id string, body any) events.SQSMessage {
	var s string
	switch b := body.(type) {
	case string:
		s = b
	default:
		raw, _ := json.Marshal(b)
		s = string(raw)
	}
	return events.SQSMessage{MessageId: id, Body: s, EventSource: "aws:sqs", ReceiptHandle: "rh-" + id}
}

func window() envelope.Window {
	return envelope.Window{
		Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
		Until: time.Date(2026, 11, 21, 10, 3, 0, 0, time.UTC),
	}
}

func (w *world) startMessage(runID, token string) exportjob.StartMessage {
	return exportjob.StartMessage{
		TaskToken: token, RunID: runID, Window: window(),
		ExecutionID: "arn:aws:states:us-east-1:000000000000:execution:cdc:" + runID,
	}
}

// ledger reads the run's ledger item as strings.
func (w *world) ledger(runID string) map[string]string {
	w.t.Helper()
	out, err := w.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table),
		Key: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "EXPORT#" + runID},
			"sk": &ddbtypes.AttributeValueMemberS{Value: "JOB"},
		},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	m := map[string]string{}
	for k, v := range out.Item {
		switch x := v.(type) {
		case *ddbtypes.AttributeValueMemberS:
			m[k] = x.Value
		case *ddbtypes.AttributeValueMemberN:
			m[k] = x.Value
		}
	}
	return m
}

func (w *world) outcome(token string) fakesfn.TaskOutcome {
	w.t.Helper()
	o, ok := w.sfn.TaskOutcome(token)
	if !ok {
		w.t.Fatalf("unknown token")
	}
	return o
}

func (w *world) calls(name string) int64 { return w.env.Gateway.Calls()[name] }

// startedRun starts run runID through the start handler and returns the
// token and the first re-check message.
func (w *world) startedRun(runID string) (string, exportjob.RecheckMessage) {
	w.t.Helper()
	token := w.sfn.IssueTaskToken(time.Hour, 24*time.Hour)
	resp := w.invoke(w.startHandler().Handle, record("start-"+runID, w.startMessage(runID, token)))
	if len(resp.BatchItemFailures) != 0 {
		w.t.Fatalf("start failed: %+v\nlogs: %s", resp, w.logs)
	}
	m, _ := w.oneRecheck()
	return token, m
}

func (w *world) getObject(key string) string {
	w.t.Helper()
	out, err := w.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		w.t.Fatalf("get %s: %v", key, err)
	}
	b, _ := io.ReadAll(out.Body)
	return string(b)
}

func (w *world) loadPatients(n int) {
	w.t.Helper()
	ds, _ := w.hl.Datastore(dsID)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%04d", i)
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","active":true}`)); err != nil {
			w.t.Fatal(err)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
