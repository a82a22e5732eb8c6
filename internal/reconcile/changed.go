package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// ChangedConcurrency is how many types' history the plan reads at once.
const ChangedConcurrency = 8

// ThrottledPageRounds is how many more times the plan reads a history page
// that HealthLake still throttled after the client's retries, each time at
// the pace the throttles slowed it to, before the plan fails. The plan
// cannot leave a page out as the compare children defer a confirmation: a
// change it did not see would make the compare find a difference that is
// not one.
const ThrottledPageRounds = 10

// changedKey holds the resources changed after the checkpoint.
func changedKey(runID string) string { return Prefix + runID + "/changed.json" }

// changedSince lists every resource ("type/id") of the plan's types with a
// version written after the checkpoint, from each type's history since it
// (`GET {type}/_history?_since=`, strong consistency), at most
// Config.ReadRate pages a second when set, slower when HealthLake throttles
// them (internal/readpace; ThrottledPageRounds). A count of current
// versions at or before the checkpoint leaves such a resource out while the
// delivered index still holds its earlier version: both sides leave it out
// (fold, diff), and the windows deliver what it became. A resource erased
// after the checkpoint leaves no history and is compared as usual (its
// delete is the reconciliation's to publish).
func (h *Handler) changedSince(ctx context.Context, pl *Plan) ([]string, error) {
	var mu sync.Mutex
	seen := map[string]struct{}{}
	var first error
	work := make(chan string)
	var wg sync.WaitGroup
	since := pl.Window.Until.Add(time.Millisecond) // history's _since is inclusive
	reads := h.newReadPace(h.cfg.ReadRate)
	for w := 0; w < ChangedConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for typ := range work {
				next := ""
				for {
					var entries []fhirrest.HistoryEntry
					var link string
					err := reads.Do(ctx, ThrottledPageRounds, func(ctx context.Context) (err error) {
						entries, link, err = h.hl.TypeHistoryPage(ctx, pl.Export.DatastoreID, typ, since, h.cfg.PageSize, next)
						return err
					})
					if err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
						break
					}
					mu.Lock()
					for _, e := range entries {
						if t, err := envelope.ParseTime(e.LastUpdated); err == nil && t.After(pl.Window.Until) {
							seen[e.ResourceType+"/"+e.ID] = struct{}{}
						}
					}
					mu.Unlock()
					if link == "" {
						break
					}
					next = link
				}
			}
		}()
	}
	for _, t := range pl.Types {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		work <- t
	}
	close(work)
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("the changes since the checkpoint: %w", first)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	return out, nil
}

// loadChanged reads the plan's changed resources as a set.
func (h *Handler) loadChanged(ctx context.Context, runID string) (map[string]struct{}, error) {
	var keys []string
	if err := h.getJSON(ctx, changedKey(runID), &keys); err != nil {
		return nil, fmt.Errorf("the changes since the checkpoint: %w", err)
	}
	set := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		set[k] = struct{}{}
	}
	return set, nil
}
