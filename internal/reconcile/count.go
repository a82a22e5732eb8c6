package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Range is one resource type's `_lastUpdated` range (After, Until]; After
// at envelope.SnapshotSince means no lower bound.
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
	return (envelope.IsSnapshotSince(r.After) || t.After(r.After)) && !t.After(r.Until)
}

// countState is the count loop's progress, kept in S3 between invocations.
type countState struct {
	// Hist is the sum of the partitions' histograms.
	Hist Hist `json:"hist"`
	// Frontier are the ranges still to count; Leaves those whose counts
	// differ and that are small enough to list.
	Frontier []Range `json:"frontier"`
	Leaves   []Range `json:"leaves"`
	// Refine are the ranges of an hour whose counts differ and which
	// HealthLake counts more than LeafMax resources in: the hour histogram
	// cannot cut them, so the refine step counts the delivered index by the
	// minute in them (Fine, the sum of its partitions' histograms) and the
	// loop cuts them on the minute grid. Refined is set once Fine is read.
	Refine  []Range `json:"refine,omitempty"`
	Fine    Hist    `json:"fine,omitempty"`
	Refined bool    `json:"refined,omitempty"`
	// RefineAsked counts the loop's answers asking for the refine step.
	RefineAsked int   `json:"refineAsked,omitempty"`
	Queries     int64 `json:"queries"`
	Done        bool  `json:"done"`
}

// maxRefineAsks bounds how often the loop asks for the refine step before
// it takes an unreadable refined histogram for a failure.
const maxRefineAsks = 3

// MaxRefine bounds the hours one reconciliation refines (the largest by
// HealthLake's count); the others are listed whole. Each partition's
// refine histogram holds at most 60 buckets a refined hour.
const MaxRefine = 200

// count compares the delivered index's counts with HealthLake's, type by
// type: a range whose counts agree is done; one that differs is split at an
// hour near its middle until it spans an hour or HealthLake counts at most
// LeafMax resources in it, and then it is a leaf, listed by the list step.
// An hour that still holds more than LeafMax resources is refined: the
// loop answers Refine, the refine step counts the delivered index by the
// minute in those hours, and the loop, called again, cuts them on the
// minute grid down to a minute or LeafMax resources. Each count is one
// `_summary=count` search, one after another, slower when HealthLake
// throttles them (internal/readpace; a count still throttled after the
// client's retries is made again at the slower pace). At its deadline the
// loop saves its frontier and answers not done; the state machine calls it
// again.
//
// Equal counts do not prove equal contents: a range where one delivered
// resource was deleted without trace and one undelivered resource appeared
// counts the same (docs/RECONCILE.md, "What it cannot prove").
func (h *Handler) count(parent context.Context, in Input) (Done, error) {
	pl := in.Plan
	ctx, cancel := h.deadline(parent)
	defer cancel()
	searches := h.newReadPace(0) // searches have their own quota: unpaced until throttled
	var st countState
	if err := h.getJSON(ctx, countStateKey(pl.RunID), &st); err != nil {
		if st, err = h.startCount(ctx, pl); err != nil {
			return Done{}, err
		}
	}
	if st.RefineAsked > 0 && !st.Refined {
		// The refine step was asked for (the hour pass is over): its
		// histograms are due. Refine may fill up before that, while a
		// deadline cuts the hour pass short.
		ok, err := h.readFine(ctx, pl, &st)
		if err != nil {
			return Done{}, err
		}
		if !ok {
			return Done{Refine: true}, nil // the refine step has not run yet
		}
	}
	for len(st.Frontier) > 0 && !st.Done {
		if ctx.Err() != nil {
			break
		}
		r := st.Frontier[len(st.Frontier)-1]
		var n int64
		err := searches.Do(ctx, -1, func(ctx context.Context) (err error) {
			n, err = h.hl.Count(ctx, pl.Export.DatastoreID, r.Type, lower(r.After), r.Until)
			return err
		})
		if err != nil {
			if ctx.Err() != nil && parent.Err() == nil {
				break // the deadline: this range is counted again next time
			}
			return Done{}, fmt.Errorf("count: %w", err)
		}
		st.Queries++
		st.Frontier = st.Frontier[:len(st.Frontier)-1]
		g, hs := gridOf(pl), st.Hist
		if st.fine(r) {
			g, hs = fineGridOf(pl), st.Fine
		}
		d := hs.in(r.Type, r.After, r.Until, g.step)
		if n == d {
			continue
		}
		r.Store, r.Delivered = n, d
		if left, right, ok := h.split(g, hs, r); ok {
			st.Frontier = append(st.Frontier, left, right)
			continue
		}
		if !st.Refined && refinable(r, h.cfg.LeafMax) {
			st.Refine = append(st.Refine, r)
			continue
		}
		st.Leaves = append(st.Leaves, r)
	}
	refine := len(st.Frontier) == 0 && len(st.Refine) > 0 && !st.Refined
	if refine {
		st.keepLargestRefines()
		st.RefineAsked++
		if err := h.putJSON(parent, refineKey(pl.RunID), st.Refine); err != nil {
			return Done{}, fmt.Errorf("count: %w", err)
		}
	}
	st.Done = len(st.Frontier) == 0 && !refine
	if err := h.putJSON(parent, countStateKey(pl.RunID), st); err != nil {
		return Done{}, fmt.Errorf("count: %w", err)
	}
	if st.Done && h.cfg.Logger != nil {
		h.cfg.Logger.Info("reconciliation counted", "runId", pl.RunID, "queries", st.Queries, "leaves", len(st.Leaves), "refined", len(st.Refine))
	}
	return Done{Done: st.Done, Refine: refine}, nil
}

