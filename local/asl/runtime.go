package asl

import (
	"context"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Execution statuses.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	StatusTimedOut  = "TIMED_OUT"
	StatusAborted   = "ABORTED"
)

// Execution types.
const (
	TypeStandard = "STANDARD"
	TypeExpress  = "EXPRESS"
)

// TaskRunner performs the resource of a Task state. Named failures are
// returned as *Error; any other error becomes States.TaskFailed.
type TaskRunner interface {
	RunTask(ctx context.Context, call TaskCall) (result any, err error)
}

// TaskCall is one invocation of a Task resource.
type TaskCall struct {
	// Resource is the resource ARN without the .waitForTaskToken suffix.
	Resource string
	// WaitForTaskToken is set for the callback pattern; TaskToken holds the token.
	WaitForTaskToken bool
	TaskToken        string
	// Parameters is the effective input (after Parameters processing).
	Parameters any
	// ExecutionARN and StateName say who calls.
	ExecutionARN, StateName string
}

// ObjectStore reads and writes S3 objects for the Distributed Map's
// ItemReader and ResultWriter.
type ObjectStore interface {
	GetObject(ctx context.Context, bucket, key string) ([]byte, error)
	PutObject(ctx context.Context, bucket, key string, body []byte) error
}

// Config wires an interpreter Runner to the outside world.
type Config struct {
	// Tasks performs Task resources.
	Tasks TaskRunner
	// Objects serves ItemReader/ResultWriter.
	Objects ObjectStore
	// Tokens issues and tracks task tokens for waitForTaskToken.
	Tokens *Tokens
	// Clock is the time source (default the wall clock); TimeScale
	// multiplies every wait (0 or 1: real time).
	Clock     Clock
	TimeScale float64
	// ExpressMaxDuration is the longest an EXPRESS execution (an EXPRESS
	// machine's or a Distributed Map's child) runs before it ends TIMED_OUT
	// with States.Timeout; 0 means AWS's DefaultExpressMaxDuration. Like
	// every duration it is multiplied by TimeScale; tests may set a smaller
	// one.
	ExpressMaxDuration time.Duration
	// Region and AccountID are used in Map Run and child execution ARNs.
	Region, AccountID string
	// OnTransition is called for each state transition of every execution.
	OnTransition func(executionARN, stateName string)
	// OnChildExecution is called when a Distributed Map starts a child execution.
	OnChildExecution func(*Execution)
}

// Runner starts executions of parsed machines.
type Runner struct {
	cfg Config
}

// NewRunner returns a Runner with cfg's defaults filled in.
func NewRunner(cfg Config) *Runner {
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Tokens == nil {
		cfg.Tokens = NewTokens(cfg.Clock, cfg.TimeScale)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "000000000000"
	}
	if cfg.ExpressMaxDuration <= 0 {
		cfg.ExpressMaxDuration = DefaultExpressMaxDuration
	}
	return &Runner{cfg: cfg}
}

// DefaultExpressMaxDuration is the longest an EXPRESS execution runs in
// Step Functions (5 minutes).
const DefaultExpressMaxDuration = 5 * time.Minute

// executionLimit returns how long an execution of type typ may run under
// the machine's TimeoutSeconds (0: none) and the EXPRESS limit, with the
// cause it times out with; 0 means no limit.
func (r *Runner) executionLimit(typ string, timeoutSeconds int64) (time.Duration, string) {
	var d time.Duration
	var cause string
	if timeoutSeconds > 0 {
		d = time.Duration(timeoutSeconds) * time.Second
		cause = "The execution ran longer than the state machine's TimeoutSeconds"
	}
	if exp := r.cfg.ExpressMaxDuration; typ == TypeExpress && (d == 0 || exp < d) {
		d = exp
		cause = fmt.Sprintf("The EXPRESS execution ran longer than %v, the longest an EXPRESS execution runs", exp)
	}
	return d, cause
}

// StartInput names a new execution.
type StartInput struct {
	ExecutionARN, Name                string
	StateMachineARN, StateMachineName string
	RoleARN                           string
	// Type is STANDARD (default) or EXPRESS.
	Type string
	// Input is the execution input JSON (default "{}").
	Input string
	// MapRunARN is set for Distributed Map children.
	MapRunARN string
}

// Event is one entry of an execution's history.
type Event struct {
	ID, PreviousEventID int64
	Type                string
	Timestamp           time.Time
	StateName           string
	// Input and Output are JSON text as the event carries it.
	Input, Output string
	Error, Cause  string
	// Task events: ResourceType ("lambda", "sqs", ...), Resource ("invoke", ...), Parameters JSON.
	ResourceType, Resource, Parameters string
	TimeoutSeconds, HeartbeatSeconds   int64
	// Map events.
	MapRunARN string
	Length    int
	Index     int
	// RoleARN for ExecutionStarted.
	RoleARN string
}

