package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// Options adjust a run.
type Options struct {
	// Duration overrides the workload's duration; Scale its scale.
	Duration time.Duration
	Scale    float64
	// Logger receives the stack's log (ids, counts, durations); default
	// discards.
	Logger *slog.Logger
	// Latency replaces the workload's latency model (cdc-local --latency:
	// a file merged over the defaults, or off); nil keeps the workload's.
	Latency *localaws.LatencyConfig
	// Progress, when set, is updated as the run goes on (simulated time,
	// windows, events), for a reader outside the bubble.
	Progress *Progress
}

// ModelledDelays counts the delays the latency model added: gateway calls,
// Lambda invocation overheads and state transitions, and their sum.
type ModelledDelays struct {
	Calls   int64   `json:"calls"`
	Seconds float64 `json:"seconds"`
}

// Runs counts the windows by how they ended.
type Runs struct {
	// Succeeded = Committed + Empty.
	Succeeded int64 `json:"succeeded"`
	Committed int64 `json:"committed"`
	Empty     int64 `json:"empty"`
	Failed    int64 `json:"failed"`
	Skipped   int64 `json:"skipped"`
	// OverlapSkipped counts the overlap's lines the windows did not publish
	// again, their version published by the window before (every run's
	// history counts): each one a duplicate delivery avoided.
	OverlapSkipped int64 `json:"overlapSkipped"`
}

// BodyCuts: export-file GetObject bodies chosen to end part way (Chosen),
// those that did (Cut: a read that stops first, a range ending before its
// cut, never meets it), and the reads prepare-change went on with from the
// byte they reached (its ReadsResumed metric).
type BodyCuts struct {
	Chosen       int64 `json:"chosen"`
	Cut          int64 `json:"cut"`
	ReadsResumed int64 `json:"readsResumed"`
}

// Throttled counts PutEvents calls answered ThrottlingException.
type Throttled struct {
	Calls int64 `json:"calls"`
	// Quota were refused by the PutEvents quota, Injected by a throttling
	// storm of the workload.
	Quota    int64 `json:"quota"`
	Injected int64 `json:"injected"`
}

// Reconciliations counts the reconciliations, scheduled and on demand, by
// how they ended, and sums what the finished ones found (their
// RECONCILE/STATE counts, docs/RECONCILE.md).
type Reconciliations struct {
	Started int64 `json:"started"`
	// Succeeded finished (RECONCILE/STATE names them); Skipped found the
	// lock held beyond the wait (or no checkpoint yet); Failed ended
	// otherwise or could not be started or followed.
	Succeeded int64 `json:"succeeded"`
	Skipped   int64 `json:"skipped"`
	Failed    int64 `json:"failed"`
	// StoreResources are the resources listed where counts differed;
	// Deletes the delete events published (HardDeletes among them), Repairs
	// the versions never delivered and re-published, Unconfirmed the
	// resources missing from a listing that read as live, Pending the
	// versions after the checkpoint left to the runs.
	StoreResources int64 `json:"storeResources"`
	Deletes        int64 `json:"deletes"`
	HardDeletes    int64 `json:"hardDeletes"`
	Repairs        int64 `json:"repairs"`
	Unconfirmed    int64 `json:"unconfirmed"`
	Pending        int64 `json:"pending"`
	// DurationSeconds is each ended reconciliation's virtual duration
	// (execution start to stop, the wait for the lock included), in the
	// order they ended; MaxSeconds the longest.
	DurationSeconds []float64 `json:"durationSeconds,omitempty"`
	MaxSeconds      float64   `json:"maxSeconds"`
	// Queries are HealthLake count queries, Refined the hours counted
	// again by the minute, Leaves the ranges listed, Listed the resources
	// listed (docs/RECONCILE.md).
	Queries int64 `json:"queries"`
	Refined int64 `json:"refined"`
	Leaves  int64 `json:"leaves"`
	Listed  int64 `json:"listed"`
	// ExportJobs and ExportSlotSeconds are the reconciliations' own export
	// jobs and how long they held HealthLake's export slot (0: it exports
	// nothing). It takes no run lock either (statemachine tests).
	ExportJobs        int64   `json:"exportJobs"`
	ExportSlotSeconds float64 `json:"exportSlotSeconds"`
	// Deferred counts delete candidates a compare child had no time to
	// confirm (the next reconciliation's).
	Deferred int64 `json:"deferred"`
	// WindowDelayMaxSeconds is the longest windowDelaySeconds of a tick
	// while a reconciliation ran: what it cost the windows (nothing, unless
	// it took the lock or the export slot).
	WindowDelayMaxSeconds float64 `json:"windowDelayMaxSeconds"`
	// Errors are the failed ones' errors (execution error and cause, or
	// why it could not be followed), the first five.
	Errors []string `json:"errors,omitempty"`
	spans  [][2]time.Time
}

