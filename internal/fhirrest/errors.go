package fhirrest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// APIError is a non-success HealthLake answer: the HTTP status and the text
// of its OperationOutcome (or AWS JSON error) body.
type APIError struct {
	// Operation is StartExport, DescribeExport, CancelExport or History.
	Operation string
	// StatusCode is the HTTP status.
	StatusCode int
	// Code is the error code when the answer names one (OperationOutcome
	// issue code, or the AWS error type such as ThrottlingException).
	Code string
	// Message is the OperationOutcome diagnostics / details text or the AWS
	// error message.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "healthlake %s: HTTP %d", e.Operation, e.StatusCode)
	if e.Code != "" {
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// codeOnly replaces e's message with its status text: the
// OperationOutcome of a FHIR read, search or history may name the resource,
// which errors must not carry. It returns e.
func (e *APIError) codeOnly() *APIError {
	e.Message = http.StatusText(e.StatusCode)
	return e
}

// Retryable reports whether the call may succeed when repeated: 429, 5xx,
// or a throttling answer of any status.
func (e *APIError) Retryable() bool { return retryableStatus(e.StatusCode) || e.Throttled() }

// Throttled reports whether the answer refuses the call for its rate,
// whatever its status. HealthLake answers ThrottlingException "for all
// operations" when a quota is exceeded (quotas page), and its API reference
// gives that error HTTP 400, not 429; the FHIR REST API documents no status.
// A code is a throttle when aws-sdk-go-v2's retryer counts it as one
// (retry.DefaultThrottleErrorCodes), or when it is FHIR's issue type
// "throttled".
func (e *APIError) Throttled() bool {
	if e.StatusCode == http.StatusTooManyRequests {
		return true
	}
	if e.Code == fhirThrottled {
		return true
	}
	_, ok := retry.DefaultThrottleErrorCodes[e.Code]
	return ok
}

// ThrottledAnswer reports whether an HTTP answer of HealthLake refuses its
// request for its rate, as APIError.Throttled reads it (for a client that
// sends its own requests: cdc-local's FHIR writes).
func ThrottledAnswer(status int, header http.Header, body []byte) bool {
	if status < 400 {
		return false
	}
	return newAPIError("", status, body, errorType(header.Get("X-Amzn-ErrorType"))).Throttled()
}

// fhirThrottled is the OperationOutcome issue type of a refused rate
// (FHIR R4 IssueType "throttled").
const fhirThrottled = "throttled"

// IsRetryable reports whether err is a HealthLake answer worth retrying or a
// transport failure (anything that is not a definitive 4xx APIError).
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.Retryable()
	}
	return true
}

// IsThrottled reports whether err is HealthLake refusing a call for its
// request rate (an APIError that Throttled), after the client's retries.
func IsThrottled(err error) bool {
	var api *APIError
	return errors.As(err, &api) && api.Throttled()
}

// ambiguousError marks the failure of a call of which an earlier attempt
// failed with a 5xx or a transport error: HealthLake may have acted on it.
type ambiguousError struct{ err error }

func (e *ambiguousError) Error() string {
	return e.err.Error() + " (an earlier attempt may have been accepted)"
}
func (e *ambiguousError) Unwrap() error { return e.err }

func markAmbiguous(err error, ambiguous bool) error {
	if !ambiguous || err == nil {
		return err
	}
	return &ambiguousError{err: err}
}

// MayHaveActed reports whether a failed call may nevertheless have been acted
// on by HealthLake: an attempt of it failed with a 5xx or a transport error
// (whatever the final answer, e.g. a retried POST $export ending in a 4xx),
// or the call itself ended with one. Only a definitive first answer (a 4xx,
// a throttle among them, which proves nothing was done) says no.
func MayHaveActed(err error) bool {
	if err == nil {
		return false
	}
	var amb *ambiguousError
	if errors.As(err, &amb) {
		return true
	}
	var api *APIError
	if errors.As(err, &api) {
		return api.StatusCode >= 500
	}
	return true
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var api *APIError
	return errors.As(err, &api) && api.StatusCode == http.StatusNotFound
}

// operationOutcome is the part of a FHIR OperationOutcome the client reads.
type operationOutcome struct {
	ResourceType string `json:"resourceType"`
	Issue        []struct {
		Severity    string `json:"severity"`
		Code        string `json:"code"`
		Diagnostics string `json:"diagnostics"`
		Details     struct {
			Text string `json:"text"`
		} `json:"details"`
	} `json:"issue"`
	// AWS JSON error shapes.
	Type     string `json:"__type"`
	Message  string `json:"message"`
	MessageU string `json:"Message"`
}

// newAPIError builds the error of a non-success answer; errType is the
// X-Amzn-ErrorType header, which names the error when present.
func newAPIError(op string, status int, body []byte, errType string) *APIError {
	e := &APIError{Operation: op, StatusCode: status}
	var oo operationOutcome
	if err := json.Unmarshal(body, &oo); err == nil {
		var texts []string
		for _, is := range oo.Issue {
			if e.Code == "" {
				e.Code = is.Code
			}
			switch {
			case is.Diagnostics != "":
				texts = append(texts, is.Diagnostics)
			case is.Details.Text != "":
				texts = append(texts, is.Details.Text)
			}
		}
		if oo.Type != "" {
			e.Code = oo.Type
			if i := strings.LastIndexByte(e.Code, '#'); i >= 0 {
				e.Code = e.Code[i+1:]
			}
		}
		for _, m := range []string{oo.Message, oo.MessageU} {
			if m != "" {
				texts = append(texts, m)
			}
		}
		e.Message = strings.Join(texts, "; ")
	} else if len(body) > 0 {
		e.Message = strings.TrimSpace(string(body))
	}
	if len(e.Message) > 2048 {
		e.Message = e.Message[:2048] + "…"
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	if t := errorType(errType); t != "" {
		e.Code = t
	}
	return e
}

// errorType trims X-Amzn-ErrorType ("ThrottlingException:http://…") to its name.
func errorType(h string) string {
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	return strings.TrimSpace(h)
}
