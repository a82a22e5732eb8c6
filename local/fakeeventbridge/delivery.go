package fakeeventbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// Delivery to rule targets is asynchronous, as in AWS: PutEvents matches the
// event against the bus's enabled rules (and records it in the bus's
// archives) and queues one delivery per target; workers deliver them. A
// failed delivery is retried after Options.RetryDelay until the target's
// RetryPolicy is exhausted (AWS's defaults: 185 attempts, 24 hours), unless
// the failure is one AWS does not retry (a queue that does not exist, access
// denied, an HTTP 4xx other than 401, 407, 409 and 429); then the event goes
// to the target's dead-letter queue, if any, with AWS's message attributes.

// Target kinds the emulator delivers to.
const (
	kindSQS     = "sqs"
	kindBus     = "bus"
	kindAPIDest = "api-destination"
)

// Defaults of the retry policy (PutTargets, RetryPolicy).
const (
	DefaultMaximumRetryAttempts     = 185
	DefaultMaximumEventAgeInSeconds = 86400
)

// QueueSender is the part of the SQS client deliveries use: targets and
// dead-letter queues are SQS queues named by ARN.
type QueueSender interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// DefaultRetryDelay is the local delay before retry n (from 1): 50 ms
// doubling up to 2 s. AWS documents exponential back-off with jitter over up
// to 24 hours; locally retries are quick so that tests see them.
func DefaultRetryDelay(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < 2*time.Second; i++ {
		d *= 2
	}
	return min(d, 2*time.Second)
}

func targetKind(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" {
		return ""
	}
	switch {
	case parts[2] == "sqs" && parts[5] != "":
		return kindSQS
	case parts[2] == "events" && strings.HasPrefix(parts[5], "event-bus/"):
		return kindBus
	case parts[2] == "events" && strings.HasPrefix(parts[5], "api-destination/"):
		return kindAPIDest
	}
	return ""
}

// delivery is one event on its way to one target.
type delivery struct {
	ruleName, ruleARN string
	target            Target
	event             []byte
	ingested          time.Time
	attempts          int
}

// deliveryError is a failed attempt; retry says whether AWS would try again.
type deliveryError struct {
	code, message string
	retry         bool
}

func (d *deliveryError) Error() string { return d.code + ": " + d.message }

// route matches an event (its JSON text) against the enabled rules of bus —
// only those in only when it is not nil — queues a delivery per target of
// each matching rule, and records the event in the bus's archives when
// archive is set. e.mu is held.
func (e *Emulator) route(bus string, raw []byte, only map[string]bool, archive bool) {
	// The event is decoded once, and only when a pattern has to see it: an
	// archive without a pattern keeps every event as it is.
	var ev map[string]any
	decoded, bad := false, false
	value := func() (map[string]any, bool) {
		if !decoded {
			decoded = true
			d := json.NewDecoder(bytes.NewReader(raw))
			d.UseNumber()
			bad = d.Decode(&ev) != nil
		}
		return ev, !bad
	}
	now := e.opts.Now()
	if archive {
		e.recordInArchives(bus, raw, value, now)
	}
	for _, r := range e.rules[bus] {
		arn := e.RuleARN(bus, r.name)
		if r.state != "ENABLED" || (only != nil && !only[arn]) {
			continue
		}
		ev, ok := value()
		if !ok || !r.pattern.MatchesValue(ev) {
			continue
		}
		e.stats.MatchedEvents++
		for _, t := range r.targets {
			e.enqueue(&delivery{ruleName: r.name, ruleARN: arn, target: t, event: raw, ingested: now})
		}
	}
}

// enqueue counts d in flight and hands it to the workers. e.mu is held.
func (e *Emulator) enqueue(d *delivery) {
	e.inflight++
	e.push(d)
}

// push queues d without blocking the caller.
func (e *Emulator) push(d *delivery) {
	select {
	case e.work <- d:
	default:
		go func() {
			select {
			case e.work <- d:
			case <-e.done:
			}
		}()
	}
}

func (e *Emulator) worker() {
	for {
		select {
		case <-e.done:
			return
		case d := <-e.work:
			e.attempt(d)
		}
	}
}

// finish takes d out of flight.
func (e *Emulator) finish() {
	e.mu.Lock()
	e.inflight--
	e.mu.Unlock()
}

