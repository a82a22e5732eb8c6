package asl

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Task token states, as TaskOutcome.Status reports them.
const (
	TokenPending   = "PENDING"
	TokenSucceeded = "SUCCEEDED"
	TokenFailed    = "FAILED"
	TokenTimedOut  = "TIMED_OUT"
)

// MaxPayloadBytes is the Step Functions limit on state input/output, task
// results and SendTaskSuccess output (256 KiB).
const MaxPayloadBytes = 256 * 1024

// Errors returned by Tokens for callbacks that AWS would reject.
var (
	ErrInvalidToken     = errors.New("invalid task token")
	ErrTaskDoesNotExist = errors.New("task does not exist")
	ErrTaskTimedOut     = errors.New("task timed out or already completed")
	ErrInvalidOutput    = errors.New("invalid task output")
)

// TaskOutcome is what became of a task token.
type TaskOutcome struct {
	// Status is PENDING, SUCCEEDED, FAILED or TIMED_OUT.
	Status string
	// Output is the JSON given to SendTaskSuccess.
	Output string
	// Error and Cause are those given to SendTaskFailure, or for a
	// TIMED_OUT token States.HeartbeatTimeout / States.Timeout.
	Error, Cause string
	// Heartbeats counts accepted SendTaskHeartbeat calls.
	Heartbeats int
}

// Tokens issues task tokens and records their callbacks, enforcing each
// token's heartbeat and timeout on the given clock.
type Tokens struct {
	clock Clock
	scale float64

	mu sync.Mutex
	m  map[string]*tokenEntry
}

type tokenEntry struct {
	outcome   TaskOutcome
	heartbeat time.Duration // already scaled
	timeout   time.Duration // already scaled
	issued    time.Time
	lastBeat  time.Time
	changed   chan struct{}
}

const tokenPrefix = "AQ"

// NewTokens returns an empty token store. timeScale multiplies heartbeat and
// timeout durations (0 or 1: real durations).
func NewTokens(clock Clock, timeScale float64) *Tokens {
	if clock == nil {
		clock = RealClock{}
	}
	return &Tokens{clock: clock, scale: timeScale, m: map[string]*tokenEntry{}}
}

// Issue creates a pending token. A zero heartbeat or timeout means none.
func (t *Tokens) Issue(heartbeat, timeout time.Duration) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	tok := tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	now := t.clock.Now()
	t.mu.Lock()
	t.m[tok] = &tokenEntry{
		outcome:   TaskOutcome{Status: TokenPending},
		heartbeat: scale(heartbeat, t.scale),
		timeout:   scale(timeout, t.scale),
		issued:    now,
		lastBeat:  now,
		changed:   make(chan struct{}),
	}
	t.mu.Unlock()
	return tok
}

func validToken(tok string) bool {
	if !strings.HasPrefix(tok, tokenPrefix) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(tok[len(tokenPrefix):])
	return err == nil && len(b) == 32
}

// lookup returns the entry for tok after applying any elapsed deadline.
// The caller holds t.mu.
func (t *Tokens) lookupLocked(tok string) (*tokenEntry, error) {
	if !validToken(tok) {
		return nil, ErrInvalidToken
	}
	e, ok := t.m[tok]
	if !ok {
		return nil, ErrTaskDoesNotExist
	}
	t.expireLocked(e, t.clock.Now())
	return e, nil
}

// pendingLocked is lookupLocked for a callback: a token that already has
// its outcome (answered, timed out) answers ErrTaskTimedOut, as AWS does.
func (t *Tokens) pendingLocked(tok string) (*tokenEntry, error) {
	e, err := t.lookupLocked(tok)
	if err != nil {
		return nil, err
	}
	if e.outcome.Status != TokenPending {
		return nil, ErrTaskTimedOut
	}
	return e, nil
}

