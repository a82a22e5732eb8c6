package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

// Range is one resource type's `_lastUpdated` range (After, Until]; After
// at events.SnapshotSince means no lower bound.
type Range struct {
	Type  string    `json:"type"`
	After time.Time `json:"after"`
	Until time.Time `json:"until"`
	// Store and Delivered are the counts found for it (leaves).
	Store     int64 `json:"store,omitempty"`
	Delivered int64 `json:"delivered,omitempty"`
}

// Contains reports whether t is in (After, Until].
func (r Range) Contains(t time.Time) bool {
	return (events.IsSnapshotSince(r.After) || t.After(r.After)) && !t.After(r.Until)
}

// countState is the count loop's progress, kept in S3 between invocations.
type countState struct {
	// Hist is the sum of the partitions' histograms.
	Hist Hist `json:"hist"`
	// Frontier are the ranges still to count; Leaves those whose counts
	// differ and that are small enough to list.
	Frontier []Range `json:"frontier"`
	Leaves   []Range `json:"leaves"`
	Queries  int64   `json:"queries"`
	Done     bool    `json:"done"`
}

// count compares the delivered index's counts with HealthLake's, type by
// type: a range whose counts agree is done; one that differs is split at an
// hour near its middle until it spans an hour or HealthLake counts at most
// LeafMax resources in it, and then it is a leaf, listed by the list step.
// Each count is one `_summary=count` search. At its deadline the loop saves
// its frontier and answers not done; the state machine calls it again.
//
// Equal counts do not prove equal contents: a range where one delivered
// resource was deleted without trace and one undelivered resource appeared
// counts the same (docs/RECONCILE.md, "What it cannot prove").
func (h *Handler) count(parent context.Context, in Input) (Done, error) {
	pl := in.Plan
	ctx, cancel := h.deadline(parent)
	defer cancel()
	var st countState
	if err := h.getJSON(ctx, countStateKey(pl.RunID), &st); err != nil {
		if st, err = h.startCount(ctx, pl); err != nil {
			return Done{}, err
		}
	}
	for len(st.Frontier) > 0 && !st.Done {
		if ctx.Err() != nil {
			break
		}
		r := st.Frontier[len(st.Frontier)-1]
		n, err := h.hl.Count(ctx, pl.Export.DatastoreID, r.Type, lower(r.After), r.Until)
		if err != nil {
			if ctx.Err() != nil && parent.Err() == nil {
				break // the deadline: this range is counted again next time
			}
			return Done{}, fmt.Errorf("count: %w", err)
		}
		st.Queries++
		st.Frontier = st.Frontier[:len(st.Frontier)-1]
		d := st.Hist.in(r.Type, r.After, r.Until)
		if n == d {
			continue
		}
		r.Store, r.Delivered = n, d
		if left, right, ok := h.split(gridOf(pl), st.Hist, r); ok {
			st.Frontier = append(st.Frontier, left, right)
			continue
		}
		st.Leaves = append(st.Leaves, r)
	}
	st.Done = len(st.Frontier) == 0
	if err := h.putJSON(parent, countStateKey(pl.RunID), st); err != nil {
		return Done{}, fmt.Errorf("count: %w", err)
	}
	if st.Done && h.cfg.Logger != nil {
		h.cfg.Logger.Info("reconciliation counted", "runId", pl.RunID, "queries", st.Queries, "leaves", len(st.Leaves))
	}
	return Done{Done: st.Done}, nil
}

// lower is the lower bound of a count or search: zero for none.
func lower(after time.Time) time.Time {
	if events.IsSnapshotSince(after) {
		return time.Time{}
	}
	return after
}

// startCount sums the partitions' histograms and puts one range per type
// on the frontier: the plan's window.
func (h *Handler) startCount(ctx context.Context, pl *Plan) (countState, error) {
	st := countState{Hist: Hist{}}
	for p := 0; p < pl.Partitions; p++ {
		var hs Hist
		if err := h.getJSON(ctx, histKey(pl.RunID, p), &hs); err != nil {
			return countState{}, fmt.Errorf("count: partition %d was not folded: %w", p, err)
		}
		st.Hist.merge(hs)
	}
	types := append([]string(nil), pl.Types...)
	sort.Sort(sort.Reverse(sort.StringSlice(types))) // popped from the end: alphabetical
	split := pl.Split
	for _, t := range types {
		if split.IsZero() {
			st.Frontier = append(st.Frontier, Range{Type: t, After: pl.Window.Since, Until: pl.Window.Until})
			continue
		}
		st.Frontier = append(st.Frontier, Range{Type: t, After: pl.Window.Since, Until: split},
			Range{Type: t, After: split, Until: pl.Window.Until})
	}
	return st, nil
}

// recentSplit is where each type's window is cut in two before counting:
// at the previous reconciliation's checkpoint (a day before this one's
// without one). Versions written since then land in the recent range, so a
// missed update — which moves a resource from an old hour to a recent one,
// the type's total unchanged — shows as a difference there. The histograms'
// hour grid is anchored at it, so the cut is exact. Zero when the window is
// too short to cut.
func recentSplit(pl *Plan) time.Time {
	s := pl.Window.Until.Add(-24 * time.Hour)
	if pl.Previous != nil {
		if t, err := events.ParseTime(pl.Previous.Checkpoint); err == nil {
			s = t
		}
	}
	if !s.After(pl.Window.Since) || !s.Before(pl.Window.Until) {
		return time.Time{}
	}
	return s
}

// split divides a range whose counts differ: at an hour near its middle;
// a range with no lower bound at the hour before the type's earliest
// delivered bucket (the part before it holds only what was never
// delivered). It reports false for a leaf: a range of an hour or less, or
// one HealthLake counts at most LeafMax resources in (listing it is then
// cheaper than counting its halves).
func (h *Handler) split(g grid, hs Hist, r Range) (Range, Range, bool) {
	if r.Store <= int64(h.cfg.LeafMax) {
		return Range{}, Range{}, false
	}
	var mid time.Time
	if events.IsSnapshotSince(r.After) {
		first := int64(0)
		for k := range hs[r.Type] {
			if first == 0 || k < first {
				first = k
			}
		}
		if first == 0 {
			return Range{}, Range{}, false // nothing delivered: list it all
		}
		mid = time.UnixMilli(first).UTC().Add(-time.Hour)
		if !mid.Before(r.Until) {
			return Range{}, Range{}, false
		}
	} else {
		if r.Until.Sub(r.After) <= time.Hour {
			return Range{}, Range{}, false
		}
		mid = g.align(r.After.Add(r.Until.Sub(r.After) / 2))
		if !mid.After(r.After) {
			mid = mid.Add(time.Hour)
		}
		if !mid.Before(r.Until) {
			return Range{}, Range{}, false
		}
	}
	left := Range{Type: r.Type, After: r.After, Until: mid}
	right := Range{Type: r.Type, After: mid, Until: r.Until}
	return left, right, true
}

// leaves reads the count step's leaves.
func (h *Handler) leaves(ctx context.Context, runID string) ([]Range, int64, error) {
	var st countState
	if err := h.getJSON(ctx, countStateKey(runID), &st); err != nil {
		return nil, 0, fmt.Errorf("the count step's state: %w", err)
	}
	if !st.Done {
		return nil, 0, errors.New("the count step has not finished")
	}
	return st.Leaves, st.Queries, nil
}
