package localaws

import (
	"context"
	"io"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// An in-memory Env serves real SDK clients without a TCP listener, inside a
// synctest bubble (which would never end if a goroutine waited on a socket).
func TestInMemoryEnvServesRealClientsInsideABubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		env, err := Start(Options{InMemory: true})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		defer func() { _ = env.Close() }()
		if !env.InMemory() || env.URL != "http://"+MemHost {
			t.Fatalf("URL = %q, InMemory = %v; want http://%s, true", env.URL, env.InMemory(), MemHost)
		}
		cfg := env.Config()
		s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
		if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("mem-bucket")}); err != nil {
			t.Fatalf("create bucket: %v", err)
		}
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("mem-bucket"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
			t.Fatalf("put: %v", err)
		}
		got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("mem-bucket"), Key: aws.String("k")})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		b, _ := io.ReadAll(got.Body)
		if string(b) != "v" {
			t.Fatalf("body = %q", b)
		}
		// A long poll waits on the fake clock, not the wall clock.
		sqsc := sqs.NewFromConfig(env.ConfigFor(AccessKeyID))
		q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("mem-q")})
		if err != nil {
			t.Fatalf("create queue: %v", err)
		}
		out, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 20})
		if err != nil || len(out.Messages) != 0 {
			t.Fatalf("receive = %v, %v; want nothing after the long poll", out, err)
		}
	})
}
