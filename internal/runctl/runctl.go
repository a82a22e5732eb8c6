// Package runctl is the logic of the run-lock Lambda: the acquire, commit
// and fail actions the state machine calls, composed from internal/runlock
// (the rules), a reader of the Distributed Map's results (the counts) and an
// export canceller (internal/exportjob). Only NewFromEnv (fromenv.go), the
// one constructor of the Lambda from its environment, touches AWS types; the
// payloads are those of docs/ARCHITECTURE.md ("run-lock input").
package runctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// Actions of the run-lock input.
const (
	ActionAcquire = "acquire"
	ActionCommit  = "commit"
	ActionFail    = "fail"
)

// Input is the run-lock Lambda's payload.
type Input struct {
	Action        string           `json:"action"`
	ExecutionID   string           `json:"executionId"`
	ExecutionName string           `json:"executionName"`
	StartTime     string           `json:"startTime"`
	Window        *envelope.Window `json:"window,omitempty"`
	ExportJobID   string           `json:"exportJobId,omitempty"`
	// Results is the Distributed Map's output with ResultWriterDetails, or null.
	Results json.RawMessage `json:"results,omitempty"`
	// Deletes is the delete scan's last answer (commit): {done, cursor,
	// totals}, or the state's placeholder {done: false, cursor: null} when
	// no scan ran.
	Deletes json.RawMessage `json:"deletes,omitempty"`
	// Export is the manifest part the run delivered (commit): the export
	// wait's output or the acquire's reuse (contract C2), or the state's
	// placeholder {"jobId":null,"fileCount":0} when nothing was exported.
	Export json.RawMessage `json:"export,omitempty"`
	// Error and Cause are the caught error of a failed run.
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
}

// AcquireOutput is the answer to acquire.
type AcquireOutput struct {
	Acquired bool   `json:"acquired"`
	Reason   string `json:"reason"`
	// Refusal is why the lock was refused, machine-readably (runlock.Refusal:
	// LOCK_HELD), "" when acquired.
	Refusal runlock.Refusal `json:"refusal"`
	RunID   string          `json:"runId"`
	// Window is null when the lock was refused. It is what the checkpoint
	// covers; ExportWindow (Window widened back by the overlap) is what the
	// run exports and delivers.
	Window       *envelope.Window `json:"window"`
	ExportWindow *envelope.Window `json:"exportWindow"`
	Empty        bool             `json:"empty"`
	// Continues: the checkpoint was set by a run's commit, so the map
	// children skip the versions that run already published in this run's
	// overlap (runlock.Acquisition.Continues); false after a replay.
	Continues bool `json:"continues"`
	// Reuse is the next part of an export a previous run started (the
	// state machine then skips the export), null otherwise.
	Reuse *manifest.Export `json:"reuse"`
}

// FinishOutput is the answer to commit and fail.
type FinishOutput struct {
	RunID      string `json:"runId"`
	Checkpoint string `json:"checkpoint"`
	// Outcome is SUCCEEDED, EMPTY, PARTIAL (a part of a multi-part export
	// was delivered; the next run delivers part NextPart of Parts) or FAILED.
	Outcome  string `json:"outcome"`
	NextPart int    `json:"nextPart,omitempty"`
	Parts    int    `json:"parts,omitempty"`
}

// Locker is the part of runlock.Store the actions use.
type Locker interface {
	Acquire(ctx context.Context, req runlock.AcquireRequest) (runlock.Acquisition, error)
	Commit(ctx context.Context, req runlock.CommitRequest) (runlock.Result, error)
	Fail(ctx context.Context, req runlock.FailRequest) (runlock.Result, error)
}

// ResultReader sums the children's summaries of a Distributed Map run from
// its ResultWriter manifest at bucket/key.
type ResultReader interface {
	Summaries(ctx context.Context, bucket, key string) (runlock.Counts, error)
}

// ExportCanceller cancels the HealthLake export a run started, if any.
type ExportCanceller interface {
	CancelRunExport(ctx context.Context, runID string) error
}

// Handler runs the actions. Results and Exports may be nil: without a
// ResultReader a commit with results fails; without an ExportCanceller a
// fail cancels nothing.
type Handler struct {
	Lock    Locker
	Results ResultReader
	Exports ExportCanceller
	Logger  *slog.Logger
	// CancelTimeout bounds the best-effort export cancel; default 20 s.
	CancelTimeout time.Duration
	// Metrics receives SkippedRuns, RunsFailed and CheckpointLagSeconds; nil writes none.
	Metrics *metrics.Recorder
	// Now is the clock for the checkpoint lag; default time.Now.
	Now func() time.Time
}

