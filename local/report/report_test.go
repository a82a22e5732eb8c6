package report

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
)

func TestReportIsRewrittenAfterEveryWindow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	rc := New(path, t0)

	rc.AddRun(Run{RunID: "r1", Status: "SUCCEEDED", Outcome: OutcomeCommitted, Events: 3, Checkpoint: "2026-11-21T10:00:00.000Z",
		Window: &Span{Since: "1970-01-01T00:00:00.000Z", Until: "2026-11-21T10:00:00.000Z"}})
	rc.Update(func(r *Report) {
		r.Events = 3
		r.Calls = map[string]int64{"s3:GETObject": 4}
		r.MaxConcurrentExports = 1
	})
	if err := rc.Write(t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	r1, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if r1.WindowsRun != 1 || r1.Events != 3 || r1.Calls["s3:GETObject"] != 4 || r1.MaxConcurrentExports != 1 || r1.Checkpoint != "2026-11-21T10:00:00.000Z" {
		t.Errorf("first report = %+v", r1)
	}

	rc.AddRun(Run{RunID: "r2", Status: "FAILED", Outcome: OutcomeFailed, Error: "States.TaskFailed"})
	if err := rc.Write(t0.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r2, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if r2.WindowsRun != 2 || !reflect.DeepEqual(r2.Outcomes, map[string]int{OutcomeCommitted: 1, OutcomeFailed: 1}) {
		t.Errorf("second report outcomes = %v", r2.Outcomes)
	}
	if r2.Checkpoint != r1.Checkpoint {
		t.Errorf("a failed window moved the reported checkpoint: %q", r2.Checkpoint)
	}
	if !r2.UpdatedAt.After(r1.UpdatedAt) {
		t.Errorf("updatedAt not advanced")
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d files", len(entries))
	}
}

func TestWindowsAreBounded(t *testing.T) {
	rc := New("", time.Now())
	for i := 0; i < MaxWindows+5; i++ {
		rc.AddRun(Run{RunID: "r", Outcome: OutcomeSkipped})
	}
	s := rc.Snapshot()
	if len(s.Windows) != MaxWindows || s.WindowsRun != MaxWindows+5 || s.Outcomes[OutcomeSkipped] != MaxWindows+5 {
		t.Errorf("windows %d run %d", len(s.Windows), s.WindowsRun)
	}
	if err := rc.Write(time.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestPerThousand(t *testing.T) {
	got := PerThousand(map[string]int64{"a": 50}, 10000)
	if got["a"] != 5 {
		t.Errorf("got %v", got)
	}
	if ks := SortedKeys(map[string]int{"b": 1, "a": 2}); !reflect.DeepEqual(ks, []string{"a", "b"}) {
		t.Errorf("keys %v", ks)
	}
}

func TestExportNoticeIsTheMedianAndMaximumOverWindows(t *testing.T) {
	rc := New("", time.Now())
	if rc.Snapshot().ExportNotice != nil {
		t.Fatal("a report without exports has a notice delay")
	}
	for _, s := range []float64{4, 0.5, 30, 2} {
		rc.AddExportNotice(s)
	}
	d := rc.Snapshot().ExportNotice
	if d == nil || d.P50 != 2 || d.Max != 30 || d.Count != 4 {
		t.Errorf("delays = %+v, want p50 2, max 30 over 4 windows", d)
	}
}

func TestTimeoutWarningsAndSlowest(t *testing.T) {
	d := map[string]lambdas.Durations{
		"prepare-change": {P50: 100, P99: 190, Max: 200, Timeout: 240, Invocations: 30},
		"run-lock":       {P50: 0.1, P99: 0.2, Max: 0.3, Timeout: 60, Invocations: 50},
		"check-export":   {P50: 1, P99: 90, Max: 96, Timeout: 120, Invocations: 5},
		"reconcile":      {Timeout: 240},
	}
	w := TimeoutWarnings(d, TimeoutShare)
	if len(w) != 1 || !strings.HasPrefix(w[0], "prepare-change: longest run 200.0s is 83% of its 240s timeout") {
		t.Errorf("warnings = %q; want prepare-change only (check-export's 80%% is not over)", w)
	}
	s := Slowest(d, 2)
	if len(s) != 2 || !strings.HasPrefix(s[0], "prepare-change: max 200.00s (83.3% of 240s)") || !strings.HasPrefix(s[1], "check-export:") {
		t.Errorf("slowest = %q", s)
	}
	if got := Slowest(d, 10); len(got) != 3 {
		t.Errorf("slowest lists %d functions, want the 3 that ran", len(got))
	}
	rc := New("", time.Now())
	rc.SetLambdaSeconds(d)
	if len(rc.Snapshot().LambdaWarnings) != 1 {
		t.Fatal("the recorder's warnings are not TimeoutWarnings'")
	}
	snap := rc.Snapshot()
	if len(snap.LambdaSeconds) != 4 || len(snap.LambdaWarnings) != 1 {
		t.Errorf("snapshot: %d functions, warnings %q", len(snap.LambdaSeconds), snap.LambdaWarnings)
	}
}

// TestARunUpToItsInternalDeadlineIsNotWarned: a function that stops itself
// 30 s before its 240 s timeout is named only when its longest run spent
// more than 80 % of those 30 s past the stop (a slower day's timeout), not
// for reaching the stop (210 s, 88 % of the timeout) by design.
func TestARunUpToItsInternalDeadlineIsNotWarned(t *testing.T) {
	at := func(max float64, past int64) map[string]lambdas.Durations {
		return map[string]lambdas.Durations{"prepare-change": {P50: 5, P99: 200, Max: max, Timeout: 240, Invocations: 40, Margin: 30, PastInternalDeadline: past}}
	}
	for _, max := range []float64{209, 210.5, 234} {
		if w := TimeoutWarnings(at(max, 1), TimeoutShare); len(w) != 0 {
			t.Errorf("max %vs: warnings %q, want none (within 80%% of the margin)", max, w)
		}
	}
	w := TimeoutWarnings(at(235, 3), TimeoutShare)
	if len(w) != 1 || !strings.HasPrefix(w[0], "prepare-change: longest run 235.0s ran 25.0s past its internal deadline (210s), 83% of the 30s it keeps before its 240s timeout") ||
		!strings.Contains(w[0], "3 of 40 runs past the internal deadline") {
		t.Errorf("max 235 s: warnings %q", w)
	}
	if s := Slowest(at(212, 2), 1); len(s) != 1 || !strings.HasSuffix(s[0], ", 2 past its internal deadline at 210s") {
		t.Errorf("slowest = %q", s)
	}
}
