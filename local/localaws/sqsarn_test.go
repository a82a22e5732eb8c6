package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// A queue's ARN is arn:aws:sqs:{region}:{account}:{name}, as SQS gives it:
// the Region is not left empty (goaws builds it from a Region it keeps
// empty so that its queue URLs stay on the endpoint's host).
func TestQueueArnCarriesTheRegion(t *testing.T) {
	ctx := context.Background()
	env := startTest(t)
	c := sqs.NewFromConfig(env.Config())
	name := fmt.Sprintf("arn-q-%d", time.Now().UnixNano()%1e9)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	want := "arn:aws:sqs:" + env.Region + ":" + env.AccountID + ":" + name
	if want != env.ARN("sqs", name) {
		t.Fatalf("Env.ARN = %s, want %s", env.ARN("sqs", name), want)
	}
	arn := func(url string) string {
		t.Helper()
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["QueueArn"]
	}
	if got := arn(aws.ToString(q.QueueUrl)); got != want {
		t.Errorf("QueueArn = %q, want %q", got, want)
	}
	// The queue URL keeps no Region in its host (goaws would put it there).
	if u := aws.ToString(q.QueueUrl); strings.Contains(u, env.Region) {
		t.Errorf("queue URL %s names the Region in its host", u)
	}
	// A redrive policy names the dead-letter queue by that ARN, and
	// reading it back gives the same ARN.
	dlq, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	dlqARN := arn(aws.ToString(dlq.QueueUrl))
	if dlqARN != want+"-dlq" {
		t.Errorf("dead-letter QueueArn = %q", dlqARN)
	}
	policy := fmt.Sprintf(`{"maxReceiveCount":"3","deadLetterTargetArn":%q}`, dlqARN)
	if _, err := c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl,
		Attributes: map[string]string{"RedrivePolicy": policy}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		t.Fatal(err)
	}
	var rp struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	}
	if err := json.Unmarshal([]byte(out.Attributes["RedrivePolicy"]), &rp); err != nil || rp.DeadLetterTargetArn != want+"-dlq" {
		t.Errorf("RedrivePolicy = %s (%v)", out.Attributes["RedrivePolicy"], err)
	}

	// The AWS CLI gets the same ARN.
	if _, err := exec.LookPath("aws"); err != nil {
		t.Log("aws CLI not installed; not tried")
		return
	}
	cliName := name + "-cli"
	for _, args := range [][]string{
		{"sqs", "create-queue", "--queue-name", cliName},
		{"sqs", "get-queue-attributes", "--queue-url", env.URL + "/" + env.AccountID + "/" + cliName, "--attribute-names", "QueueArn", "--output", "text"},
	} {
		cmd := exec.Command("aws", append([]string{"--endpoint-url", env.URL, "--region", env.Region}, args...)...)
		cmd.Env = []string{"AWS_ACCESS_KEY_ID=" + AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + SecretAccessKey, "HOME=" + t.TempDir(), "PATH=/usr/bin:/bin:/usr/local/bin"}
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, b)
		}
		if args[1] == "get-queue-attributes" && !strings.Contains(string(b), want+"-cli") {
			t.Errorf("aws sqs get-queue-attributes: %s, want %s", b, want+"-cli")
		}
	}
}
