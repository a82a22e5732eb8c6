package reconcile

import (
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// Kind is what the comparison decided for one resource.
type Kind int

// The decisions of Diff.
const (
	// KindUnchanged: the store's version is the one delivered.
	KindUnchanged Kind = iota
	// KindRepair: the store holds a version with lastUpdated at or before
	// the checkpoint that was never delivered: publish it again.
	KindRepair
	// KindDelete: delivered and live, absent from the store: publish a delete.
	KindDelete
	// KindPending: the store holds an undelivered version after the
	// checkpoint: the next runs deliver it, nothing to do.
	KindPending
	// KindAhead: consumers were told of a later state than the export
	// shows (a change the export does not see yet): nothing to do.
	KindAhead
	// KindGone: delivered as deleted and absent from the store.
	KindGone
)

// String names the kind.
func (k Kind) String() string {
	return [...]string{"unchanged", "repair", "delete", "pending", "ahead", "gone"}[k]
}

// Decision is the outcome for one resource: its store entry (nil when the
// export does not hold it) and its delivered entry (nil when never delivered).
type Decision struct {
	Kind         Kind
	Store, Known *delivered.Entry
}

// Stats count the decisions of one comparison.
type Stats struct {
	Store     int64 `json:"store"`
	Known     int64 `json:"known"`
	Unchanged int64 `json:"unchanged"`
	Repairs   int64 `json:"repairs"`
	Deletes   int64 `json:"deletes"`
	Pending   int64 `json:"pending"`
	Ahead     int64 `json:"ahead"`
	Gone      int64 `json:"gone"`
}

// Add sums s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{Store: s.Store + o.Store, Known: s.Known + o.Known, Unchanged: s.Unchanged + o.Unchanged,
		Repairs: s.Repairs + o.Repairs, Deletes: s.Deletes + o.Deletes, Pending: s.Pending + o.Pending,
		Ahead: s.Ahead + o.Ahead, Gone: s.Gone + o.Gone}
}

func (s *Stats) count(k Kind) {
	switch k {
	case KindUnchanged:
		s.Unchanged++
	case KindRepair:
		s.Repairs++
	case KindDelete:
		s.Deletes++
	case KindPending:
		s.Pending++
	case KindAhead:
		s.Ahead++
	case KindGone:
		s.Gone++
	}
}

// Diff merges store (the export's entries) and known (the delivered
// index), both sorted by key with one entry per key (SortEntries, Reduce),
// and calls fn once per resource of either, in key order. checkpoint is the
// checkpoint the reconciliation holds: a version at or before it should have
// been delivered, a later one is the next runs' work. It stops at fn's
// first error. Memory: none beyond the two slices.
func Diff(store, known []delivered.Entry, checkpoint time.Time, fn func(Decision) error) (Stats, error) {
	var st Stats
	st.Store, st.Known = int64(len(store)), int64(len(known))
	i, j := 0, 0
	for i < len(store) || j < len(known) {
		var d Decision
		switch {
		case j >= len(known) || i < len(store) && delivered.CompareKey(&store[i], &known[j]) < 0:
			d = Decision{Store: &store[i], Kind: due(store[i], checkpoint)}
			i++
		case i >= len(store) || delivered.CompareKey(&store[i], &known[j]) > 0:
			d = Decision{Known: &known[j], Kind: KindDelete}
			if known[j].Deleted {
				d.Kind = KindGone
			}
			j++
		default:
			s, k := &store[i], &known[j]
			d = Decision{Store: s, Known: k}
			switch {
			case !k.Deleted && s.VersionID == k.VersionID:
				d.Kind = KindUnchanged
			case delivered.Newer(*s, *k):
				d.Kind = due(*s, checkpoint) // a later version, or a re-creation after a delete
			default:
				d.Kind = KindAhead
			}
			i++
			j++
		}
		st.count(d.Kind)
		if err := fn(d); err != nil {
			return st, err
		}
	}
	return st, nil
}

// due is KindRepair for a version at or before the checkpoint (or one whose
// time cannot be read: it is in the store and was never delivered), else
// KindPending.
func due(e delivered.Entry, checkpoint time.Time) Kind {
	t, err := e.LastUpdatedAt()
	if err == nil && t.After(checkpoint) {
		return KindPending
	}
	return KindRepair
}
