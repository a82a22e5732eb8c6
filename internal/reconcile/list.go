package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// listState is the list loop's progress, kept in S3 between invocations.
type listState struct {
	Leaf   int    `json:"leaf"`   // the leaf being listed
	Next   string `json:"next"`   // its next page ("" = its first)
	Seq    int    `json:"seq"`    // pages written so far
	Listed int64  `json:"listed"` // resources listed
	Done   bool   `json:"done"`
}

// list reads the store's resources in each leaf range, page by page
// (search with strong consistency; slower when HealthLake throttles the
// searches, and a page still throttled after the client's retries is read
// again at the slower pace until the step's deadline), writes each page as an NDJSON object and
// the pages' entries, partitioned, as store runs whose lines locate each
// resource in its page (the compare step reads a repair back from it): one
// store run per partition per invocation, whatever the pages.
func (h *Handler) list(parent context.Context, in Input) (Done, error) {
	pl := in.Plan
	ctx, cancel := h.deadline(parent)
	defer cancel()
	leaves, err := h.leaves(parent, pl.RunID)
	if err != nil {
		return Done{}, fmt.Errorf("list: %w", err)
	}
	var st listState
	if err := h.getJSON(parent, listStateKey(pl.RunID), &st); err != nil {
		st = listState{}
	}
	run := &storeRuns{first: st.Seq, parts: map[int][]delivered.Entry{}}
	searches := h.newReadPace(0) // searches have their own quota: unpaced until throttled
	for st.Leaf < len(leaves) && ctx.Err() == nil {
		r := leaves[st.Leaf]
		var page []json.RawMessage
		var next string
		err := searches.Do(ctx, -1, func(ctx context.Context) (err error) {
			page, next, err = h.hl.SearchPage(ctx, pl.Export.DatastoreID, r.Type, lower(r.After), r.Until, h.cfg.PageSize, st.Next)
			return err
		})
		if err != nil {
			if ctx.Err() != nil && parent.Err() == nil {
				break
			}
			return Done{}, fmt.Errorf("list: %w", err)
		}
		n, err := h.writePage(parent, pl, st.Seq, r, page, run)
		if err != nil {
			return Done{}, fmt.Errorf("list: %w", err)
		}
		st.Seq++
		st.Listed += n
		st.Next = next
		if next == "" {
			st.Leaf++
		}
	}
	// The store runs before the state: a crash in between lists the same
	// pages again under the same keys.
	if err := h.writeStoreRuns(parent, pl, run); err != nil {
		return Done{}, fmt.Errorf("list: %w", err)
	}
	st.Done = st.Leaf >= len(leaves)
	if err := h.putJSON(parent, listStateKey(pl.RunID), st); err != nil {
		return Done{}, fmt.Errorf("list: %w", err)
	}
	return Done{Done: st.Done}, nil
}

// storeRuns collects one list invocation's entries by partition; File in
// each entry indexes files.
type storeRuns struct {
	first int // the first page's seq: the runs' batch number
	files []delivered.FileRef
	parts map[int][]delivered.Entry
}

// writePage writes one search page: its resources, one per line, to
// listedKey(seq), and adds the entries of those in the leaf r to the
// invocation's store runs. It returns the resources indexed.
func (h *Handler) writePage(ctx context.Context, pl *Plan, seq int, r Range, page []json.RawMessage, run *storeRuns) (int64, error) {
	var nd bytes.Buffer
	for i, raw := range page {
		start := nd.Len()
		if err := json.Compact(&nd, raw); err != nil {
			nd.Truncate(start)
			return 0, fmt.Errorf("search page %d of %s, entry %d: not a JSON object", seq, r.Type, i+1)
		}
		nd.WriteByte('\n')
	}
	key := listedKey(pl.RunID, seq)
	if err := h.put(ctx, key, nd.Bytes()); err != nil {
		return 0, err
	}
	file := len(run.files)
	run.files = append(run.files, delivered.FileRef{Bucket: h.cfg.Bucket, Key: key})
	var n int64
	rd := fhir.NewReader(bytes.NewReader(nd.Bytes()), fhir.Options{File: key, Validation: fhir.ValidateNone})
	for {
		line, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("search page %d of %s: %w", seq, r.Type, err)
		}
		if line.ResourceType != r.Type || line.ID == "" {
			return 0, fmt.Errorf("search page %d of %s: line %d is not a %s with an id", seq, r.Type, line.Number, r.Type)
		}
		t, err := envelope.ParseTime(line.LastUpdated)
		if err != nil || !r.Contains(t) {
			continue // changed since it was counted: a later window's, or another range's
		}
		v := line.VersionID
		if v == "" {
			v = envelope.ContentVersion(line.Raw)
		}
		e := delivered.Entry{Type: line.ResourceType, ID: line.ID, VersionID: v, LastUpdated: line.LastUpdated,
			File: file, Offset: line.Offset, Length: int64(len(line.Raw))}
		p := delivered.Partition(e.Type, e.ID, pl.Partitions)
		run.parts[p] = append(run.parts[p], e)
		n++
	}
	return n, nil
}

// writeStoreRuns writes the invocation's store runs, one per partition.
func (h *Handler) writeStoreRuns(ctx context.Context, pl *Plan, run *storeRuns) error {
	for p, es := range run.parts {
		delivered.SortEntries(es)
		var buf bytes.Buffer
		w := delivered.NewWriter(&buf, true)
		if err := w.Files(run.files); err != nil {
			return err
		}
		for _, e := range es {
			if err := w.Write(e); err != nil {
				return err
			}
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := h.put(ctx, storeRunKey(pl.RunID, p, run.first), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