// ExecutionInfo is a snapshot of an execution.
type ExecutionInfo struct {
	ARN, Name                         string
	StateMachineARN, StateMachineName string
	Type                              string
	MapRunARN                         string
	Status                            string
	Input, Output                     string
	Error, Cause                      string
	StartDate, StopDate               time.Time
	Transitions                       int
}

// Execution is a running or finished execution.
type Execution struct {
	info    ExecutionInfo
	roleARN string

	mu     sync.Mutex
	events []Event
	done   chan struct{}
	cancel context.CancelCauseFunc
}

// Info returns a snapshot of the execution.
func (x *Execution) Info() ExecutionInfo {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.info
}

// History returns a copy of the execution's events, oldest first.
func (x *Execution) History() []Event {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]Event(nil), x.events...)
}

// Transitions returns how many state transitions the execution has made
// (each state entered and each retry).
func (x *Execution) Transitions() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.info.Transitions
}

// Done is closed when the execution has finished.
func (x *Execution) Done() <-chan struct{} { return x.done }

// Wait blocks until the execution finishes or ctx ends.
func (x *Execution) Wait(ctx context.Context) (ExecutionInfo, error) {
	select {
	case <-x.done:
		return x.Info(), nil
	case <-ctx.Done():
		return x.Info(), fmt.Errorf("wait for execution %s: %w", x.info.ARN, ctx.Err())
	}
}

// abortError is the cancel cause of StopExecution.
type abortError struct{ name, cause string }

func (a *abortError) Error() string { return "execution aborted: " + a.name + " " + a.cause }

// timedOutError is the cancel cause of an execution that reached its
// TimeoutSeconds or the EXPRESS limit.
type timedOutError struct{ cause string }

func (e *timedOutError) Error() string { return "execution timed out: " + e.cause }

// Stop aborts a running execution (status ABORTED); no effect once finished.
func (x *Execution) Stop(errName, cause string) {
	x.cancel(&abortError{name: errName, cause: cause})
}

// TimeOut ends a running execution TIMED_OUT with cause, as reaching its
// machine's TimeoutSeconds does; no effect once finished. Step Functions has
// no call for it: tests use it to arrange a timed-out execution at once.
func (x *Execution) TimeOut(cause string) {
	x.cancel(&timedOutError{cause: cause})
}

// MaxHistoryEvents is the history limit of a STANDARD execution; an
// execution that reaches it fails with States.Runtime.
const MaxHistoryEvents = 25000

func (x *Execution) eventCount() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.events)
}

func (x *Execution) addEvent(ev Event) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ev.ID = int64(len(x.events) + 1)
	ev.PreviousEventID = ev.ID - 1
	x.events = append(x.events, ev)
}

