package runlock

import (
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

// A reconciliation (internal/reconcile) shares the run lock with the runs:
// HealthLake runs one export at a time, and a full export beside a run's
// export would only queue. While it holds the lock the runs are refused
// (SkippedRuns) and the checkpoint stays; the first run after it covers the
// longer window. Its window is empty at the checkpoint, so its commit
// releases the lock with outcome EMPTY and moves nothing; its export
// window, which start-export receives, is (SnapshotSince, checkpoint]: a
// full export without _since (contract D3).

// reconcileExportWindow is the export window of a reconciliation.
func reconcileExportWindow(checkpoint time.Time) events.Window {
	return events.Window{Since: events.SnapshotSince, Until: checkpoint}
}

// reconcileRefusal says why a reconciliation may not take the lock now
// (the refusal and its text), or "": it needs a checkpoint (the first run committed), and it waits while a
// multi-part export is being delivered part by part (its window would be
// split around the reconciliation).
func reconcileRefusal(st state) (Refusal, string) {
	switch {
	case !st.exists || st.checkpoint.IsZero() || events.IsSnapshotSince(st.checkpoint):
		return RefusalNoCheckpoint, "reconciliation refused: no checkpoint yet (the first run has not committed)"
	case st.pending != nil:
		return RefusalPendingExport, "reconciliation refused: a multi-part export is being delivered; reconcile after its last part"
	}
	return "", ""
}