// exportSlot sums the time the reconciliations' own export jobs held
// HealthLake's one export slot (jobs named after a reconciliation's run):
// 0 since the reconciliation exports nothing (docs/RECONCILE.md), measured
// so a change that makes it export again shows here.
func (r *Reconciliations) exportSlot(jobs []fakehealthlake.JobInfo) {
	for _, j := range jobs {
		if !strings.Contains(j.JobName, "reconcile") {
			continue
		}
		end := j.EndTime
		if end.IsZero() {
			end = time.Now()
		}
		r.ExportJobs++
		r.ExportSlotSeconds += end.Sub(j.SubmitTime).Seconds()
	}
}

// windowDelays returns, for each window tick, the time until the first
// export submitted at or after it.
func windowDelays(ticks []time.Time, jobs []fakehealthlake.JobInfo) Percentiles {
	submits := make([]time.Time, 0, len(jobs))
	for _, j := range jobs {
		submits = append(submits, j.SubmitTime)
	}
	sort.Slice(submits, func(a, b int) bool { return submits[a].Before(submits[b]) })
	var ds []float64
	for _, t := range ticks {
		i := sort.Search(len(submits), func(k int) bool { return !submits[k].Before(t) })
		if i < len(submits) {
			ds = append(ds, submits[i].Sub(t).Seconds())
		}
	}
	return percentiles(ds)
}

// note keeps a failure's reason (the first five).
func (r *Reconciliations) note(why string) {
	if len(r.Errors) < 5 {
		r.Errors = append(r.Errors, why)
	}
}

// add counts one ended reconciliation.
func (r *Reconciliations) add(rec stack.Reconciliation, err error) {
	r.Started++
	switch {
	case err != nil:
		r.Failed++
		r.note(err.Error())
		return
	case rec.Finished():
		r.Succeeded++
		c := rec.Last.Counts
		r.StoreResources += c.Store
		r.Queries += c.Queries
		r.Refined += c.Refined
		r.Leaves += c.Leaves
		r.Listed += c.Listed
		r.Deletes += c.Deletes
		r.HardDeletes += c.HardDeletes
		r.Repairs += c.Repairs
		r.Unconfirmed += c.Unconfirmed
		r.Pending += c.Pending
		r.Deferred += c.Deferred
	case rec.Skipped:
		r.Skipped++
	default:
		r.Failed++
		r.note(rec.Status + " " + rec.Error + ": " + rec.Cause)
	}
	d := rec.Duration().Seconds()
	if !rec.StartedAt.IsZero() && !rec.StoppedAt.IsZero() {
		r.spans = append(r.spans, [2]time.Time{rec.StartedAt, rec.StoppedAt})
	}
	r.DurationSeconds = append(r.DurationSeconds, d)
	r.MaxSeconds = max(r.MaxSeconds, d)
}

