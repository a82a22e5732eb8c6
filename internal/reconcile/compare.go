package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/readpace"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// ConfirmConcurrency is how many deletions a compare child confirms at once
// (a history read, and a resource read when the history is gone).
const ConfirmConcurrency = 16

// PublishReserve is the time a compare child keeps after confirming for
// publishing what it confirmed and writing its records: confirmations stop
// this long (plus DeadlineMargin) before its deadline, and the candidates
// not reached are deferred to the next reconciliation.
const PublishReserve = 60 * time.Second

// leafSet answers whether an entry's version lies in one of the leaves.
type leafSet map[string][]Range

func newLeafSet(leaves []Range) leafSet {
	ls := leafSet{}
	for _, r := range leaves {
		ls[r.Type] = append(ls[r.Type], r)
	}
	return ls
}

func (ls leafSet) has(e delivered.Entry) bool {
	rs := ls[e.Type]
	if len(rs) == 0 {
		return false
	}
	t, err := e.LastUpdatedAt()
	if err != nil {
		return false
	}
	for _, r := range rs {
		if r.Contains(t) {
			return true
		}
	}
	return false
}

// diff compares partition p inside the leaf ranges: the store's listed
// resources there against the delivered index's versions there. Outside the
// leaves the counts agreed and the delivered index is kept as it is. It
// publishes repairs and confirmed deletes, records them, and writes the
// partition's next index and its counts.
func (h *Handler) diff(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	p, err := in.partition()
	if err != nil {
		return Result{}, err
	}
	res := Result{Partition: p}
	checkpoint := pl.Window.Until
	leaves, err := h.leaves(ctx, pl.RunID)
	if err != nil {
		return res, fmt.Errorf("diff partition %d: %w", p, err)
	}
	ls := newLeafSet(leaves)
	changed, err := h.loadChanged(ctx, pl.RunID)
	if err != nil {
		return res, fmt.Errorf("diff partition %d: %w", p, err)
	}
	store, files, err := h.loadStore(ctx, pl.RunID, p)
	if err != nil {
		return res, err
	}
	var all, known, outside []delivered.Entry
	if err := h.read(ctx, foldedKey(pl.RunID, p), nil, func(e delivered.Entry) error { all = append(all, e); return nil }); err != nil {
		return res, fmt.Errorf("diff partition %d: the folded index: %w", p, err)
	}
	for _, e := range all {
		if _, ok := changed[e.Type+"/"+e.ID]; !ok && ls.has(e) {
			known = append(known, e)
		} else {
			outside = append(outside, e)
		}
	}
	next := make([]delivered.Entry, 0, len(all)+len(store)/8)
	var repairs []repairAt
	var deletes []int // positions in next
	st, err := Diff(store, known, checkpoint, func(d Decision) error {
		switch d.Kind {
		case KindRepair:
			e := *d.Store
			repairs = append(repairs, repairAt{entry: e, pos: len(next), known: d.Known})
			e.File, e.Offset, e.Length = 0, 0, 0
			next = append(next, e)
		case KindDelete:
			deletes = append(deletes, len(next))
			next = append(next, *d.Known)
		default:
			if d.Known != nil {
				next = append(next, *d.Known)
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Stats = st
	res.Known = int64(len(all))
	pub, err := publish.New(h.eb, h.cfg.Publish)
	if err != nil {
		return res, err
	}
	defer func() { _ = pub.Wait() }()
	var record []delivered.Entry
	em := &publish.Emitter{Publisher: pub, ClaimCheck: &publish.ClaimCheck{S3: h.s3, Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID},
		Window: pl.Window, Export: pl.Export}
	for _, r := range repairs {
		ok, err := h.repair(ctx, em, files, r.entry)
		if err != nil {
			return res, err
		}
		if !ok { // not delivered after all: the index keeps what was
			res.Unrepairable++
			res.Repairs--
			next[r.pos] = delivered.Entry{}
			if r.known != nil {
				next[r.pos] = *r.known
			}
			continue
		}
		rec := r.entry
		rec.File, rec.Offset, rec.Length = 0, 0, 0
		record = append(record, rec)
	}
	cctx, cancel := h.confirmDeadline(ctx)
	confirmed, err := h.confirm(cctx, pl, next, deletes)
	cancel()
	if err != nil {
		return res, fmt.Errorf("diff partition %d: %w", p, err)
	}
	var detail []byte
	for k, i := range deletes {
		c := confirmed[k]
		switch c.outcome {
		case deleteUnconfirmed:
			res.Unconfirmed++
			res.Deletes--
			continue
		case deletePending:
			res.Pending++
			res.Deletes--
			continue
		case deleteDeferred:
			// Not confirmed before the child's confirm deadline: left as
			// delivered, so the next reconciliation finds it again.
			res.Deferred++
			res.Deletes--
			continue
		case deleteHard:
			res.HardDeletes++
		}
		e := next[i]
		d := envelope.Deletion{ResourceType: e.Type, ResourceID: e.ID, VersionID: c.version, LastUpdated: c.at, Window: pl.Window, Export: pl.Export}
		detail = envelope.AppendDeleteDetail(detail[:0], d)
		if err := pub.Add(ctx, detail, nil); err != nil {
			return res, fmt.Errorf("diff partition %d: publish a delete: %w", p, err)
		}
		tomb := delivered.Entry{Type: e.Type, ID: e.ID, VersionID: c.version, LastUpdated: c.at, Deleted: true}
		next[i] = tomb
		record = append(record, tomb)
	}
	if err := pub.Flush(ctx); err != nil {
		return res, fmt.Errorf("diff partition %d: publish: %w", p, err)
	}
	// Published: record it, then the partition's new index.
	if len(record) > 0 {
		if err := h.writeIndex(ctx, reconcileDeliveredKey(h.now(), pl.RunID, p), record); err != nil {
			return res, err
		}
	}
	next = append(next, outside...)
	delivered.SortEntries(next)
	next = delivered.Reduce(next) // a repair newer than a delivered version outside the leaves
	if err := h.writeIndex(ctx, IndexKey(pl.RunID, p), next); err != nil {
		return res, err
	}
	if err := h.putJSON(ctx, statsKey(pl.RunID, p), res); err != nil {
		return res, err
	}
	return res, nil
}

// The outcomes of confirming a deletion.
const (
	deleteSoft        = iota // the history's newest entry is the DELETE
	deleteHard               // no history and the resource reads as gone
	deleteUnconfirmed        // live after all: nothing is published
	deletePending            // deleted after the checkpoint: its window publishes it
	deleteDeferred           // not confirmed in this child's time: the next reconciliation's
)

type confirmation struct {
	outcome     int
	version, at string
}

// confirm decides each candidate deletion (positions in next) from the
// resource's history and, when the history is gone, a read of the
// resource, ConfirmConcurrency at a time and, with Config.ReadRate, at most
// the child's share of it a second, slower while HealthLake throttles them
// (internal/readpace); a read still throttled after the client's retries leaves its
// deletion deferred. A live resource is never deleted.
func (h *Handler) confirm(ctx context.Context, pl *Plan, next []delivered.Entry, deletes []int) ([]confirmation, error) {
	out := make([]confirmation, len(deletes))
	for k := range out {
		out[k].outcome = deleteDeferred
	}
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	reads := h.newReadPace(h.cfg.childReadRate())
	ctx = reads.Traced(ctx)
	for w := 0; w < ConfirmConcurrency && w < len(deletes); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				if ctx.Err() != nil {
					continue // deferred
				}
				c, err := h.confirmOne(ctx, reads, pl, next[deletes[k]])
				mu.Lock()
				switch {
				case err != nil && ctx.Err() != nil:
					// the confirm deadline: deferred
				case fhirrest.IsThrottled(err):
					// Still throttled after the client's retries (the
					// pace has slowed down): deferred, as at the deadline.
				case err != nil:
					if first == nil {
						first = err
					}
				default:
					out[k] = c
				}
				mu.Unlock()
			}
		}()
	}
	for k := range deletes {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		work <- k
	}
	close(work)
	wg.Wait()
	return out, first
}

// confirmDeadline bounds the confirmations: PublishReserve and the margin
// before ctx's deadline.
func (h *Handler) confirmDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-h.cfg.DeadlineMargin-PublishReserve))
}

