package replica

import (
	"strconv"
	"strings"
	"time"
)

// Version is the state of one resource a replica last applied: the version
// of an upsert or of a delete (a tombstone). Keeping one per resource, not
// every eventId, is the replica's deduplication set: it grows with the
// number of resources, not of events.
type Version struct {
	// EventID is the detail's eventId ({type}/{id}/_history/{versionId}).
	EventID string `json:"eventId"`
	// VersionID and LastUpdated are the detail's.
	VersionID   string    `json:"versionId"`
	LastUpdated time.Time `json:"lastUpdated"`
	// Deleted marks a tombstone: the resource was deleted at this version.
	Deleted bool `json:"deleted,omitempty"`
}

// Compare orders two states of the same resource: -1 when v is older than w,
// +1 when newer, 0 when they are the same state. The order is the
// pipeline's: a later lastUpdated is newer; at the same instant a delete is
// newer than an upsert, then the higher versionId (numerically when both are
// numbers, as HealthLake's are; a hard delete's "{n}-deleted" ranks right
// after n), then the versionId's text, so that every replica settles on the
// same state whatever order deliveries arrive in.
func (v Version) Compare(w Version) int {
	if c := v.LastUpdated.Compare(w.LastUpdated); c != 0 {
		return c
	}
	if v.Deleted != w.Deleted {
		if v.Deleted {
			return 1
		}
		return -1
	}
	return compareVersionIDs(v.VersionID, w.VersionID)
}

// compareVersionIDs compares numeric versionIds (with an optional
// "-deleted" suffix) by number, anything else by text.
func compareVersionIDs(a, b string) int {
	an, as, aok := numericVersion(a)
	bn, bs, bok := numericVersion(b)
	if aok && bok {
		switch {
		case an < bn:
			return -1
		case an > bn:
			return 1
		case as != bs:
			if as {
				return 1
			}
			return -1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// numericVersion parses "n" or "n-deleted".
func numericVersion(s string) (n uint64, deletedSuffix, ok bool) {
	base, suffix := strings.CutSuffix(s, "-deleted")
	n, err := strconv.ParseUint(base, 10, 64)
	if err != nil {
		return 0, false, false
	}
	return n, suffix, true
}