// Report is the result of a simulation.
type Report struct {
	Workload string  `json:"workload"`
	Scale    float64 `json:"scale"`
	// SimulatedSeconds is the writes' duration, DrainSeconds how long
	// windows ran after it until the checkpoint passed the last write.
	SimulatedSeconds float64 `json:"simulatedSeconds"`
	DrainSeconds     float64 `json:"drainSeconds"`
	Drained          bool    `json:"drained"`
	// WallSeconds is filled in by the caller (the bubble's clock is fake).
	WallSeconds float64 `json:"wallSeconds,omitempty"`
	Writes      Writes  `json:"writes"`
	// Resources is the number of resources in the data store at the end
	// (current version not a deletion), Deleted those whose current
	// version is a deletion.
	Resources int64 `json:"resources"`
	Deleted   int64 `json:"deleted"`
	// LostLatestVersions counts resources whose current version (in the
	// data store at the end) never reached the bus; deletions are left out
	// (an export carries none — docs/EVENTS.md).
	LostLatestVersions int64 `json:"lostLatestVersions"`
	// LatencySeconds is write (meta.lastUpdated) → first delivery, virtual
	// time, over the upserts written during the simulation.
	LatencySeconds Percentiles `json:"latencySeconds"`
	// DeleteLatencySeconds is deletion → first delete event, virtual time:
	// each window publishes the deletions in it (its history scan); those
	// that leave no history wait for the reconciliation.
	DeleteLatencySeconds Percentiles `json:"deleteLatencySeconds"`
	// FalseDeletes counts resources that exist at the end (live, not
	// re-created since) for which a delete event was published: must be 0.
	FalseDeletes int64 `json:"falseDeletes"`
	// UnpublishedDeletes counts resources deleted or gone at the end that
	// consumers were told of (an upsert) and never told were deleted: 0
	// once every deletion reached the bus (a window's, or the
	// reconciliation's for those without history).
	UnpublishedDeletes int64 `json:"unpublishedDeletes"`
	// WindowDelaySeconds is, for every scheduled window tick, the time until
	// the next export started (a window's tick → its export submitted): a
	// window refused because another holds the lock, or queued behind
	// another export, waits here.
	WindowDelaySeconds Percentiles `json:"windowDelaySeconds"`
	// LatencyBoundSeconds is safety lag + schedule + modelled export time
	// (start-up + per MiB × the mean MiB of an export job) + 30 s.
	LatencyBoundSeconds float64 `json:"latencyBoundSeconds"`
	// ExportedLines counts the lines of every export job's files (read
	// back from S3), DeliveredEvents the distinct eventIds delivered,
	// Deliveries every delivery.
	ExportedLines        int64   `json:"exportedLines"`
	ExportJobs           int64   `json:"exportJobs"`
	ExportedMiB          float64 `json:"exportedMiB"`
	DeliveredEvents      int64   `json:"deliveredEvents"`
	Deliveries           int64   `json:"deliveries"`
	ExportedPerDelivered float64 `json:"exportedPerDelivered"`
	// ExportedByCause splits ExportedLines by why they were exported
	// (stack.ExportedByCause): window, overlap, beyondUntil, replay, other
	// (the reconciliation's or an operator's jobs, a snapshot's older lines).
	ExportedByCause stack.ExportedByCause `json:"exportedByCause"`
	// WindowExportedPerDelivered is the windows' own lines (window, overlap,
	// beyond until) per distinct event delivered: what the 5-minute path
	// alone reads per event, without replays and other jobs.
	WindowExportedPerDelivered float64    `json:"windowExportedPerDelivered"`
	Duplicates                 Duplicates `json:"duplicates"`
	Throttled                  Throttled  `json:"throttled"`
	Runs                       Runs       `json:"runs"`
	// Reconciliations are the scheduled and on-demand reconciliations.
	Reconciliations Reconciliations `json:"reconciliations"`
	// Replays lists the virtual offsets (seconds) at which replays were
	// applied.
	Replays []float64 `json:"replays,omitempty"`
	// USDPerMillionChanges and USDPerMonth are at list prices
	// (local/stack's Cost; Lambda GB-s are measured on the fake clock, so
	// in-process handler time counts as zero).
	USDPerMillionChanges float64      `json:"usdPerMillionChanges"`
	USDPerMonth          float64      `json:"usdPerMonth"`
	Cost                 *report.Cost `json:"cost,omitempty"`
	Limits               Limits       `json:"limits"`
	// LatencyModel says which per-call latency model ran: "default",
	// "workload" (the defaults changed by the workload's latency),
	// "options" (cdc-local --latency FILE) or "off"; ModelledDelays what it
	// added.
	LatencyModel   string         `json:"latencyModel"`
	ModelledDelays ModelledDelays `json:"modelledDelays"`
	// HealthLakePeakPerSecond is, for each HealthLake operation the
	// pipeline called (SearchWithGet, VReadResource, ReadHistory,
	// StartFHIRExportJob, …), the most calls within one second of virtual
	// time: what to hold against HealthLake's request-rate quotas per data
	// store (docs/SIMULATION.md). The workload's own writes are not in it.
	HealthLakePeakPerSecond map[string]int `json:"healthLakePeakPerSecond,omitempty"`
	// HealthLakeThrottled counts, by quota, the requests HealthLake's
	// request-rate quotas refused (limits.healthLakeQuotas): the pipeline
	// retries them.
	HealthLakeThrottled map[string]int `json:"healthLakeThrottled,omitempty"`
	// BodyCuts counts, with an s3BodyCuts outage, the export-file bodies
	// the gateway ended part way, and the reads prepare-change resumed.
	BodyCuts *BodyCuts `json:"bodyCuts,omitempty"`
	// LambdaSeconds is each function's run durations in virtual seconds
	// (p50, p99, max over the invocations whose handler ran) and its
	// deployed timeout (internal/stackconfig).
	LambdaSeconds map[string]lambdas.Durations `json:"lambdaSeconds"`
	// Warnings is the verdict's list of concerns: every function whose
	// longest run exceeded 80 % of its timeout (report.TimeoutShare).
	Warnings []string `json:"warnings,omitempty"`
	// Verdict judges the run in one line (verdict.go); Explanations says,
	// for each figure that could be misread as a failure, what it means
	// (keyed by the figure's JSON path).
	Verdict      Verdict           `json:"verdict"`
	Explanations map[string]string `json:"explanations,omitempty"`
	// FastPath is the fast path's section (fastpath.go); absent when the
	// workload does not turn it on.
	FastPath *FastPathReport `json:"fastPath,omitempty"`
}