// emit writes metrics, logging (never failing the action) when it cannot.
func (h *Handler) emit(in Input, values ...metrics.Value) {
	if len(values) == 0 {
		return
	}
	if err := h.Metrics.Emit(values, nil, map[string]any{"executionId": in.ExecutionID, "runId": in.ExecutionName}); err != nil {
		h.log().Warn("metrics not written", "error", err.Error())
	}
}

// lag is the CheckpointLagSeconds value of a checkpoint, none while the
// checkpoint is at envelope.SnapshotSince (a first run's snapshot: now − the
// zero time would be an alarm, not a lag) or unknown.
func (h *Handler) lag(checkpoint time.Time) []metrics.Value {
	if checkpoint.IsZero() || envelope.IsSnapshotSince(checkpoint) {
		return nil
	}
	return []metrics.Value{metrics.Seconds(metrics.CheckpointLagSeconds, h.now().Sub(checkpoint))}
}

func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// InputError is a payload the handler cannot act on.
type InputError struct{ Msg string }

// Error implements error.
func (e *InputError) Error() string { return "run-lock input: " + e.Msg }

// LockLostError is a commit by an execution that no longer holds the lock:
// its window will be run again by a later execution.
type LockLostError struct {
	RunID string
	Err   error
}

// Error implements error.
func (e *LockLostError) Error() string {
	return "run " + e.RunID + " lost the lock; its window will be retried by a later run: " + e.Err.Error()
}

// Unwrap returns the store's error (runlock.ErrNotOwner).
func (e *LockLostError) Unwrap() error { return e.Err }

// ChildrenFailedError is a commit refused because some Distributed Map
// children did not succeed: the checkpoint must not pass their files.
type ChildrenFailedError struct {
	RunID  string
	Failed int64
}

// Error implements error.
func (e *ChildrenFailedError) Error() string {
	return fmt.Sprintf("run %s: %d export file(s) were not published; not committing, the window will be retried", e.RunID, e.Failed)
}

func (h *Handler) log() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.New(slog.NewJSONHandler(io.Discard, nil))
}

// Handle runs one action and returns its output (AcquireOutput or
// FinishOutput), ready to be marshalled as the Lambda's result.
func (h *Handler) Handle(ctx context.Context, in Input) (any, error) {
	if h.Lock == nil {
		return nil, errors.New("run-lock: no lock store configured")
	}
	if in.ExecutionID == "" || in.ExecutionName == "" {
		return nil, &InputError{Msg: "executionId and executionName are required (pass $$.Execution.Id and $$.Execution.Name)"}
	}
	switch in.Action {
	case ActionAcquire:
		return h.acquire(ctx, in)
	case ActionCommit:
		return h.commit(ctx, in)
	case ActionFail:
		return h.fail(ctx, in)
	default:
		return nil, &InputError{Msg: fmt.Sprintf("unknown action %q: want acquire, commit or fail", clip.String(in.Action, 40))}
	}
}

func startTime(in Input) (time.Time, error) {
	if in.StartTime == "" {
		return time.Time{}, nil
	}
	t, err := envelope.ParseTime(in.StartTime)
	if err != nil {
		return time.Time{}, &InputError{Msg: "startTime: " + err.Error()}
	}
	return t, nil
}

func (h *Handler) acquire(ctx context.Context, in Input) (AcquireOutput, error) {
	start, err := startTime(in)
	if err != nil {
		return AcquireOutput{}, err
	}
	a, err := h.Lock.Acquire(ctx, runlock.AcquireRequest{Owner: in.ExecutionID, RunID: in.ExecutionName, StartTime: start})
	var moved *runlock.DatastoreChangedError
	if errors.As(err, &moved) {
		// As it is, so the execution fails with the error name
		// DatastoreChangedError and says how to go on.
		return AcquireOutput{}, moved
	}
	if err != nil {
		return AcquireOutput{}, fmt.Errorf("acquire run lock for %s: %w", in.ExecutionName, err)
	}
	out := AcquireOutput{Acquired: a.Acquired, Reason: a.Reason, Refusal: a.Refusal, RunID: in.ExecutionName}
	if a.Acquired && a.PreviousRunID != "" && a.PreviousRunID != in.ExecutionName {
		h.cancelPreviousExport(ctx, in, a)
	}
	if a.Acquired {
		w, ew := a.Window, a.ExportWindow
		out.Window, out.ExportWindow, out.Empty, out.Reuse, out.Continues = &w, &ew, a.Empty, a.Reuse, a.Continues
		h.emit(in, h.lag(a.Checkpoint)...)
	} else {
		// A refused run still reports the lag: a lock held too long shows as a growing lag.
		h.emit(in, append([]metrics.Value{metrics.Count(metrics.SkippedRuns, 1)}, h.lag(a.Checkpoint)...)...)
	}
	return out, nil
}

