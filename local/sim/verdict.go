package sim

import (
	"fmt"
	"strings"
)

// Verdict judges a simulation in one line (docs/SIMULATION.md, "Verdict").
type Verdict struct {
	// Pass: nothing lost, no false delete, the pipeline caught up, and —
	// without outages, which delay and fail windows by design — p95 latency
	// within the bound, no failed window or reconciliation, no repair.
	Pass bool `json:"pass"`
	// Line is "PASS — …" or "FAIL — …": what failed first, then the
	// figures that passed.
	Line string `json:"line"`
	// Failed names each failed check.
	Failed []string `json:"failed,omitempty"`
}

// hasDeletesWithoutHistory reports whether the workload deletes resources
// in ways no window can see — $erase, a hard $bulk-delete, a type opted out
// of history — which only a reconciliation publishes.
func (w Workload) hasDeletesWithoutHistory() bool {
	if len(w.Limits.HistoryOptOut) > 0 {
		return true
	}
	for _, b := range w.Bursts {
		if b.Erases > 0 || b.BulkDelete == BulkDeleteHard {
			return true
		}
	}
	return false
}

// judge returns the report's verdict and, for every figure that could be
// read as a failure without being one, a sentence saying why (the report's
// explanations, keyed by the figure's JSON path).
func judge(r Report, w Workload) (Verdict, map[string]string) {
	outages := len(w.Outages) > 0
	var failed, passed []string
	check := func(ok bool, fail, pass string) {
		if ok {
			if pass != "" {
				passed = append(passed, pass)
			}
			return
		}
		failed = append(failed, fail)
	}
	check(r.LostLatestVersions == 0, fmt.Sprintf("%d lost (lostLatestVersions)", r.LostLatestVersions), "0 lost")
	p95, bound := r.LatencySeconds.P95, r.LatencyBoundSeconds
	switch {
	case r.LatencySeconds.Count == 0:
		passed = append(passed, "no latency measured (no upsert written during the run)")
	case outages:
		passed = append(passed, fmt.Sprintf("p95 %.0f s (bound %.0f s not applied: the workload has outages)", p95, bound))
	default:
		check(p95 <= bound, fmt.Sprintf("p95 %.0f s > bound %.0f s (latencySeconds.p95)", p95, bound), fmt.Sprintf("p95 %.0f s ≤ bound %.0f s", p95, bound))
	}
	check(r.FalseDeletes == 0, fmt.Sprintf("%d false deletes (falseDeletes)", r.FalseDeletes), "0 false deletes")
	switch {
	case r.UnpublishedDeletes == 0:
		passed = append(passed, "0 unpublished deletes")
	case w.hasDeletesWithoutHistory():
		passed = append(passed, fmt.Sprintf("%d unpublished deletes (deletions without history wait for the next reconciliation)", r.UnpublishedDeletes))
	default:
		failed = append(failed, fmt.Sprintf("%d unpublished deletes (unpublishedDeletes: the windows publish every soft delete)", r.UnpublishedDeletes))
	}
	check(r.Drained, fmt.Sprintf("not drained: the checkpoint had not passed the last write after %.0f s of drain", r.DrainSeconds),
		fmt.Sprintf("drained in %.0f s", r.DrainSeconds))
	if !outages {
		check(r.Runs.Failed == 0, fmt.Sprintf("%d failed windows without outages (runs.failed)", r.Runs.Failed), "")
		check(r.Reconciliations.Failed == 0, fmt.Sprintf("%d failed reconciliations without outages (reconciliations.failed)", r.Reconciliations.Failed), "")
		check(r.Reconciliations.Repairs == 0, fmt.Sprintf("%d repairs without outages (reconciliations.repairs: versions the windows never delivered)", r.Reconciliations.Repairs), "")
	}
	passed = append(passed, fmt.Sprintf("%d windows succeeded, %d failed, %d skipped", r.Runs.Succeeded, r.Runs.Failed, r.Runs.Skipped))
	if n := len(r.Warnings); n > 0 {
		passed = append(passed, fmt.Sprintf("%d warnings", n))
	}
	v := Verdict{Pass: len(failed) == 0, Failed: failed}
	if v.Pass {
		v.Line = "PASS — " + strings.Join(passed, ", ")
	} else {
		v.Line = "FAIL — " + strings.Join(failed, "; ") + " (passed: " + strings.Join(passed, ", ") + ")"
	}
	return v, explain(r, w)
}