var simSeq atomic.Int64

// Run simulates w. It must run inside a testing/synctest bubble (see the
// package doc); outside one it would take the simulated time in real time.
func Run(ctx context.Context, w Workload, o Options) (Report, error) {
	if err := w.Check(); err != nil {
		return Report{}, fmt.Errorf("sim: workload: %w", err)
	}
	if o.Scale > 0 {
		w.Scale = o.Scale
	}
	dur := w.Duration.D()
	if o.Duration > 0 {
		dur = o.Duration
	}
	if dur <= 0 {
		return Report{}, errors.New("sim: no duration: give the workload a duration or pass one")
	}
	drain := w.Drain.D()
	if drain <= 0 {
		drain = time.Hour
	}
	lim := effectiveLimits(w.Limits)
	latency, latencyName := latencyModel(w, o)
	o.Progress.start(dur)

	var pinned atomic.Pointer[time.Time]
	now := func() time.Time {
		if p := pinned.Load(); p != nil {
			return *p
		}
		return time.Now()
	}
	start := time.Now()
	obs := newObserver(start)
	fastOn := w.fastPathOn()
	var subs fakehealthlake.SubscriptionOptions
	var payload string
	var batchingWindow, lowTrafficWait time.Duration
	if fastOn {
		obs.fp = newFastPathLog()
		subs = w.FastPath.subscriptionOptions(w.Seed)
		subs.OnDelivered = obs.notified
		payload = w.FastPath.Payload
		batchingWindow, lowTrafficWait = w.FastPath.batchingWindow(), w.FastPath.lowTrafficWait()
	}
	env := map[string]string{}
	if w.Limits.PutEventsQuota > 0 {
		c := stackconfig.Default()
		c.PutEventsQuota = w.Limits.PutEventsQuota
		env[stackconfig.EnvPutEventsRate] = strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64)
	}
	if r := w.Limits.ReconcileReadRate; r > 0 {
		// The reconcile Lambda shares it among the deployed Map's children
		// (CDC_MAP_MAX_CONCURRENCY, from the deployed configuration).
		env[stackconfig.EnvHealthLakeReadRate] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	// The emulators keep bulk bytes (export files, the archive) on disk: a
	// day of changes or a 10 M-resource store does not fit in memory.
	spill, err := os.MkdirTemp("", "cdc-sim-*")
	if err != nil {
		return Report{}, fmt.Errorf("sim: spill directory: %w", err)
	}
	defer os.RemoveAll(spill)
	// The fast path's SubscriptionTopic and Subscription are written as the
	// stack starts, and the emulator's stamps never go back: the initial
	// load, stamped before the start, would be stamped after them. So the
	// stack starts on a clock pinned before the initial load's spread, and
	// the modelled activation delay is lengthened by as much: the
	// Subscription still activates ActivationDelay after the start.
	if fastOn && w.Initial.Resources > 0 {
		spread := w.Initial.SpreadOver.D()
		if spread <= 0 {
			spread = time.Hour
		}
		early := start.Add(-spread - time.Second)
		pinned.Store(&early)
		subs.ActivationDelay = max(subs.ActivationDelay, 0) + start.Sub(early)
		if w.FastPath.ActivationDelay == nil {
			subs.ActivationDelay += defaultActivationDelay
		}
	}
	st, err := stack.Start(ctx, stack.Options{
		InMemory: true, Name: fmt.Sprintf("sim%d", simSeq.Add(1)), SampleSize: -1,
		SpillDir: spill, TrustedLoads: true,
		Every: lim.Every.D(), SafetyLag: lim.SafetyLag.D(), PutEventsQuota: lim.PutEventsQuota,
		ExportStartup: lim.ExportStartup.D(), ExportPerMB: lim.ExportPerMB.D(), VisibilityLag: lim.VisibilityLag.D(),
		HistoryLag: lim.HistoryLag.D(), HistoryOptOut: lim.HistoryOptOut, HealthLakeQuotas: lim.HealthLakeQuotas,
		ResourcesPerFile: lim.ResourcesPerFile, RecheckDelay: lim.RecheckDelay.D(),
		Sink: obs, Now: now, Logger: o.Logger, LambdaEnv: env, Latency: &latency,
		FastPath: fastOn, FastPathPayload: payload, FastPathTypes: w.fastPathTypes(), Subscriptions: subs,
		FastPathBatchingWindow: batchingWindow, FastPathLowTrafficWait: lowTrafficWait,
	})
	pinned.Store(nil)
	if err != nil {
		return Report{}, fmt.Errorf("sim: %w", err)
	}
	defer st.Close()
	ds, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ok {
		return Report{}, errors.New("sim: the stack has no data store")
	}
	store, err := runlock.New(dynamodb.NewFromConfig(st.Config), runlock.Config{Table: st.Res.Table})
	if err != nil {
		return Report{}, fmt.Errorf("sim: %w", err)
	}

	drv := newDriver(ds, st.FHIR, w.Seed+1)
	if fastOn {
		drv.keepStamps()
	}
	scale := w.scale()
	if n := int(math.Round(float64(w.Initial.Resources) * scale)); n > 0 {
		err := drv.preload(w.Initial, n, start, func(t time.Time) { pinned.Store(&t) })
		pinned.Store(nil)
		if err != nil {
			return Report{}, fmt.Errorf("sim: initial load: %w", err)
		}
	}

	bg, stopBG := context.WithCancel(ctx)
	var bgWG sync.WaitGroup
	defer func() { stopBG(); bgWG.Wait() }()
	cuts := installOutages(bg, &bgWG, st, w.Outages, start, w.Seed)
	// The Subscription's activation: when HealthLake's handshake was
	// delivered (the emulator moves on every 50 ms; so does this).
	var activated atomic.Pointer[time.Time]
	if fastOn {
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			for st.HealthLake.SubscriptionStats().Handshakes == 0 {
				if !sleepUntil(bg, time.Now().Add(50*time.Millisecond)) {
					return
				}
			}
			t := time.Now()
			activated.Store(&t)
		}()
	}
	var replays []float64
	var replayMu sync.Mutex
	for _, r := range w.Replays {
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			if !sleepUntil(bg, start.Add(r.At.D())) {
				return
			}
			for {
				_, err := store.Replay(bg, runlock.ReplayRequest{Since: time.Now().Add(-r.Back.D()), Actor: "sim", Reason: "workload replay"})
				if err == nil {
					obs.replayed(time.Now())
					replayMu.Lock()
					replays = append(replays, time.Since(start).Seconds())
					replayMu.Unlock()
					return
				}
				if !errors.Is(err, runlock.ErrLockHeld) && !errors.Is(err, runlock.ErrStaleLock) {
					st.Options().Logger.Warn("replay not applied", "error", err.Error())
					return
				}
				if !sleepUntil(bg, time.Now().Add(10*time.Second)) {
					return
				}
			}
		}()
	}

	// The reconciliations, scheduled (below) and on demand.
	var recs Reconciliations
	var recsMu sync.Mutex
	onReconciliation := func(r stack.Reconciliation, err error) {
		if err != nil {
			st.Options().Logger.Warn("reconciliation not followed", "error", err.Error())
		}
		recsMu.Lock()
		defer recsMu.Unlock()
		recs.add(r, err)
	}
	for _, r := range w.Reconciliations {
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			if !sleepUntil(bg, start.Add(r.At.D())) {
				return
			}
			// Once started it is followed to its end, even past the drain.
			onReconciliation(st.Reconcile(context.WithoutCancel(bg)))
		}()
	}

	// The schedule.
	var runs Runs
	var ticks []time.Time
	var committed []report.Run   // with the fast path: the committed windows
	var firstWindow *report.Span // and the first that succeeded
	var runsMu sync.Mutex
	runCtx, stopRuns := context.WithCancel(ctx)
	scheduleDone := make(chan error, 1)
	go func() {
		scheduleDone <- st.RunWith(runCtx, stack.RunOptions{
			ReconcileEvery:   time.Duration(lim.ReconcileEvery),
			OnReconciliation: onReconciliation,
			OnWindow: func(win report.Run, err error) {
				runsMu.Lock()
				defer runsMu.Unlock()
				if !win.StartedAt.IsZero() {
					ticks = append(ticks, win.StartedAt)
				}
				runs.OverlapSkipped += win.OverlapSkipped
				if fastOn && err == nil && win.Outcome == report.OutcomeCommitted {
					committed = append(committed, win)
				}
				if fastOn && err == nil && firstWindow == nil && win.Window != nil &&
					(win.Outcome == report.OutcomeCommitted || win.Outcome == report.OutcomeEmpty) {
					firstWindow = win.Window
				}
				distinct, _ := st.Delivered.Counts()
				o.Progress.window(win, err, int64(distinct))
				switch {
				case err != nil || win.Outcome == report.OutcomeFailed:
					runs.Failed++
				case win.Outcome == report.OutcomeSkipped:
					runs.Skipped++
				case win.Outcome == report.OutcomeEmpty:
					runs.Empty++
				default:
					runs.Committed++
				}
			},
		})
	}()
	stopSchedule := func() error {
		stopRuns()
		return <-scheduleDone
	}

	// The writes, one second at a time.
	p := newPlan(w)
	for t := time.Duration(0); t < dur; t += time.Second {
		if err := p.second(ctx, drv, t); err != nil {
			_ = stopSchedule()
			return Report{}, fmt.Errorf("sim: writes at %v: %w", t, err)
		}
		if !sleepUntil(ctx, start.Add(t+time.Second)) {
			_ = stopSchedule()
			return Report{}, fmt.Errorf("sim: %w", ctx.Err())
		}
		o.Progress.at(t + time.Second)
	}
	// Drain: windows go on until the checkpoint has passed the last write
	// and no export is pending, or the drain limit.
	end := time.Now()
	drained := false
	for time.Since(end) < drain {
		s, err := store.Status(ctx, 0)
		if err == nil && s.Exists && s.Pending == nil && !s.Checkpoint.Before(drv.lastWrite) && s.Lock == nil {
			drained = true
			break
		}
		if !sleepUntil(ctx, time.Now().Add(10*time.Second)) {
			break
		}
		o.Progress.at(dur + time.Since(end))
	}
	drainTime := time.Since(end)
	if err := stopSchedule(); err != nil {
		return Report{}, fmt.Errorf("sim: schedule: %w", err)
	}
	stopBG()
	bgWG.Wait()

	rep := Report{
		Workload: w.Name, Scale: scale, SimulatedSeconds: dur.Seconds(), DrainSeconds: drainTime.Seconds(), Drained: drained,
		Writes: drv.writes, Limits: lim, Replays: replays,
		LatencyModel: latencyName, LambdaSeconds: st.Lambdas.Durations(),
	}
	rep.Warnings = report.TimeoutWarnings(rep.LambdaSeconds, report.TimeoutShare)
	if calls, total := st.Env.Gateway.Latency().Totals(); calls > 0 {
		rep.ModelledDelays = ModelledDelays{Calls: calls, Seconds: total.Seconds()}
	}
	rep.HealthLakePeakPerSecond = healthLakePeaks(st.Env.Gateway.PeakRates())
	if th := st.HealthLake.QuotaThrottles(); len(th) > 0 {
		rep.HealthLakeThrottled = th
	}
	if cuts != nil {
		rep.BodyCuts = &BodyCuts{Chosen: cuts.Load(), Cut: st.Env.Gateway.BodyCutsMade(), ReadsResumed: int64(st.Metrics.Totals()[metrics.ReadsResumed])}
	}
	runsMu.Lock()
	runs.Succeeded = runs.Committed + runs.Empty
	rep.Runs = runs
	runsMu.Unlock()
	recsMu.Lock()
	rep.Reconciliations = recs
	recsMu.Unlock()
	drv.latest(func(typ, id, vid, lastUpdated string) {
		if vid == "" {
			rep.Deleted++
			if obs.unpublishedDelete(typ, id) {
				rep.UnpublishedDeletes++
			}
			return
		}
		rep.Resources++
		if obs.falseDelete(typ, id, lastUpdated) {
			rep.FalseDeletes++
		}
		if !obs.delivered(envelope.EventID(typ, id, vid)) {
			rep.LostLatestVersions++
		}
	})
	own := int64(0)
	if fastOn {
		if own, err = fastPathResources(ctx, st); err != nil {
			return rep, err
		}
	}
	if n := int64(ds.Count()) - own; n != rep.Resources {
		return rep, fmt.Errorf("sim: the data store holds %d resources (besides the fast path's %d), the workload knows of %d", n, own, rep.Resources)
	}
	rep.LatencySeconds, rep.Duplicates, rep.DeliveredEvents, rep.Deliveries = obs.summary()
	rep.DeleteLatencySeconds = obs.deleteLatency()
	runsMu.Lock()
	rep.WindowDelaySeconds = windowDelays(ticks, st.HealthLake.Jobs())
	for _, sp := range rep.Reconciliations.spans {
		var during []time.Time
		for _, t := range ticks {
			if !t.Before(sp[0]) && !t.After(sp[1]) {
				during = append(during, t)
			}
		}
		rep.Reconciliations.WindowDelayMaxSeconds = max(rep.Reconciliations.WindowDelayMaxSeconds, windowDelays(during, st.HealthLake.Jobs()).Max)
	}
	runsMu.Unlock()
	rep.Reconciliations.exportSlot(st.HealthLake.Jobs())
	ex, err := st.Exported(ctx)
	if err != nil {
		return rep, fmt.Errorf("sim: %w", err)
	}
	lines, bytes, jobs := ex.Lines, ex.Bytes, ex.Jobs
	rep.ExportedLines, rep.ExportJobs, rep.ExportedMiB = lines, jobs, float64(bytes)/(1<<20)
	rep.ExportedByCause = ex.ByCause
	if rep.DeliveredEvents > 0 {
		rep.ExportedPerDelivered = float64(lines) / float64(rep.DeliveredEvents)
		c := ex.ByCause
		rep.WindowExportedPerDelivered = float64(c.Window+c.Overlap+c.BeyondUntil) / float64(rep.DeliveredEvents)
	}
	exportTime := lim.ExportStartup.D().Seconds()
	if jobs > 0 {
		exportTime += lim.ExportPerMB.D().Seconds() * rep.ExportedMiB / float64(jobs)
	}
	rep.LatencyBoundSeconds = lim.SafetyLag.D().Seconds() + lim.Every.D().Seconds() + exportTime + 30
	eb := st.EventBridge.Stats()
	rep.Throttled = Throttled{Calls: eb.ThrottledCalls, Quota: eb.QuotaThrottledCalls, Injected: eb.ThrottledCalls - eb.QuotaThrottledCalls}
	c := st.Cost()
	rep.Cost, rep.USDPerMillionChanges, rep.USDPerMonth = &c, c.USDPerMillionChanges, c.USDPerMonth
	if fastOn {
		var at time.Time
		if p := activated.Load(); p != nil {
			at = *p
		}
		runsMu.Lock()
		reads, first := windowReads(committed, st.HealthLake.Jobs()), firstWindow
		runsMu.Unlock()
		rep.FastPath = obs.fastPathReport(fastPathInputs{
			fp: *w.FastPath, types: w.fastPathTypes(), start: start, activatedAt: at,
			stats: st.HealthLake.SubscriptionStats(), mapping: st.MappingStats()[stack.FnFastPath], lambda: st.Lambdas.Stats()[stack.FnFastPath], dropped: st.HealthLake.DroppedNotifications(),
			totals: st.Metrics.Totals(), windows: reads, firstWindow: first, stamps: drv.stamps, lastWrite: drv.lastWrite, end: time.Now(),
			maxNotificationDelay: w.FastPath.maxNotificationDelay(), visibilityLag: lim.VisibilityLag.D(),
		})
		if !at.IsZero() {
			rep.FastPath.Cost = fastPathCost(st.FastPathUsage(), int64(st.HealthLake.SubscriptionStats().Matched), time.Since(at), st.FastPathModel())
		}
	}
	rep.Verdict, rep.Explanations = judge(rep, w)
	return rep, nil
}

