package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sim"
)

// progressEvery is how often (wall time) the simulation prints its
// progress to stderr.
var progressEvery = 5 * time.Second

// runSimulate runs `cdc-local --simulate D --workload F`: the simulation
// must run inside a testing/synctest bubble, which needs a test binary, so
// it builds local/sim's test binary with `go test -c` from the module's
// source (cdc-local is started with `go run`, so the toolchain and source
// are at hand) and runs its TestSimulate, whose progress lines (every
// progressEvery of wall time) reach stderr as they come — `go test` would
// hold a test's output until it ends. The report goes to --report (stdout
// without one); the last line on stderr is the report's verdict, and a
// FAIL verdict exits 1.
func runSimulate(ctx context.Context, c config, stdout, stderr io.Writer) int {
	if c.workload == "" {
		fmt.Fprintln(stderr, "cdc-local: --simulate needs --workload FILE")
		return exitUsage
	}
	if _, err := sim.Load(c.workload); err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitUsage
	}
	workload, err := filepath.Abs(c.workload)
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitUsage
	}
	goBin := goTool()
	root, err := moduleRoot(ctx, goBin)
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local: --simulate runs from the module's source:", err)
		return exitFailed
	}
	reportPath := c.report
	if reportPath == "" {
		f, err := os.CreateTemp("", "cdc-local-sim-*.json")
		if err != nil {
			fmt.Fprintln(stderr, "cdc-local:", err)
			return exitFailed
		}
		reportPath = f.Name()
		_ = f.Close()
		defer os.Remove(reportPath)
	}
	if reportPath, err = filepath.Abs(reportPath); err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitFailed
	}
	bin, err := os.MkdirTemp("", "cdc-local-sim-bin-*")
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitFailed
	}
	defer os.RemoveAll(bin)
	testBin := filepath.Join(bin, "sim.test")
	build := exec.CommandContext(ctx, goBin, "test", "-c", "-o", testBin, "./local/sim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "cdc-local: build the simulation (go test -c ./local/sim): %v\n%s", err, out)
		return exitFailed
	}
	args := []string{"-test.run", "^TestSimulate$", "-test.timeout", "0",
		"-workload", workload, "-duration", c.simulate.String(), "-report", reportPath,
		"-progress", progressEvery.String()}
	if c.verbose {
		args = append(args, "-log")
	}
	if c.scale > 0 {
		args = append(args, "-scale", strconv.FormatFloat(c.scale, 'g', -1, 64))
	}
	switch c.latency {
	case "":
	case "off":
		args = append(args, "-latency", "off")
	default:
		abs, err := filepath.Abs(c.latency)
		if err != nil {
			fmt.Fprintln(stderr, "cdc-local:", err)
			return exitUsage
		}
		args = append(args, "-latency", abs)
	}
	fmt.Fprintf(stderr, "cdc-local: simulating %s of %s (local/sim's TestSimulate %s)\n", c.simulate, filepath.Base(workload), strings.Join(args, " "))
	began := time.Now()
	cmd := exec.CommandContext(ctx, testBin, args...)
	cmd.Dir = filepath.Join(root, "local", "sim") // where `go test` runs it
	var testOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &testOut, stderr
	if err := cmd.Run(); err != nil {
		_, _ = stderr.Write(testOut.Bytes())
		fmt.Fprintln(stderr, "cdc-local: simulation failed:", err)
		return exitFailed
	}
	fmt.Fprintf(stderr, "cdc-local: simulated %s in %s; report %s\n", c.simulate, time.Since(began).Round(time.Second), c.report)
	b, err := os.ReadFile(reportPath)
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitFailed
	}
	pass := printSimulationSummary(stderr, b)
	if c.report == "" {
		_, _ = stdout.Write(b)
	}
	if !pass {
		return exitFailed
	}
	return exitOK
}

// printSimulationSummary prints the report's latency model, the slowest
// functions (closest to their timeout first), its warnings, the fast path's
// figures when the workload turned it on, the explanations of figures that
// look like failures and, last, its verdict; it returns whether the
// verdict passed.
func printSimulationSummary(w io.Writer, b []byte) bool {
	var rep struct {
		LatencyModel   string                       `json:"latencyModel"`
		ModelledDelays sim.ModelledDelays           `json:"modelledDelays"`
		LambdaSeconds  map[string]lambdas.Durations `json:"lambdaSeconds"`
		Warnings       []string                     `json:"warnings"`
		Explanations   map[string]string            `json:"explanations"`
		Verdict        sim.Verdict                  `json:"verdict"`
		FastPath       *sim.FastPathReport          `json:"fastPath"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		fmt.Fprintln(w, "cdc-local: report:", err)
		return false
	}
	defer func() {
		keys := make([]string, 0, len(rep.Explanations))
		for k := range rep.Explanations {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "cdc-local: note %s: %s\n", k, rep.Explanations[k])
		}
		fmt.Fprintln(w, "cdc-local: verdict: "+rep.Verdict.Line)
	}()
	fmt.Fprintf(w, "cdc-local: latency model %s: %d modelled delays, %.0f s in all\n", rep.LatencyModel, rep.ModelledDelays.Calls, rep.ModelledDelays.Seconds)
	for _, line := range report.Slowest(rep.LambdaSeconds, 5) {
		fmt.Fprintln(w, "cdc-local: lambda", line)
	}
	for _, line := range rep.Warnings {
		fmt.Fprintln(w, "cdc-local: WARNING", line)
	}
	if fp := rep.FastPath; fp != nil {
		fmt.Fprintf(w, "cdc-local: fast path: write → event p95 %.2f s (upserts), %.2f s (deletes); notification delay p95 %.2f s; %d delivered by it, %d by the windows (FastPathMissed %d)\n",
			fp.LatencySeconds.P95, fp.DeleteLatencySeconds.P95, fp.NotificationDelaySeconds.P95, fp.DeliveredByFastPath, fp.DeliveredByExportPath, fp.Missed)
		if c := fp.Cost; c != nil {
			fmt.Fprintf(w, "cdc-local: fast path cost: $%.2f per million changes measured, $%.2f modelled at %.0f changes a day (logs in neither; docs/COST.md)\n",
				c.USDPerMillionChanges, c.ModelUSDPerMillionChanges, c.ChangesPerDay)
		}
	}
	return rep.Verdict.Pass
}

// goTool is the go command: the one on PATH (`go run ./cmd/cdc-local` was
// started with it), else $GOROOT/bin/go.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// moduleRoot is the directory of the main module (go env GOMOD).
func moduleRoot(ctx context.Context, goBin string) (string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the healthlake-cdc module (run cdc-local from the repository)")
	}
	return filepath.Dir(mod), nil
}
