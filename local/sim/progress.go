package sim

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// Progress is what a running simulation has done so far. Run updates it
// (Options.Progress); it holds atomics only, so a goroutine outside the
// simulation's testing/synctest bubble — on the wall clock — may read it
// while the simulation runs (TestSimulate's -progress, which cdc-local
// --simulate shows on stderr).
type Progress struct {
	// duration is the writes' simulated duration; simulated the virtual
	// time since the start (past duration while the pipeline drains).
	duration, simulated atomic.Int64
	// Windows by outcome, and the distinct events delivered.
	windows, committed, empty, skipped, failed atomic.Int64
	events                                     atomic.Int64
}

// start records the writes' duration.
func (p *Progress) start(d time.Duration) {
	if p != nil {
		p.duration.Store(int64(d))
	}
}

// at records the virtual time since the start.
func (p *Progress) at(d time.Duration) {
	if p != nil {
		p.simulated.Store(int64(d))
	}
}

// window counts one ended window and the distinct events delivered so far.
func (p *Progress) window(w report.Run, err error, events int64) {
	if p == nil {
		return
	}
	p.windows.Add(1)
	switch {
	case err != nil || w.Outcome == report.OutcomeFailed:
		p.failed.Add(1)
	case w.Outcome == report.OutcomeSkipped:
		p.skipped.Add(1)
	case w.Outcome == report.OutcomeEmpty:
		p.empty.Add(1)
	default:
		p.committed.Add(1)
	}
	p.events.Store(events)
}

// Line is one progress line: simulated time of the duration (or of the
// drain after it), the windows by outcome and the events delivered, after
// wall of wall time.
func (p *Progress) Line(wall time.Duration) string {
	d, s := time.Duration(p.duration.Load()), time.Duration(p.simulated.Load())
	at := fmt.Sprintf("%s of %s simulated", roundDur(s), roundDur(d))
	if d > 0 {
		if s <= d {
			at += fmt.Sprintf(" (%.0f%%)", 100*s.Seconds()/d.Seconds())
		} else {
			at = fmt.Sprintf("%s simulated, draining for %s", roundDur(d), roundDur(s-d))
		}
	}
	return fmt.Sprintf("%s, wall %s: %d windows (%d committed, %d empty, %d skipped, %d failed), %d events delivered",
		at, wall.Round(time.Second), p.windows.Load(), p.committed.Load(), p.empty.Load(), p.skipped.Load(), p.failed.Load(), p.events.Load())
}

func roundDur(d time.Duration) time.Duration {
	if d >= time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
