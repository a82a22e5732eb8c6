// Package exportjob holds the start-export and check-export Lambdas' logic:
// starting a HealthLake `$export` for a run's window exactly once (the export
// ledger), polling it through the delayed re-check queue while heartbeating
// the Step Functions task token, writing the manifest of NDJSON files and
// answering the token; and the Canceller the run-lock Lambda uses on failure.
//
// See docs/EXPORT.md for the message schemas, configuration and behaviour.
package exportjob

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Error names given to SendTaskFailure (each ≤ 256 characters).
const (
	ErrInvalidMessage            = "InvalidMessage"
	ErrExportStartFailed         = "ExportStartFailed"
	ErrExportFailed              = "ExportFailed"
	ErrExportCancelled           = "ExportCancelled"
	ErrExportCancelFailed        = "ExportCancelFailed"
	ErrExportCompletedWithErrors = "ExportCompletedWithErrors"
	ErrExportTimedOut            = "ExportTimedOut"
	ErrManifestFailed            = "ManifestFailed"
)

// StartMessage is the body the state machine sends to the start queue.
// Window is the export window: `_since` of the export is Window.Since.
type StartMessage struct {
	TaskToken   string          `json:"taskToken"`
	ExecutionID string          `json:"executionId"`
	RunID       string          `json:"runId"`
	Window      envelope.Window `json:"window"`
}

// RecheckMessage is the body of a delayed re-check message.
type RecheckMessage struct {
	TaskToken   string          `json:"taskToken"`
	ExecutionID string          `json:"executionId"`
	RunID       string          `json:"runId"`
	Window      envelope.Window `json:"window"`
	DatastoreID string          `json:"datastoreId"`
	JobID       string          `json:"jobId"`
	// StartedAt is when the export was started (for the maximum wait),
	// formatted by envelope.FormatTime.
	StartedAt string `json:"startedAt"`
	// Attempt numbers the checks, 1 for the first one sent by start-export.
	Attempt int `json:"attempt"`
}

// KindJobEvent is the "kind" of a re-check queue message made from a
// HealthLake job state event by the EventBridge rule's InputTransformer.
const KindJobEvent = "jobEvent"

// JobEventMessage is a HealthLake job state event as the rule on the default
// bus puts it on the re-check queue (JobEventInputTemplate). JobStatus holds
// the event's detail-type, e.g. "Export Job Completed".
type JobEventMessage struct {
	Kind        string `json:"kind"`
	DatastoreID string `json:"datastoreId"`
	JobID       string `json:"jobId"`
	JobStatus   string `json:"jobStatus"`
}

// MessageError is a message body the handler cannot act on. Token is the
// task token when it could be read (the run is then failed at once).
type MessageError struct {
	Problem string
	Token   string
}

// Error implements error.
func (e *MessageError) Error() string { return "invalid message: " + e.Problem }

// readToken extracts a task token from a body that is a JSON object even when
// the rest of it is unusable.
func readToken(body []byte) (map[string]json.RawMessage, string, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, "", err
	}
	var token string
	if t, ok := raw["taskToken"]; ok {
		_ = json.Unmarshal(t, &token)
	}
	return raw, strings.TrimSpace(token), nil
}

// wireMessage is the JSON shape of the start and re-check messages, with
// the window's times as strings so that a bad window is named precisely.
type wireMessage struct {
	TaskToken   string `json:"taskToken"`
	ExecutionID string `json:"executionId"`
	RunID       string `json:"runId"`
	Window      struct {
		Since string `json:"since"`
		Until string `json:"until"`
	} `json:"window"`
	DatastoreID string `json:"datastoreId"`
	JobID       string `json:"jobId"`
	StartedAt   string `json:"startedAt"`
	Attempt     int    `json:"attempt"`
}

