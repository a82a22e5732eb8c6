package prepare

import (
	"context"
	"time"

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
	period := cfg.SharePeriod
	if period <= 0 {
		period = share.DefaultPeriod
	}
	child := share.ChildID(b.in.Files[0].Key)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		warned := false
		for {
			live, err := cfg.Share.Beat(ctx, b.in.RunID, child)
			switch {
			case err == nil:
				b.pub.SetRate(share.Of(total, live))
				b.maxLive = max(b.maxLive, live)
			case !warned && cfg.Logger != nil && ctx.Err() == nil:
				cfg.Logger.Warn("PutEvents share not read; the batch keeps its rate", "runId", b.in.RunID, "error", err.Error())
				warned = true
			}
			t := time.NewTimer(period)
			select {
			case <-done:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := cfg.Share.Leave(lctx, b.in.RunID, child); err != nil && cfg.Logger != nil {
			cfg.Logger.Warn("PutEvents share not left; siblings wait for its lease", "runId", b.in.RunID, "error", err.Error())
		}
	}
}