// refinable reports whether a leaf of the hour grid is worth refining: an
// hour (or less, at the window's edges) with a lower bound, holding more
// than leafMax resources, more than a minute long.
func refinable(r Range, leafMax int) bool {
	span := r.Until.Sub(r.After)
	return !envelope.IsSnapshotSince(r.After) && r.Store > int64(leafMax) && span <= time.Hour && span > time.Minute
}

// keepLargestRefines keeps the MaxRefine hours HealthLake counts most
// resources in; the others become leaves, listed whole.
func (st *countState) keepLargestRefines() {
	if len(st.Refine) <= MaxRefine {
		return
	}
	sort.SliceStable(st.Refine, func(i, j int) bool { return st.Refine[i].Store > st.Refine[j].Store })
	st.Leaves = append(st.Leaves, st.Refine[MaxRefine:]...)
	st.Refine = st.Refine[:MaxRefine]
}

// fine reports whether r lies in a refined hour: its delivered count and
// its cuts come from the minute histogram.
func (st *countState) fine(r Range) bool {
	if !st.Refined {
		return false
	}
	for _, f := range st.Refine {
		if f.Type == r.Type && !r.After.Before(f.After) && !r.Until.After(f.Until) {
			return true
		}
	}
	return false
}

// readFine sums the refine step's histograms into st and puts each refined
// hour's two halves on the frontier. While a partition's histogram cannot
// be read — the refine step has not run: S3 answers a missing object 404,
// or 403 to a role that may list only some prefixes — it reports false and
// counts the request in st.RefineAsked; past maxRefineAsks it fails.
func (h *Handler) readFine(ctx context.Context, pl *Plan, st *countState) (bool, error) {
	fine := Hist{}
	for p := 0; p < pl.Partitions; p++ {
		var hs Hist
		if err := h.getJSON(ctx, fineKey(pl.RunID, p), &hs); err != nil {
			if st.RefineAsked >= maxRefineAsks {
				return false, fmt.Errorf("count: partition %d's refined histogram, asked for %d times: %w", p, st.RefineAsked, err)
			}
			st.RefineAsked++
			if err := h.putJSON(ctx, countStateKey(pl.RunID), st); err != nil {
				return false, fmt.Errorf("count: %w", err)
			}
			return false, nil
		}
		fine.merge(hs)
	}
	st.Fine, st.Refined = fine, true
	for _, r := range st.Refine {
		if left, right, ok := h.split(fineGridOf(pl), fine, r); ok {
			st.Frontier = append(st.Frontier, left, right)
		} else {
			st.Leaves = append(st.Leaves, r)
		}
	}
	return true, nil
}

// lower is the lower bound of a count or search: zero for none.
func lower(after time.Time) time.Time {
	if envelope.IsSnapshotSince(after) {
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
		if t, err := envelope.ParseTime(pl.Previous.Checkpoint); err == nil {
			s = t
		}
	}
	if !s.After(pl.Window.Since) || !s.Before(pl.Window.Until) {
		return time.Time{}
	}
	return s
}

// split divides a range whose counts differ: at a grid step (an hour, or a
// minute in a refined hour) near its middle; a range with no lower bound at
// the hour before the type's earliest delivered bucket (the part before it
// holds only what was never delivered). It reports false for a leaf: a
// range of one step or less, or one HealthLake counts at most LeafMax
// resources in (listing it is then cheaper than counting its halves).
func (h *Handler) split(g grid, hs Hist, r Range) (Range, Range, bool) {
	if r.Store <= int64(h.cfg.LeafMax) {
		return Range{}, Range{}, false
	}
	var mid time.Time
	if envelope.IsSnapshotSince(r.After) {
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
		if r.Until.Sub(r.After) <= g.step {
			return Range{}, Range{}, false
		}
		mid = g.align(r.After.Add(r.Until.Sub(r.After) / 2))
		if !mid.After(r.After) {
			mid = mid.Add(g.step)
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
func (h *Handler) leaves(ctx context.Context, runID string) ([]Range, error) {
	st, err := h.countResult(ctx, runID)
	if err != nil {
		return nil, err
	}
	return st.Leaves, nil
}

// countResult reads the finished count step's state.
func (h *Handler) countResult(ctx context.Context, runID string) (*countState, error) {
	var st countState
	if err := h.getJSON(ctx, countStateKey(runID), &st); err != nil {
		return nil, fmt.Errorf("the count step's state: %w", err)
	}
	if !st.Done {
		return nil, errors.New("the count step has not finished")
	}
	return &st, nil
}

// refined is the number of hours the refine step counted by the minute.
func (st *countState) refined() int64 {
	if !st.Refined {
		return 0
	}
	return int64(len(st.Refine))
}
