package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// refine counts, by the minute, partition p's live versions in the hours
// the count step could not cut with its hour histograms (refineKey): the
// same versions the fold step counts by the hour (counted), read from the
// partition's folded index. It writes the partition's minute histogram
// (fineKey); the count step, called again, sums them and cuts those hours
// on the minute grid, so that an hour holding a bulk load and a few
// differences is not listed whole.
func (h *Handler) refine(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	p, err := in.partition()
	if err != nil {
		return Result{}, err
	}
	var hours []Range
	if err := h.getJSON(ctx, refineKey(pl.RunID), &hours); err != nil {
		return Result{}, fmt.Errorf("refine partition %d: the hours to refine: %w", p, err)
	}
	byType := map[string][]Range{}
	for _, r := range hours {
		byType[r.Type] = append(byType[r.Type], r)
	}
	changed, err := h.loadChanged(ctx, pl.RunID)
	if err != nil {
		return Result{}, fmt.Errorf("refine partition %d: %w", p, err)
	}
	fine, g := Hist{}, fineGridOf(pl)
	res := Result{Partition: p}
	err = h.read(ctx, foldedKey(pl.RunID, p), nil, func(e delivered.Entry) error {
		rs := byType[e.Type]
		if len(rs) == 0 {
			return nil
		}
		t, ok := counted(pl, changed, e)
		if !ok || !inAny(rs, t) {
			return nil
		}
		fine.add(g, e.Type, t)
		res.DeliveredLive++
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("refine partition %d: %w", p, err)
	}
	if err := h.putJSON(ctx, fineKey(pl.RunID, p), fine); err != nil {
		return Result{}, fmt.Errorf("refine partition %d: %w", p, err)
	}
	return res, nil
}

// inAny reports whether t lies in one of rs.
func inAny(rs []Range, t time.Time) bool {
	for _, r := range rs {
		if r.Contains(t) {
			return true
		}
	}
	return false
}
