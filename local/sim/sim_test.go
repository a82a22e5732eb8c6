package sim

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// Flags of TestSimulate, the entry point `cdc-local --simulate` runs
// (`go test ./local/sim -run '^TestSimulate$' -args -workload F -duration D
// -report R`).
var (
	flagWorkload  = flag.String("workload", "", "TestSimulate: the workload file")
	flagDuration  = flag.Duration("duration", 0, "TestSimulate: simulated duration (default: the workload's)")
	flagScale     = flag.Float64("scale", 0, "TestSimulate: scale of the workload's counts and rates (default: the workload's)")
	flagReport    = flag.String("report", "", "TestSimulate: where to write the report JSON (default: stdout)")
	flagLog       = flag.Bool("log", false, "TestSimulate: write the stack's log (ids, counts, durations) to stderr")
	flagHeap      = flag.String("heapprofile", "", "TestSimulate: write a heap profile to PREFIX.N every -heapprofile-every of wall time while the run goes on")
	flagHeapEvery = flag.Duration("heapprofile-every", 30*time.Second, "TestSimulate: wall time between two heap profiles")
	flagLatency   = flag.String("latency", "", "TestSimulate: latency model: a JSON file merged over the defaults, or off (default: the workload's)")
)

// heapProfiles writes a heap profile to prefix.1, prefix.2, … at each tick
// until stop is closed. It runs outside the bubble, so a ticker's time is
// real.
func heapProfiles(t *testing.T, prefix string, tick <-chan time.Time, stop <-chan struct{}) {
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		case <-tick:
		}
		f, err := os.Create(fmt.Sprintf("%s.%d", prefix, n))
		if err != nil {
			t.Errorf("heap profile: %v", err)
			return
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Errorf("heap profile: %v", err)
		}
		_ = f.Close()
	}
}

// simulate runs w inside a bubble and returns the report with the wall time.
func simulate(t *testing.T, w Workload, o Options) Report {
	t.Helper()
	var rep Report
	var err error
	began := time.Now()
	synctest.Test(t, func(t *testing.T) {
		rep, err = Run(context.Background(), w, o)
	})
	rep.WallSeconds = time.Since(began).Seconds()
	if err != nil {
		t.Fatalf("simulate %s: %v", w.Name, err)
	}
	return rep
}

