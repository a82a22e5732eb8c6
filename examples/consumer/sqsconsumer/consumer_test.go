package sqsconsumer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/replica"
	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/sqsconsumer"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

func resource(id, v string) string {
	return fmt.Sprintf(`{"resourceType":"Patient","id":%q,"meta":{"versionId":%q,"lastUpdated":"2026-11-21T10:00:0%s.000Z"}}`, id, v, v)
}

func detail(id, v, payload string) string {
	return fmt.Sprintf(`{"schemaVersion":"1","eventId":"Patient/%s/_history/%s","operation":"upsert","resourceType":"Patient","resourceId":%q,"versionId":%q,"lastUpdated":"2026-11-21T10:00:0%s.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T11:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"},%s}`,
		id, v, id, v, v, payload)
}

// envelope is the whole event an SQS target without input transformation gets.
func envelope(detail string) string {
	return `{"version":"0","id":"x","detail-type":"FHIR Resource Changed","source":"healthlake.cdc","account":"000000000000","time":"2026-11-21T10:05:00Z","region":"us-east-1","resources":[],"detail":` + detail + `}`
}

type fixture struct {
	sqs        *sqs.Client
	s3         *s3.Client
	queue, dlq string
	consumer   *sqsconsumer.Consumer
	replica    *replica.Replica
	bucket     string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	env := localawstest.Start(t)
	f := &fixture{sqs: sqs.NewFromConfig(env.Config()), s3: s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true }), bucket: "artifacts"}
	name := "consumer-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dlq, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	f.dlq = aws.ToString(dlq.QueueUrl)
	q, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"VisibilityTimeout": "1",
		"RedrivePolicy":     `{"maxReceiveCount":"2","deadLetterTargetArn":"` + env.ARN("sqs", name+"-dlq") + `"}`,
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.queue = aws.ToString(q.QueueUrl)
	if _, err := f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(f.bucket)}); err != nil {
		t.Fatal(err)
	}
	if f.replica, err = replica.Open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	f.consumer = &sqsconsumer.Consumer{Queue: f.sqs, QueueURL: f.queue, Replica: f.replica, Objects: s3getter.New(f.s3), WaitSeconds: 1}
	return f
}

func (f *fixture) send(t *testing.T, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if _, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(f.queue), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
}

// claimCheck stores body as the pipeline would and returns the resourceRef field.
func (f *fixture) claimCheck(t *testing.T, body []byte) string {
	t.Helper()
	sum := sha256.Sum256(body)
	key := "claim-check/Patient/" + hex.EncodeToString(sum[:]) + ".json"
	if _, err := f.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`"resourceRef":{"bucket":%q,"key":%q,"size":%d,"sha256":%q}`, f.bucket, key, len(body), hex.EncodeToString(sum[:]))
}

func (f *fixture) count(t *testing.T, url string) int {
	t.Helper()
	out, err := f.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	b, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return a + b
}

