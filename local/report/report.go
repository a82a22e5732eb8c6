// Package report is cdc-local's JSON run report (--report FILE): the
// windows run and their outcomes, the events delivered, the calls each
// emulated API served (the gateway's counters) and the most exports that
// ever ran at once. The file is rewritten atomically after every window, so
// a reader never sees half a report.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
)

// Run outcomes.
const (
	OutcomeCommitted = "committed" // the window published and the checkpoint moved
	OutcomeEmpty     = "empty"     // nothing to export; the checkpoint moved
	OutcomeSkipped   = "skipped"   // another execution held the lock
	OutcomeFailed    = "failed"    // the execution failed; the checkpoint stayed
)

// Span is a window's half-open interval (since, until].
type Span struct {
	Since string `json:"since"`
	Until string `json:"until"`
}

// Run is one execution of the state machine: one run over its window.
type Run struct {
	RunID        string    `json:"runId"`
	ExecutionARN string    `json:"executionArn"`
	StartedAt    time.Time `json:"startedAt"`
	FinishedAt   time.Time `json:"finishedAt"`
	// Status is the execution status: SUCCEEDED, FAILED, TIMED_OUT, ABORTED.
	Status string `json:"status"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	Window  *Span  `json:"window,omitempty"`
	// Events counts the events delivered while the window ran; Deletes the
	// delete events among them its run published (its run record's).
	Events  int64 `json:"events"`
	Deletes int64 `json:"deletes,omitempty"`
	// OverlapSkipped counts the lines of the window's overlap it did not
	// publish again: the previous window had (the run's history counts).
	OverlapSkipped int64 `json:"overlapSkipped,omitempty"`
	// Checkpoint is lastRunTime after the window.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Error and Cause are the execution's failure (error names and messages
	// carry no resource data).
	Error string `json:"error,omitempty"`
	Cause string `json:"cause,omitempty"`
	// Note explains an outcome that Status alone would misstate: a run
	// that committed before its execution failed (the run record, and so
	// `cdcctl status`, says SUCCEEDED), or an execution that failed before
	// taking the lock (no run record at all).
	Note string `json:"note,omitempty"`
}

// Cost is the usage the emulators counted, priced at list prices, and the
// cost per million changes delivered.
type Cost struct {
	// Changes is the number of distinct events delivered.
	Changes int64      `json:"changes"`
	Usage   cost.Usage `json:"usage"`
	Bill    cost.Bill  `json:"bill"`
	// USDPerMillionChanges is Bill.Total per million changes (0 with none).
	USDPerMillionChanges float64 `json:"usdPerMillionChanges"`
	// USDPerMonth is a month of 5-minute windows like this run's average
	// window, with every monthly and storage line item (Monthly).
	USDPerMonth float64    `json:"usdPerMonth"`
	Monthly     *cost.Bill `json:"monthly,omitempty"`
}

// Report is the whole file.
type Report struct {
	StartedAt time.Time `json:"startedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	Endpoint  string    `json:"endpoint,omitempty"`
	// Resources is the number of resources seeded into the data store;
	// SeedSkipped the seed lines that were not resources (or were refused).
	Resources   int `json:"resources"`
	SeedSkipped int `json:"seedSkipped,omitempty"`
	// WindowsRun counts every window; Outcomes counts them by outcome.
	WindowsRun int            `json:"windowsRun"`
	Outcomes   map[string]int `json:"outcomes"`
	// Windows lists the most recent windows (at most MaxWindows), oldest first.
	Windows []Run `json:"windows"`
	// Events counts every event delivered to the sink; DistinctEvents the
	// distinct eventIds among them.
	Events         int64 `json:"events"`
	DistinctEvents int64 `json:"distinctEvents"`
	// Calls counts the calls served per API, "service:Operation".
	Calls map[string]int64 `json:"calls"`
	// MaxConcurrentExports is the most HealthLake exports ever running at once.
	MaxConcurrentExports int `json:"maxConcurrentExports"`
	// Checkpoint is the latest lastRunTime seen.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Faults counts the injected faults per kind (with --fault-rate).
	Faults map[string]int64 `json:"faults,omitempty"`
	// Lambdas counts invocations and errors per function.
	Lambdas any `json:"lambdas,omitempty"`
	// LambdaSeconds summarizes each function's run durations (p50, p99,
	// max, over the invocations whose handler ran) beside its timeout;
	// LambdaWarnings names those whose max exceeded TimeoutShare of it.
	LambdaSeconds  map[string]lambdas.Durations `json:"lambdaSeconds,omitempty"`
	LambdaWarnings []string                     `json:"lambdaWarnings,omitempty"`
	// Queues counts the event-source mappings' work per queue.
	Queues any `json:"queues,omitempty"`
	// Metrics holds the totals of every metric the Lambdas emitted (EMF).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Cost prices what the run used at list prices (docs/COST.md).
	Cost *Cost `json:"cost,omitempty"`
	// ExportNotice is the delay from an export job's end (HealthLake's
	// endTime) to its manifest, over the windows that exported.
	ExportNotice *Delays `json:"exportNoticeSeconds,omitempty"`
}

