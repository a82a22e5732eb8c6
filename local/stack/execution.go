package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/statemachine"
)

// exportHeartbeat is the wait's HeartbeatSeconds, derived like the deployed
// one (internal/stackconfig) from the local re-check cap (CDC_RECHECK_MAX_DELAY
// = 4 × RecheckDelay), check-export's deployed timeout and the re-check
// queue's visibility timeout, so a check that fails and is retried still
// heartbeats in time.
func (s *Stack) exportHeartbeat() time.Duration {
	set := stackconfig.Default()
	return set.CheckExport.Timeout + 4*s.opts.RecheckDelay + s.visibility(FnCheckExport) + set.HeartbeatMargin
}

// Substitutions returns the values the local state machine is created with
// (CDK's DefinitionSubstitutions in AWS).
func (s *Stack) Substitutions() map[string]string {
	scale := s.opts.TimeScale
	if scale <= 0 {
		scale = 1
	}
	secs := func(d time.Duration) string {
		return strconv.Itoa(int(math.Ceil(d.Seconds() / scale)))
	}
	dep := s.deployedConfig()
	return map[string]string{
		statemachine.RunLockFunctionArn:       s.Lambdas.ARN(FnRunLock),
		statemachine.PrepareChangeFunctionArn: s.Lambdas.ARN(FnPrepareChange),
		statemachine.StartQueueURL:            s.Res.StartQueueURL,
		statemachine.ArtifactBucket:           s.Res.Bucket,
		statemachine.ExportHeartbeatSeconds:   secs(s.exportHeartbeat()),
		// The deployed export wait, Map concurrency (the divisor of
		// prepare-change's PutEvents rate) and run timeout (run-lock's lease
		// is this + 1 h). Durations are real time, substituted divided by
		// the time scale since the interpreter multiplies them by it.
		statemachine.ExportTimeoutSeconds: secs(dep.ExportTimeout),
		statemachine.MapMaxConcurrency:    strconv.Itoa(dep.MapMaxConcurrency),
		statemachine.RunTimeoutSeconds:    secs(dep.RunTimeout),
	}
}

// createStateMachine creates the state machine from the very file CDK
// deploys, through the real Step Functions client.
func (s *Stack) createStateMachine(ctx context.Context) error {
	raw := s.opts.Definition
	if raw == nil {
		raw = statemachine.Definition()
	}
	def, err := statemachine.Substitute(raw, s.Substitutions())
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	out, err := s.sfnc.CreateStateMachine(ctx, &sfnapi.CreateStateMachineInput{
		Name:       aws.String(s.opts.Name),
		Definition: aws.String(string(def)),
		RoleArn:    aws.String(s.roleARN(iampolicy.StateMachine)),
		Type:       sfntypes.StateMachineTypeStandard,
	})
	if err != nil {
		return fmt.Errorf("stack: create state machine: %w", err)
	}
	s.Res.StateMachineARN = aws.ToString(out.StateMachineArn)
	return s.createReconcileMachine(ctx)
}

var execSeq atomic.Int64

// StartExecution starts one execution, as the schedule does, and returns
// its ARN.
func (s *Stack) StartExecution(ctx context.Context) (string, error) {
	return s.startScheduled(ctx, s.Res.StateMachineARN, "local")
}

// startScheduled starts an execution of machine named prefix-{time}-{n} as
// the schedules do: as the scheduler's role, with input {}.
func (s *Stack) startScheduled(ctx context.Context, machine, prefix string) (string, error) {
	name := fmt.Sprintf("%s-%s-%d", prefix, s.opts.Now().UTC().Format("20060102T150405.000Z"), execSeq.Add(1))
	name = strings.ReplaceAll(name, ".", "")
	s.noteOwnStart(name)
	out, err := sfnapi.NewFromConfig(s.principalConfig(iampolicy.Scheduler)).StartExecution(ctx, &sfnapi.StartExecutionInput{
		StateMachineArn: aws.String(machine),
		Name:            aws.String(name),
		Input:           aws.String("{}"),
	})
	if err != nil {
		return "", fmt.Errorf("stack: start %s execution: %w", prefix, err)
	}
	return aws.ToString(out.ExecutionArn), nil
}

