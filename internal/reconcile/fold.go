package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// Hist counts live versions by resource type and hour: Hist[type][k] is the
// number of resources whose latest delivered version is live with
// lastUpdated in (k − 1 h, k] (k in Unix milliseconds), within the plan's
// window. The hours are on a
// grid anchored at the plan's Split (not at the epoch), so the split and
// every later cut fall on bucket edges.
type Hist map[string]map[int64]int64

// grid is the hour grid of one reconciliation.
type grid struct{ anchor time.Time }

// key is the bucket of t: the grid hour that ends at or after it.
func (g grid) key(t time.Time) int64 {
	d := t.Sub(g.anchor)
	n := d / time.Hour
	if d > n*time.Hour {
		n++
	}
	return g.anchor.Add(n * time.Hour).UnixMilli()
}

// align moves t to the nearest grid hour.
func (g grid) align(t time.Time) time.Time {
	return g.anchor.Add(t.Sub(g.anchor).Round(time.Hour))
}

func gridOf(pl *Plan) grid {
	if !pl.Split.IsZero() {
		return grid{anchor: pl.Split}
	}
	return grid{anchor: pl.Window.Until}
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

// in counts the versions of typ in the range (after, until]: the buckets k
// with after < k < until + 1 h (exact when after and until are on the grid;
// the window's own bounds need not be: only its versions are counted).
func (hs Hist) in(typ string, after, until time.Time) int64 {
	var n int64
	lo, hi := after.UnixMilli(), until.Add(time.Hour).UnixMilli()
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
	p := in.Partition
	if pl.Partitions <= 0 || p < 0 || p >= pl.Partitions {
		return Result{}, &InputError{Msg: "fold needs a partition in range"}
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
		if e.Deleted {
			continue
		}
		if _, ok := changed[e.Type+"/"+e.ID]; ok {
			continue // changed after the checkpoint: the store's count leaves it out too
		}
		if t, err := e.LastUpdatedAt(); err == nil && pl.Window.Contains(t) {
			hist.add(g, e.Type, t)
			res.DeliveredLive++
		}
	}
	if err := h.putJSON(ctx, histKey(pl.RunID, p), hist); err != nil {
		return Result{}, fmt.Errorf("fold partition %d: %w", p, err)
	}
	return res, nil
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
