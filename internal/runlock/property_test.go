package runlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// TestPropertyWindowsAreContiguousAndCheckpointMonotonic drives random
// sequences of runs, commits, failures, crashes, late commits, unlocks and
// replays against the real client over minidyn, and checks after every step
// that the checkpoint never moves back except by a replay, that at most one
// live execution holds the lock, and that the windows of successful runs
// between replays are contiguous: each starts where the previous ended, so
// nothing is skipped and nothing is published twice.
func TestPropertyWindowsAreContiguousAndCheckpointMonotonic(t *testing.T) {
	sequences, steps := 16, 60
	if testing.Short() {
		sequences, steps = 6, 40
	}
	var total propStats
	for seed := range sequences {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := runProperty(t, uint64(seed), steps)
			total.commits += s.commits
			total.replays += s.replays
			total.takeovers += s.takeovers
			total.refusals += s.refusals
		})
	}
	// The sequences must have exercised every path, or the property is vacuous.
	if total.commits < 10 || total.replays < 2 || total.takeovers < 2 || total.refusals < 5 {
		t.Fatalf("sequences too tame: %+v", total)
	}
	t.Logf("exercised %+v", total)
}

type propStats struct{ commits, replays, takeovers, refusals int }

type propRun struct {
	name    string
	crashed bool
	done    bool
}