// Delays summarizes delays in seconds: their median, maximum and count.
type Delays struct {
	P50   float64 `json:"p50"`
	Max   float64 `json:"max"`
	Count int     `json:"count"`
	all   []float64
}

// AddExportNotice records one window's delay from export end to manifest.
func (rc *Recorder) AddExportNotice(seconds float64) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	d := rc.r.ExportNotice
	if d == nil {
		d = &Delays{}
		rc.r.ExportNotice = d
	}
	d.all = append(d.all, seconds)
	sorted := append([]float64(nil), d.all...)
	sort.Float64s(sorted)
	d.Count, d.Max = len(sorted), sorted[len(sorted)-1]
	d.P50 = sorted[(len(sorted)-1)/2]
}

// MaxWindows bounds Report.Windows; WindowsRun keeps counting.
const MaxWindows = 1000

// Recorder accumulates a report and writes it. Safe for concurrent use.
type Recorder struct {
	path string

	mu sync.Mutex
	r  Report
}

// New returns a recorder writing to path ("" keeps the report in memory).
func New(path string, started time.Time) *Recorder {
	return &Recorder{path: path, r: Report{StartedAt: started.UTC(), Outcomes: map[string]int{}, Calls: map[string]int64{}}}
}

// Path returns the file the recorder writes.
func (rc *Recorder) Path() string { return rc.path }

// AddRun appends a finished run.
func (rc *Recorder) AddRun(w Run) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.r.WindowsRun++
	rc.r.Outcomes[w.Outcome]++
	rc.r.Windows = append(rc.r.Windows, w)
	if n := len(rc.r.Windows); n > MaxWindows {
		rc.r.Windows = append([]Run(nil), rc.r.Windows[n-MaxWindows:]...)
	}
	if w.Checkpoint != "" {
		rc.r.Checkpoint = w.Checkpoint
	}
}

// Update changes the report under the lock (counters, calls, faults).
func (rc *Recorder) Update(f func(*Report)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	f(&rc.r)
}

// Snapshot returns a deep-enough copy of the report.
func (rc *Recorder) Snapshot() Report {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.r
	out.Windows = append([]Run(nil), rc.r.Windows...)
	out.Outcomes = make(map[string]int, len(rc.r.Outcomes))
	for k, v := range rc.r.Outcomes {
		out.Outcomes[k] = v
	}
	out.Calls = make(map[string]int64, len(rc.r.Calls))
	for k, v := range rc.r.Calls {
		out.Calls[k] = v
	}
	if rc.r.ExportNotice != nil {
		d := *rc.r.ExportNotice
		d.all = nil
		out.ExportNotice = &d
	}
	if rc.r.LambdaSeconds != nil {
		out.LambdaSeconds = make(map[string]lambdas.Durations, len(rc.r.LambdaSeconds))
		for k, v := range rc.r.LambdaSeconds {
			out.LambdaSeconds[k] = v
		}
		out.LambdaWarnings = append([]string(nil), rc.r.LambdaWarnings...)
	}
	if rc.r.Faults != nil {
		out.Faults = make(map[string]int64, len(rc.r.Faults))
		for k, v := range rc.r.Faults {
			out.Faults[k] = v
		}
	}
	return out
}