// explain says why the figures that look like failures are not (or what
// they mean), with the report's own numbers.
func explain(r Report, w Workload) map[string]string {
	e := map[string]string{}
	if r.LatencySeconds.Count > 0 && r.LatencySeconds.Max > r.LatencyBoundSeconds {
		why := "the bound (safety lag + schedule + modelled export time + 30 s) is what p95 is held to, not every version"
		if len(w.Outages) > 0 {
			why += "; versions written during an outage wait for it to end"
		}
		if r.Runs.Skipped > 0 || r.WindowDelaySeconds.Max > 0 {
			why += fmt.Sprintf("; a version written just after a window's until waits for the next window, longer when that one was skipped (runs.skipped %d) or its export queued (windowDelaySeconds.max %.0f s)",
				r.Runs.Skipped, r.WindowDelaySeconds.Max)
		}
		e["latencySeconds.max"] = fmt.Sprintf("max %.0f s is above latencyBoundSeconds %.0f s while p95 is %.0f s: %s",
			r.LatencySeconds.Max, r.LatencyBoundSeconds, r.LatencySeconds.P95, why)
	}
	if written := r.Writes.Deletes + r.Writes.Erases + r.Writes.BulkDeleted; written > 0 || r.Writes.DeletesRefused > 0 {
		s := fmt.Sprintf("deletions written: writes.deletes %d (FHIR DELETE) + writes.erases %d ($erase) + writes.bulkDeleted %d ($bulk-delete); %d resources are deleted at the end (deleted). "+
			"The windows publish the deletions they see in history (their history scan); reconciliations.deletes %d counts only what the reconciliation published: deletions without history ($erase, a hard $bulk-delete, types opted out of history; hardDeletes %d). "+
			"deleteLatencySeconds.count %d is every delete event delivered for a deletion during the run, from either. The checks are falseDeletes (%d) and unpublishedDeletes (%d), not the difference between these counts",
			r.Writes.Deletes, r.Writes.Erases, r.Writes.BulkDeleted, r.Deleted, r.Reconciliations.Deletes, r.Reconciliations.HardDeletes,
			r.DeleteLatencySeconds.Count, r.FalseDeletes, r.UnpublishedDeletes)
		if r.Writes.DeletesRefused > 0 {
			s += fmt.Sprintf("; writes.deletesRefused %d were refused by HealthLake during an outage and never happened", r.Writes.DeletesRefused)
		}
		if r.UnpublishedDeletes > 0 && w.hasDeletesWithoutHistory() {
			s += "; unpublished deletes of resources deleted without history wait for the next reconciliation"
		}
		e["deletes"] = s
	}
	if r.Runs.Skipped > 0 {
		e["runs.skipped"] = fmt.Sprintf("%d windows were refused because another run held the lock (a window that outlasts the schedule): by design, the next window covers their time", r.Runs.Skipped)
	}
	if r.Runs.Failed > 0 {
		e["runs.failed"] = fmt.Sprintf("%d windows failed; each left the checkpoint where it was and the next window retried the same time (duplicates.rerun): lostLatestVersions is the check", r.Runs.Failed)
	}
	if d := r.Duplicates; d.Total > 0 {
		s := fmt.Sprintf("%d deliveries repeated an eventId already delivered (retries %d, rerun %d, replay %d, overlap %d", d.Total, d.Retries, d.Rerun, d.Replay, d.Overlap)
		if r.FastPath != nil {
			s += fmt.Sprintf(", fastPath %d: HealthLake notified a version twice, crossPath %d: one delivery from each path — a late notification, or a window that ran before the fast path recorded what it published (fastPath.missedBreakdown)", d.FastPath, d.CrossPath)
		}
		e["duplicates.total"] = s + "): consumers dedupe on eventId; a duplicate is no loss"
	}
	if r.ExportedPerDelivered > 1 {
		e["exportedPerDelivered"] = fmt.Sprintf("%.2f lines exported per distinct event: each window's export overlaps the one before and replays export again; the windows skip the overlap's repeats (runs.overlapSkipped %d) instead of publishing them",
			r.ExportedPerDelivered, r.Runs.OverlapSkipped)
	}
	if len(e) == 0 {
		return nil
	}
	return e
}