// attempt makes one delivery attempt and then retries, dead-letters or
// finishes d.
func (e *Emulator) attempt(d *delivery) {
	d.attempts++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := e.send(ctx, d)
	e.mu.Lock()
	e.stats.Invocations++
	if d.attempts > 1 {
		e.stats.RetryInvocationAttempts++
	}
	if err == nil {
		e.mu.Unlock()
		e.finish()
		return
	}
	var de *deliveryError
	if !errors.As(err, &de) {
		de = &deliveryError{code: "InternalException", message: err.Error(), retry: true}
	}
	maxAttempts, maxAge := DefaultMaximumRetryAttempts, DefaultMaximumEventAgeInSeconds
	if rp := d.target.RetryPolicy; rp != nil {
		if rp.MaximumRetryAttempts != nil {
			maxAttempts = *rp.MaximumRetryAttempts
		}
		if rp.MaximumEventAgeInSeconds != nil {
			maxAge = *rp.MaximumEventAgeInSeconds
		}
	}
	age := e.opts.Now().Sub(d.ingested)
	retry := de.retry && d.attempts <= maxAttempts && age < time.Duration(maxAge)*time.Second
	closed := e.closed
	e.mu.Unlock()
	if retry && !closed {
		time.AfterFunc(e.opts.RetryDelay(d.attempts), func() { e.push(d) })
		return
	}
	e.mu.Lock()
	e.stats.FailedInvocations++
	e.mu.Unlock()
	condition := "MaximumRetryAttempts"
	switch {
	case !de.retry:
		condition = "NotRetryable"
	case age >= time.Duration(maxAge)*time.Second:
		condition = "MaximumEventAgeInSeconds"
	}
	e.deadLetter(ctx, d, de, condition)
	e.finish()
}

// deadLetter sends d's event to its target's dead-letter queue with the
// attributes the EventBridge user guide lists ("Using dead-letter queues to
// process undelivered events").
func (e *Emulator) deadLetter(ctx context.Context, d *delivery, de *deliveryError, condition string) {
	dlq := d.target.DeadLetterConfig
	if dlq == nil || dlq.Arn == "" {
		return
	}
	attr := func(v string) sqstypes.MessageAttributeValue {
		return sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
	}
	attrs := map[string]sqstypes.MessageAttributeValue{
		"RULE_ARN": attr(d.ruleARN), "TARGET_ARN": attr(d.target.Arn),
		"ERROR_CODE": attr(de.code), "ERROR_MESSAGE": attr(de.message),
		"EXHAUSTED_RETRY_CONDITION": attr(condition), "RETRY_ATTEMPTS": attr(strconv.Itoa(d.attempts - 1)),
	}
	err := e.sendToQueue(ctx, dlq.Arn, string(d.event), "", attrs)
	e.mu.Lock()
	if err != nil {
		e.stats.InvocationsFailedToBeSentToDLQ++
	} else {
		e.stats.InvocationsSentToDLQ++
	}
	e.mu.Unlock()
}

// send makes one attempt to deliver d to its target.
func (e *Emulator) send(ctx context.Context, d *delivery) error {
	t := d.target
	if targetKind(t.Arn) == kindBus {
		// Bus to bus: the event itself goes on.
		return e.forward(busOfARN(t.Arn), d.event)
	}
	body, err := targetInput(t, d.event, transformContext{
		ruleName: d.ruleName, ruleARN: d.ruleARN, ingestionTime: d.ingested.UTC().Format(time.RFC3339),
	})
	if err != nil {
		return &deliveryError{code: "InputTransformationFailed", message: err.Error()}
	}
	switch targetKind(t.Arn) {
	case kindSQS:
		group := ""
		if t.SqsParameters != nil {
			group = t.SqsParameters.MessageGroupID
		}
		return e.sendToQueue(ctx, t.Arn, string(body), group, nil)
	case kindAPIDest:
		return e.invokeAPIDestination(ctx, t, body)
	}
	return &deliveryError{code: "UnsupportedTarget", message: "target " + t.Arn + " is not supported"}
}

// forward puts an event delivered by a rule on another bus of this emulator.
func (e *Emulator) forward(bus string, raw []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.buses[bus]; !ok {
		return &deliveryError{code: "ResourceNotFoundException", message: "Event bus " + bus + " does not exist."}
	}
	e.route(bus, raw, nil, true)
	return nil
}

