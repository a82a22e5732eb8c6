package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --simulate and --workload go together, and a bad workload is refused with
// its reason before anything runs.
func TestSimulateFlagsAreCheckedBeforeRunning(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name":"x","streams":[{"resourceType":"Spaceship","createsPerDay":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "x.json"}, "--workload needs --simulate"},
		{[]string{"--simulate", "1h"}, "--simulate needs --workload"},
		{[]string{"--simulate", "1h", "--workload", bad}, "Spaceship"},
		{[]string{"--simulate", "-1h", "--workload", bad}, "must not be negative"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), c.args, nil, io.Discard, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", c.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: stderr %q does not say %q", c.args, stderr.String(), c.want)
		}
	}
}

// `cdc-local --simulate` shows its progress on stderr while it runs and
// ends with a one-line verdict; the report carries the verdict and the
// explanations of figures that look like failures.
func TestSimulateShowsProgressAndEndsWithAVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the simulation")
	}
	dir := t.TempDir()
	wl := filepath.Join(dir, "tiny.json")
	if err := os.WriteFile(wl, []byte(`{"name": "tiny", "duration": "20m", "drain": "30m", "seed": 5,
		"limits": {"reconcileEvery": "off"},
		"initial": {"resources": 30, "spreadOver": "10m", "types": ["Patient"]},
		"streams": [{"resourceType": "Patient", "createsPerDay": 2880, "updatesPerDay": 2880, "deletesPerDay": 288}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := progressEvery
	progressEvery = 100 * time.Millisecond
	defer func() { progressEvery = old }()
	reportPath := filepath.Join(dir, "report.json")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--simulate", "20m", "--workload", wl, "--report", reportPath}, nil, io.Discard, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "cdc-local: verdict: PASS — 0 lost, p95 ") {
		t.Errorf("the last line is not the verdict: %q\n%s", last, stderr.String())
	}
	if !strings.Contains(stderr.String(), "progress: ") || !strings.Contains(stderr.String(), " simulated") || !strings.Contains(stderr.String(), " windows (") {
		t.Errorf("no progress (simulated time, windows, events) on stderr:\n%s", stderr.String())
	}
	b, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Verdict struct {
			Pass bool   `json:"pass"`
			Line string `json:"line"`
		} `json:"verdict"`
		Explanations map[string]string `json:"explanations"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || !rep.Verdict.Pass || rep.Explanations["deletes"] == "" {
		t.Errorf("report verdict %+v, explanations %v (%v)", rep.Verdict, rep.Explanations, err)
	}
}

// TestSimulationSummaryShowsTheFastPath: a report with a fastPath section
// gets the fast path's latencies, its deliveries and misses, and its
// measured and modelled cost, before the verdict; one without gets none.
func TestSimulationSummaryShowsTheFastPath(t *testing.T) {
	rep := `{"verdict": {"pass": true, "line": "PASS"}, "fastPath": {"latencySeconds": {"p95": 3.05}, "deleteLatencySeconds": {"p95": 3.08},
		"notificationDelaySeconds": {"p95": 2.95}, "deliveredByFastPath": 130000, "deliveredByExportPath": 2125, "missed": 12,
		"cost": {"changesPerDay": 1000000, "usdPerMillionChanges": 2.31, "modelUsdPerMillionChanges": 2.42}}}`
	var out bytes.Buffer
	if !printSimulationSummary(&out, []byte(rep)) {
		t.Fatal("a passing verdict read as failing")
	}
	for _, want := range []string{
		"cdc-local: fast path: write → event p95 3.05 s (upserts), 3.08 s (deletes); notification delay p95 2.95 s; 130000 delivered by it, 2125 by the windows (FastPathMissed 12)",
		"cdc-local: fast path cost: $2.31 per million changes measured, $2.42 modelled at 1000000 changes a day",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); lines[len(lines)-1] != "cdc-local: verdict: PASS" {
		t.Errorf("the verdict is not last:\n%s", out.String())
	}
	out.Reset()
	printSimulationSummary(&out, []byte(`{"verdict": {"pass": true, "line": "PASS"}}`))
	if strings.Contains(out.String(), "fast path") {
		t.Errorf("a run without the fast path shows it:\n%s", out.String())
	}
}