// confirmOne confirms one candidate deletion; each HealthLake read waits
// for its turn of reads.
func (h *Handler) confirmOne(ctx context.Context, reads *readpace.Pace, pl *Plan, k delivered.Entry) (confirmation, error) {
	if err := reads.Wait(ctx); err != nil {
		return confirmation{}, err
	}
	hist, err := h.hl.History(ctx, pl.Export.DatastoreID, k.Type, k.ID)
	switch {
	case errors.Is(err, fhirrest.ErrNoHistory):
		if err := reads.Wait(ctx); err != nil {
			return confirmation{}, err
		}
		live, rerr := h.hl.Exists(ctx, pl.Export.DatastoreID, k.Type, k.ID)
		if rerr != nil {
			return confirmation{}, rerr
		}
		if live {
			// No history but a live resource (a type opted out of
			// history): never a delete.
			return confirmation{outcome: deleteUnconfirmed}, nil
		}
		return confirmation{outcome: deleteHard, version: envelope.HardDeleteVersion(k.VersionID), at: pl.StartedAt}, nil
	case err != nil:
		return confirmation{}, err
	case len(hist) > 0 && hist[0].Deleted:
		if t, err := envelope.ParseTime(hist[0].LastUpdated); err == nil && t.After(pl.Window.Until) {
			return confirmation{outcome: deletePending}, nil
		}
		return confirmation{outcome: deleteSoft, version: hist[0].VersionID, at: hist[0].LastUpdated}, nil
	}
	// Live in the history (written since it was counted, or moved to a
	// range that was not listed): the next reconciliation decides.
	return confirmation{outcome: deleteUnconfirmed}, nil
}