// TestSimulate runs the workload named by -workload and writes the report;
// without -workload it is skipped.
func TestSimulate(t *testing.T) {
	if *flagWorkload == "" {
		t.Skip("no -workload given (cdc-local --simulate runs this test)")
	}
	w, err := Load(*flagWorkload)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Duration: *flagDuration, Scale: *flagScale}
	if *flagLatency != "" {
		l, err := localaws.LoadLatency(*flagLatency)
		if err != nil {
			t.Fatal(err)
		}
		o.Latency = &l
	}
	if *flagLog {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if !*flagLog {
		// The emulators' HTTP servers log through the standard logger
		// (e.g. minidyn's superfluous WriteHeader): only with -log.
		log.SetOutput(io.Discard)
		defer log.SetOutput(os.Stderr)
	}
	if *flagProgress > 0 {
		o.Progress = &Progress{}
		defer showProgress(os.Stderr, o.Progress, *flagProgress)()
	}
	if *flagHeap != "" && *flagHeapEvery > 0 {
		stop := make(chan struct{})
		done := make(chan struct{})
		tick := time.NewTicker(*flagHeapEvery)
		go func() { defer close(done); heapProfiles(t, *flagHeap, tick.C, stop) }()
		defer func() { close(stop); <-done; tick.Stop() }()
	}
	rep := simulate(t, w, o)
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *flagReport == "" {
		_, _ = os.Stdout.Write(out)
		return
	}
	if err := os.WriteFile(*flagReport, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Two hours of the steady workload at a tenth of its rate: nothing lost,
// the latency within the bound, every window succeeded.
func TestShortSteadyLosesNothingWithinTheLatencyBound(t *testing.T) {
	w, err := Load(filepath.Join("..", "..", "testdata", "workloads", "steady.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := simulate(t, w, Options{Duration: 2 * time.Hour, Scale: 0.1})
	t.Logf("wall %.1fs: %d creates, %d updates, %d deletes; %d delivered; latency %+v (bound %.0fs); runs %+v; duplicates %+v; exported/delivered %.3f (%d jobs, by cause %+v)",
		rep.WallSeconds, rep.Writes.Creates, rep.Writes.Updates, rep.Writes.Deletes, rep.DeliveredEvents,
		rep.LatencySeconds, rep.LatencyBoundSeconds, rep.Runs, rep.Duplicates, rep.ExportedPerDelivered, rep.ExportJobs, rep.ExportedByCause)
	t.Logf("latency model %s: %d modelled delays, %.0fs; slowest functions: %v; warnings: %v",
		rep.LatencyModel, rep.ModelledDelays.Calls, rep.ModelledDelays.Seconds, report.Slowest(rep.LambdaSeconds, 5), rep.Warnings)
	if rep.LatencyModel != "default" || rep.ModelledDelays.Calls == 0 {
		t.Errorf("latency model %q added %d delays: want the default model on", rep.LatencyModel, rep.ModelledDelays.Calls)
	}
	if d := rep.LambdaSeconds["prepare-change"]; d.Invocations == 0 || d.Max <= 0 || d.Timeout != 240 {
		t.Errorf("lambdaSeconds[prepare-change] = %+v: want runs with a duration and the deployed 240 s timeout", d)
	}
	if rep.Writes.Creates+rep.Writes.Updates == 0 || rep.DeliveredEvents == 0 {
		t.Fatalf("nothing written or delivered: %+v", rep.Writes)
	}
	if rep.LostLatestVersions != 0 {
		t.Errorf("lostLatestVersions = %d, want 0", rep.LostLatestVersions)
	}
	if !rep.Drained {
		t.Errorf("the pipeline did not catch up within the drain")
	}
	if rep.LatencySeconds.P95 > rep.LatencyBoundSeconds {
		t.Errorf("p95 latency %.0fs > bound %.0fs", rep.LatencySeconds.P95, rep.LatencyBoundSeconds)
	}
	if rep.LatencySeconds.P50 < rep.Limits.SafetyLag.D().Seconds() {
		t.Errorf("p50 latency %.0fs is below the safety lag: the clock is not simulated", rep.LatencySeconds.P50)
	}
	if rep.Runs.Failed != 0 || rep.Runs.Succeeded == 0 {
		t.Errorf("runs = %+v, want all succeeded", rep.Runs)
	}
	// Each version once: with no failure, retry or replay, the overlap's
	// repeats are skipped (counted), not delivered again.
	if rep.Duplicates.Total*1000 > rep.Deliveries || rep.Runs.OverlapSkipped == 0 {
		t.Errorf("duplicates %+v of %d deliveries (want ≤ 0.1 %%), %d overlap lines skipped (want > 0)", rep.Duplicates, rep.Deliveries, rep.Runs.OverlapSkipped)
	}
}

// Each tick writes the next numbered heap profile (gzip-compressed
// protobuf); closing stop ends the writer.
func TestHeapProfilesWritesOneNumberedProfilePerTick(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "heap")
	tick := make(chan time.Time)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); heapProfiles(t, prefix, tick, stop) }()
	tick <- time.Time{}
	tick <- time.Time{}
	close(stop)
	<-done
	for _, n := range []string{".1", ".2"} {
		b, err := os.ReadFile(prefix + n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is not a gzip-compressed profile (%d bytes)", prefix+n, len(b))
		}
	}
	if _, err := os.Stat(prefix + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third profile was written without a third tick (stat: %v)", err)
	}
}

// TestDeletesReachTheBusFromTheirWindowAndTheReconciliation: soft deletes
// are published by the windows they happen in (within the latency bound);
// $erase and a hard $bulk-delete leave no history and a type opted out of
// history leaves none either: the on-demand reconciliation publishes those.
// At the end nothing consumers were told of is left undeleted, no live
// resource was reported deleted, and the reconciliation started no export.
func TestDeletesReachTheBusFromTheirWindowAndTheReconciliation(t *testing.T) {
	w, err := Parse([]byte(`{
		"name": "deletes-small", "duration": "1h", "drain": "1h", "seed": 7,
		"limits": {"reconcileEvery": "off", "historyOptOut": ["Condition"], "historyLag": "2s"},
		"initial": {"resources": 400, "spreadOver": "1h", "types": ["Patient", "Observation", "Condition", "Encounter"]},
		"bursts": [
			{"resourceType": "Observation", "at": "10m", "over": "1m", "updates": 20, "deletes": 30, "erases": 10},
			{"resourceType": "Patient", "at": "11m", "deletes": 10},
			{"resourceType": "Condition", "at": "12m", "deletes": 5},
			{"resourceType": "Encounter", "at": "13m", "bulkDelete": "hard"}
		],
		"reconciliations": [{"at": "40m"}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	rep := simulate(t, w, Options{})
	r := rep.Reconciliations
	t.Logf("wall %.1fs: writes %+v; resources %d, deleted %d; deletes p95 %.0fs (bound %.0fs); reconciliations %+v",
		rep.WallSeconds, rep.Writes, rep.Resources, rep.Deleted, rep.DeleteLatencySeconds.P95, rep.LatencyBoundSeconds, r)
	if rep.Writes.Deletes != 45 || rep.Writes.Erases < 9 || rep.Writes.BulkDeletes != 1 || rep.Writes.DeletesRefused != 0 {
		t.Fatalf("writes = %+v", rep.Writes)
	}
	if r.Started != 1 || r.Succeeded != 1 || r.Failed != 0 {
		t.Fatalf("reconciliations = %+v, want one, succeeded", r)
	}
	// The reconciliation's: the erased, the bulk-deleted Encounters and 5
	// Conditions opted out of history — all without history, so all with
	// the hard-delete version.
	if want := rep.Writes.Erases + rep.Writes.BulkDeleted + 5; r.Deletes != want || r.HardDeletes != want {
		t.Errorf("the reconciliation published %d deletes (%d hard), want %d", r.Deletes, r.HardDeletes, want)
	}
	if rep.UnpublishedDeletes != 0 || rep.FalseDeletes != 0 {
		t.Errorf("unpublished deletes %d, false deletes %d; want 0 and 0", rep.UnpublishedDeletes, rep.FalseDeletes)
	}
	if rep.DeleteLatencySeconds.Count < 40 || rep.DeleteLatencySeconds.P50 > rep.LatencyBoundSeconds {
		t.Errorf("delete latency %+v: the windows' deletes within the bound %.0f s", rep.DeleteLatencySeconds, rep.LatencyBoundSeconds)
	}
	if r.ExportJobs != 0 || r.Repairs != 0 {
		t.Errorf("reconciliation counts %+v: no export, no repairs", r)
	}
	if rep.LostLatestVersions != 0 || !rep.Drained {
		t.Errorf("lostLatestVersions = %d, drained %v", rep.LostLatestVersions, rep.Drained)
	}
	if rep.WindowDelaySeconds.Count == 0 || rep.WindowDelaySeconds.Max > 600 {
		t.Errorf("window delay %+v: want every tick's export within 600 s", rep.WindowDelaySeconds)
	}
}

func TestReconcileEveryDefaultsToTheDeployedSchedule(t *testing.T) {
	if got := effectiveLimits(Limits{}).ReconcileEvery; time.Duration(got) != 24*time.Hour {
		t.Errorf("default reconcileEvery = %v, want 24h", time.Duration(got))
	}
	for _, c := range []struct {
		in   string
		want Schedule
		ok   bool
	}{{`"off"`, scheduleOff, true}, {`"6h"`, Schedule(6 * time.Hour), true}, {`"0s"`, 0, false}, {`"-1h"`, 0, false}, {`"daily"`, 0, false}} {
		var s Schedule
		err := json.Unmarshal([]byte(c.in), &s)
		if (err == nil) != c.ok || (c.ok && s != c.want) {
			t.Errorf("%s: %v, %v; want %v (ok %v)", c.in, time.Duration(s), err, time.Duration(c.want), c.ok)
		}
		if c.ok {
			if b, _ := json.Marshal(s); string(b) != c.in && !(c.in == `"6h"` && string(b) == `"6h0m0s"`) {
				t.Errorf("%s marshals as %s", c.in, b)
			}
		}
	}
}

// Every committed workload file parses and passes Check.
func TestCommittedWorkloadsLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "workloads", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workload files: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%v", err)
		}
	}
	w, err := Load(filepath.Join("..", "..", "testdata", "workloads", "reconcile-10m.json"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Initial.Resources != 10_000_000 || w.Scale != 0.001 || len(w.Reconciliations) != 1 || !w.Limits.ReconcileEvery.Off() {
		t.Errorf("reconcile-10m: %d resources at scale %v, %d reconciliations, schedule %v", w.Initial.Resources, w.Scale, len(w.Reconciliations), w.Limits.ReconcileEvery)
	}
	// limits.healthLakeQuotas takes the stack's values only.
	if _, err := Parse([]byte(`{"name": "q", "duration": "1h", "limits": {"healthLakeQuotas": "legacy"}}`)); err != nil {
		t.Errorf("healthLakeQuotas legacy refused: %v", err)
	}
	if _, err := Parse([]byte(`{"name": "q", "duration": "1h", "limits": {"healthLakeQuotas": "2023"}}`)); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("healthLakeQuotas 2023: err %v, want a refusal naming the values", err)
	}
}

// fastPathWorkload is a small workload for the fast path's tests: two
// types written from 90 s, after the Subscription activated at 1 min (so
// every version is notified), the default latency model, the deployed
// safety lag and a modelled export; faults sets the notification faults.
// Patients are created in the first minutes and deleted from 8 min, so no
// resource is created and deleted inside one window (a deletion whose
// notification is dropped is then not published: docs/SIMULATION.md, "The
// fast path").
func fastPathWorkload(t *testing.T, faults string) Workload {
	t.Helper()
	w, err := Parse([]byte(`{
		"name": "fastpath-small", "duration": "15m", "drain": "1h", "seed": 3,
		"limits": {"every": "5m", "safetyLag": "2m", "exportStartup": "1m", "exportPerMB": "2s", "visibilityLag": "30s", "recheckDelay": "5s"},
		"streams": [
			{"resourceType": "Observation", "createsPerDay": 40000, "updatesPerDay": 80000, "from": "90s"},
			{"resourceType": "Patient", "createsPerDay": 30000, "from": "90s", "until": "6m"},
			{"resourceType": "Patient", "updatesPerDay": 20000, "from": "90s"},
			{"resourceType": "Patient", "deletesPerDay": 5000, "from": "8m"}
		],
		"fastPath": {"on": true, "activationDelay": "1m", "notificationDelay": "2s", "notificationJitter": "1s"` + faults + `}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// The fast path delivers upserts and deletes within seconds of the
// modelled notification delay and the windows skip what it delivered:
// nothing lost, no miss but the versions the fast path kept unrecorded as
// the writes stopped, duplicates only those.
func TestFastPathDeliversWithinTheNotificationDelay(t *testing.T) {
	rep := simulate(t, fastPathWorkload(t, ""), Options{})
	f := rep.FastPath
	if f == nil {
		t.Fatal("no fastPath section")
	}
	t.Logf("wall %.1fs: writes %+v; fast path %+v; duplicates %+v of %d deliveries", rep.WallSeconds, rep.Writes, *f, rep.Duplicates, rep.Deliveries)
	if rep.LostLatestVersions != 0 || !rep.Drained || rep.UnpublishedDeletes != 0 || !rep.Verdict.Pass {
		t.Errorf("lostLatestVersions = %d, drained %v, unpublishedDeletes %d; verdict %s", rep.LostLatestVersions, rep.Drained, rep.UnpublishedDeletes, rep.Verdict.Line)
	}
	if f.ActivatedAtSeconds < 60 || f.ActivatedAtSeconds > 61 || f.WritesBeforeActivation != 0 {
		t.Errorf("activated at %.2f s with %d writes before: want at 1 min, none before", f.ActivatedAtSeconds, f.WritesBeforeActivation)
	}
	// Modelled: 2 s + up to 1 s; the fast path's queue, Lambda and
	// PutEvents add their modelled latencies.
	if f.NotificationDelaySeconds.Count == 0 || f.NotificationDelaySeconds.P50 < 2 || f.NotificationDelaySeconds.Max > 3 {
		t.Errorf("notification delay %+v: want the modelled 2 s + [0, 1 s)", f.NotificationDelaySeconds)
	}
	bound := 2 + 1 + 10.0
	if f.LatencySeconds.Count == 0 || f.LatencySeconds.P95 > bound || f.LatencySeconds.P50 < f.NotificationDelaySeconds.P50 {
		t.Errorf("fast-path latency %+v: want p95 ≤ %.0f s, p50 ≥ the notification delay's", f.LatencySeconds, bound)
	}
	if f.DeleteLatencySeconds.Count == 0 || f.DeleteLatencySeconds.P95 > bound {
		t.Errorf("fast-path delete latency %+v: want deletes, p95 ≤ %.0f s", f.DeleteLatencySeconds, bound)
	}
	// Five pollers (up to the mapping's MaximumConcurrency with a backlog)
	// gather for a second each: invocations carry a message or more, never
	// more than the batch size, and each poller needs one environment at most.
	if maxPollers := int64(stackconfig.Default().FastPathMaxConcurrency()); f.PeakPollers < 5 || f.PeakPollers > maxPollers {
		t.Errorf("peak pollers %d: want 5 to %d", f.PeakPollers, maxPollers)
	}
	if f.Environments < 1 || f.Environments > f.PeakPollers {
		t.Errorf("%d execution environments for a mapping of at most %d pollers: want 1 to %d", f.Environments, f.PeakPollers, f.PeakPollers)
	}
	if f.Invocations == 0 || f.MessagesPerInvocation < 1 || f.MessagesPerInvocation > stackconfig.FastPathBatchSize {
		t.Errorf("%d invocations of %.2f messages each: want batches of 1 to %d", f.Invocations, f.MessagesPerInvocation, stackconfig.FastPathBatchSize)
	}
	if f.DeliveredByExportPath != 0 || f.ExportLatencySeconds.Count != 0 || f.Skipped == 0 {
		t.Errorf("the export path delivered %d versions first (latency %+v), skipped %d: want none first, the fast path's skipped",
			f.DeliveredByExportPath, f.ExportLatencySeconds, f.Skipped)
	}
	b := f.MissedBreakdown
	if !f.MissedExplained || f.Missed != b.NotRecorded {
		t.Errorf("missed %d, breakdown %+v: want only versions the fast path published but had not recorded when a window ran (notes %q)", f.Missed, b, f.Notes)
	}
	if rep.Duplicates.Total != b.NotRecorded || rep.Duplicates.CrossPath != b.NotRecorded {
		t.Errorf("duplicates %+v: want only the %d versions the fast path had not recorded when a window ran", rep.Duplicates, b.NotRecorded)
	}
}

// With HealthLake dropping notifications, the windows publish exactly the
// dropped versions that were still the latest when they exported:
// FastPathMissed is what was dropped (besides the versions the fast path
// had published but not recorded when a window ran: an environment's
// record waits for its next invocation), nothing is lost.
func TestFastPathMissedIsWhatHealthLakeDropped(t *testing.T) {
	rep := simulate(t, fastPathWorkload(t, `, "dropRate": 0.05`), Options{})
	f := rep.FastPath
	if f == nil {
		t.Fatal("no fastPath section")
	}
	b := f.MissedBreakdown
	t.Logf("wall %.1fs: fast path %+v", rep.WallSeconds, *f)
	if rep.LostLatestVersions != 0 || !rep.Drained || rep.UnpublishedDeletes != 0 || !rep.Verdict.Pass {
		t.Errorf("lostLatestVersions = %d, drained %v, unpublishedDeletes %d; verdict %s", rep.LostLatestVersions, rep.Drained, rep.UnpublishedDeletes, rep.Verdict.Line)
	}
	if f.Dropped < 20 || f.DroppedLatest == 0 || f.DroppedLatest+f.DroppedSuperseded != f.Dropped {
		t.Fatalf("dropped %d = latest %d + superseded %d: want some of each kind counted", f.Dropped, f.DroppedLatest, f.DroppedSuperseded)
	}
	if f.DroppedDelivered != f.DroppedLatest || b.Dropped != f.DroppedLatest {
		t.Errorf("delivered %d of the dropped versions, the windows %d; want droppedLatest %d", f.DroppedDelivered, b.Dropped, f.DroppedLatest)
	}
	if f.Missed-b.NotRecorded != f.DroppedLatest || !f.MissedExplained {
		t.Errorf("missed %d (breakdown %+v), droppedLatest %d: want missed = droppedLatest + the unrecorded last versions (notes %q)", f.Missed, b, f.DroppedLatest, f.Notes)
	}
	if f.DeliveredByExportPath != f.DroppedLatest || f.ExportLatencySeconds.P95 > rep.LatencyBoundSeconds {
		t.Errorf("the export path delivered %d versions first (latency %+v, bound %.0f s), want the %d dropped latest within the bound",
			f.DeliveredByExportPath, f.ExportLatencySeconds, rep.LatencyBoundSeconds, f.DroppedLatest)
	}
}

// TestCutExportReadsAreResumed: with a fifth of the export files' bodies
// ending part way (large-files-cuts), prepare-change resumes the reads it
// meets cut, and the windows commit with nothing lost or delivered twice: a
// read that failed would have failed its batch, and the Map's retry would
// have published its lines again.
func TestCutExportReadsAreResumed(t *testing.T) {
	w, err := Load(filepath.Join("..", "..", "testdata", "workloads", "large-files-cuts.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep := simulate(t, w, Options{Duration: 30 * time.Minute, Scale: 0.005})
	t.Logf("wall %.1fs: runs %+v, duplicates %+v, body cuts %+v", rep.WallSeconds, rep.Runs, rep.Duplicates, rep.BodyCuts)
	// A body may be cut after its reader had what it needed (a range's
	// last line) and before it closed it: such a cut needs no resume.
	if b := rep.BodyCuts; b == nil || b.ReadsResumed == 0 || b.ReadsResumed > b.Cut || b.Cut > b.Chosen {
		t.Fatalf("body cuts %+v: want reads cut and resumed", rep.BodyCuts)
	}
	if rep.Runs.Failed != 0 || rep.Runs.Committed == 0 || rep.LostLatestVersions != 0 || rep.Duplicates.Total != 0 || !rep.Drained {
		t.Errorf("runs %+v, lost %d, duplicates %+v, drained %v: want every window committed once, nothing lost",
			rep.Runs, rep.LostLatestVersions, rep.Duplicates, rep.Drained)
	}
}
