// Package backoff computes exponential retry delays and waits them out
// under a context: the one sleep the pipeline's retry loops share.
package backoff

import (
	"context"
	"time"
)

// Ceiling is the exponential step before retry attempt (from 1):
// min(max, base·2^(attempt−1)), without overflow. Full jitter draws the
// delay from [0, Ceiling).
func Ceiling(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max || d <= 0 {
		d = max
	}
	return d
}

// Sleep waits d, or until ctx is done, in which case it returns ctx's
// error. A d ≤ 0 returns at once (ctx's error, if any).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