// repairAt is a repair, its position in the next index and what was delivered before.
type repairAt struct {
	entry delivered.Entry
	pos   int
	known *delivered.Entry
}

// repair re-publishes the store version e from its export line, as a
// normal upsert (same eventId as the run that missed it would have sent).
func (h *Handler) repair(ctx context.Context, em *publish.Emitter, files []delivered.FileRef, e delivered.Entry) (bool, error) {
	if e.Length <= 0 || e.File < 0 || e.File >= len(files) {
		return false, nil // an over-long line: the runs quarantine it too
	}
	f := files[e.File]
	body, err := s3read.Range(ctx, h.s3, f.Bucket, f.Key, e.Offset, e.Offset+e.Length-1)
	if err != nil {
		return false, fmt.Errorf("repair: get s3://%s/%s: %w", f.Bucket, f.Key, err)
	}
	raw, err := io.ReadAll(body)
	body.Close()
	if err != nil {
		return false, fmt.Errorf("repair: read s3://%s/%s: %w", f.Bucket, f.Key, err)
	}
	line, err := fhir.NewReader(bytes.NewReader(raw), fhir.Options{File: f.Key, Validation: fhir.ValidateJSON}).Next()
	if err != nil || line.Problem != "" || line.ID != e.ID || line.ResourceType != e.Type {
		return false, nil // not the line indexed, or a bad line: the runs quarantine it
	}
	r := envelope.Resource{ResourceType: line.ResourceType, ID: line.ID, VersionID: line.VersionID, LastUpdated: line.LastUpdated, Raw: line.Raw}
	if _, err := em.Emit(ctx, r, nil); err != nil {
		var tooLarge *publish.EntryTooLargeError
		if errors.As(err, &tooLarge) {
			return false, nil
		}
		return false, fmt.Errorf("repair: %w", err)
	}
	return true, nil
}

// loadStore reads partition p of the store index: every batch's sorted run.
func (h *Handler) loadStore(ctx context.Context, runID string, p int) ([]delivered.Entry, []delivered.FileRef, error) {
	keys, err := h.listKeys(ctx, storeRunPrefix(runID, p))
	if err != nil {
		return nil, nil, err
	}
	var es []delivered.Entry
	var files []delivered.FileRef
	for _, k := range keys {
		base := len(files)
		err := h.read(ctx, k, func(f delivered.FileRef) { files = append(files, f) }, func(e delivered.Entry) error {
			e.File += base
			es = append(es, e)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	delivered.SortEntries(es)
	return delivered.Reduce(es), files, nil
}
