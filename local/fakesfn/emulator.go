// Package sfn emulates the AWS Step Functions API (AWS JSON 1.0) over the
// project's States Language interpreter, local/asl: state machines,
// executions with their history, and the task-token callbacks.
package fakesfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

// Defaults for Options.
const (
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
)

// LambdaInvoker invokes a Lambda function the way Lambda's Invoke does: a
// handler error is functionError=true with out = {"errorType","errorMessage"};
// err means the invocation itself failed (Lambda.ServiceException).
type LambdaInvoker interface {
	Invoke(ctx context.Context, function string, payload []byte) (out []byte, functionError bool, err error)
}

// Options configure an Emulator.
type Options struct {
	// Region and AccountID appear in ARNs; defaults us-east-1 / 000000000000.
	Region, AccountID string
	// Lambda runs arn:aws:states:::lambda:invoke tasks.
	Lambda LambdaInvoker
	// SQS runs arn:aws:states:::sqs:sendMessage[.waitForTaskToken] tasks.
	SQS SQSSender
	// S3 serves Distributed Map ItemReader (GetObject) and ResultWriter (PutObject).
	S3 ObjectStore
	// Clock is the time source; default the wall clock.
	Clock asl.Clock
	// TimeScale multiplies every wait (Wait states, Retry intervals,
	// heartbeats, timeouts); 0 or 1 is real time, 0.001 runs a minute in 60 ms.
	TimeScale float64
	// ExpressMaxDuration is the longest an EXPRESS execution (an EXPRESS
	// machine's, or a Distributed Map child) runs before it ends TIMED_OUT
	// with States.Timeout; 0 is AWS's 5 minutes. Scaled by TimeScale; tests
	// may set a smaller one.
	ExpressMaxDuration time.Duration
	// OnTransition, when set, is called for each state transition of every
	// execution (parent and Distributed Map children).
	OnTransition func(executionARN, stateName string)
	// OnStart, when set, is called once for each execution started through
	// StartExecution (the API or the Go method; not Distributed Map
	// children), after it started, with its ARN and its state machine's.
	OnStart func(executionARN, stateMachineARN string)
}

// Emulator is an in-memory Step Functions service.
type Emulator struct {
	opts   Options
	tokens *asl.Tokens

	ctx    context.Context
	cancel context.CancelFunc

	runOnce sync.Once
	run     *asl.Runner

	mu         sync.Mutex
	machines   map[string]*stateMachine // by ARN
	executions map[string]*execution    // by ARN
	order      []*execution
}

// New returns an Emulator with no state machines.
func New(opts Options) *Emulator {
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	if opts.Clock == nil {
		opts.Clock = asl.RealClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Emulator{
		opts:       opts,
		tokens:     asl.NewTokens(opts.Clock, opts.TimeScale),
		ctx:        ctx,
		cancel:     cancel,
		machines:   map[string]*stateMachine{},
		executions: map[string]*execution{},
	}
}

// Close stops every running execution (they end ABORTED).
func (e *Emulator) Close() {
	e.cancel()
}

// IssueTaskToken returns a task token with no state machine behind it, for
// tests of code that calls SendTaskSuccess/Failure/Heartbeat. A zero
// heartbeat or timeout means none (both are scaled by Options.TimeScale).
func (e *Emulator) IssueTaskToken(heartbeat, timeout time.Duration) string {
	return e.tokens.Issue(heartbeat, timeout)
}

// TaskOutcome is what became of a task token.
type TaskOutcome = asl.TaskOutcome

// TaskOutcome reports what became of a token: Status PENDING, SUCCEEDED,
// FAILED or TIMED_OUT, with Output, Error, Cause and the heartbeat count.
func (e *Emulator) TaskOutcome(token string) (TaskOutcome, bool) {
	return e.tokens.Outcome(token)
}

// apiError is an AWS JSON 1.0 error response.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (a *apiError) Error() string { return a.Type + ": " + a.Message }

func errf(typ, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typ, Message: fmt.Sprintf(format, args...)}
}

type handler func(e *Emulator, ctx context.Context, body []byte) (any, error)