func (t *Tokens) expireLocked(e *tokenEntry, now time.Time) {
	if e.outcome.Status != TokenPending {
		return
	}
	hbAt, toAt := e.deadlines()
	switch {
	case !hbAt.IsZero() && !now.Before(hbAt) && (toAt.IsZero() || hbAt.Before(toAt)):
		e.finish(TaskOutcome{Status: TokenTimedOut, Error: ErrorHeartbeatTimeout, Cause: "the task did not send a heartbeat within HeartbeatSeconds"})
	case !toAt.IsZero() && !now.Before(toAt):
		e.finish(TaskOutcome{Status: TokenTimedOut, Error: ErrorTimeout, Cause: "the task did not complete within TimeoutSeconds"})
	}
}

func (e *tokenEntry) deadlines() (hb, to time.Time) {
	if e.heartbeat > 0 {
		hb = e.lastBeat.Add(e.heartbeat)
	}
	if e.timeout > 0 {
		to = e.issued.Add(e.timeout)
	}
	return hb, to
}

func (e *tokenEntry) finish(o TaskOutcome) {
	o.Heartbeats = e.outcome.Heartbeats
	e.outcome = o
	close(e.changed)
	e.changed = make(chan struct{})
}

// Succeed records SendTaskSuccess. output must be JSON of at most 256 KiB.
func (t *Tokens) Succeed(tok, output string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.pendingLocked(tok)
	if err != nil {
		return err
	}
	if len(output) > MaxPayloadBytes {
		return fmt.Errorf("%w: output is %d bytes, more than %d", ErrInvalidOutput, len(output), MaxPayloadBytes)
	}
	if !json.Valid([]byte(output)) {
		return fmt.Errorf("%w: output is not valid JSON", ErrInvalidOutput)
	}
	e.finish(TaskOutcome{Status: TokenSucceeded, Output: output})
	return nil
}

// Fail records SendTaskFailure.
func (t *Tokens) Fail(tok, errName, cause string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.pendingLocked(tok)
	if err != nil {
		return err
	}
	e.finish(TaskOutcome{Status: TokenFailed, Error: errName, Cause: cause})
	return nil
}

// Heartbeat records SendTaskHeartbeat and restarts the heartbeat interval.
func (t *Tokens) Heartbeat(tok string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.pendingLocked(tok)
	if err != nil {
		return err
	}
	e.outcome.Heartbeats++
	e.lastBeat = t.clock.Now()
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

// Outcome reports the token's current state; false if it was never issued.
func (t *Tokens) Outcome(tok string) (TaskOutcome, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[tok]
	if !ok {
		return TaskOutcome{}, false
	}
	t.expireLocked(e, t.clock.Now())
	return e.outcome, true
}

// Cancel ends a pending token (its execution stopped); later callbacks get
// ErrTaskTimedOut.
func (t *Tokens) Cancel(tok, cause string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[tok]; ok && e.outcome.Status == TokenPending {
		e.finish(TaskOutcome{Status: TokenTimedOut, Error: errorAbortedInternal, Cause: cause})
	}
}

// Wait blocks until the token leaves PENDING (callback, heartbeat timeout or
// timeout) or ctx ends.
func (t *Tokens) Wait(ctx context.Context, tok string) (TaskOutcome, error) {
	for {
		t.mu.Lock()
		e, err := t.lookupLocked(tok)
		if err != nil {
			t.mu.Unlock()
			return TaskOutcome{}, err
		}
		if e.outcome.Status != TokenPending {
			o := e.outcome
			t.mu.Unlock()
			return o, nil
		}
		changed := e.changed
		var timer <-chan time.Time
		hb, to := e.deadlines()
		next := hb
		if next.IsZero() || (!to.IsZero() && to.Before(next)) {
			next = to
		}
		if !next.IsZero() {
			timer = t.clock.After(next.Sub(t.clock.Now()))
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return TaskOutcome{}, ctx.Err()
		case <-changed:
		case <-timer:
		}
	}
}