// Wait polls the execution until it ends and returns its window, which is
// also added to the report (and the report file rewritten).
func (s *Stack) Wait(ctx context.Context, arn string, started time.Time, eventsBefore int) (report.Run, error) {
	out, err := s.awaitExecution(ctx, arn)
	if err != nil {
		return report.Run{}, err
	}
	w := report.Run{
		RunID: aws.ToString(out.Name), ExecutionARN: arn, StartedAt: started.UTC(), FinishedAt: s.opts.Now().UTC(),
		Status: string(out.Status), Error: aws.ToString(out.Error), Cause: clip.String(aws.ToString(out.Cause), 512),
		Events: int64(s.Delivered.Len() - eventsBefore),
	}
	w.Outcome = outcomeOf(out)
	s.recordExportNotice(ctx, w.RunID)
	if rec, ok := s.history(ctx, w.RunID); ok {
		w.Window = &report.Span{Since: envelope.FormatTime(rec.Window.Since), Until: envelope.FormatTime(rec.Window.Until)}
		w.OverlapSkipped, w.Deletes = rec.Counts.OverlapSkipped, rec.Counts.Deletes
		s.noteJobRun(rec)
		// The run record decides, as in `cdcctl status`: a run that
		// committed stays committed when its execution failed afterwards
		// (HandleFailure leaves a committed record as it is).
		switch rec.Outcome {
		case runlock.OutcomeEmpty:
			w.Outcome = report.OutcomeEmpty
		case runlock.OutcomeSucceeded, runlock.OutcomePartial:
			w.Outcome = report.OutcomeCommitted
		}
		w.Note = outcomeNote(w, rec.Outcome)
	} else if w.Outcome != report.OutcomeFailed && !tookLock(out) {
		// A run that never took the lock has no history item.
		w.Outcome = report.OutcomeSkipped
	} else {
		w.Note = outcomeNote(w, "")
	}
	if cp, ok := s.checkpoint(ctx); ok {
		w.Checkpoint = envelope.FormatTime(cp)
		// Snapshot, then checkpoint, after every window: a crash never leaves a
		// saved checkpoint ahead of the saved data store (Persist).
		if err := s.Persist(ctx); err != nil {
			s.log.Warn("state not persisted", "error", err.Error())
		}
	}
	s.recordWindow(w)
	return w, nil
}

// Polling of DescribeExecution by awaitExecution: the first pause, doubled
// after every poll up to the last. A window's execution ends within seconds
// to minutes and a reconciliation's within hours: a fixed 50 ms would be
// most of a million requests in a simulated day.
const (
	pollFirst = 50 * time.Millisecond
	pollMax   = time.Second
)

// awaitExecution describes the execution arn until it has ended.
func (s *Stack) awaitExecution(ctx context.Context, arn string) (*sfnapi.DescribeExecutionOutput, error) {
	return pollUntilEnded(ctx, arn, func(ctx context.Context) (*sfnapi.DescribeExecutionOutput, error) {
		return s.sfnc.DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	})
}

// pollRetries is how many describe errors in a row pollUntilEnded bears.
const pollRetries = 10

// pollRetryPause is the pause before asking again after a describe error.
const pollRetryPause = 5 * time.Second

// pollUntilEnded calls describe until the execution is neither RUNNING nor
// PENDING_REDRIVE, pausing pollFirst after the first call and doubling the
// pause up to pollMax.
func pollUntilEnded(ctx context.Context, arn string, describe func(context.Context) (*sfnapi.DescribeExecutionOutput, error)) (*sfnapi.DescribeExecutionOutput, error) {
	pause := pollFirst
	failures := 0
	for {
		out, err := describe(ctx)
		if err != nil {
			// A lost connection or a garbled answer is asked again, a few
			// times in a row at most, further apart each time (a wait of
			// hours outlives them; the in-memory network's closed-pipe
			// fault comes in streaks).
			if failures++; failures > pollRetries || ctx.Err() != nil {
				return nil, fmt.Errorf("stack: describe execution %s: %w", arn, err)
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("stack: wait for %s: %w", arn, ctx.Err())
			case <-time.After(min(pollRetryPause<<(failures-1), time.Minute)):
			}
			continue
		}
		failures = 0
		if out.Status != sfntypes.ExecutionStatusRunning && out.Status != "PENDING_REDRIVE" {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stack: wait for %s: %w", arn, ctx.Err())
		case <-time.After(pause):
		}
		pause = min(2*pause, pollMax)
	}
}

// tookLock reports whether a succeeded execution's output says it held the
// lock ({"lock": {"acquired": true, ...}}): the answer when its run record
// could not be read. A refused run ends in Skipped with acquired false.
func tookLock(out *sfnapi.DescribeExecutionOutput) bool {
	var o struct {
		Lock struct {
			Acquired bool `json:"acquired"`
		} `json:"lock"`
	}
	return json.Unmarshal([]byte(aws.ToString(out.Output)), &o) == nil && o.Lock.Acquired
}

