package localaws

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// SQS refuses a DelaySeconds over 900 (and the other limited parameters
// out of range) with InvalidParameterValue; goaws alone would accept them.
func TestSQSRefusesOutOfRangeParameters(t *testing.T) {
	ctx := context.Background()
	env := startTest(t)
	c := sqs.NewFromConfig(env.Config())
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("limits-q")})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
			t.Errorf("%s: err = %v, want InvalidParameterValue", what, err)
		}
	}
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("{}"), DelaySeconds: 901})
	refused("SendMessage DelaySeconds 901", err)
	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("{}")}, {Id: aws.String("b"), MessageBody: aws.String("{}"), DelaySeconds: 1000}}})
	refused("SendMessageBatch entry DelaySeconds 1000", err)
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 21})
	refused("ReceiveMessage WaitTimeSeconds 21", err)
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 11})
	refused("ReceiveMessage MaxNumberOfMessages 11", err)
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("{}"), DelaySeconds: 900}); err != nil {
		t.Errorf("DelaySeconds 900 refused: %v", err)
	}

	// The AWS CLI (query protocol) gets the same answer.
	if _, err := exec.LookPath("aws"); err != nil {
		t.Log("aws CLI not installed; query protocol not tried")
		return
	}
	cmd := exec.Command("aws", "--endpoint-url", env.URL, "--region", "us-east-1", "sqs", "send-message",
		"--queue-url", aws.ToString(q.QueueUrl), "--message-body", "{}", "--delay-seconds", "901")
	cmd.Env = []string{"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey, "HOME=" + t.TempDir(), "PATH=/usr/bin:/bin:/usr/local/bin"}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "InvalidParameterValue") {
		t.Errorf("aws sqs send-message --delay-seconds 901: err %v\n%s", err, out)
	}
}
