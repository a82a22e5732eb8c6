package prepare

import (
	"context"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// FastPathMaxSpan bounds how far back a window reads the fast path's
// record (one item per fast-path invocation, docs/FASTPATH.md): a longer
// window — a catch-up after an outage, a replay — publishes what it exports
// without consulting it (the fast path's versions come again, with the same
// eventIds).
const FastPathMaxSpan = 6 * time.Hour

// fastPathSlack widens the span read to the left, for the clocks of the
// fast path's writer and HealthLake's meta.lastUpdated, and to the right for
// a writer whose clock runs ahead of this one.
const fastPathSlack = time.Minute

// FastPathRecord reads what the fast path recorded in a span of write
// times (*fastrecord.Reader is one).
type FastPathRecord interface {
	Read(ctx context.Context, from, to time.Time) (*delivered.Set, error)
}

// FastPathSet returns the versions the fast path published that a window
// of the export window w may meet: those in the record items written from
// w.Since (less a minute's slack) until now. It returns nil — consult
// nothing — when the fast path is off, the run does not continue a
// committed window (a first window or a replay publishes on purpose), or
// the span is longer than FastPathMaxSpan.
func (h *Handler) FastPathSet(ctx context.Context, since time.Time, continues bool) (*delivered.Set, error) {
	if !h.cfg.FastPath || !continues {
		return nil, nil
	}
	from := since.Add(-fastPathSlack)
	now := time.Now()
	if h.cfg.Now != nil {
		now = h.cfg.Now()
	}
	if now.Sub(from) > FastPathMaxSpan {
		return nil, nil
	}
	return h.cfg.FastPathRecord.Read(ctx, from, now.Add(fastPathSlack))
}