// outcomeOf reads an ended execution: failed unless it succeeded; a
// succeeded one is refined from the run's history item.
func outcomeOf(out *sfnapi.DescribeExecutionOutput) string {
	if out.Status != sfntypes.ExecutionStatusSucceeded {
		return report.OutcomeFailed
	}
	return report.OutcomeCommitted
}

// outcomeNote explains a window whose execution status and run record
// (recorded, "" for none) tell different stories; "" when they agree.
func outcomeNote(w report.Run, recorded runlock.Outcome) string {
	if w.Status == string(sfntypes.ExecutionStatusSucceeded) {
		return ""
	}
	switch {
	case recorded == "":
		return "failed before taking the lock: no run record, the checkpoint did not move; the next window retries"
	case w.Outcome != report.OutcomeFailed:
		return "the execution ended " + w.Status + " after the run committed (its run record says " + string(recorded) + ")"
	case recorded == runlock.OutcomeRunning:
		return "the run record still says RUNNING: an ended execution holds the lock; the next window takes it over (or `cdcctl unlock`)"
	}
	return ""
}

// RunOnce runs one window now and waits for it. The error reports a failure
// to run the window at all; a window that ran and failed has Outcome failed.
func (s *Stack) RunOnce(ctx context.Context) (report.Run, error) {
	before := s.Delivered.Len()
	started := s.opts.Now()
	arn, err := s.StartExecution(ctx)
	if err != nil {
		return report.Run{}, err
	}
	return s.Wait(ctx, arn, started, before)
}

// RunOptions are RunWith's options; each may be left zero.
type RunOptions struct {
	// OnWindow is called after each window, OnReconciliation after each
	// scheduled reconciliation (the error: it could not be started or
	// followed), from the goroutine that ran it, concurrently with each
	// other.
	OnWindow         func(report.Run, error)
	OnReconciliation func(Reconciliation, error)
	// ReconcileEvery overrides Options.ReconcileEvery for this Run: 0 keeps
	// the stack's (by default the deployed daily schedule), < 0 starts none.
	ReconcileEvery time.Duration
}

// Run runs a first window at once and then one every Options.Every until
// ctx is done. Windows that outlast the period overlap, as scheduled
// executions in AWS do; the lock turns the later one into a skip. onWindow,
// if set, is called after each window. See RunWith.
func (s *Stack) Run(ctx context.Context, onWindow func(report.Run, error)) error {
	return s.RunWith(ctx, RunOptions{OnWindow: onWindow})
}

// RunWith is Run with both schedules' callbacks. Beside the windows it
// checks the fast path's Subscription every Options.FastPathCheckEvery
// (FastPath only; CheckSubscription) and starts a reconciliation every RunOptions.ReconcileEvery, else
// Options.ReconcileEvery, else the deployed daily schedule, as the second
// schedule does in AWS. Both tick together when the period is a multiple of Every,
// as in AWS; a reconciliation that finds a window holding the lock waits
// for it (statemachine/reconcile.asl.json, docs/RECONCILE.md). When ctx is
// done it waits for the windows and reconciliations in flight.
func (s *Stack) RunWith(ctx context.Context, h RunOptions) error {
	t := time.NewTicker(s.opts.Every)
	defer t.Stop()
	var reconcileTick <-chan time.Time
	every := s.reconcileEvery()
	if h.ReconcileEvery != 0 {
		every = h.ReconcileEvery
	}
	if every > 0 {
		rt := time.NewTicker(every)
		defer rt.Stop()
		reconcileTick = rt.C
	}
	var checkTick <-chan time.Time
	if ce := s.fastPathCheckEvery(); ce > 0 {
		ct := time.NewTicker(ce)
		defer ct.Stop()
		checkTick = ct.C
	}
	done := make(chan struct{}, 64)
	inflight := 0
	launch := func() {
		inflight++
		go func() {
			defer func() { done <- struct{}{} }()
			w, err := s.RunOnce(context.WithoutCancel(ctx))
			if h.OnWindow != nil {
				h.OnWindow(w, err)
			}
		}()
	}
	// Executions started by hand are followed like the scheduled ones.
	byHand, stopWatch := s.watchHandStarted()
	defer stopWatch()
	launch()
	for {
		select {
		case <-ctx.Done():
			for ; inflight > 0; inflight-- {
				<-done
			}
			return nil
		case m := <-byHand:
			inflight++
			go func() {
				defer func() { done <- struct{}{} }()
				s.followHandStarted(context.WithoutCancel(ctx), m, h)
			}()
		case <-done:
			inflight--
		case <-t.C:
			launch()
		case <-checkTick:
			inflight++
			go func() {
				defer func() { done <- struct{}{} }()
				if err := s.CheckSubscription(context.WithoutCancel(ctx)); err != nil {
					s.log.Warn("fast path: Subscription check failed", "error", err.Error())
				}
			}()
		case <-reconcileTick:
			inflight++
			go func() {
				defer func() { done <- struct{}{} }()
				r, err := s.Reconcile(context.WithoutCancel(ctx))
				if err != nil {
					s.log.Warn("reconciliation not run", "error", err.Error())
				}
				if h.OnReconciliation != nil {
					h.OnReconciliation(r, err)
				}
			}()
		}
	}
}