// cancelPreviousExport stops the export of the run before this one when that
// run ended without finishing cleanly: taken over (execution timeout, abort,
// crash, a failed HandleFailure), unlocked by an operator, or failed with a
// cancel that did not go through. Its export may still run, and this run is
// about to start its own: never two exports at once. Best effort, like the
// cancel of HandleFailure: a failure is logged (the abandoned run's re-check
// chain cancels its job once its task token is stale).
func (h *Handler) cancelPreviousExport(ctx context.Context, in Input, a runlock.Acquisition) {
	if h.Exports == nil {
		return
	}
	timeout := h.CancelTimeout
	if timeout <= 0 {
		timeout = 20 * time.Second
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := h.Exports.CancelRunExport(cctx, a.PreviousRunID); err != nil {
		h.log().Warn("export of the previous run not cancelled", "executionId", in.ExecutionID, "runId", in.ExecutionName,
			"previousRunId", a.PreviousRunID, "previousOutcome", string(a.PreviousOutcome), "error", clip.String(err.Error(), 300))
	}
}

// ResultLocation is where the Distributed Map's ResultWriter put its manifest.
type ResultLocation struct {
	Bucket string `json:"Bucket"`
	Key    string `json:"Key"`
}

// ParseResults reads the results field: null or absent (no map ran), the
// Map state's output {"ResultWriterDetails": {"Bucket", "Key"}, ...}, or the
// details object itself. ok is false when there are no results.
func ParseResults(raw json.RawMessage) (loc ResultLocation, ok bool, err error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" || trimmed == "{}" {
		return ResultLocation{}, false, nil
	}
	var wrapper struct {
		Details *ResultLocation `json:"ResultWriterDetails"`
		ResultLocation
	}
	if err := json.Unmarshal(raw, &wrapper); err != nil {
		return ResultLocation{}, false, &InputError{Msg: "results: not a ResultWriter output object"}
	}
	loc = wrapper.ResultLocation
	if wrapper.Details != nil {
		loc = *wrapper.Details
	}
	if loc.Bucket == "" || loc.Key == "" {
		return ResultLocation{}, false, &InputError{Msg: "results: ResultWriterDetails needs Bucket and Key"}
	}
	return loc, true, nil
}

func (h *Handler) commit(ctx context.Context, in Input) (FinishOutput, error) {
	loc, has, err := ParseResults(in.Results)
	if err != nil {
		return FinishOutput{}, err
	}
	var counts runlock.Counts
	if has {
		if h.Results == nil {
			return FinishOutput{}, errors.New("commit: results given but no result reader configured")
		}
		counts, err = h.Results.Summaries(ctx, loc.Bucket, loc.Key)
		if err != nil {
			return FinishOutput{}, fmt.Errorf("commit %s: read map results: %w", in.ExecutionName, err)
		}
		if counts.FailedFiles > 0 {
			h.log().Warn("run commit refused: children failed", "executionId", in.ExecutionID, "runId", in.ExecutionName, "failedFiles", counts.FailedFiles)
			return FinishOutput{}, &ChildrenFailedError{RunID: in.ExecutionName, Failed: counts.FailedFiles}
		}
	}
	deleted, err := ParseDeletes(in.Deletes)
	if err != nil {
		return FinishOutput{}, err
	}
	counts = counts.Add(deleted)
	exp, err := ParseExport(in.Export)
	if err != nil {
		return FinishOutput{}, err
	}
	res, err := h.Lock.Commit(ctx, runlock.CommitRequest{Owner: in.ExecutionID, RunID: in.ExecutionName,
		ExportJobID: in.ExportJobID, Counts: counts, Window: in.Window, Export: exp})
	if errors.Is(err, runlock.ErrNotOwner) {
		return FinishOutput{}, &LockLostError{RunID: in.ExecutionName, Err: err}
	}
	if errors.Is(err, runlock.ErrPartMismatch) || errors.Is(err, runlock.ErrWindowMismatch) {
		return FinishOutput{}, &InputError{Msg: "commit " + in.ExecutionName + ": " + err.Error()}
	}
	if err != nil {
		return FinishOutput{}, fmt.Errorf("commit %s: %w", in.ExecutionName, err)
	}
	h.emit(in, h.lag(res.Checkpoint)...)
	out := FinishOutput{RunID: in.ExecutionName, Checkpoint: envelope.FormatTime(res.Checkpoint), Outcome: string(res.Outcome)}
	if res.Pending != nil {
		out.NextPart, out.Parts = res.Pending.Next.Part, res.Pending.Next.Parts
	}
	return out, nil
}