// fastPathResources counts the fast path's own resources in the data store
// (its SubscriptionTopic and Subscription, which the workload did not
// write), with FHIR searches.
func fastPathResources(ctx context.Context, st *stack.Stack) (int64, error) {
	var n int64
	for _, typ := range []string{"SubscriptionTopic", "Subscription"} {
		resp, err := st.FHIR(ctx, http.MethodGet, typ+"?_summary=count", nil)
		if err != nil {
			return 0, fmt.Errorf("sim: count the fast path's resources: %w", err)
		}
		var b struct {
			Total int64 `json:"total"`
		}
		err = json.NewDecoder(resp.Body).Decode(&b)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("sim: count the fast path's %s resources: HTTP %d %v", typ, resp.StatusCode, err)
		}
		n += b.Total
	}
	return n, nil
}

// latencyModel is the latency model a run uses and its name: the options,
// else the defaults changed by the workload, else the defaults.
func latencyModel(w Workload, o Options) (localaws.LatencyConfig, string) {
	switch {
	case o.Latency != nil && o.Latency.Off, o.Latency == nil && w.Latency != nil && w.Latency.Off:
		return localaws.LatencyConfig{Off: true}, "off"
	case o.Latency != nil:
		return *o.Latency, "options"
	case w.Latency != nil:
		return localaws.DefaultLatency().Merge(*w.Latency), "workload"
	}
	return localaws.DefaultLatency(), "default"
}