// sendToQueue sends body to the queue named by arn.
func (e *Emulator) sendToQueue(ctx context.Context, arn, body, group string, attrs map[string]sqstypes.MessageAttributeValue) error {
	if e.opts.Queues == nil {
		return &deliveryError{code: "NoSQS", message: "the emulator has no SQS client (Options.Queues)"}
	}
	name := arn[strings.LastIndex(arn, ":")+1:]
	e.mu.Lock()
	qurl := e.queueURLs[arn]
	e.mu.Unlock()
	if qurl == "" {
		out, err := e.opts.Queues.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return sqsError(err)
		}
		qurl = aws.ToString(out.QueueUrl)
		e.mu.Lock()
		e.queueURLs[arn] = qurl
		e.mu.Unlock()
	}
	in := &sqs.SendMessageInput{QueueUrl: aws.String(qurl), MessageBody: aws.String(body), MessageAttributes: attrs}
	if group != "" {
		in.MessageGroupId = aws.String(group)
	}
	if _, err := e.opts.Queues.SendMessage(ctx, in); err != nil {
		return sqsError(err)
	}
	return nil
}

// sqsError classifies an SQS failure: a missing queue, a denial or a KMS
// problem is not retried (AWS retries throttling and service errors).
func sqsError(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code := ae.ErrorCode()
		retry := true
		switch {
		case strings.Contains(code, "NonExistentQueue"), code == "QueueDoesNotExist", strings.HasPrefix(code, "AccessDenied"),
			strings.HasPrefix(code, "KMS."), code == "InvalidMessageContents", code == "InvalidParameterValue":
			retry = false
		}
		return &deliveryError{code: code, message: ae.ErrorMessage(), retry: retry}
	}
	return &deliveryError{code: "SQSUnreachable", message: err.Error(), retry: true}
}

// invokeAPIDestination sends body to an API destination's endpoint with its
// connection's authorization and the target's HttpParameters.
func (e *Emulator) invokeAPIDestination(ctx context.Context, t Target, body []byte) error {
	e.mu.Lock()
	dest, ok := e.destinations[apiDestinationName(t.Arn)]
	var conn *connection
	if ok {
		conn = e.connections[connectionName(dest.connectionARN)]
	}
	e.mu.Unlock()
	if !ok || conn == nil {
		return &deliveryError{code: "ResourceNotFoundException", message: "API destination or its connection does not exist"}
	}
	endpoint := dest.endpoint
	hp := t.HTTPParameters
	if hp != nil {
		for _, v := range hp.PathParameterValues {
			endpoint = strings.Replace(endpoint, "*", url.PathEscape(v), 1)
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return &deliveryError{code: "InvalidEndpoint", message: err.Error()}
	}
	q := u.Query()
	header := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	if hp != nil {
		for k, v := range hp.QueryStringParameters {
			q.Set(k, v)
		}
		for k, v := range hp.HeaderParameters {
			header.Set(k, v)
		}
	}
	for k, v := range conn.headers {
		header.Set(k, v)
	}
	u.RawQuery = q.Encode()
	method := dest.method
	var rd io.Reader
	if method != http.MethodGet && method != http.MethodHead {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return &deliveryError{code: "InvalidEndpoint", message: err.Error()}
	}
	req.Header = header
	if conn.basicUser != "" {
		req.SetBasicAuth(conn.basicUser, conn.basicPassword)
	}
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		return &deliveryError{code: "EndpointUnreachable", message: err.Error(), retry: true}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if resp.StatusCode < 300 {
		return nil
	}
	// API destinations retry 401, 407, 409, 429 and 5xx (user guide, "API
	// destinations": error handling).
	retry := resp.StatusCode >= 500 || resp.StatusCode == 401 || resp.StatusCode == 407 || resp.StatusCode == 409 || resp.StatusCode == 429
	return &deliveryError{code: "HTTP" + strconv.Itoa(resp.StatusCode), message: fmt.Sprintf("endpoint answered %d", resp.StatusCode), retry: retry}
}

// WaitIdle returns when no delivery is queued, under way or waiting for a
// retry, and no replay is running, or when ctx ends.
func (e *Emulator) WaitIdle(ctx context.Context) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		e.mu.Lock()
		n := e.inflight
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fakeeventbridge: %d deliveries still in flight: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// Close stops the delivery workers; queued and retrying deliveries are
// dropped. The emulator keeps answering API calls.
func (e *Emulator) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.done)
	}
	e.closeArchiveFile()
}
