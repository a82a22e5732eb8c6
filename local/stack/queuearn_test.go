package stack

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The stack's queues answer QueueArn in the stack's Region and account:
// the ARN IAM statements, event-source mappings and rule targets name.
func TestQueueArnsCarryTheRegion(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = -1 })
	c := sqs.NewFromConfig(st.Config)
	for _, u := range []string{st.Res.StartQueueURL, st.Res.StartDLQURL, st.Res.RecheckQueueURL, st.Res.RecheckDLQURL} {
		out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		want := "arn:aws:sqs:" + st.Env.Region + ":" + st.Env.AccountID + ":" + lastSegment(u)
		if got := out.Attributes["QueueArn"]; got != want || st.Env.Region == "" {
			t.Errorf("%s: QueueArn = %q, want %q", u, got, want)
		}
	}
}
