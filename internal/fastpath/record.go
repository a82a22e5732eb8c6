package fastpath

import "github.com/healthlake-cdc/healthlake-cdc/internal/delivered"

// record is what one invocation published, in the order EventBridge
// accepted it: the entries Handler.record writes (internal/fastrecord).
type record struct {
	entries []delivered.Entry
}

// add keeps one accepted version.
func (r *record) add(e delivered.Entry) { r.entries = append(r.entries, e) }