// Start validates the input and runs the execution in the background.
func (r *Runner) Start(ctx context.Context, m *Machine, in StartInput) (*Execution, error) {
	x, input, err := r.newExecution(in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	x.cancel = cancel
	go r.runExecution(ctx, m.root, m.TimeoutSeconds, x, input)
	return x, nil
}

func (r *Runner) newExecution(in StartInput) (*Execution, any, error) {
	if in.Input == "" {
		in.Input = "{}"
	}
	if len(in.Input) > MaxPayloadBytes {
		return nil, nil, Errorf(ErrorDataLimitExceeded, "execution input is %d bytes, more than %d", len(in.Input), MaxPayloadBytes)
	}
	input, err := ParseJSON(in.Input)
	if err != nil {
		return nil, nil, fmt.Errorf("execution input: %w", err)
	}
	if in.Type == "" {
		in.Type = TypeStandard
	}
	x := &Execution{
		info: ExecutionInfo{
			ARN: in.ExecutionARN, Name: in.Name, StateMachineARN: in.StateMachineARN,
			StateMachineName: in.StateMachineName, Type: in.Type, MapRunARN: in.MapRunARN,
			Status: StatusRunning, Input: in.Input, StartDate: r.cfg.Clock.Now(),
		},
		roleARN: in.RoleARN,
		done:    make(chan struct{}),
		cancel:  func(error) {},
	}
	return x, input, nil
}

// run is the interpreter state of one execution.
type run struct {
	r     *Runner
	x     *Execution
	input any
}

// runExecution runs x to its end. timeoutSeconds is the machine's
// TimeoutSeconds (0: none); an EXPRESS execution also ends at the EXPRESS
// limit.
func (r *Runner) runExecution(ctx context.Context, root *processor, timeoutSeconds int64, x *Execution, input any) {
	defer close(x.done)
	ctx = withScope(ctx, newScope(nil))
	rn := &run{r: r, x: x, input: input}
	x.addEvent(Event{Type: "ExecutionStarted", Timestamp: r.cfg.Clock.Now(), Input: x.info.Input, RoleARN: x.roleARN})
	if limit, why := r.executionLimit(x.info.Type, timeoutSeconds); limit > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			select {
			case <-r.cfg.Clock.After(scale(limit, r.cfg.TimeScale)):
				x.cancel(&timedOutError{cause: why})
			case <-stop:
			case <-ctx.Done():
			}
		}()
	}
	out, err := rn.runProcessor(ctx, root, input)
	now := r.cfg.Clock.Now()
	var ev Event
	x.mu.Lock()
	x.info.StopDate = now
	switch {
	case err == nil:
		s, merr := MarshalJSON(out)
		if merr != nil {
			x.info.Status, x.info.Error, x.info.Cause = StatusFailed, ErrorRuntime, merr.Error()
			ev = Event{Type: "ExecutionFailed", Error: ErrorRuntime, Cause: merr.Error()}
			break
		}
		x.info.Status, x.info.Output = StatusSucceeded, s
		ev = Event{Type: "ExecutionSucceeded", Output: s}
	case ctx.Err() != nil:
		cause := context.Cause(ctx)
		var ab *abortError
		var to *timedOutError
		switch {
		case errors.As(cause, &ab):
			x.info.Status, x.info.Error, x.info.Cause = StatusAborted, ab.name, ab.cause
			ev = Event{Type: "ExecutionAborted", Error: ab.name, Cause: ab.cause}
		case errors.As(cause, &to):
			x.info.Status, x.info.Error, x.info.Cause = StatusTimedOut, ErrorTimeout, to.cause
			ev = Event{Type: "ExecutionTimedOut", Error: x.info.Error, Cause: x.info.Cause}
		default:
			x.info.Status, x.info.Error, x.info.Cause = StatusAborted, "", "the service stopped"
			ev = Event{Type: "ExecutionAborted", Cause: x.info.Cause}
		}
	default:
		e := asError(err)
		x.info.Status, x.info.Error, x.info.Cause = StatusFailed, e.Name, e.Cause
		ev = Event{Type: "ExecutionFailed", Error: e.Name, Cause: e.Cause}
	}
	x.mu.Unlock()
	ev.Timestamp = now
	x.addEvent(ev)
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Name: ErrorTaskFailed, Cause: err.Error()}
}

func (rn *run) now() time.Time { return rn.r.cfg.Clock.Now() }

func (rn *run) event(ev Event) {
	if ev.Timestamp.IsZero() {
		ev.Timestamp = rn.now()
	}
	rn.x.addEvent(ev)
}

func (rn *run) transition(state string) {
	rn.x.mu.Lock()
	rn.x.info.Transitions++
	arn := rn.x.info.ARN
	rn.x.mu.Unlock()
	if f := rn.r.cfg.OnTransition; f != nil {
		f(arn, state)
	}
}

