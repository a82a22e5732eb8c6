package reconcile

import "github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"

// childReadRate is one compare child's share of ReadRate: the Map runs
// MapMaxConcurrency of them at once (at least 1); 0 when unpaced.
func (c Config) childReadRate() float64 {
	return c.ReadRate / float64(max(1, c.MapMaxConcurrency))
}

// readPacer returns the token bucket that spaces HealthLake reads at rate
// per second (one token: evenly spaced), or nil for rate ≤ 0, which does
// not pace (Wait on nil returns at once). It keeps the reconciliation's
// reads within the ReconcileReadRate setting, so that the data store's read
// quota is left to its other clients.
func (h *Handler) readPacer(rate float64) *tokenbucket.Bucket {
	if !(rate > 0) {
		return nil
	}
	return tokenbucket.New(rate, 1, h.now)
}
