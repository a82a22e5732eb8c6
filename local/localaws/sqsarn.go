package localaws

import (
	"strings"

	"github.com/Admiral-Piett/goaws/app/models"
)

// completeQueueARN gives the queue goaws has just created the ARN SQS gives
// it, arn:aws:sqs:{region}:{account}:{name}. goaws builds the ARN from its
// environment's Region, which stays empty because goaws would also put the
// Region into the host of every queue URL (a host that does not resolve to
// the endpoint); so each new queue's ARN is completed here, with the Env's
// Region, right after goaws created it (sqsGated). GetQueueAttributes
// (QueueArn, a RedrivePolicy's deadLetterTargetArn) then answers it.
func completeQueueARN(name, region, account string) {
	models.SyncQueues.Lock()
	defer models.SyncQueues.Unlock()
	if q, ok := models.SyncQueues.Queues[name]; ok && strings.HasPrefix(q.Arn, "arn:aws:sqs::") {
		q.Arn = "arn:aws:sqs:" + region + ":" + account + ":" + name
	}
}