var operations = map[string]handler{
	"SendTaskSuccess":      (*Emulator).sendTaskSuccess,
	"SendTaskFailure":      (*Emulator).sendTaskFailure,
	"SendTaskHeartbeat":    (*Emulator).sendTaskHeartbeat,
	"CreateStateMachine":   (*Emulator).createStateMachine,
	"DescribeStateMachine": (*Emulator).describeStateMachine,
	"ListStateMachines":    (*Emulator).listStateMachines,
	"StartExecution":       (*Emulator).startExecution,
	"DescribeExecution":    (*Emulator).describeExecution,
	"ListExecutions":       (*Emulator).listExecutions,
	"StopExecution":        (*Emulator).stopExecution,
	"GetExecutionHistory":  (*Emulator).getExecutionHistory,
}

// ServeHTTP implements the Step Functions AWS JSON 1.0 protocol: POST with
// X-Amz-Target "AWSStepFunctions.<Operation>".
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Header.Get("X-Amz-Target")
	op, ok := strings.CutPrefix(target, "AWSStepFunctions.")
	if r.Method != http.MethodPost || !ok {
		writeErr(w, &apiError{Status: http.StatusBadRequest, Type: "UnknownOperationException", Message: "unsupported target " + target})
		return
	}
	h, ok := operations[op]
	if !ok {
		writeErr(w, &apiError{Status: http.StatusBadRequest, Type: "UnknownOperationException", Message: "operation " + op + " is not emulated"})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		writeErr(w, errf("SerializationException", "read body: %v", err))
		return
	}
	if len(body) == 0 {
		body = []byte("{}")
	}
	out, err := h(e, r.Context(), body)
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{Status: http.StatusInternalServerError, Type: "InternalFailure", Message: err.Error()}
		}
		writeErr(w, ae)
		return
	}
	if out == nil {
		out = struct{}{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		writeErr(w, &apiError{Status: http.StatusInternalServerError, Type: "InternalFailure", Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_, _ = w.Write(b)
}

func writeErr(w http.ResponseWriter, ae *apiError) {
	b, _ := json.Marshal(map[string]string{"__type": ae.Type, "message": ae.Message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", ae.Type)
	w.WriteHeader(ae.Status)
	_, _ = w.Write(b)
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return errf("SerializationException", "cannot decode request: %v", err)
	}
	return nil
}

func tokenErr(err error) error {
	switch {
	case errors.Is(err, asl.ErrInvalidToken):
		return errf("InvalidToken", "Invalid Token: '%v'", err)
	case errors.Is(err, asl.ErrTaskDoesNotExist):
		return errf("TaskDoesNotExist", "Task Does Not Exist")
	case errors.Is(err, asl.ErrTaskTimedOut):
		return errf("TaskTimedOut", "Task Timed Out")
	case errors.Is(err, asl.ErrInvalidOutput):
		return errf("InvalidOutput", "Invalid Output: %v", err)
	}
	return err
}

func (e *Emulator) sendTaskSuccess(_ context.Context, body []byte) (any, error) {
	var in struct {
		TaskToken string  `json:"taskToken"`
		Output    *string `json:"output"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.TaskToken == "" || in.Output == nil {
		return nil, errf("ValidationException", "taskToken and output are required")
	}
	if len(in.TaskToken) > 2048 {
		return nil, errf("InvalidToken", "Invalid Token: too long")
	}
	if err := e.tokens.Succeed(in.TaskToken, *in.Output); err != nil {
		return nil, tokenErr(err)
	}
	return struct{}{}, nil
}

func (e *Emulator) sendTaskFailure(_ context.Context, body []byte) (any, error) {
	var in struct {
		TaskToken string `json:"taskToken"`
		Error     string `json:"error"`
		Cause     string `json:"cause"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.TaskToken == "" {
		return nil, errf("ValidationException", "taskToken is required")
	}
	if len([]rune(in.Error)) > 256 {
		return nil, errf("ValidationException", "1 validation error detected: Value at 'error' failed to satisfy constraint: Member must have length less than or equal to 256")
	}
	if len([]rune(in.Cause)) > 32768 {
		return nil, errf("ValidationException", "1 validation error detected: Value at 'cause' failed to satisfy constraint: Member must have length less than or equal to 32768")
	}
	if err := e.tokens.Fail(in.TaskToken, in.Error, in.Cause); err != nil {
		return nil, tokenErr(err)
	}
	return struct{}{}, nil
}

func (e *Emulator) sendTaskHeartbeat(_ context.Context, body []byte) (any, error) {
	var in struct {
		TaskToken string `json:"taskToken"`
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if in.TaskToken == "" {
		return nil, errf("ValidationException", "taskToken is required")
	}
	if err := e.tokens.Heartbeat(in.TaskToken); err != nil {
		return nil, tokenErr(err)
	}
	return struct{}{}, nil
}
