package localaws

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/Admiral-Piett/goaws/app/models"
)

// sqsARNs serves SQS (goaws) and gives every queue it creates the ARN SQS
// gives it, arn:aws:sqs:{region}:{account}:{name}. goaws builds the ARN
// from its environment's Region, which stays empty because goaws would
// also put the Region into the host of every queue URL (a host that does
// not resolve to the endpoint); so each new queue's ARN is completed here,
// with this Env's Region, right after goaws created it. GetQueueAttributes
// (QueueArn, a RedrivePolicy's deadLetterTargetArn) then answers it.
type sqsARNs struct {
	next    http.Handler
	region  string
	account string
}

func (h sqsARNs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := createQueueName(r)
	h.next.ServeHTTP(w, r)
	if name == "" {
		return
	}
	models.SyncQueues.Lock()
	defer models.SyncQueues.Unlock()
	if q, ok := models.SyncQueues.Queues[name]; ok && strings.HasPrefix(q.Arn, "arn:aws:sqs::") {
		q.Arn = "arn:aws:sqs:" + h.region + ":" + h.account + ":" + name
	}
}

// createQueueName returns the queue name of a CreateQueue request (the JSON
// protocol's X-Amz-Target or the query protocol's Action), else "". The
// body is restored for the emulator.
func createQueueName(r *http.Request) string {
	jsonProtocol := r.Header.Get("X-Amz-Target") != ""
	if jsonProtocol && r.Header.Get("X-Amz-Target") != "AmazonSQS.CreateQueue" {
		return ""
	}
	if !jsonProtocol && r.URL.Query().Get("Action") != "CreateQueue" &&
		!strings.Contains(r.Header.Get("Content-Type"), "x-www-form-urlencoded") {
		return ""
	}
	if r.Body == nil {
		return r.URL.Query().Get("QueueName")
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	if jsonProtocol {
		var in struct{ QueueName string }
		if json.Unmarshal(body, &in) != nil {
			return ""
		}
		return in.QueueName
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	for k, v := range r.URL.Query() {
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	if form.Get("Action") != "CreateQueue" {
		return ""
	}
	return form.Get("QueueName")
}
