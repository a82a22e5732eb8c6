// Package lambdas is the local Lambda service: a registry of in-process
// handlers by function name or ARN, invoked the way Lambda's Invoke API and
// Go runtime do. Payloads go through lambda.NewHandler, so decoding and
// encoding are the real runtime's; a handler error comes back as
// functionError=true with out = {"errorType","errorMessage"}, a panic as the
// runtime reports it. The registry implements the LambdaInvoker seam of the
// Step Functions emulator and the Invoker of local/esm.
//
// Fault hooks make an invocation crash before the handler runs (no side
// effect happened) or after it returned (its side effects happened, its
// result is lost), the two crashes the pipeline must recover from.
package lambdas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Faults decides, per invocation, whether the function crashes. A nil Faults
// injects nothing.
type Faults interface {
	// CrashBefore reports whether the invocation crashes before the handler
	// runs.
	CrashBefore(function string) bool
	// CrashAfter reports whether the invocation crashes after the handler
	// returned, losing its result.
	CrashAfter(function string) bool
}

// ErrorTypeCrash is the errorType of an injected crash, Lambda's for a
// runtime that exited during an invocation.
const ErrorTypeCrash = "Runtime.ExitError"

// ErrorTypeTimeout is the errorType Lambda reports for an invocation that
// ran past the function's timeout (the runtime is stopped; the result is
// lost). In Step Functions it matches States.TaskFailed.
const ErrorTypeTimeout = "Sandbox.Timedout"

// ErrFunctionNotFound is returned (wrapped) by Invoke for an unknown function,
// like Lambda's ResourceNotFoundException.
var ErrFunctionNotFound = errors.New("function not found")

// Stats are one function's counters.
type Stats struct {
	Invocations    int64 `json:"invocations"`    // every Invoke of the function
	FunctionErrors int64 `json:"functionErrors"` // handler errors, panics and injected crashes
	CrashesBefore  int64 `json:"crashesBefore"`  // injected crashes before the handler ran
	CrashesAfter   int64 `json:"crashesAfter"`   // injected crashes after the handler returned
	// DurationMs is the handlers' total run time, for the cost model's GB-seconds.
	DurationMs float64 `json:"durationMs"`
	// Environments counts the execution environments made, and
	// EnvironmentsShutDown those shut down (idle, or by Shutdown), of a
	// function registered with RegisterEnvironments.
	Environments         int64 `json:"environments,omitempty"`
	EnvironmentsShutDown int64 `json:"environmentsShutDown,omitempty"`
}

type function struct {
	name    string
	arn     string
	handler lambda.Handler // nil for a function of environments (envs)
	envs    *environments  // nil for one shared handler
	timeout time.Duration
	// margin is how long before its deadline the handler stops taking work
	// (WithDeadlineMargin); 0 when it has no internal deadline.
	margin time.Duration
	stats  struct{ invocations, errors, before, after, nanos atomic.Int64 }
	// durations holds each run's duration in seconds (handler runs only).
	durMu     sync.Mutex
	durations []float64
}

// Durations summarizes one function's run durations: the seconds from the
// handler's start to its return (what Lambda bills and holds against the
// timeout), over the invocations whose handler ran, and the function's
// timeout in seconds.
type Durations struct {
	P50         float64 `json:"p50"`
	P99         float64 `json:"p99"`
	Max         float64 `json:"max"`
	Timeout     float64 `json:"timeout"`
	Invocations int64   `json:"invocations"`
	// Margin is, for a function with an internal deadline
	// (WithDeadlineMargin), how many seconds before its timeout it stops
	// taking work; PastInternalDeadline counts the runs that went past that
	// point — they stopped themselves and spent part of the margin
	// finishing (publishing what they hold, returning a cursor or an error
	// the caller retries).
	Margin               float64 `json:"margin,omitempty"`
	PastInternalDeadline int64   `json:"pastInternalDeadline,omitempty"`
}

// InternalDeadline is the seconds into a run at which the function stops
// taking work: Timeout less Margin (Timeout without a margin).
func (d Durations) InternalDeadline() float64 { return d.Timeout - d.Margin }

// ShareOfTimeout is Max ÷ Timeout (0 without a timeout).
func (d Durations) ShareOfTimeout() float64 {
	if d.Timeout <= 0 {
		return 0
	}
	return d.Max / d.Timeout
}