func (rn *run) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-rn.r.cfg.Clock.After(scale(d, rn.r.cfg.TimeScale)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FormatTime renders a time as Step Functions does in the context object.
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ctxObject builds the context object ($$) for a state.
type stateCtx struct {
	name      string
	entered   time.Time
	retries   int
	token     string
	itemIndex int
	itemValue any
	hasItem   bool
	// vars are the variables as the state was entered; pend receives what
	// the state assigns, committed when it finishes.
	vars map[string]any
	pend *pendingAssign
}

type pendingAssign struct {
	vals map[string]any
}

// set records the values a state or catcher assigns.
func (p *pendingAssign) set(vals map[string]any) {
	if p != nil {
		p.vals = vals
	}
}

// ctxObject builds what paths evaluate against besides the data: the
// context object and the state's view of the variables.
func (rn *run) ctxObject(sc stateCtx) *evalEnv {
	info := rn.x.Info()
	c := map[string]any{
		"Execution": map[string]any{
			"Id":           info.ARN,
			"Name":         info.Name,
			"StartTime":    FormatTime(info.StartDate),
			"Input":        rn.input,
			"RoleArn":      rn.x.roleARN,
			"RedriveCount": int64(0),
		},
		"State": map[string]any{
			"Name":        sc.name,
			"EnteredTime": FormatTime(sc.entered),
			"RetryCount":  int64(sc.retries),
		},
		"StateMachine": map[string]any{
			"Id":   info.StateMachineARN,
			"Name": info.StateMachineName,
		},
	}
	if sc.token != "" {
		c["Task"] = map[string]any{"Token": sc.token}
	}
	if sc.hasItem {
		c["Map"] = map[string]any{"Item": map[string]any{"Index": int64(sc.itemIndex), "Value": sc.itemValue}}
	}
	return &evalEnv{ctx: c, vars: sc.vars}
}

// statesVar builds JSONata's $states for a state.
func statesVar(input any, env *evalEnv) map[string]any {
	return map[string]any{"input": input, "context": env.ctx}
}

// jOutput finishes a JSONata state: Output (default def) and Assign, both
// evaluated with the variables as the state was entered.
func jOutput(s *state, states map[string]any, def any, env *evalEnv, pend *pendingAssign) (any, error) {
	out := def
	if s.output != nil {
		var err error
		if out, err = s.output.eval(states, env); err != nil {
			return nil, err
		}
	}
	if s.assign != nil {
		vals, err := s.assign.eval(nil, env, states)
		if err != nil {
			return nil, err
		}
		pend.set(vals)
	}
	return out, nil
}

// jInt evaluates a JSONata expression given for an integer field.
func jInt(t *jtemplate, field string, states map[string]any, env *evalEnv) (int64, error) {
	v, err := t.eval(states, env)
	if err != nil {
		return 0, err
	}
	n, ok := isInteger(v)
	if !ok || n < 0 {
		return 0, Errorf(ErrorQueryEvaluation, "The JSONata expression of %s returned %s, not a non-negative integer", field, mustJSON(v))
	}
	return n, nil
}

// jString evaluates a JSONata expression given for a string field.
func jString(t *jtemplate, field string, states map[string]any, env *evalEnv) (string, error) {
	v, err := t.eval(states, env)
	if err != nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", Errorf(ErrorQueryEvaluation, "The JSONata expression of %s returned %s, not a string", field, mustJSON(v))
	}
	return str, nil
}

// runProcessor runs states from StartAt until one ends the processor.
func (rn *run) runProcessor(ctx context.Context, p *processor, input any) (any, error) {
	name := p.startAt
	cur := input
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if rn.x.info.Type == TypeStandard && rn.x.eventCount() >= MaxHistoryEvents {
			return nil, runtimeErr("The execution reached the maximum number of history events (%d).", MaxHistoryEvents)
		}
		s := p.states[name]
		out, next, err := rn.runState(ctx, s, cur)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		name, cur = next, out
	}
}

func (rn *run) runState(ctx context.Context, s *state, raw any) (out any, next string, err error) {
	entered := rn.now()
	rn.event(Event{Type: s.typ + "StateEntered", StateName: s.name, Input: mustJSON(raw), Timestamp: entered})
	rn.transition(s.name)
	scope := scopeFrom(ctx)
	sc := stateCtx{name: s.name, entered: entered, pend: &pendingAssign{}}
	if scope != nil {
		sc.vars = scope.snapshot()
	}
	switch s.typ {
	case "Pass":
		out, err = rn.pass(s, raw, sc)
		next = s.next
	case "Choice":
		out, next, err = rn.choice(s, raw, sc)
	case "Wait":
		out, err = rn.wait(ctx, s, raw, sc)
		next = s.next
	case "Succeed":
		if s.jsonata {
			env := rn.ctxObject(sc)
			out, err = jOutput(s, statesVar(raw, env), raw, env, sc.pend)
			break
		}
		var eff any
		if eff, err = inputPath(s, raw, rn.ctxObject(sc)); err == nil {
			out, err = outputPath(s, eff, rn.ctxObject(sc))
		}
	case "Fail":
		return nil, "", rn.fail(s, raw, sc)
	case "Task", "Map", "Parallel":
		out, next, err = rn.withRetry(ctx, s, raw, sc)
	default:
		err = runtimeErr("state %q has unsupported type %q", s.name, s.typ)
	}
	if err != nil {
		if ctx.Err() != nil {
			switch s.typ {
			case "Task", "Wait", "Map", "Parallel":
				rn.event(Event{Type: s.typ + "StateAborted", StateName: s.name})
			}
		}
		return nil, "", err
	}
	if err := checkSize(out, "state output of '"+s.name+"'"); err != nil {
		return nil, "", err
	}
	if scope != nil && sc.pend.vals != nil {
		scope.assign(sc.pend.vals)
	}
	rn.event(Event{Type: s.typ + "StateExited", StateName: s.name, Output: mustJSON(out)})
	return out, next, nil
}