// Write stamps UpdatedAt and rewrites the file atomically (temporary file
// and rename). With no path it only stamps.
func (rc *Recorder) Write(now time.Time) error {
	rc.mu.Lock()
	rc.r.UpdatedAt = now.UTC()
	rc.mu.Unlock()
	if rc.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(rc.Snapshot(), "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(rc.path)
	tmp, err := os.CreateTemp(dir, ".report-*.json")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("report: write: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report: close: %w", err)
	}
	if err := os.Rename(tmp.Name(), rc.path); err != nil {
		return fmt.Errorf("report: replace %s: %w", rc.path, err)
	}
	return nil
}

// Read loads a report file.
func Read(path string) (Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Report{}, fmt.Errorf("report %s: %w", path, err)
	}
	return r, nil
}

// PerThousand scales calls to calls per 1,000 resources, for the benchmark.
func PerThousand(calls map[string]int64, resources int) map[string]float64 {
	out := make(map[string]float64, len(calls))
	if resources <= 0 {
		return out
	}
	for k, v := range calls {
		out[k] = float64(v) * 1000 / float64(resources)
	}
	return out
}

// SortedKeys returns the keys of m in order.
func SortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TimeoutShare is the share of its timeout a function's longest run may
// take before the reports flag it: a function that close to its timeout in
// a simulation will time out in AWS on a slower day.
const TimeoutShare = 0.8

// SetLambdaSeconds records the functions' run durations and the warnings
// TimeoutWarnings gives for them.
func (rc *Recorder) SetLambdaSeconds(d map[string]lambdas.Durations) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.r.LambdaSeconds = d
	rc.r.LambdaWarnings = TimeoutWarnings(d, TimeoutShare)
}

// TimeoutWarnings names, in order, every function whose longest run took
// more than share of its timeout, with the figures. For a function with an
// internal deadline (Durations.Margin) a run up to that deadline is by
// design — it stops itself there — so the share is of the margin: it is
// named when its longest run spent more than share of the margin past its
// internal deadline, the part a slower day could push into the timeout.
func TimeoutWarnings(d map[string]lambdas.Durations, share float64) []string {
	var out []string
	for _, name := range SortedKeys(d) {
		f := d[name]
		switch {
		case f.Timeout <= 0:
		case f.Margin > 0:
			past := f.Max - f.InternalDeadline()
			if past > share*f.Margin {
				out = append(out, fmt.Sprintf("%s: longest run %.1fs ran %.1fs past its internal deadline (%.0fs), %.0f%% of the %.0fs it keeps before its %.0fs timeout (over %.0f%%; %d of %d runs past the internal deadline)",
					name, f.Max, past, f.InternalDeadline(), 100*past/f.Margin, f.Margin, f.Timeout, 100*share, f.PastInternalDeadline, f.Invocations))
			}
		case f.Max > share*f.Timeout:
			out = append(out, fmt.Sprintf("%s: longest run %.1fs is %.0f%% of its %.0fs timeout (over %.0f%%; p99 %.1fs, %d invocations)",
				name, f.Max, 100*f.ShareOfTimeout(), f.Timeout, 100*share, f.P99, f.Invocations))
		}
	}
	return out
}

// Slowest lists up to n functions that ran, the closest to their timeout
// first, one line each: "name: max 1.2s (2% of 60s), p99 0.9s, p50 0.3s, 40 runs".
func Slowest(d map[string]lambdas.Durations, n int) []string {
	names := make([]string, 0, len(d))
	for name, f := range d {
		if f.Invocations > 0 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := d[names[i]], d[names[j]]
		if a.ShareOfTimeout() != b.ShareOfTimeout() {
			return a.ShareOfTimeout() > b.ShareOfTimeout()
		}
		return names[i] < names[j]
	})
	if len(names) > n {
		names = names[:n]
	}
	out := make([]string, 0, len(names))
	for _, name := range names {
		f := d[name]
		line := fmt.Sprintf("%s: max %.2fs (%.1f%% of %.0fs), p99 %.2fs, p50 %.2fs, %d runs",
			name, f.Max, 100*f.ShareOfTimeout(), f.Timeout, f.P99, f.P50, f.Invocations)
		if f.Margin > 0 {
			line += fmt.Sprintf(", %d past its internal deadline at %.0fs", f.PastInternalDeadline, f.InternalDeadline())
		}
		out = append(out, line)
	}
	return out
}
