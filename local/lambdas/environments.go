package lambdas

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

// Environment is one execution environment of a function registered with
// RegisterEnvironments: the handler its init made, and what Lambda's
// shutdown phase runs in it (the runtime's SIGTERM hook; nil: nothing).
//
// Lambda runs one invocation at a time in an environment and reuses an
// idle one before it makes another ("Understanding the Lambda execution
// environment lifecycle", Lambda Developer Guide). It shuts an environment
// down after a while without invocations — how long is not documented:
// IdleShutdown, modelled — and a runtime that crashed, panicked or ran past
// its timeout is replaced without a shutdown phase.
type Environment struct {
	Handler  any
	Shutdown func(ctx context.Context)
}

// DefaultIdleShutdown is how long an environment stays idle before the
// local Lambda shuts it down. Lambda documents no figure; this is a model
// (WithIdleShutdown).
const DefaultIdleShutdown = 10 * time.Minute

// ShutdownBudget bounds an environment's shutdown phase: Lambda gives a
// runtime's SIGTERM hook about 500 ms (internal/lambdart); the local one
// allows more, for a loaded machine.
const ShutdownBudget = 2 * time.Second

// WithIdleShutdown sets how long an environment of a function registered
// with RegisterEnvironments stays idle before it is shut down.
func WithIdleShutdown(d time.Duration) Option {
	return func(f *function) {
		if f.envs != nil && d > 0 {
			f.envs.idleAfter = d
		}
	}
}

// Pick is which idle environment the local Lambda gives an invocation
// when more than one waits. Lambda does not document it: a model
// (WithPick).
type Pick int

const (
	// PickMostRecent takes the environment used last (the default): the
	// others stay idle and are shut down first.
	PickMostRecent Pick = iota
	// PickLeastRecent takes the one idle longest: invocations go round the
	// environments, which all stay warm.
	PickLeastRecent
)

// WithPick sets which idle environment an invocation of a function
// registered with RegisterEnvironments takes.
func WithPick(p Pick) Option {
	return func(f *function) {
		if f.envs != nil {
			f.envs.pick = p
		}
	}
}

// environments is a function's execution environments.
type environments struct {
	init      func() (Environment, error)
	idleAfter time.Duration
	pick      Pick

	mu   sync.Mutex
	idle []*environment // the most recently used last

	made, shutDown atomic.Int64
}

// environment is one execution environment.
type environment struct {
	handler  lambda.Handler
	shutdown func(ctx context.Context)
	// idleTimer shuts the environment down once it has been idle
	// idleAfter; nil while it is busy.
	idleTimer *time.Timer
}

// take returns an idle environment (as pick says), else a new one.
func (e *environments) take() (*environment, error) {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		i := n - 1
		if e.pick == PickLeastRecent {
			i = 0
		}
		env := e.idle[i]
		e.idle = append(e.idle[:i], e.idle[i+1:]...)
		env.idleTimer.Stop()
		env.idleTimer = nil
		e.mu.Unlock()
		return env, nil
	}
	e.mu.Unlock()
	made, err := e.init()
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	h, err := wrap("environment", made.Handler)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	e.made.Add(1)
	return &environment{handler: h, shutdown: made.Shutdown}, nil
}

// release ends an invocation in env: kept, it waits idle for the next one;
// otherwise it is gone without its shutdown phase. Nil-safe (a function of
// one shared handler).
func (e *environments) release(env *environment, keep bool) {
	if e == nil || env == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !keep {
		return
	}
	e.idle = append(e.idle, env)
	env.idleTimer = time.AfterFunc(e.idleAfter, func() { e.reap(env) })
}

// reap shuts env down if it is still idle.
func (e *environments) reap(env *environment) {
	e.mu.Lock()
	at := -1
	for i, x := range e.idle {
		if x == env {
			at = i
			break
		}
	}
	if at < 0 {
		e.mu.Unlock()
		return
	}
	e.idle = append(e.idle[:at], e.idle[at+1:]...)
	e.mu.Unlock()
	e.stop(context.Background(), env)
}

// stop runs env's shutdown phase.
func (e *environments) stop(ctx context.Context, env *environment) {
	e.shutDown.Add(1)
	if env.shutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ShutdownBudget)
	defer cancel()
	env.shutdown(ctx)
}

// shutdownIdle shuts down every idle environment.
func (e *environments) shutdownIdle(ctx context.Context) {
	e.mu.Lock()
	idle := e.idle
	e.idle = nil
	for _, env := range idle {
		env.idleTimer.Stop()
	}
	e.mu.Unlock()
	for _, env := range idle {
		e.stop(ctx, env)
	}
}

// Shutdown runs the shutdown phase of every idle environment of every
// function registered with RegisterEnvironments, as Lambda does when it
// reclaims them (the stack's Close: invocations have ended by then).
func (r *Registry) Shutdown(ctx context.Context) {
	r.mu.RLock()
	var envs []*environments
	for _, f := range r.fns {
		if f.envs != nil {
			envs = append(envs, f.envs)
		}
	}
	r.mu.RUnlock()
	for _, e := range envs {
		e.shutdownIdle(ctx)
	}
}