// decodeMessage decodes a message body of the named schema, checks the
// fields every message has, and returns the task token it read — also when
// the rest of the body is unusable, so the run can be failed at once.
func decodeMessage(body []byte, schema string) (wireMessage, envelope.Window, string, error) {
	var m wireMessage
	_, token, err := readToken(body)
	if err != nil {
		return m, envelope.Window{}, "", &MessageError{Problem: "body is not a JSON object: " + jsonProblem(err)}
	}
	if token == "" {
		return m, envelope.Window{}, "", &MessageError{Problem: "taskToken is missing or empty"}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, envelope.Window{}, token, &MessageError{Problem: "body does not match the " + schema + " schema: " + jsonProblem(err), Token: token}
	}
	m.TaskToken = token
	w, p := checkRunFields(m)
	if p != "" {
		return m, w, token, &MessageError{Problem: p, Token: token}
	}
	return m, w, token, nil
}

// ParseStartMessage decodes and checks a start message. A problem is returned
// as a *MessageError naming it.
func ParseStartMessage(body []byte) (StartMessage, error) {
	m, w, token, err := decodeMessage(body, "start message")
	return StartMessage{TaskToken: token, ExecutionID: m.ExecutionID, RunID: m.RunID, Window: w}, err
}

// ParseRecheckMessage decodes and checks a re-check message.
func ParseRecheckMessage(body []byte) (RecheckMessage, error) {
	m, w, token, err := decodeMessage(body, "re-check message")
	out := RecheckMessage{
		TaskToken: token, ExecutionID: m.ExecutionID, RunID: m.RunID, Window: w,
		DatastoreID: m.DatastoreID, JobID: m.JobID, StartedAt: m.StartedAt, Attempt: m.Attempt,
	}
	if err != nil {
		return out, err
	}
	switch {
	case m.DatastoreID == "":
		return out, &MessageError{Problem: "datastoreId is missing", Token: token}
	case m.JobID == "":
		return out, &MessageError{Problem: "jobId is missing", Token: token}
	case m.Attempt < 1:
		return out, &MessageError{Problem: "attempt must be a positive number", Token: token}
	}
	if _, err := envelope.ParseTime(m.StartedAt); err != nil {
		return out, &MessageError{Problem: "startedAt is not an RFC 3339 time", Token: token}
	}
	return out, nil
}

// ParseJobEventMessage decodes a job event message (kind "jobEvent").
func ParseJobEventMessage(body []byte) (JobEventMessage, error) {
	var m JobEventMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return m, &MessageError{Problem: "body does not match the job event schema: " + jsonProblem(err)}
	}
	switch {
	case m.Kind != KindJobEvent:
		return m, &MessageError{Problem: "kind is not " + KindJobEvent}
	case m.DatastoreID == "":
		return m, &MessageError{Problem: "datastoreId is missing"}
	case m.JobID == "":
		return m, &MessageError{Problem: "jobId is missing"}
	}
	return m, nil
}

// messageKind reads the "kind" field of a re-check queue body ("" for the
// re-check messages start-export and check-export send).
func messageKind(body []byte) string {
	var k struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &k)
	return k.Kind
}

func checkRunFields(m wireMessage) (envelope.Window, string) {
	switch {
	case m.RunID == "":
		return envelope.Window{}, "runId is missing"
	case len(m.RunID) > 80 || strings.ContainsAny(m.RunID, "/\\ \t\r\n"):
		return envelope.Window{}, "runId is not an execution name (at most 80 characters, no slashes or spaces)"
	}
	since, err := envelope.ParseTime(m.Window.Since)
	if err != nil {
		return envelope.Window{}, "window.since is missing or not an RFC 3339 time"
	}
	until, err := envelope.ParseTime(m.Window.Until)
	if err != nil {
		return envelope.Window{}, "window.until is missing or not an RFC 3339 time"
	}
	w := envelope.Window{Since: since, Until: until}
	if w.Empty() {
		return w, "window.since is not before window.until"
	}
	return w, ""
}

// jsonProblem names a JSON decoding problem without quoting the body.
func jsonProblem(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("syntax error at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %q has the wrong type (%s, want %s)", e.Field, e.Value, e.Type)
	}
	return "cannot decode JSON"
}

// exportSince is the `_since` of the export of w: its since, or the zero
// time (no `_since`, the whole store) for a snapshot window, which starts at
// envelope.SnapshotSince or earlier.
func exportSince(w envelope.Window) time.Time {
	if envelope.IsSnapshotSince(w.Since) {
		return time.Time{}
	}
	return w.Since
}
