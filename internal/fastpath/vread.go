package fastpath

import (
	"context"
	"fmt"
	"sync"
)

// VReadConcurrency is how many version reads an invocation makes at once.
// The id-only notifications of a batch are read back together before they
// are published in order: a batch's reads then take about the time of its
// slowest few, not their sum, and the fast path keeps up with bursts that
// one read after another could not (docs/FASTPATH.md).
const VReadConcurrency = 8

// vreadResult is one version read: the stored bytes, or why not.
type vreadResult struct {
	body []byte
	err  error
}

// prefetch reads back, VReadConcurrency at a time, each version the
// batch's (parsed) id-only notifications announce for the data store and the types
// the filter allows, so that change finds it read. A batch with fewer than
// two such versions reads where it uses them.
func (inv *invocation) prefetch(ctx context.Context, batch []parsed) {
	cfg := inv.h.cfg
	var todo []Change
	seen := map[string]bool{}
	for _, p := range batch {
		if p.err != nil || p.n.DatastoreID != cfg.DatastoreID {
			continue // message reports it
		}
		for _, c := range p.n.Changes {
			if c.NeedsRead() && cfg.Filter.Allows(c.ResourceType) && !seen[c.EventID()] {
				seen[c.EventID()] = true
				todo = append(todo, c)
			}
		}
	}
	if len(todo) < 2 {
		return
	}
	inv.reads = make(map[string]vreadResult, len(todo))
	inv.c.vreads += int64(len(todo))
	var mu sync.Mutex
	work := make(chan Change)
	var wg sync.WaitGroup
	for w := 0; w < min(VReadConcurrency, len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				body, err := inv.read(ctx, c)
				mu.Lock()
				inv.reads[c.EventID()] = vreadResult{body: body, err: err}
				mu.Unlock()
			}
		}()
	}
	for _, c := range todo {
		work <- c
	}
	close(work)
	wg.Wait()
}

// vread is the announced version's stored bytes: prefetched, or read now.
func (inv *invocation) vread(ctx context.Context, c Change) ([]byte, error) {
	if r, ok := inv.reads[c.EventID()]; ok {
		return r.body, r.err
	}
	inv.c.vreads++
	return inv.read(ctx, c)
}

// read reads c's version in its turn of the environment's read pace,
// reporting throttled attempts to the pace. A read whose turn comes after
// ctx's end is not made: its message fails and comes again.
func (inv *invocation) read(ctx context.Context, c Change) ([]byte, error) {
	if err := inv.h.reads.Wait(ctx); err != nil {
		return nil, fmt.Errorf("wait for a read's turn: %w", err)
	}
	return inv.h.hl.VRead(inv.h.reads.Traced(ctx), inv.h.cfg.DatastoreID, c.ResourceType, c.ID, c.VersionID)
}