// ParseDeletes reads the deletes field of a commit: the delete scan's
// output (internal/deletes.Output), whose totals give the run's Deletes
// and the deletes' share of FastPathSkipped and FastPathMissed. Absent,
// null, or without totals (no scan ran: an empty window) counts nothing.
func ParseDeletes(raw json.RawMessage) (runlock.Counts, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return runlock.Counts{}, nil
	}
	// The fields of deletes.Totals the run record keeps (runctl does not
	// link the scan, which reads HealthLake and publishes).
	var out struct {
		Totals *struct {
			Deletes         int64 `json:"deletes"`
			FastPathSkipped int64 `json:"fastPathSkipped"`
			FastPathMissed  int64 `json:"fastPathMissed"`
		} `json:"totals"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return runlock.Counts{}, &InputError{Msg: "deletes: not a delete scan output object (" + clip.String(err.Error(), 200) + ")"}
	}
	t := out.Totals
	if t == nil {
		return runlock.Counts{}, nil
	}
	if t.Deletes < 0 || t.FastPathSkipped < 0 || t.FastPathMissed < 0 {
		return runlock.Counts{}, &InputError{Msg: "deletes: negative totals"}
	}
	return runlock.Counts{Deletes: t.Deletes, FastPathSkipped: t.FastPathSkipped, FastPathMissed: t.FastPathMissed}, nil
}

// ParseExport reads the export field of a commit: nil for absent, null or
// an object without parts (no export, or an export wait output from before
// manifests had parts), else the manifest part the run delivered.
func ParseExport(raw json.RawMessage) (*manifest.Export, error) {
	trimmed := strings.TrimSpace(string(raw))
	if trimmed == "" || trimmed == "null" {
		return nil, nil
	}
	var e manifest.Export
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, &InputError{Msg: "export: not a manifest part object (" + clip.String(err.Error(), 200) + ")"}
	}
	if e.Parts == 0 {
		return nil, nil
	}
	if err := e.Validate(); err != nil {
		return nil, &InputError{Msg: err.Error()}
	}
	return &e, nil
}

func (h *Handler) fail(ctx context.Context, in Input) (FinishOutput, error) {
	start, err := startTime(in)
	if err != nil {
		start = time.Time{} // a failing run must still be closed
	}
	reason := FailureReason(in.Error, in.Cause)
	if h.Exports != nil {
		timeout := h.CancelTimeout
		if timeout <= 0 {
			timeout = 20 * time.Second
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		if cerr := h.Exports.CancelRunExport(cctx, in.ExecutionName); cerr != nil {
			h.log().Warn("export cancel failed", "executionId", in.ExecutionID, "runId", in.ExecutionName, "error", clip.String(cerr.Error(), 300))
		}
		cancel()
	}
	res, err := h.Lock.Fail(ctx, runlock.FailRequest{Owner: in.ExecutionID, RunID: in.ExecutionName, StartTime: start,
		ExportJobID: in.ExportJobID, Reason: reason})
	if err != nil {
		return FinishOutput{}, fmt.Errorf("fail %s: %w", in.ExecutionName, err)
	}
	h.emit(in, metrics.Count(metrics.RunsFailed, 1))
	return FinishOutput{RunID: in.ExecutionName, Checkpoint: envelope.FormatTime(res.Checkpoint), Outcome: string(res.Outcome)}, nil
}

// Bounds of the parts of a stored failure reason.
const (
	maxErrorBytes = 256
	maxCauseBytes = 700
)

// FailureReason builds the stored reason of a failed run from the caught
// error name and cause: a Lambda cause {"errorType","errorMessage",...}
// keeps only its type and message (no stack trace), control characters are
// dropped and both parts are truncated.
func FailureReason(errName, cause string) string {
	errName = clip.String(clean(errName), maxErrorBytes)
	if errName == "" {
		errName = "UnknownError"
	}
	var lambdaErr struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	if json.Unmarshal([]byte(cause), &lambdaErr) == nil && (lambdaErr.Message != "" || lambdaErr.Type != "") {
		cause = lambdaErr.Message
		if lambdaErr.Type != "" && lambdaErr.Type != errName {
			cause = lambdaErr.Type + ": " + cause
		}
	}
	cause = clip.String(clean(cause), maxCauseBytes)
	if cause == "" {
		return errName
	}
	return errName + ": " + cause
}

func clean(v string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, v))
}
