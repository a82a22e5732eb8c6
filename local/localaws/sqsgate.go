package localaws

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
)

// sqsTable keeps goaws's queue table (a package-level map) from being read
// while CreateQueue or DeleteQueue writes it: several goaws handlers look a
// queue up without its lock, and a Go map read during a write ends the
// process ("concurrent map read and map write"). goaws's table is the
// process's, so the gate is too.
var sqsTable sync.RWMutex

// sqsGated serves goaws behind sqsTable: a request with a parameter out of
// SQS's range is refused (sqslimits.go); CreateQueue and DeleteQueue alone,
// every other request beside the others; a new queue gets its full ARN
// (completeQueueARN, with region and account). A long poll never waits inside
// goaws, which would hold the gate (and, in a synctest bubble, keep the
// clock from moving while a CreateQueue waits on the gate): it is served as
// receives that do not wait, 100 ms apart, as goaws itself polls.
type sqsGated struct {
	next            http.Handler
	region, account string
}

func (h sqsGated) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := readSQSRequest(r)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if msg := req.limitError(); msg != "" {
		writeSQSInvalidParameter(w, r, msg)
		return
	}
	switch req.op {
	case "CreateQueue", "DeleteQueue":
		sqsTable.Lock()
		defer sqsTable.Unlock()
		h.next.ServeHTTP(w, r)
		if name := req.param("QueueName"); req.op == "CreateQueue" && name != "" {
			completeQueueARN(name, h.region, h.account)
		}
	case "ReceiveMessage":
		h.receive(w, r, req)
	default:
		sqsTable.RLock()
		defer sqsTable.RUnlock()
		h.next.ServeHTTP(w, r)
	}
}

// longPollStep is how often a long poll looks at its queue again: goaws's
// own step.
const longPollStep = 100 * time.Millisecond

// receive serves a ReceiveMessage. One that waits is served as receives
// that do not (or, on a queue whose ReceiveMessageWaitTimeSeconds makes
// goaws wait, of a second), until one returns messages (or an error) or the
// wait has passed; the client gets that receive's answer.
func (h sqsGated) receive(w http.ResponseWriter, r *http.Request, req sqsRequest) {
	wait, queueWait := req.waits()
	if wait <= 0 {
		sqsTable.RLock()
		defer sqsTable.RUnlock()
		h.next.ServeHTTP(w, r)
		return
	}
	slice := 0 // goaws then takes the queue's wait
	if queueWait > 0 {
		slice = 1
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	sliced := req.withWait(r, slice)
	for {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		sqsTable.RLock()
		h.next.ServeHTTP(rec, sliced.request())
		sqsTable.RUnlock()
		if rec.status != http.StatusOK || bytes.Contains(rec.body.Bytes(), []byte("MessageId")) ||
			!time.Now().Before(deadline) || r.Context().Err() != nil {
			rec.copyTo(w)
			return
		}
		if slice == 0 {
			t := time.NewTimer(min(longPollStep, time.Until(deadline)))
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
	}
}

// sqsRequest is an SQS request's operation and parameters, in either
// protocol: JSON (X-Amz-Target) or query (a form).
type sqsRequest struct {
	op   string
	json map[string]any // the JSON protocol's body
	form url.Values     // the query protocol's parameters
}

// readSQSRequest reads r's operation and, for the operations the gate looks
// into (those with a limited parameter, and CreateQueue), its parameters; a
// body it reads is restored. A JSON-protocol request names its operation in
// a header, so the others are not parsed.
func readSQSRequest(r *http.Request) (sqsRequest, error) {
	target := r.Header.Get("X-Amz-Target")
	op := strings.TrimPrefix(target, "AmazonSQS.")
	if target != "" && !sqsLimited[op] && op != "CreateQueue" {
		return sqsRequest{op: op}, nil
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return sqsRequest{}, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if target != "" {
		req := sqsRequest{op: op, json: map[string]any{}}
		_ = json.Unmarshal(body, &req.json) // goaws answers a bad body itself
		return req, nil
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		form = url.Values{}
	}
	for k, v := range r.URL.Query() {
		if _, ok := form[k]; !ok {
			form[k] = v
		}
	}
	return sqsRequest{op: form.Get("Action"), form: form}, nil
}

// param returns the string parameter name, "" when absent.
func (q sqsRequest) param(name string) string {
	if q.json != nil {
		v, _ := q.json[name].(string)
		return v
	}
	return q.form.Get(name)
}

// waits returns the receive's WaitTimeSeconds, else (when it has none)
// its queue's ReceiveMessageWaitTimeSeconds, as goaws (and SQS) take it; and
// the queue's own.
func (q sqsRequest) waits() (wait, queueWait int) {
	if q.json != nil {
		if v, ok := q.json["WaitTimeSeconds"].(float64); ok {
			wait = int(v)
		}
	} else {
		wait, _ = strconv.Atoi(q.form.Get("WaitTimeSeconds"))
	}
	queueURL := q.param("QueueUrl")
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	models.SyncQueues.RLock()
	if queue, ok := models.SyncQueues.Queues[name]; ok {
		queueWait = queue.ReceiveMessageWaitTimeSeconds
	}
	models.SyncQueues.RUnlock()
	if wait <= 0 {
		wait = queueWait
	}
	return wait, queueWait
}

// slicedReceive is a receive asking for another wait than its client's,
// built once and sent as often as the long poll looks at its queue.
type slicedReceive struct {
	r    *http.Request // with the wait in its query, if it had one there
	body []byte
}

// request returns a request of the receive, its body unread.
func (s slicedReceive) request() *http.Request {
	out := s.r.Clone(s.r.Context())
	out.Body = io.NopCloser(bytes.NewReader(s.body))
	out.ContentLength = int64(len(s.body))
	out.Header.Set("Content-Length", strconv.Itoa(len(s.body)))
	return out
}

// withWait returns the receive r asking for a wait of seconds.
func (q sqsRequest) withWait(r *http.Request, seconds int) slicedReceive {
	var body []byte
	if q.json != nil {
		m := make(map[string]any, len(q.json))
		for k, v := range q.json {
			m[k] = v
		}
		m["WaitTimeSeconds"] = seconds
		body, _ = json.Marshal(m)
	} else {
		form := url.Values{}
		for k, v := range q.form {
			form[k] = v
		}
		form.Set("WaitTimeSeconds", strconv.Itoa(seconds))
		body = []byte(form.Encode())
	}
	out := r.Clone(r.Context())
	if query := out.URL.Query(); query.Has("WaitTimeSeconds") {
		query.Set("WaitTimeSeconds", strconv.Itoa(seconds))
		out.URL.RawQuery = query.Encode()
	}
	return slicedReceive{r: out, body: body}
}

// recorder keeps a handler's answer until the next receive is decided.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

func (r *recorder) copyTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}
