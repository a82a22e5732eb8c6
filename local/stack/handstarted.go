package stack

import (
	"context"
	"strings"
	"time"
)

// Executions started by hand — `cdcctl run`, `cdcctl reconcile`,
// `aws stepfunctions start-execution` against the endpoint — are followed
// by RunWith like the ones its schedules start: the Step Functions
// emulator tells the stack of every start (fakesfn.Options.OnStart), and
// the starts the stack did not make itself go to the Run in progress.

// handStarted is an execution of one of the stack's machines that the
// stack did not start itself.
type handStarted struct {
	arn, machine string
	started      time.Time
	// before is how many events were delivered when it started.
	before int
}

// noteOwnStart records that the stack itself starts the execution name.
func (s *Stack) noteOwnStart(name string) { s.own.Store(name, struct{}{}) }

// onExecutionStart is the Step Functions emulator's OnStart.
func (s *Stack) onExecutionStart(arn, machine string) {
	if _, mine := s.own.LoadAndDelete(arn[strings.LastIndexByte(arn, ':')+1:]); mine {
		return
	}
	if f := s.watch.Load(); f != nil {
		(*f)(handStarted{arn: arn, machine: machine, started: s.opts.Now(), before: s.Delivered.Len()})
	}
}

// watchHandStarted hands the executions started by hand to the returned
// channel until stop is called.
func (s *Stack) watchHandStarted() (starts <-chan handStarted, stop func()) {
	ch := make(chan handStarted, 16)
	stopped := make(chan struct{})
	f := func(h handStarted) {
		// Never block the StartExecution call that told of it.
		go func() {
			select {
			case ch <- h:
			case <-stopped:
			}
		}()
	}
	s.watch.Store(&f)
	return ch, func() {
		s.watch.CompareAndSwap(&f, nil)
		close(stopped)
	}
}

// followHandStarted waits for an execution started by hand and reports it
// as RunWith reports its own: a window to OnWindow (and the report), a
// reconciliation to OnReconciliation.
func (s *Stack) followHandStarted(ctx context.Context, h handStarted, opts RunOptions) {
	switch h.machine {
	case s.Res.StateMachineARN:
		w, err := s.Wait(ctx, h.arn, h.started, h.before)
		if opts.OnWindow != nil {
			opts.OnWindow(w, err)
		}
	case s.Res.ReconcileStateMachineARN:
		r, err := s.WaitReconciliation(ctx, h.arn)
		if opts.OnReconciliation != nil {
			opts.OnReconciliation(r, err)
		}
	}
}
