package prepare

import (
	"context"

	"github.com/healthlake-cdc/healthlake-cdc/internal/share"
)

// shareRate keeps the batch's PutEvents rate at its part of the Map's whole
// share while it publishes: it beats on the run's board at once and every
// SharePeriod, and sets the publisher's rate to the share divided among the
// live children (internal/share). A failed beat keeps the rate it has (at
// worst the RateFor start rate, never above the share). The returned stop
// ends the beats and leaves the board; nil when sharing is off.
func (b *batch) shareRate(ctx context.Context) func() {
	cfg := b.h.cfg
	total := cfg.Publish.Rate * float64(cfg.MapMaxConcurrency)
	if cfg.Share == nil || total <= 0 || cfg.MapMaxConcurrency <= 1 {
		return nil
	}
	return cfg.Share.Keep(ctx, b.in.RunID, share.ChildID(b.in.Files[0].Name()), total, cfg.SharePeriod,
		func(rate float64, live int) {
			b.pub.SetRate(rate)
			b.maxLive = max(b.maxLive, live)
		}, cfg.shareWarning(b.in.RunID))
}

// shareWarning logs a board that could not be read or left (nil without a
// logger): the child keeps its rate, its siblings wait for its lease.
func (c Config) shareWarning(runID string) func(error) {
	if c.Logger == nil {
		return nil
	}
	return func(err error) {
		c.Logger.Warn("PutEvents share not read or not left; the rate stays, siblings wait for the lease", "runId", runID, "error", err.Error())
	}
}
