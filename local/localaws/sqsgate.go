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

// sqsGated serves goaws behind sqsTable: CreateQueue and DeleteQueue alone,
// every other request beside the others. A long poll is served as a series
// of receives of at most a second each, so that it never holds the gate
// while it waits and a CreateQueue waits a second at most.
type sqsGated struct{ next http.Handler }

func (h sqsGated) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, err := readSQSRequest(r)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch req.op {
	case "CreateQueue", "DeleteQueue":
		sqsTable.Lock()
		defer sqsTable.Unlock()
		h.next.ServeHTTP(w, r)
	case "ReceiveMessage":
		h.receive(w, r, req)
	default:
		sqsTable.RLock()
		defer sqsTable.RUnlock()
		h.next.ServeHTTP(w, r)
	}
}

// receive serves a ReceiveMessage: at once when it waits a second or less,
// else in receives of a second until one returns messages (or an error)
// or the wait has passed; the client gets that receive's answer.
func (h sqsGated) receive(w http.ResponseWriter, r *http.Request, req sqsRequest) {
	wait := req.waitSeconds()
	if wait <= 1 {
		sqsTable.RLock()
		defer sqsTable.RUnlock()
		h.next.ServeHTTP(w, r)
		return
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		sqsTable.RLock()
		h.next.ServeHTTP(rec, req.withWait(r, 1))
		sqsTable.RUnlock()
		if rec.status != http.StatusOK || bytes.Contains(rec.body.Bytes(), []byte("MessageId")) ||
			!time.Now().Before(deadline) || r.Context().Err() != nil {
			rec.copyTo(w)
			return
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

// readSQSRequest reads r's operation and parameters and restores its body.
func readSQSRequest(r *http.Request) (sqsRequest, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return sqsRequest{}, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		req := sqsRequest{op: strings.TrimPrefix(target, "AmazonSQS."), json: map[string]any{}}
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

// waitSeconds is the receive's long-poll wait: its WaitTimeSeconds, else
// its queue's ReceiveMessageWaitTimeSeconds, as goaws (and SQS) take it.
func (q sqsRequest) waitSeconds() int {
	var wait int
	var queueURL string
	if q.json != nil {
		if v, ok := q.json["WaitTimeSeconds"].(float64); ok {
			wait = int(v)
		}
		queueURL, _ = q.json["QueueUrl"].(string)
	} else {
		wait, _ = strconv.Atoi(q.form.Get("WaitTimeSeconds"))
		queueURL = q.form.Get("QueueUrl")
	}
	if wait > 0 {
		return wait
	}
	name := queueURL[strings.LastIndexByte(queueURL, '/')+1:]
	models.SyncQueues.RLock()
	defer models.SyncQueues.RUnlock()
	if queue, ok := models.SyncQueues.Queues[name]; ok {
		return queue.ReceiveMessageWaitTimeSeconds
	}
	return 0
}

// withWait returns a copy of r whose body asks for a wait of seconds.
func (q sqsRequest) withWait(r *http.Request, seconds int) *http.Request {
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
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return out
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
