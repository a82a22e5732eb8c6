package localaws

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestEnvRoutesRealClientsToEachEmulator(t *testing.T) {
	ctx := context.Background()
	env := startTest(t)
	cfg := env.Config()

	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bucket-one")}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-one"), Key: aws.String("a/b.json"), Body: strings.NewReader("hello")}); err != nil {
		t.Fatalf("put: %v", err)
	}
	got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-one"), Key: aws.String("a/b.json")})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	body, _ := io.ReadAll(got.Body)
	if string(body) != "hello" {
		t.Fatalf("get body = %q, want hello", body)
	}

	sqsc := sqs.NewFromConfig(cfg)
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("env-test-q")})
	if err != nil {
		t.Fatalf("create queue: %v", err)
	}
	if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{"x":1}`)}); err != nil {
		t.Fatalf("send: %v", err)
	}
	rcv, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	if len(rcv.Messages) != 1 || aws.ToString(rcv.Messages[0].Body) != `{"x":1}` {
		t.Fatalf("received %+v, want the one message", rcv.Messages)
	}

	ddb := dynamodb.NewFromConfig(cfg)
	_, err = ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("t1"),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	_, err = ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String("t1"),
		Item:                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "RUN"}},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if err != nil {
		t.Fatalf("put item: %v", err)
	}

	calls := env.Gateway.Calls()
	for _, want := range []string{"s3:PUTObject", "s3:GETObject", "sqs:SendMessage", "sqs:ReceiveMessage", "dynamodb:PutItem"} {
		if calls[want] == 0 {
			t.Errorf("gateway did not count %s; counted %v", want, env.Gateway.CallNames())
		}
	}
}

// TestCallsAreCountedPerAccessKey: CallsBy counts each key's calls apart,
// and their sum is Calls.
func TestCallsAreCountedPerAccessKey(t *testing.T) {
	ctx := context.Background()
	env := startTest(t)
	admin := sqs.NewFromConfig(env.Config())
	role := sqs.NewFromConfig(env.ConfigFor(PrincipalAccessKeyID("fast-path")))
	q, err := admin.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("per-key-q")})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := role.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl}); err != nil {
			t.Fatal(err)
		}
	}
	adminKey, _ := env.Config().Credentials.Retrieve(ctx)
	if got := env.Gateway.CallsBy(PrincipalAccessKeyID("fast-path")); len(got) != 1 || got["sqs:ReceiveMessage"] != 3 {
		t.Errorf("the role's calls = %v, want 3 receives", got)
	}
	if got := env.Gateway.CallsBy(adminKey.AccessKeyID); len(got) != 1 || got["sqs:CreateQueue"] != 1 {
		t.Errorf("the admin's calls = %v, want its CreateQueue", got)
	}
	if got := env.Gateway.CallsBy("AKIDNEVERUSED"); len(got) != 0 {
		t.Errorf("an unused key's calls = %v", got)
	}
	if all := env.Gateway.Calls(); all["sqs:ReceiveMessage"] != 3 || all["sqs:CreateQueue"] != 1 {
		t.Errorf("Calls = %v", all)
	}
}

func TestLocalPathsAreServedBeforeServiceRouting(t *testing.T) {
	env := startTest(t)
	env.Gateway.HandleLocal("/_local/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("pong"))
	}))
	resp, err := http.Get(env.URL + "/_local/ping")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "pong" {
		t.Fatalf("GET /_local/ping = %q", body)
	}
	if n := len(env.Gateway.Calls()); n != 0 {
		t.Fatalf("local calls must not be counted as AWS calls: %v", env.Gateway.Calls())
	}
	// An unknown local path falls through to S3, as any unsigned path does.
	resp, err = http.Get(env.URL + "/_local/unknown")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if env.Gateway.Calls()["s3:GETObject"] != 1 {
		t.Fatalf("unknown local path not routed to S3: %v", env.Gateway.Calls())
	}
}

// startTest is localawstest.Start for this package's own tests (which
// cannot import it: it imports this package).
func startTest(t testing.TB) *Env {
	t.Helper()
	env, err := Start(Options{})
	if err != nil {
		t.Fatalf("start local AWS: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}