func TestConsumerAppliesDeletesAppliedAndLeavesPoisonToTheDLQ(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	tampered := []byte(resource("p3", "1"))
	ref := f.claimCheck(t, tampered)
	tampered[5] ^= 1
	if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(f.bucket), Key: aws.String("claim-check/Patient/" + ref[len(ref)-66:len(ref)-2] + ".json"), Body: bytes.NewReader(tampered)}); err != nil {
		t.Fatal(err)
	}
	f.send(t,
		envelope(detail("p1", "1", `"resource":`+resource("p1", "1"))),
		envelope(detail("p1", "2", `"resource":`+resource("p1", "2"))),
		envelope(detail("p1", "1", `"resource":`+resource("p1", "1"))), // older, after the newer
		detail("p2", "1", `"resource":`+resource("p2", "1")),           // a target with InputPath $.detail
		envelope(detail("p4", "1", f.claimCheck(t, []byte(resource("p4", "1"))))),
		envelope(detail("p1", "2", `"resource":`+resource("p1", "2"))), // duplicate
		`not json`,
		envelope(detail("p3", "1", ref)), // its object was tampered with
	)
	st, err := f.consumer.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The two poison messages fail at each receive. Drain's last long poll
	// (1 s) races their visibility timeout (1 s), so they may come back
	// before Drain ends: every receive is acked (6) or a failure of one of
	// them, each failing at least once.
	if st.Upserted != 4 || st.Stale != 1 || st.Duplicates != 1 || st.Acked != 6 ||
		st.Failed < 2 || st.Received != 6+st.Failed {
		t.Fatalf("stats %+v", st)
	}
	got := map[string]string{}
	if err := f.replica.Walk(func(typ, id string, body []byte) error { got[typ+"/"+id] = string(body); return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Patient/p1": resource("p1", "2"), "Patient/p2": resource("p2", "1"), "Patient/p4": resource("p4", "1")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("replica %v, want %v", got, want)
	}
	// The two failures come back and, after maxReceiveCount receives, SQS
	// moves them to the dead-letter queue; nothing else is left.
	deadline := time.Now().Add(time.Minute)
	for f.count(t, f.dlq) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("dead-letter queue has %d messages, queue %d", f.count(t, f.dlq), f.count(t, f.queue))
		}
		if _, err := f.consumer.Poll(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.count(t, f.queue); n != 0 {
		t.Fatalf("%d messages left on the queue", n)
	}
}

func TestDecodeMessageAndReason(t *testing.T) {
	d := detail("p1", "1", `"resource":`+resource("p1", "1"))
	for _, body := range []string{d, envelope(d)} {
		got, err := sqsconsumer.DecodeMessage([]byte(body))
		if err != nil || got.EventID != "Patient/p1/_history/1" {
			t.Fatalf("%s: %+v %v", body, got, err)
		}
	}
	for body, want := range map[string]string{
		`[]`: "malformed", `{}`: "malformed", `{"detail":{"schemaVersion":"2"}}`: "unsupported",
		`{"schemaVersion":"1","eventId":"Patient/p/_history/1","resourceType":"Patient","resourceId":"p","versionId":"1","operation":"merge"}`: "unsupported",
	} {
		_, err := sqsconsumer.DecodeMessage([]byte(body))
		if err == nil || sqsconsumer.Reason(err) != want {
			t.Errorf("%s: %v (%s), want %s", body, err, sqsconsumer.Reason(err), want)
		}
	}
	for err, want := range map[error]string{
		fmt.Errorf("x: %w", cdcevent.ErrChecksumMismatch): "claim-check-mismatch",
		fmt.Errorf("x: %w", s3getter.ErrNotFound):         "claim-check-missing",
		fmt.Errorf("x: %w", replica.ErrInvalid):           "malformed",
		errors.New("connection reset"):                    "error",
	} {
		if got := sqsconsumer.Reason(err); got != want {
			t.Errorf("Reason(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestNewFromEnv(t *testing.T) {
	env := map[string]string{"AWS_REGION": "us-east-1"}
	getenv := func(k string) string { return env[k] }
	if _, err := sqsconsumer.NewFromEnv(context.Background(), getenv, nil); err == nil {
		t.Fatal("no queue and no directory accepted")
	}
	env[sqsconsumer.EnvQueueURL], env[sqsconsumer.EnvReplicaDir] = "http://q", t.TempDir()
	env[sqsconsumer.EnvWaitSeconds] = "21"
	if _, err := sqsconsumer.NewFromEnv(context.Background(), getenv, nil); err == nil {
		t.Fatal("a wait over 20 s accepted")
	}
	env[sqsconsumer.EnvWaitSeconds] = "0"
	t.Setenv("AWS_REGION", "us-east-1")
	c, err := sqsconsumer.NewFromEnv(context.Background(), getenv, nil)
	if err != nil || c.QueueURL != "http://q" || c.WaitSeconds != -1 || c.Replica == nil {
		t.Fatalf("%+v %v", c, err)
	}
}
