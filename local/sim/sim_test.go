package sim

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"testing/synctest"
	"time"
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
	if *flagLog {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
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
	t.Logf("wall %.1fs: %d creates, %d updates, %d deletes; %d delivered; latency %+v (bound %.0fs); runs %+v; duplicates %+v; exported/delivered %.3f",
		rep.WallSeconds, rep.Writes.Creates, rep.Writes.Updates, rep.Writes.Deletes, rep.DeliveredEvents,
		rep.LatencySeconds, rep.LatencyBoundSeconds, rep.Runs, rep.Duplicates, rep.ExportedPerDelivered)
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