// Registry holds the local functions.
type Registry struct {
	region, account string

	mu     sync.RWMutex
	fns    map[string]*function
	faults Faults
	seq    atomic.Int64
	// overhead is the invocation overhead (SetInvokeLatency), or nil.
	overhead func(function string) time.Duration
}

// New returns an empty registry whose ARNs use region and account.
func New(region, account string) *Registry {
	return &Registry{region: region, account: account, fns: map[string]*function{}}
}

// Option configures a registered function.
type Option func(*function)

// WithTimeout sets the function's timeout: the handler's context gets that
// deadline, and a handler that returns after it is a timeout whatever it
// returned. The default is the timeout the stack deploys for the pipeline's
// four Lambdas (internal/stackconfig), else 15 minutes, Lambda's maximum.
func WithTimeout(d time.Duration) Option { return func(f *function) { f.timeout = d } }

// WithDeadlineMargin declares that the handler stops taking work d before
// its context's deadline and uses the rest to finish (the pipeline's
// prepare-change, reconcile and fast-path handlers do): a run that long is
// by design, and Durations reports the margin so that a timeout warning
// measures what a run spends past its internal deadline rather than the
// internal deadline itself.
func WithDeadlineMargin(d time.Duration) Option { return func(f *function) { f.margin = max(0, d) } }

// defaultTimeout is the deployed timeout of a pipeline Lambda, or Lambda's maximum.
func defaultTimeout(name string) time.Duration {
	if fn, ok := stackconfig.Default().Function(name); ok {
		return fn.Timeout
	}
	return stackconfig.MaxLambdaTimeout
}

// Timeout returns the timeout of a registered function.
func (r *Registry) Timeout(function string) (time.Duration, error) {
	f, err := r.resolve(function)
	if err != nil {
		return 0, err
	}
	return f.timeout, nil
}

// Register adds a function whose invocations all run one handler, at once
// when they overlap. handler is any valid Lambda handler function (the forms
// lambda.Start accepts); it is wrapped with lambda.NewHandler.
func (r *Registry) Register(name string, handler any, opts ...Option) error {
	if err := validName(name); err != nil {
		return err
	}
	h, err := wrap(name, handler)
	if err != nil {
		return err
	}
	return r.add(&function{name: name, arn: r.ARN(name), handler: h, timeout: defaultTimeout(name)}, opts)
}

// RegisterEnvironments adds a function that runs in execution environments
// as Lambda runs it (Environment): init makes one, as Lambda's init phase
// does, when an invocation finds none idle.
func (r *Registry) RegisterEnvironments(name string, init func() (Environment, error), opts ...Option) error {
	if err := validName(name); err != nil {
		return err
	}
	if init == nil {
		return fmt.Errorf("register function %s: nil init", name)
	}
	f := &function{name: name, arn: r.ARN(name), timeout: defaultTimeout(name),
		envs: &environments{init: init, idleAfter: DefaultIdleShutdown}}
	return r.add(f, opts)
}

// wrap checks a handler and wraps it with lambda.NewHandler; name is for
// the error (add checks it).
func wrap(name string, handler any) (lambda.Handler, error) {
	if handler == nil {
		return nil, fmt.Errorf("register function %s: nil handler", name)
	}
	if t := reflect.TypeOf(handler); t.Kind() != reflect.Func {
		if _, ok := handler.(lambda.Handler); !ok {
			return nil, fmt.Errorf("register function %s: handler is a %s, not a function", name, t.Kind())
		}
	}
	return lambda.NewHandler(handler), nil
}

// validName refuses a function name Lambda could not take apart from an ARN.
func validName(name string) error {
	if name == "" || strings.ContainsAny(name, ":/") {
		return fmt.Errorf("register function %q: invalid name", name)
	}
	return nil
}

// add registers f (its name checked) with its options.
func (r *Registry) add(f *function, opts []Option) error {
	for _, o := range opts {
		o(f)
	}
	name := f.name
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.fns[name]; dup {
		return fmt.Errorf("register function %s: already registered", name)
	}
	r.fns[name] = f
	return nil
}

// ARN returns the function ARN of name in the registry's region and account.
func (r *Registry) ARN(name string) string {
	return "arn:aws:lambda:" + r.region + ":" + r.account + ":function:" + name
}

// SetFaults installs (or, with nil, removes) the crash hooks.
func (r *Registry) SetFaults(f Faults) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = f
}

