package reconcile

import "github.com/healthlake-cdc/healthlake-cdc/internal/readpace"

// childReadRate is one compare child's share of ReadRate: the Map runs
// MapMaxConcurrency of them at once (at least 1); 0 when unpaced.
func (c Config) childReadRate() float64 {
	return c.ReadRate / float64(max(1, c.MapMaxConcurrency))
}

// newReadPace returns a step's pace (internal/readpace), starting at rate
// reads a second (≤ 0: unpaced): the compare children run at once, each
// with its own pace, and so share HealthLake's read quota with each other
// and with the store's other clients (docs/RECONCILE.md, step 6).
func (h *Handler) newReadPace(rate float64) *readpace.Pace {
	return readpace.New(rate, h.now)
}
