package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// Hist counts live versions by resource type and grid step: Hist[type][k]
// is the number of resources whose latest delivered version is live with
// lastUpdated in (k − step, k] (k in Unix milliseconds), within the plan's
// window. The fold step counts by the hour; the refine step by the minute,
// in the hours it is asked about. The grid is anchored at the plan's Split
// (not at the epoch), so the split and every later cut fall on bucket
// edges, and every minute lies inside one hour.
type Hist map[string]map[int64]int64

// grid is a step grid of one reconciliation: its hours (gridOf) or its
// minutes (fineGridOf).
type grid struct {
	anchor time.Time
	step   time.Duration
}

// key is the bucket of t: the grid step that ends at or after it.
func (g grid) key(t time.Time) int64 {
	d := t.Sub(g.anchor)
	n := d / g.step
	if d > n*g.step {
		n++
	}
	return g.anchor.Add(n * g.step).UnixMilli()
}

// align moves t to the nearest grid step.
func (g grid) align(t time.Time) time.Time {
	return g.anchor.Add(t.Sub(g.anchor).Round(g.step))
}

// gridOf is the hour grid of the fold step's histograms.
func gridOf(pl *Plan) grid {
	if !pl.Split.IsZero() {
		return grid{anchor: pl.Split, step: time.Hour}
	}
	return grid{anchor: pl.Window.Until, step: time.Hour}
}

// fineGridOf is the minute grid of the refine step's histograms, on the
// same anchor.
func fineGridOf(pl *Plan) grid {
	g := gridOf(pl)
	g.step = time.Minute
	return g
}

// add counts one live version.
func (hs Hist) add(g grid, typ string, t time.Time) {
	m := hs[typ]
	if m == nil {
		m = map[int64]int64{}
		hs[typ] = m
	}
	m[g.key(t)]++
}

// merge adds o into hs.
func (hs Hist) merge(o Hist) {
	for typ, m := range o {
		for k, n := range m {
			if hs[typ] == nil {
				hs[typ] = map[int64]int64{}
			}
			hs[typ][k] += n
		}
	}
}

// total counts every version hs holds.
func (hs Hist) total() int64 {
	var n int64
	for _, m := range hs {
		for _, c := range m {
			n += c
		}
	}
	return n
}

// in counts the versions of typ in the range (after, until] from buckets of
// the given step: the buckets k with after < k < until + step (exact when
// after and until are on the grid; the window's own bounds need not be:
// only its versions are counted).
func (hs Hist) in(typ string, after, until time.Time, step time.Duration) int64 {
	var n int64
	lo, hi := after.UnixMilli(), until.Add(step).UnixMilli()
	for k, c := range hs[typ] {
		if k > lo && k < hi {
			n += c
		}
	}
	return n
}

// fold builds partition p of the delivered index (the previous
// reconciliation's index and every delivered object since), writes it, and
// writes its histogram of live versions in the plan's window.
func (h *Handler) fold(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	p, err := in.partition()
	if err != nil {
		return Result{}, err
	}
	known, err := h.loadKnown(ctx, pl, p)
	if err != nil {
		return Result{}, err
	}
	if err := h.writeIndex(ctx, foldedKey(pl.RunID, p), known); err != nil {
		return Result{}, fmt.Errorf("fold partition %d: %w", p, err)
	}
	changed, err := h.loadChanged(ctx, pl.RunID)
	if err != nil {
		return Result{}, fmt.Errorf("fold partition %d: %w", p, err)
	}
	hist, g := Hist{}, gridOf(pl)
	res := Result{Partition: p}
	res.Known = int64(len(known))
	for _, e := range known {
		if t, ok := counted(pl, changed, e); ok {
			hist.add(g, e.Type, t)
			res.DeliveredLive++
		}
	}
	if err := h.putJSON(ctx, histKey(pl.RunID, p), hist); err != nil {
		return Result{}, fmt.Errorf("fold partition %d: %w", p, err)
	}
	return res, nil
}

// counted reports whether the histograms count e, and its time: a live
// version in the plan's window of a resource not changed after the
// checkpoint (the store's count leaves those out too).
func counted(pl *Plan, changed map[string]struct{}, e delivered.Entry) (time.Time, bool) {
	if e.Deleted {
		return time.Time{}, false
	}
	if _, ok := changed[e.Type+"/"+e.ID]; ok {
		return time.Time{}, false
	}
	t, err := e.LastUpdatedAt()
	if err != nil || !pl.Window.Contains(t) {
		return time.Time{}, false
	}
	return t, true
}

// loadKnown builds partition p of the delivered index: the previous
// reconciliation's index and every delivered object of the plan.
func (h *Handler) loadKnown(ctx context.Context, pl *Plan, p int) ([]delivered.Entry, error) {
	var es []delivered.Entry
	keep := func(e delivered.Entry) error {
		if delivered.Partition(e.Type, e.ID, pl.Partitions) == p {
			e.File, e.Offset, e.Length = 0, 0, 0
			es = append(es, e)
		}
		return nil
	}
	if prev := pl.Previous; prev != nil {
		if prev.Partitions == pl.Partitions {
			if err := h.read(ctx, IndexKey(prev.RunID, p), nil, keep); err != nil {
				return nil, fmt.Errorf("previous index: %w", err)
			}
		} else {
			for q := 0; q < prev.Partitions; q++ { // N changed: filter every old partition
				if err := h.read(ctx, IndexKey(prev.RunID, q), nil, keep); err != nil {
					return nil, fmt.Errorf("previous index: %w", err)
				}
			}
		}
	}
	var keys []string
	if err := h.getJSON(ctx, pl.DeliveredKeysKey, &keys); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := h.read(ctx, k, nil, keep); err != nil {
			return nil, err
		}
	}
	delivered.SortEntries(es)
	return delivered.Reduce(es), nil
}