// SetInvokeLatency installs (or, with nil, removes) the invocation
// overhead: each Invoke first waits overhead(function) — Lambda's own part
// of an invocation, before the handler runs, not part of its duration.
func (r *Registry) SetInvokeLatency(overhead func(function string) time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.overhead = overhead
}

// Durations returns every function's run-duration summary by name (a
// function never run has Invocations 0), with its timeout.
func (r *Registry) Durations() map[string]Durations {
	r.mu.RLock()
	fns := make([]*function, 0, len(r.fns))
	for _, f := range r.fns {
		fns = append(fns, f)
	}
	r.mu.RUnlock()
	out := make(map[string]Durations, len(fns))
	for _, f := range fns {
		f.durMu.Lock()
		xs := append([]float64(nil), f.durations...)
		f.durMu.Unlock()
		d := Durations{Timeout: f.timeout.Seconds(), Invocations: int64(len(xs))}
		if f.margin > 0 && f.margin < f.timeout {
			d.Margin = f.margin.Seconds()
			for _, x := range xs {
				if x > d.InternalDeadline() {
					d.PastInternalDeadline++
				}
			}
		}
		if len(xs) > 0 {
			sort.Float64s(xs)
			rank := func(q float64) float64 {
				i := int(math.Ceil(q*float64(len(xs)))) - 1
				return xs[max(0, min(i, len(xs)-1))]
			}
			d.P50, d.P99, d.Max = rank(0.50), rank(0.99), xs[len(xs)-1]
		}
		out[f.name] = d
	}
	return out
}

// Names lists the registered function names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.fns))
	for n := range r.fns {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Stats returns every function's counters by name.
func (r *Registry) Stats() map[string]Stats {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]Stats, len(r.fns))
	for n, f := range r.fns {
		st := Stats{
			Invocations: f.stats.invocations.Load(), FunctionErrors: f.stats.errors.Load(),
			CrashesBefore: f.stats.before.Load(), CrashesAfter: f.stats.after.Load(),
			DurationMs: float64(f.stats.nanos.Load()) / 1e6,
		}
		if f.envs != nil {
			st.Environments, st.EnvironmentsShutDown = f.envs.made.Load(), f.envs.shutDown.Load()
		}
		out[n] = st
	}
	return out
}

// resolve accepts a name, a name with a qualifier (name:$LATEST), a full
// function ARN with or without a qualifier, and the partial ARN
// account:function:name.
func (r *Registry) resolve(ref string) (*function, error) {
	name := ref
	if strings.HasPrefix(ref, "arn:") {
		parts := strings.Split(ref, ":")
		// arn:aws:lambda:region:account:function:name[:qualifier]
		if len(parts) < 7 || parts[2] != "lambda" || parts[5] != "function" {
			return nil, fmt.Errorf("function %q: %w", ref, ErrFunctionNotFound)
		}
		if parts[3] != r.region || parts[4] != r.account {
			return nil, fmt.Errorf("function %q: other region or account: %w", ref, ErrFunctionNotFound)
		}
		name = parts[6]
	} else if parts := strings.Split(ref, ":"); len(parts) >= 3 && parts[1] == "function" {
		name = parts[2]
	} else if i := strings.IndexByte(ref, ':'); i >= 0 {
		name = ref[:i]
	}
	r.mu.RLock()
	f := r.fns[name]
	r.mu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("function %q: %w", ref, ErrFunctionNotFound)
	}
	return f, nil
}