// effectiveLimits fills in the defaults the simulation runs with.
func effectiveLimits(l Limits) Limits {
	if l.Every <= 0 {
		l.Every = Duration(stack.DefaultEvery)
	}
	if l.SafetyLag == nil {
		lag := Duration(2 * time.Minute)
		l.SafetyLag = &lag
	}
	if l.PutEventsQuota <= 0 {
		l.PutEventsQuota = stackconfig.Default().PutEventsQuota
	}
	if l.HealthLakeQuotas == "" {
		l.HealthLakeQuotas = stack.QuotasCurrent
	}
	if l.ResourcesPerFile <= 0 {
		l.ResourcesPerFile = 5000
	}
	if l.RecheckDelay <= 0 {
		l.RecheckDelay = Duration(time.Second)
	}
	if l.ReconcileEvery == 0 {
		l.ReconcileEvery = Schedule(stackconfig.Default().ReconcileEvery)
	}
	if l.HistoryLag == 0 {
		l.HistoryLag = Duration(stack.DefaultHistoryLag)
	}
	return l
}

// sleepUntil waits until t (virtual) or ctx ends; false when ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// installOutages starts one goroutine per outage that turns it on and off
// at its times, and the throttling, crash and body-cut deciders. It returns
// the count of bodies cut, or nil without an s3BodyCuts outage.
func installOutages(ctx context.Context, wg *sync.WaitGroup, st *stack.Stack, outages []Outage, start time.Time, seed int64) *atomic.Int64 {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(uint64(seed), 0x0a7a))
	active := func(o Outage) bool {
		off := time.Since(start)
		return off >= o.From.D() && off < o.From.D()+o.For.D()
	}
	roll := func(p float64) bool {
		if p <= 0 || p >= 1 {
			return p >= 1 || p == 0
		}
		mu.Lock()
		defer mu.Unlock()
		return rng.Float64() < p
	}
	var storms, crashes, cuts []Outage
	for _, o := range outages {
		switch o.Kind {
		case OutageHealthLake:
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !sleepUntil(ctx, start.Add(o.From.D())) {
					return
				}
				st.HealthLake.FailNextCalls(math.MaxInt32, 503)
				sleepUntil(ctx, start.Add(o.From.D()+o.For.D()))
				st.HealthLake.FailNextCalls(0, 503)
			}()
		case OutagePutEvents:
			storms = append(storms, o)
		case OutageLambdaCrash:
			crashes = append(crashes, o)
		case OutageS3BodyCuts:
			cuts = append(cuts, o)
		}
	}
	var cutCount *atomic.Int64
	if len(cuts) > 0 {
		cutCount = new(atomic.Int64)
		reader := localaws.PrincipalAccessKeyID(string(iampolicy.PrepareChange))
		st.Env.Gateway.SetBodyCuts(func(service, op string, r *http.Request) (float64, bool) {
			key, _ := localaws.Credential(r)
			path := r.URL.Path
			if service != localaws.ServiceS3 || op != "GETObject" || key != reader || !strings.Contains(path, "FHIR_EXPORT") || !strings.HasSuffix(path, ".ndjson") {
				return 0, false
			}
			for _, o := range cuts {
				if active(o) && roll(o.Fraction) {
					cutCount.Add(1)
					mu.Lock()
					defer mu.Unlock()
					return rng.Float64(), true
				}
			}
			return 0, false
		})
	}
	if len(storms) > 0 {
		st.EventBridge.SetThrottle(func(int) bool {
			for _, o := range storms {
				if active(o) && roll(o.Fraction) {
					return true
				}
			}
			return false
		})
	}
	if len(crashes) > 0 {
		st.Lambdas.SetFaults(crashFaults{outages: crashes, active: active, roll: roll})
	}
	return cutCount
}

// crashFaults crashes invocations during the workload's lambdaCrash outages.
type crashFaults struct {
	outages []Outage
	active  func(Outage) bool
	roll    func(float64) bool
}

func (c crashFaults) crash(function, when string) bool {
	for _, o := range c.outages {
		w := o.When
		if w == "" {
			w = "before"
		}
		if w == when && (o.Function == "" || o.Function == function) && c.active(o) && c.roll(o.Rate) {
			return true
		}
	}
	return false
}

// CrashBefore implements lambdas.Faults.
func (c crashFaults) CrashBefore(function string) bool { return c.crash(function, "before") }

// CrashAfter implements lambdas.Faults.
func (c crashFaults) CrashAfter(function string) bool { return c.crash(function, "after") }

// healthLakePeaks keeps the HealthLake operations of a gateway's peak
// rates, by operation name.
func healthLakePeaks(peaks map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range peaks {
		if op, ok := strings.CutPrefix(k, localaws.ServiceHealthLake+":"); ok {
			out[op] = n
		}
	}
	return out
}