func inputPath(s *state, raw, ctxObj any) (any, error) {
	switch {
	case !s.inputPath.set:
		return raw, nil
	case s.inputPath.null:
		return map[string]any{}, nil
	}
	v, err := s.inputPath.p.get(raw, ctxObj)
	if err != nil {
		return nil, runtimeErr("An error occurred while executing the state '%s'. Invalid path '%s' : No results for path: %s", s.name, s.inputPath.p.src, s.inputPath.p.src)
	}
	return v, nil
}

func outputPath(s *state, v, ctxObj any) (any, error) {
	switch {
	case !s.outputPath.set:
		return v, nil
	case s.outputPath.null:
		return map[string]any{}, nil
	}
	out, err := s.outputPath.p.get(v, ctxObj)
	if err != nil {
		return nil, runtimeErr("An error occurred while executing the state '%s'. Invalid path '%s' : No results for path: %s", s.name, s.outputPath.p.src, s.outputPath.p.src)
	}
	return out, nil
}

func resultPath(op optPath, raw, result any) (any, error) {
	switch {
	case !op.set:
		return result, nil
	case op.null:
		return raw, nil
	}
	return op.p.set(raw, result)
}

// finish applies ResultSelector, Assign, ResultPath and OutputPath to a
// result; for a JSONata state, Output and Assign.
func (rn *run) finish(s *state, raw, result any, ctxObj *evalEnv, pend *pendingAssign) (any, error) {
	if s.jsonata {
		states := statesVar(raw, ctxObj)
		states["result"] = result
		return jOutput(s, states, result, ctxObj, pend)
	}
	var err error
	if s.resultSelector != nil {
		if result, err = s.resultSelector.eval(result, ctxObj); err != nil {
			return nil, err
		}
	}
	if s.assign != nil {
		vals, err := s.assign.eval(result, ctxObj, nil)
		if err != nil {
			return nil, err
		}
		pend.set(vals)
	}
	combined, err := resultPath(s.resultPath, raw, result)
	if err != nil {
		return nil, err
	}
	return outputPath(s, combined, ctxObj)
}