// Invoke runs the function synchronously (RequestResponse). A handler error
// or panic is functionError=true with out = {"errorType","errorMessage"};
// err reports that the invocation could not happen (unknown function).
func (r *Registry) Invoke(ctx context.Context, function string, payload []byte) (out []byte, functionError bool, err error) {
	f, err := r.resolve(function)
	if err != nil {
		return nil, false, fmt.Errorf("invoke: %w", err)
	}
	r.mu.RLock()
	faults := r.faults
	overhead := r.overhead
	r.mu.RUnlock()
	f.stats.invocations.Add(1)
	requestID := fmt.Sprintf("local-%s-%d", f.name, r.seq.Add(1))

	if overhead != nil {
		if d := overhead(f.name); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, false, fmt.Errorf("invoke %s: %w", f.name, ctx.Err())
			}
		}
	}

	handler := f.handler
	var env *environment
	if f.envs != nil {
		if env, err = f.envs.take(); err != nil {
			f.stats.errors.Add(1)
			return initError(requestID, err), true, nil
		}
		handler = env.handler
	}
	// keep says whether the environment survives the invocation: a crash,
	// a panic (the Go runtime exits after reporting it) and a timeout
	// (Lambda stops the runtime) end it without its shutdown phase.
	keep := false
	defer func() { f.envs.release(env, keep) }()

	if faults != nil && faults.CrashBefore(f.name) {
		f.stats.before.Add(1)
		f.stats.errors.Add(1)
		return crash(requestID, "before the handler ran"), true, nil
	}

	hctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	hctx = lambdacontext.NewContext(hctx, &lambdacontext.LambdaContext{AwsRequestID: requestID, InvokedFunctionArn: f.arn})
	began := time.Now()
	res, herr, panicked := callHandler(hctx, handler, payload)
	took := time.Since(began)
	f.stats.nanos.Add(int64(took))
	f.durMu.Lock()
	f.durations = append(f.durations, took.Seconds())
	f.durMu.Unlock()
	// Lambda stops a runtime at the timeout: whatever the handler returned
	// after its deadline is lost. (In process the handler cannot be stopped;
	// it is expected to honour its context, as the pipeline's do.)
	if errors.Is(hctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		f.stats.errors.Add(1)
		b, err := json.Marshal(messages.InvokeResponse_Error{
			Type:    ErrorTypeTimeout,
			Message: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", requestID, f.timeout.Seconds()),
		})
		if err != nil {
			return nil, false, fmt.Errorf("invoke %s: encode timeout: %w", f.name, err)
		}
		return b, true, nil
	}

	if faults != nil && faults.CrashAfter(f.name) {
		f.stats.after.Add(1)
		f.stats.errors.Add(1)
		return crash(requestID, "after the handler returned"), true, nil
	}
	keep = !panicked
	if herr != nil {
		f.stats.errors.Add(1)
		b, merr := json.Marshal(herr)
		if merr != nil {
			return nil, false, fmt.Errorf("invoke %s: encode function error: %w", f.name, merr)
		}
		return b, true, nil
	}
	return res, false, nil
}

// callHandler invokes h and turns an error or a panic into the response the
// Go runtime sends.
func callHandler(ctx context.Context, h lambda.Handler, payload []byte) (out []byte, invokeErr *messages.InvokeResponse_Error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			// The runtime also sends the stack; it is left out here.
			invokeErr, panicked = &messages.InvokeResponse_Error{Type: typeName(p), Message: fmt.Sprint(p)}, true
		}
	}()
	out, err := h.Invoke(ctx, payload)
	if err != nil {
		var ive messages.InvokeResponse_Error
		if errors.As(err, &ive) {
			return nil, &ive, false
		}
		return nil, &messages.InvokeResponse_Error{Type: typeName(err), Message: err.Error()}, false
	}
	// The runtime reuses its buffer; keep our own copy.
	return append([]byte(nil), out...), nil, false
}

// typeName is the Go runtime's errorType: the (pointer-stripped) type name.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "nil"
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// ErrorTypeInit is the errorType of an invocation whose environment's init
// failed (Lambda's for an init phase that returned an error).
const ErrorTypeInit = "Runtime.InitError"

func initError(requestID string, err error) []byte {
	b, _ := json.Marshal(messages.InvokeResponse_Error{
		Type: ErrorTypeInit, Message: "RequestId: " + requestID + " Error: " + err.Error(),
	})
	return b
}

func crash(requestID, when string) []byte {
	b, _ := json.Marshal(messages.InvokeResponse_Error{
		Type:    ErrorTypeCrash,
		Message: "RequestId: " + requestID + " Error: Runtime exited with error: exit status 2 (injected crash " + when + ")",
	})
	return b
}

// Name returns the function name of a ref (name, ARN or partial ARN), or ""
// when it does not name a function.
func Name(ref string) string {
	if strings.HasPrefix(ref, "arn:") {
		parts := strings.Split(ref, ":")
		if len(parts) >= 7 {
			return parts[6]
		}
		return ""
	}
	if i := strings.IndexByte(ref, ':'); i >= 0 {
		if parts := strings.Split(ref, ":"); len(parts) >= 3 && parts[1] == "function" {
			return parts[2]
		}
		return ref[:i]
	}
	return ref
}
