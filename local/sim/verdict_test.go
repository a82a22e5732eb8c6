package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func cleanReport() Report {
	return Report{
		LostLatestVersions: 0, Drained: true, DrainSeconds: 370,
		LatencySeconds:      Percentiles{P50: 317, P95: 461, P99: 473, Max: 474, Count: 812},
		LatencyBoundSeconds: 518,
		Runs:                Runs{Succeeded: 85, Committed: 85},
	}
}

// The verdict passes a clean run with its figures, and fails naming each
// check that failed; outages waive the latency bound and the failed
// windows, never a loss.
func TestVerdictNamesWhatFailed(t *testing.T) {
	v, _ := judge(cleanReport(), Workload{})
	if !v.Pass || !strings.HasPrefix(v.Line, "PASS — 0 lost, p95 461 s ≤ bound 518 s, 0 false deletes") {
		t.Errorf("clean run: %+v", v)
	}
	outage := Workload{Outages: []Outage{{Kind: "healthLakeUnavailable"}}}
	noHistory := Workload{Limits: Limits{HistoryOptOut: []string{"Condition"}}}
	for _, c := range []struct {
		name   string
		change func(*Report)
		w      Workload
		pass   bool
		want   string
	}{
		{"lost", func(r *Report) { r.LostLatestVersions = 3 }, Workload{}, false, "3 lost (lostLatestVersions)"},
		{"lost under outages", func(r *Report) { r.LostLatestVersions = 1 }, outage, false, "1 lost"},
		{"p95 above the bound", func(r *Report) { r.LatencySeconds.P95 = 600 }, Workload{}, false, "p95 600 s > bound 518 s"},
		{"p95 above the bound under outages", func(r *Report) { r.LatencySeconds.P95 = 6000 }, outage, true, "bound 518 s not applied"},
		{"false deletes", func(r *Report) { r.FalseDeletes = 2 }, Workload{}, false, "2 false deletes"},
		{"unpublished soft deletes", func(r *Report) { r.UnpublishedDeletes = 4 }, Workload{}, false, "4 unpublished deletes"},
		{"deletes without history pending", func(r *Report) { r.UnpublishedDeletes = 4 }, noHistory, true, "wait for the next reconciliation"},
		{"not drained", func(r *Report) { r.Drained = false }, Workload{}, false, "not drained"},
		{"failed windows", func(r *Report) { r.Runs.Failed = 2 }, Workload{}, false, "2 failed windows"},
		{"failed windows under outages", func(r *Report) { r.Runs.Failed = 2 }, outage, true, "2 failed"},
		{"repairs", func(r *Report) { r.Reconciliations.Repairs = 5 }, Workload{}, false, "5 repairs"},
	} {
		r := cleanReport()
		c.change(&r)
		v, _ := judge(r, c.w)
		if v.Pass != c.pass || !strings.Contains(v.Line, c.want) {
			t.Errorf("%s: %+v; want pass %v and %q", c.name, v, c.pass, c.want)
		}
		if !v.Pass && (!strings.HasPrefix(v.Line, "FAIL — ") || len(v.Failed) == 0) {
			t.Errorf("%s: a failed verdict %+v does not start with FAIL and name the check", c.name, v)
		}
	}
}

// Every figure that looks like a failure without being one is explained:
// a max latency above the bound, deletes written against deletes the
// reconciliation published.
func TestReportExplainsFiguresThatLookLikeFailures(t *testing.T) {
	r := cleanReport()
	if _, e := judge(r, Workload{}); e != nil {
		t.Errorf("a clean run with nothing to explain: %v", e)
	}
	r.LatencySeconds.Max = 690
	r.Runs.Skipped = 3
	r.Writes = Writes{Deletes: 59, Erases: 9, BulkDeleted: 1000}
	r.Deleted = 1068
	r.Reconciliations.Deletes, r.Reconciliations.HardDeletes = 1013, 1013
	r.DeleteLatencySeconds.Count = 1068
	r.Duplicates = Duplicates{Total: 10, Overlap: 10}
	_, e := judge(r, Workload{})
	if s := e["latencySeconds.max"]; !strings.Contains(s, "max 690 s is above latencyBoundSeconds 518 s while p95 is 461 s") || !strings.Contains(s, "runs.skipped 3") {
		t.Errorf("latencySeconds.max: %q", s)
	}
	s := e["deletes"]
	for _, want := range []string{"writes.deletes 59", "writes.erases 9", "writes.bulkDeleted 1000", "reconciliations.deletes 1013", "deleteLatencySeconds.count 1068", "The windows publish", "falseDeletes (0) and unpublishedDeletes (0)"} {
		if !strings.Contains(s, want) {
			t.Errorf("deletes explanation lacks %q: %s", want, s)
		}
	}
	for _, k := range []string{"runs.skipped", "duplicates.total"} {
		if e[k] == "" {
			t.Errorf("no explanation of %s: %v", k, e)
		}
	}
}

// Run keeps Progress up to date for a reader outside the bubble, and
// judges the report.
func TestRunUpdatesProgressAndJudgesTheReport(t *testing.T) {
	w, err := Parse([]byte(`{
		"name": "progress-small", "duration": "30m", "drain": "30m", "seed": 3,
		"limits": {"reconcileEvery": "off"},
		"initial": {"resources": 50, "spreadOver": "10m", "types": ["Patient"]},
		"streams": [{"resourceType": "Patient", "createsPerDay": 2880, "updatesPerDay": 2880}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	p := &Progress{}
	rep := simulate(t, w, Options{Progress: p})
	line := p.Line(3 * time.Second)
	if p.simulated.Load() < int64(30*time.Minute) || p.windows.Load() < 6 || p.events.Load() < 50 {
		t.Errorf("progress %s: want the 30m simulated, ≥ 6 windows and the initial 50 events", line)
	}
	if !strings.Contains(line, "30m0s simulated") || !strings.Contains(line, fmt.Sprintf("%d windows (", p.windows.Load())) || !strings.Contains(line, "wall 3s") {
		t.Errorf("progress line %q", line)
	}
	if !rep.Verdict.Pass || !strings.HasPrefix(rep.Verdict.Line, "PASS — 0 lost, p95 ") {
		t.Errorf("verdict %+v", rep.Verdict)
	}
}

func TestProgressLineWhileWritingAndDraining(t *testing.T) {
	p := &Progress{}
	p.start(24 * time.Hour)
	p.at(6 * time.Hour)
	if got := p.Line(41 * time.Second); got != "6h0m0s of 24h0m0s simulated (25%), wall 41s: 0 windows (0 committed, 0 empty, 0 skipped, 0 failed), 0 events delivered" {
		t.Errorf("line %q", got)
	}
	p.at(24*time.Hour + 5*time.Minute)
	if got := p.Line(time.Minute); !strings.HasPrefix(got, "24h0m0s simulated, draining for 5m0s, wall 1m0s") {
		t.Errorf("line while draining %q", got)
	}
	var nilP *Progress
	nilP.start(time.Hour) // Options without Progress: no-ops
	nilP.at(time.Hour)
}
