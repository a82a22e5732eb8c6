package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// sqsCall is one JSON-protocol SQS request of op with body.
func sqsCall(op, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", "AmazonSQS."+op)
	return r
}

// goaws looks queues up without its lock, so a queue created or deleted
// while other requests ran could end the process ("concurrent map read and
// map write", seen in CI). Behind the gate no request runs while
// CreateQueue or DeleteQueue does.
func TestNoRequestRunsWhileAQueueIsCreatedOrDeleted(t *testing.T) {
	var writing, reading atomic.Int32
	var overlaps atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Amz-Target") {
		case "AmazonSQS.CreateQueue", "AmazonSQS.DeleteQueue":
			writing.Add(1)
			if reading.Load() != 0 || writing.Load() != 1 {
				overlaps.Add(1)
			}
			time.Sleep(time.Millisecond)
			writing.Add(-1)
		default:
			reading.Add(1)
			if writing.Load() != 0 {
				overlaps.Add(1)
			}
			time.Sleep(time.Millisecond)
			reading.Add(-1)
		}
		_, _ = w.Write([]byte("{}"))
	})
	gate := sqsGated{next: next}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ops := []string{"SendMessage", "CreateQueue", "GetQueueUrl", "DeleteQueue", "DeleteMessageBatch"}
			for n := 0; n < 50; n++ {
				gate.ServeHTTP(httptest.NewRecorder(), sqsCall(ops[(i+n)%len(ops)], `{"QueueUrl":"http://h/000000000000/q"}`))
			}
		}(i)
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d requests ran while a queue was created or deleted", n)
	}
}

// A long poll does not hold the gate while it waits: it asks goaws for
// receives that do not wait, 100 ms apart, so a CreateQueue sent during a
// 5-second poll is served at once, and the poll still lasts its 5 seconds.
func TestALongPollLetsQueuesBeCreated(t *testing.T) {
	var slices atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" {
			var in struct{ WaitTimeSeconds int }
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &in)
			if in.WaitTimeSeconds != 0 {
				t.Errorf("a receive asked goaws to wait %d s, want 0", in.WaitTimeSeconds)
			}
			slices.Add(1)
		}
		_, _ = w.Write([]byte("{}"))
	})
	gate := sqsGated{next: next}
	start := time.Now()
	done := make(chan time.Duration)
	go func() {
		gate.ServeHTTP(httptest.NewRecorder(), sqsCall("ReceiveMessage", `{"QueueUrl":"http://h/000000000000/q","WaitTimeSeconds":5}`))
		done <- time.Since(start)
	}()
	time.Sleep(200 * time.Millisecond)
	created := time.Now()
	gate.ServeHTTP(httptest.NewRecorder(), sqsCall("CreateQueue", `{"QueueName":"q2"}`))
	if took := time.Since(created); took > 500*time.Millisecond {
		t.Errorf("CreateQueue waited %s for the long poll", took)
	}
	if polled := <-done; polled < 5*time.Second || slices.Load() < 20 {
		t.Errorf("the 5-second poll answered after %s in %d receives", polled, slices.Load())
	}
}

// A long poll still waits for its whole WaitTimeSeconds when the queue
// stays empty, and still answers as soon as a message arrives.
func TestLongPollWaitsAndAnswersOnArrival(t *testing.T) {
	ctx := context.Background()
	env := startTest(t)
	c := sqs.NewFromConfig(env.Config())
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("poll-%d", time.Now().UnixNano()%1e9))})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 3})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("empty queue: %d messages, %v", len(out.Messages), err)
	}
	if waited := time.Since(start); waited < 3*time.Second {
		t.Errorf("an empty long poll of 3 s answered after %s", waited)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, _ = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("late")})
	}()
	start = time.Now()
	out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 10})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "late" {
		t.Fatalf("long poll: %+v, %v; want the message sent after 1.5 s", out.Messages, err)
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Errorf("the long poll answered %s after the start, not when the message came (1.5 s)", waited)
	}
}