func (rn *run) pass(s *state, raw any, sc stateCtx) (any, error) {
	ctxObj := rn.ctxObject(sc)
	if s.jsonata {
		return jOutput(s, statesVar(raw, ctxObj), raw, ctxObj, sc.pend)
	}
	eff, err := rn.effectiveInput(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	result := eff
	if s.hasResult {
		result = deepCopy(s.result)
	}
	if s.assign != nil {
		vals, err := s.assign.eval(result, ctxObj, nil)
		if err != nil {
			return nil, err
		}
		sc.pend.set(vals)
	}
	combined, err := resultPath(s.resultPath, raw, result)
	if err != nil {
		return nil, err
	}
	return outputPath(s, combined, ctxObj)
}

func (rn *run) choice(s *state, raw any, sc stateCtx) (any, string, error) {
	ctxObj := rn.ctxObject(sc)
	var states map[string]any
	eff := raw
	var err error
	if s.jsonata {
		states = statesVar(raw, ctxObj)
	} else if eff, err = inputPath(s, raw, ctxObj); err != nil {
		return nil, "", err
	}
	next := ""
	var matched *choiceRule
	for _, c := range s.choices {
		var ok bool
		if s.jsonata {
			v, err := c.condition.eval(states, ctxObj)
			if err != nil {
				return nil, "", err
			}
			b, isBool := v.(bool)
			if !isBool {
				return nil, "", Errorf(ErrorQueryEvaluation, "The Condition of a Choice rule of state '%s' returned %s, not a boolean", s.name, mustJSON(v))
			}
			ok = b
		} else if ok, err = c.eval(eff, ctxObj); err != nil {
			return nil, "", err
		}
		if ok {
			next, matched = c.next, c
			break
		}
	}
	if next == "" {
		next = s.deflt
	}
	if next == "" {
		return nil, "", Errorf(ErrorNoChoiceMatched, "No Choice Rules matched and no Default was specified in state '%s'", s.name)
	}
	// A matched rule's own Assign and Output apply; the state's apply when
	// the Default is taken.
	assign, output := s.assign, s.output
	if matched != nil {
		assign, output = matched.assign, matched.output
	}
	if assign != nil {
		vals, err := assign.eval(eff, ctxObj, states)
		if err != nil {
			return nil, "", err
		}
		sc.pend.set(vals)
	}
	if s.jsonata {
		if output == nil {
			return raw, next, nil
		}
		out, err := output.eval(states, ctxObj)
		return out, next, err
	}
	out, err := outputPath(s, eff, ctxObj)
	return out, next, err
}

func (rn *run) wait(ctx context.Context, s *state, raw any, sc stateCtx) (any, error) {
	ctxObj := rn.ctxObject(sc)
	eff, err := inputPath(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	var d time.Duration
	switch {
	case s.jx["Seconds"] != nil:
		n, err := jInt(s.jx["Seconds"], "Seconds", statesVar(raw, ctxObj), ctxObj)
		if err != nil {
			return nil, err
		}
		d = time.Duration(n) * time.Second
	case s.jx["Timestamp"] != nil:
		str, err := jString(s.jx["Timestamp"], "Timestamp", statesVar(raw, ctxObj), ctxObj)
		if err != nil {
			return nil, err
		}
		ts, err := parseTimestamp(str)
		if err != nil {
			return nil, Errorf(ErrorQueryEvaluation, "The Timestamp of state '%s': %v", s.name, err)
		}
		d = ts.Sub(rn.now())
	case s.hasSeconds:
		d = time.Duration(s.seconds) * time.Second
	case s.hasTimestamp:
		d = s.timestamp.Sub(rn.now())
	case s.secondsPath != nil:
		v, err := s.secondsPath.get(eff, ctxObj)
		if err != nil {
			return nil, err
		}
		n, ok := isInteger(v)
		if !ok || n < 0 {
			return nil, runtimeErr("SecondsPath '%s' in state '%s' does not select a non-negative integer", s.secondsPath.src, s.name)
		}
		d = time.Duration(n) * time.Second
	case s.timestampPath != nil:
		v, err := s.timestampPath.get(eff, ctxObj)
		if err != nil {
			return nil, err
		}
		str, _ := v.(string)
		ts, err := parseTimestamp(str)
		if err != nil {
			return nil, runtimeErr("TimestampPath '%s' in state '%s': %v", s.timestampPath.src, s.name, err)
		}
		d = ts.Sub(rn.now())
	}
	if err := rn.sleep(ctx, d); err != nil {
		return nil, err
	}
	if s.jsonata {
		return jOutput(s, statesVar(raw, ctxObj), raw, ctxObj, sc.pend)
	}
	if s.assign != nil {
		vals, err := s.assign.eval(eff, ctxObj, nil)
		if err != nil {
			return nil, err
		}
		sc.pend.set(vals)
	}
	return outputPath(s, eff, ctxObj)
}

func (rn *run) fail(s *state, raw any, sc stateCtx) error {
	e := &Error{Name: s.errName, Cause: s.cause}
	ctxObj := rn.ctxObject(sc)
	for _, f := range []struct {
		key string
		dst *string
	}{{"Error", &e.Name}, {"Cause", &e.Cause}} {
		if t := s.jx[f.key]; t != nil {
			str, err := jString(t, f.key, statesVar(raw, ctxObj), ctxObj)
			if err != nil {
				return err
			}
			*f.dst = str
		}
	}
	for _, f := range []struct {
		t   *template
		dst *string
		fld string
	}{{s.errorPath, &e.Name, "ErrorPath"}, {s.causePath, &e.Cause, "CausePath"}} {
		if f.t == nil {
			continue
		}
		v, err := f.t.eval(raw, ctxObj)
		if err != nil {
			return err
		}
		str, ok := v.(string)
		if !ok {
			return runtimeErr("The %s in state '%s' does not select a string", f.fld, s.name)
		}
		*f.dst = str
	}
	return e
}

// withRetry runs a Task, Map or Parallel state, applying Retry and Catch.
func (rn *run) withRetry(ctx context.Context, s *state, raw any, sc stateCtx) (any, string, error) {
	counts := make([]int, len(s.retry))
	for {
		var out any
		var err error
		switch s.typ {
		case "Task":
			out, err = rn.task(ctx, s, raw, sc)
		case "Map":
			out, err = rn.mapState(ctx, s, raw, sc)
		case "Parallel":
			out, err = rn.parallel(ctx, s, raw, sc)
		}
		if err == nil {
			return out, s.next, nil
		}
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		e := asError(err)
		if terminal(e.Name) {
			return nil, "", e
		}
		if i := firstRetrier(s.retry, e.Name); i >= 0 && counts[i] < s.retry[i].maxAttempts {
			rt := s.retry[i]
			delay := rt.interval * math.Pow(rt.backoff, float64(counts[i]))
			if rt.maxDelay > 0 && delay > rt.maxDelay {
				delay = rt.maxDelay
			}
			if rt.jitterFull {
				delay *= mrand.Float64()
			}
			counts[i]++
			sc.retries++
			if err := rn.sleep(ctx, time.Duration(delay*float64(time.Second))); err != nil {
				return nil, "", err
			}
			rn.transition(s.name)
			continue
		}
		for _, c := range s.catch {
			if matches(c.errorEquals, e.Name) {
				out, err := rn.caught(s, c, raw, e, sc)
				if err != nil {
					return nil, "", err
				}
				return out, c.next, nil
			}
		}
		return nil, "", e
	}
}

// caught builds the output of a matching catcher and records its Assign.
func (rn *run) caught(s *state, c catcher, raw any, e *Error, sc stateCtx) (any, error) {
	errOut := map[string]any{"Error": e.Name, "Cause": e.Cause}
	env := rn.ctxObject(sc)
	sc.pend.set(nil)
	if s.jsonata {
		states := statesVar(raw, env)
		states["errorOutput"] = errOut
		out := any(errOut)
		if c.output != nil {
			var err error
			if out, err = c.output.eval(states, env); err != nil {
				return nil, err
			}
		}
		if c.assign != nil {
			vals, err := c.assign.eval(nil, env, states)
			if err != nil {
				return nil, err
			}
			sc.pend.set(vals)
		}
		return out, nil
	}
	if c.assign != nil {
		vals, err := c.assign.eval(errOut, env, nil)
		if err != nil {
			return nil, err
		}
		sc.pend.set(vals)
	}
	return resultPath(c.resultPath, raw, errOut)
}

func firstRetrier(rs []retrier, name string) int {
	for i, r := range rs {
		if matches(r.errorEquals, name) {
			return i
		}
	}
	return -1
}

// splitResource returns the event's resourceType and resource for a Task
// resource ARN.
func splitResource(res string) (typ, name string) {
	if rest, ok := strings.CutPrefix(res, "arn:aws:states:::"); ok {
		if i := strings.IndexByte(rest, ':'); i >= 0 {
			return rest[:i], rest[i+1:]
		}
		return rest, ""
	}
	parts := strings.Split(res, ":")
	if len(parts) > 2 {
		return parts[2], res
	}
	return "", res
}

func (rn *run) intField(name string, fixed int64, p *path, eff, ctxObj any) (int64, error) {
	if p == nil {
		return fixed, nil
	}
	v, err := p.get(eff, ctxObj)
	if err != nil {
		return 0, err
	}
	n, ok := isInteger(v)
	if !ok || n < 0 {
		return 0, runtimeErr("%s '%s' does not select a non-negative integer", name, p.src)
	}
	return n, nil
}

func (rn *run) task(ctx context.Context, s *state, raw any, sc stateCtx) (any, error) {
	ctxObj := rn.ctxObject(sc)
	eff, err := inputPath(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	timeout, err := rn.intField("TimeoutSecondsPath", s.timeoutSeconds, s.timeoutSecondsPath, eff, ctxObj)
	if err != nil {
		return nil, err
	}
	heartbeat, err := rn.intField("HeartbeatSecondsPath", s.heartbeatSeconds, s.heartbeatSecondsPath, eff, ctxObj)
	if err != nil {
		return nil, err
	}
	if t := s.jx["TimeoutSeconds"]; t != nil {
		if timeout, err = jInt(t, "TimeoutSeconds", statesVar(raw, ctxObj), ctxObj); err != nil {
			return nil, err
		}
	}
	if t := s.jx["HeartbeatSeconds"]; t != nil {
		if heartbeat, err = jInt(t, "HeartbeatSeconds", statesVar(raw, ctxObj), ctxObj); err != nil {
			return nil, err
		}
	}
	resource, callback := strings.CutSuffix(s.resource, ".waitForTaskToken")
	if callback {
		sc.token = rn.r.cfg.Tokens.Issue(time.Duration(heartbeat)*time.Second, time.Duration(timeout)*time.Second)
		ctxObj = rn.ctxObject(sc)
	}
	params := eff
	if s.arguments != nil {
		if params, err = s.arguments.eval(statesVar(raw, ctxObj), ctxObj); err != nil {
			if callback {
				rn.r.cfg.Tokens.Cancel(sc.token, "arguments failed")
			}
			return nil, err
		}
	} else if s.parameters != nil {
		if params, err = s.parameters.eval(eff, ctxObj); err != nil {
			if callback {
				rn.r.cfg.Tokens.Cancel(sc.token, "parameters failed")
			}
			return nil, err
		}
	}
	if err := checkSize(params, "input of state '"+s.name+"' after Parameters"); err != nil {
		return nil, err
	}
	rtype, rname := splitResource(s.resource)
	rn.event(Event{Type: "TaskScheduled", StateName: s.name, ResourceType: rtype, Resource: rname,
		Parameters: mustJSON(params), TimeoutSeconds: timeout, HeartbeatSeconds: heartbeat})
	rn.event(Event{Type: "TaskStarted", StateName: s.name, ResourceType: rtype, Resource: rname})
	call := TaskCall{Resource: resource, WaitForTaskToken: callback, TaskToken: sc.token, Parameters: params, ExecutionARN: rn.x.Info().ARN, StateName: s.name}
	var result any
	if callback {
		result, err = rn.callbackTask(ctx, call, rtype, rname)
	} else {
		result, err = rn.requestTask(ctx, call, time.Duration(timeout)*time.Second)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e := asError(err)
		typ := "TaskFailed"
		if e.Name == ErrorTimeout || e.Name == ErrorHeartbeatTimeout {
			typ = "TaskTimedOut"
		}
		rn.event(Event{Type: typ, StateName: s.name, ResourceType: rtype, Resource: rname, Error: e.Name, Cause: e.Cause})
		return nil, e
	}
	if err := checkSize(result, "result of state '"+s.name+"'"); err != nil {
		rn.event(Event{Type: "TaskFailed", StateName: s.name, ResourceType: rtype, Resource: rname, Error: ErrorDataLimitExceeded, Cause: err.(*Error).Cause})
		return nil, err
	}
	rn.event(Event{Type: "TaskSucceeded", StateName: s.name, ResourceType: rtype, Resource: rname, Output: mustJSON(result)})
	return rn.finish(s, raw, result, ctxObj, sc.pend)
}

func (rn *run) requestTask(ctx context.Context, call TaskCall, timeout time.Duration) (any, error) {
	if rn.r.cfg.Tasks == nil {
		return nil, runtimeErr("no task runner is configured for resource %s", call.Resource)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type res struct {
		v   any
		err error
	}
	ch := make(chan res, 1)
	go func() {
		v, err := rn.r.cfg.Tasks.RunTask(cctx, call)
		ch <- res{v, err}
	}()
	var timer <-chan time.Time
	if timeout > 0 {
		timer = rn.r.cfg.Clock.After(scale(timeout, rn.r.cfg.TimeScale))
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-timer:
		return nil, Errorf(ErrorTimeout, "Task timed out after %v", timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (rn *run) callbackTask(ctx context.Context, call TaskCall, rtype, rname string) (any, error) {
	tokens := rn.r.cfg.Tokens
	if rn.r.cfg.Tasks == nil {
		tokens.Cancel(call.TaskToken, "no task runner")
		return nil, runtimeErr("no task runner is configured for resource %s", call.Resource)
	}
	sent, err := rn.r.cfg.Tasks.RunTask(ctx, call)
	if err != nil {
		tokens.Cancel(call.TaskToken, "the task could not be submitted")
		return nil, err
	}
	rn.event(Event{Type: "TaskSubmitted", StateName: call.StateName, ResourceType: rtype, Resource: rname, Output: mustJSON(sent)})
	o, err := tokens.Wait(ctx, call.TaskToken)
	if err != nil {
		tokens.Cancel(call.TaskToken, "the execution stopped")
		return nil, err
	}
	switch o.Status {
	case TokenSucceeded:
		v, err := ParseJSON(o.Output)
		if err != nil {
			return nil, runtimeErr("task output: %v", err)
		}
		return v, nil
	case TokenFailed, TokenTimedOut:
		return nil, &Error{Name: o.Error, Cause: o.Cause}
	}
	return nil, runtimeErr("task token ended in status %s", o.Status)
}

// effectiveInput is a Pass or Parallel state's input after InputPath and
// Parameters, which must stay within the 256 KiB payload limit.
func (rn *run) effectiveInput(s *state, raw any, ctxObj *evalEnv) (any, error) {
	if s.jsonata {
		if s.arguments == nil {
			return raw, nil
		}
		eff, err := s.arguments.eval(statesVar(raw, ctxObj), ctxObj)
		if err != nil {
			return nil, err
		}
		return eff, checkSize(eff, "input of state '"+s.name+"' after Arguments")
	}
	eff, err := inputPath(s, raw, ctxObj)
	if err != nil {
		return nil, err
	}
	if s.parameters != nil {
		if eff, err = s.parameters.eval(eff, ctxObj); err != nil {
			return nil, err
		}
		if err := checkSize(eff, "input of state '"+s.name+"' after Parameters"); err != nil {
			return nil, err
		}
	}
	return eff, nil
}