func runProperty(t *testing.T, seed uint64, steps int) (stats propStats) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	initial := t0.Add(-time.Duration(rng.IntN(72)) * time.Hour)
	f := newFixture(t, func(c *Config) {
		c.InitialCheckpoint = initial
		c.MaxWindow = 6 * time.Hour
		c.Lease = 3 * time.Hour
	})
	ctx := context.Background()
	cursor := initial // where the next successful window must start
	lastCheckpoint := initial
	var runs []*propRun
	holder := "" // the run this model believes holds the lock
	seq := 0
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after %v: %s", seed, trace, fmt.Sprintf(format, args...))
	}
	commitOK := func(name string, res Result) {
		if res.Outcome == OutcomeEmpty {
			if !res.Window.Empty() || !res.Window.Since.Equal(cursor) {
				fail("empty commit %s at %s, cursor %v", name, res.Window, cursor)
			}
			return
		}
		if !res.Window.Since.Equal(cursor) {
			fail("window %s of %s does not start at %v: gap or overlap", res.Window, name, envelope.FormatTime(cursor))
		}
		if !res.Window.Until.After(res.Window.Since) {
			fail("successful window %s is not forward", res.Window)
		}
		cursor = res.Window.Until
		stats.commits++
	}
	for step := 0; step < steps; step++ {
		op := rng.IntN(100)
		replayed := false
		switch {
		case op < 45: // a scheduled tick starts an execution
			f.clock.Advance(time.Duration(1+rng.IntN(30)) * time.Minute)
			if rng.IntN(8) == 0 {
				f.clock.Advance(time.Duration(rng.IntN(12)) * time.Hour) // an outage
			}
			seq++
			r := &propRun{name: fmt.Sprintf("run-%d", seq)}
			a := f.start(t, r.name)
			trace = append(trace, "tick:"+r.name)
			if !a.Acquired {
				if holder == "" {
					fail("acquire of %s refused with no holder: %s", r.name, a.Reason)
				}
				r.done = true
				stats.refusals++
				break
			}
			if a.TookOverFrom != "" {
				stats.takeovers++
			}
			if holder != "" {
				prev := findRun(runs, holder)
				if prev == nil || !prev.crashed {
					// Only a lease expiry may take a live owner's lock.
					if a.TookOverFrom == "" || !containsLease(a.Reason) {
						fail("%s acquired while %s was live: %s", r.name, holder, a.Reason)
					}
				}
			}
			if !a.Window.Since.Equal(cursor) {
				fail("acquired window %s does not start at the cursor %v", a.Window, cursor)
			}
			holder = r.name
			runs = append(runs, r)
		case op < 65: // the holder (or a random earlier run) commits
			r := pickRun(rng, runs, holder)
			if r == nil {
				continue
			}
			trace = append(trace, "commit:"+r.name)
			res, err := f.store.Commit(ctx, CommitRequest{Owner: arn(r.name), RunID: r.name, ExportJobID: "job-" + r.name})
			switch {
			case err == nil && res.Released:
				if r.name != holder {
					fail("commit of %s succeeded but %s holds the lock", r.name, holder)
				}
				commitOK(r.name, res)
				holder = ""
				r.done = true
			case err == nil:
				// a repeated commit: must not move anything
			case errors.Is(err, ErrNotOwner):
				if r.name == holder {
					fail("holder %s refused: %v", r.name, err)
				}
			default:
				fail("commit %s: %v", r.name, err)
			}
		case op < 75: // the holder fails
			r := pickRun(rng, runs, holder)
			if r == nil {
				continue
			}
			trace = append(trace, "fail:"+r.name)
			res, err := f.store.Fail(ctx, FailRequest{Owner: arn(r.name), RunID: r.name, Reason: "States.TaskFailed"})
			if err != nil {
				fail("fail %s: %v", r.name, err)
			}
			if res.Released {
				if r.name != holder {
					fail("fail of %s released %s's lock", r.name, holder)
				}
				holder = ""
			}
			r.done = true
		case op < 85: // the holder crashes, times out or is aborted
			if holder == "" {
				continue
			}
			r := findRun(runs, holder)
			r.crashed = true
			f.owners.set(arn(r.name), []string{"FAILED", "TIMED_OUT", "ABORTED", StatusGone}[rng.IntN(4)])
			trace = append(trace, "crash:"+r.name)
		case op < 92: // an operator replays
			to := cursor.Add(-time.Duration(rng.IntN(48*60)) * time.Minute)
			trace = append(trace, "replay:"+envelope.FormatTime(to))
			_, err := f.store.Replay(ctx, ReplayRequest{Since: to, Actor: "prop"})
			switch {
			case err == nil:
				if holder != "" {
					fail("replay applied while %s holds the lock", holder)
				}
				cursor = to
				replayed = true
				stats.replays++
			case errors.Is(err, ErrLockHeld) || errors.Is(err, ErrStaleLock):
				if holder == "" {
					fail("replay refused with no holder: %v", err)
				}
			default:
				fail("replay: %v", err)
			}
		default: // an operator unlocks without --force
			trace = append(trace, "unlock")
			res, err := f.store.Unlock(ctx, UnlockRequest{Actor: "prop"})
			switch {
			case err == nil && res.Released:
				r := findRun(runs, holder)
				if r == nil || (!r.crashed && !res.Liveness.LeaseExpired) {
					fail("unlock released a live holder %s", holder)
				}
				holder = ""
			case err == nil:
				if holder != "" {
					fail("unlock found no lock but %s holds it", holder)
				}
			case errors.Is(err, ErrLockHeld):
			default:
				fail("unlock: %v", err)
			}
		}
		st := f.status(t)
		if !st.Exists {
			if holder != "" || !cursor.Equal(initial) {
				fail("the RUN record vanished")
			}
			continue
		}
		if st.Checkpoint.Before(lastCheckpoint) && !replayed {
			fail("checkpoint moved back from %v to %v without a replay", lastCheckpoint, st.Checkpoint)
		}
		lastCheckpoint = st.Checkpoint
		if holder == "" && st.Lock != nil {
			// The model lost track only if a take-over happened in a tick; ticks set holder.
			fail("lock held by %s but the model has none", st.Lock.RunID)
		}
		if holder != "" && (st.Lock == nil || st.Lock.RunID != holder) {
			fail("model holder %s, record %+v", holder, st.Lock)
		}
		if st.Lock == nil && !st.Checkpoint.Equal(cursor) {
			fail("checkpoint %v is not where the last successful window ended (%v)", st.Checkpoint, cursor)
		}
	}
	return stats
}

func containsLease(reason string) bool { return strings.Contains(reason, "lease expired") }

func findRun(runs []*propRun, name string) *propRun {
	for _, r := range runs {
		if r.name == name {
			return r
		}
	}
	return nil
}

// pickRun returns the holder most of the time and otherwise any earlier run
// (a late or duplicated callback).
func pickRun(rng *rand.Rand, runs []*propRun, holder string) *propRun {
	if len(runs) == 0 {
		return nil
	}
	if holder != "" && rng.IntN(4) != 0 {
		return findRun(runs, holder)
	}
	return runs[rng.IntN(len(runs))]
}