// history returns the run's history record.
func (s *Stack) history(ctx context.Context, runID string) (runlock.HistoryRecord, bool) {
	store, err := s.runStore()
	if err != nil {
		return runlock.HistoryRecord{}, false
	}
	// A transient error (the in-memory network's closed pipe, see
	// awaitExecution) is asked again: a run not found here is reported as
	// skipped, and its export would count as no window's.
	// The run asked for is almost always among the newest few: a small
	// page first (a small answer also meets that fault less often).
	var recs []runlock.HistoryRecord
	pause := time.Second
	for attempt := 0; ; attempt++ {
		recs, err = store.History(ctx, 10)
		if err == nil && !hasRun(recs, runID) {
			recs, err = store.History(ctx, 50)
		}
		if err == nil {
			break
		}
		if attempt == 7 || ctx.Err() != nil {
			s.log.Warn("run history not read", "runId", runID, "error", err.Error())
			return runlock.HistoryRecord{}, false
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Second)
	}
	for _, r := range recs {
		if r.RunID == runID {
			return r, true
		}
	}
	return runlock.HistoryRecord{}, false
}

func hasRun(recs []runlock.HistoryRecord, runID string) bool {
	for _, r := range recs {
		if r.RunID == runID {
			return true
		}
	}
	return false
}

// checkpoint reads lastRunTime and notes whether it ever moved backwards.
func (s *Stack) checkpoint(ctx context.Context) (time.Time, bool) {
	store, err := s.runStore()
	if err != nil {
		return time.Time{}, false
	}
	st, err := store.Status(ctx, 0)
	if err != nil || !st.Exists {
		return time.Time{}, false
	}
	s.mu.Lock()
	if n := len(s.checkpoints); n > 0 && st.Checkpoint.Before(s.checkpoints[n-1]) {
		s.backwards = true
	}
	if n := len(s.checkpoints); n == 0 || !st.Checkpoint.Equal(s.checkpoints[n-1]) {
		s.checkpoints = append(s.checkpoints, st.Checkpoint)
	}
	s.mu.Unlock()
	return st.Checkpoint, true
}

// Checkpoints returns the distinct checkpoints observed after each window,
// in order, and whether one was ever earlier than its predecessor.
func (s *Stack) Checkpoints() ([]time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.checkpoints...), s.backwards
}

// Checkpoint returns the current lastRunTime.
func (s *Stack) Checkpoint(ctx context.Context) (time.Time, error) {
	store, err := s.runStore()
	if err != nil {
		return time.Time{}, err
	}
	st, err := store.Status(ctx, 0)
	if err != nil {
		return time.Time{}, fmt.Errorf("stack: run status: %w", err)
	}
	if !st.Exists {
		return time.Time{}, errors.New("stack: no RUN record yet")
	}
	return st.Checkpoint, nil
}

func (s *Stack) runStore() (*runlock.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store != nil {
		return s.store, nil
	}
	st, err := runlock.New(s.ddb, runlock.Config{Table: s.Res.Table})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	s.store = st
	return st, nil
}

// recordWindow adds w to the report with fresh counters and rewrites the
// report file.
func (s *Stack) recordWindow(w report.Run) {
	s.Report.AddRun(w)
	s.refreshReport()
	if err := s.Report.Write(s.opts.Now()); err != nil {
		s.log.Warn("report not written", "error", err.Error())
	}
}

// refreshReport copies the live counters into the report.
func (s *Stack) refreshReport() {
	calls := s.Env.Gateway.Calls()
	maxExports := s.HealthLake.MaxConcurrentExports()
	distinct, total := s.Delivered.Counts()
	lam := s.Lambdas.Stats()
	queues := s.MappingStats()
	var inj map[string]int64
	if s.opts.FaultRate > 0 {
		inj = s.Faults.InjectedSummary()
	}
	s.Report.Update(func(r *report.Report) {
		r.Calls = calls
		r.MaxConcurrentExports = maxExports
		r.Events = int64(total)
		r.DistinctEvents = int64(distinct)
		r.Lambdas = lam
		r.Queues = queues
		r.Faults = inj
		r.Metrics = s.Metrics.Totals()
		c := s.Cost()
		r.Cost = &c
	})
}
