// Package change decides the fate of each line of an export file: it becomes
// an event, is skipped because its meta.lastUpdated lies outside the run's
// window, is dropped by the resource-type filter, is skipped as a repeat of
// a version the previous window already published (KindRepeat, decided by
// prepare-change), is skipped because the Subscriptions fast path already
// published its version (KindFastPath, decided by prepare-change), or is
// quarantined with a reason. Every line ends as exactly one of these.
package change

import (
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// Kind is the outcome of one line.
type Kind int

const (
	// KindEvent: the line is published as an event.
	KindEvent Kind = iota
	// KindOutsideWindow: meta.lastUpdated is not in (since, until]; the line
	// belongs to another window and is skipped.
	KindOutsideWindow
	// KindFiltered: the resource type is excluded by configuration.
	KindFiltered
	// KindQuarantined: the line cannot become an event; it is kept with a reason.
	KindQuarantined
	// KindRepeat: the line's version lies in the run's overlap and the
	// previous window already published it; it is skipped, not sent again.
	KindRepeat
	// KindFastPath: the Subscriptions fast path already published the
	// line's version (docs/FASTPATH.md); it is skipped, not sent again.
	KindFastPath
)

// String returns the kind's name as used in counts: "event", "outsideWindow",
// "filtered", "quarantined", "overlapSkipped" or "fastPathSkipped".
func (k Kind) String() string {
	switch k {
	case KindEvent:
		return "event"
	case KindOutsideWindow:
		return "outsideWindow"
	case KindFiltered:
		return "filtered"
	case KindQuarantined:
		return "quarantined"
	case KindRepeat:
		return "overlapSkipped"
	case KindFastPath:
		return "fastPathSkipped"
	}
	return "unknown"
}

// Quarantine reasons Classify adds to those of the reader. They name fields,
// never values.
const (
	ReasonLastUpdatedMissing = "meta.lastUpdated missing"
	ReasonLastUpdatedInvalid = "meta.lastUpdated not a valid instant"
	ReasonTypeInvalid        = "resourceType not a valid FHIR resource type name"
	ReasonIDInvalid          = "id does not match the FHIR id pattern [A-Za-z0-9.-]{1,64}"
	ReasonVersionIDInvalid   = "meta.versionId does not match the FHIR id pattern [A-Za-z0-9.-]{1,64}"
	// ReasonTrailingData quarantines a line with data after its top-level
	// object (seen at validation level none, fhir.Line.TrailingData): copied
	// into a detail, that data would add fields to the detail itself.
	ReasonTrailingData = "data after the top-level object: the line is not one JSON object"
)

// Filter selects resource types. An empty Include admits every type; Exclude
// wins over Include.
type Filter struct {
	Include []string
	Exclude []string
}

// Allows reports whether resources of typ pass the filter.
func (f Filter) Allows(typ string) bool {
	for _, t := range f.Exclude {
		if t == typ {
			return false
		}
	}
	if len(f.Include) == 0 {
		return true
	}
	for _, t := range f.Include {
		if t == typ {
			return true
		}
	}
	return false
}

// ParseTypeList splits a comma-separated list of resource types
// ("Patient, Observation"), trimming spaces and dropping empty entries and
// duplicates; order is kept. It returns nil for an empty list.
func ParseTypeList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		dup := false
		for _, q := range out {
			if q == p {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, p)
		}
	}
	return out
}

// Classifier applies a run's window and type filter to lines.
type Classifier struct {
	Window envelope.Window
	Filter Filter
}

// Classify decides the fate of one reader line and, for a quarantined line,
// gives the reason. In order: a line with a Problem is quarantined with it; a
// missing or unparseable meta.lastUpdated, or a resourceType, id or
// meta.versionId unusable in an event id, or data after the top-level object
// (fhir.Line.TrailingData), quarantines the line; a lastUpdated
// outside the window gives KindOutsideWindow; a type the filter excludes gives
// KindFiltered; anything else is KindEvent.
func (c Classifier) Classify(l *fhir.Line) (Kind, string) {
	if l.Problem != "" {
		return KindQuarantined, l.Problem
	}
	if l.LastUpdated == "" {
		return KindQuarantined, ReasonLastUpdatedMissing
	}
	t, err := envelope.ParseTime(l.LastUpdated)
	if err != nil {
		return KindQuarantined, ReasonLastUpdatedInvalid
	}
	if !IsTypeName(l.ResourceType) {
		return KindQuarantined, ReasonTypeInvalid
	}
	if !IsID(l.ID) {
		return KindQuarantined, ReasonIDInvalid
	}
	if l.VersionID != "" && !IsID(l.VersionID) {
		return KindQuarantined, ReasonVersionIDInvalid
	}
	if l.TrailingData {
		return KindQuarantined, ReasonTrailingData
	}
	if !c.Window.Contains(t) {
		return KindOutsideWindow, ""
	}
	if !c.Filter.Allows(l.ResourceType) {
		return KindFiltered, ""
	}
	return KindEvent, ""
}

// IsID reports whether s matches the FHIR id datatype [A-Za-z0-9\-\.]{1,64},
// which makes it safe in event ids and S3 keys.
func IsID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// IsTypeName reports whether s has the shape of a FHIR resource type name:
// an upper-case ASCII letter followed by up to 63 ASCII letters.
func IsTypeName(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Counts tallies the outcomes of the lines of one file. Lines counts
// non-blank lines (each ends as exactly one of Events, OutsideWindow, OverlapSkipped,
// FastPathSkipped, Filtered, Quarantined); Blank counts blank lines, which carry nothing.
type Counts struct {
	Lines         int64 `json:"lines"`
	Events        int64 `json:"events"`
	OutsideWindow int64 `json:"outsideWindow"`
	Filtered      int64 `json:"filtered"`
	Quarantined   int64 `json:"quarantined"`
	// OverlapSkipped counts KindRepeat lines.
	OverlapSkipped int64 `json:"overlapSkipped"`
	// FastPathSkipped counts KindFastPath lines.
	FastPathSkipped int64 `json:"fastPathSkipped"`
	Blank           int64 `json:"blank"`
}

// Add counts one non-blank line of kind k.
func (c *Counts) Add(k Kind) {
	c.Lines++
	switch k {
	case KindEvent:
		c.Events++
	case KindOutsideWindow:
		c.OutsideWindow++
	case KindFiltered:
		c.Filtered++
	case KindQuarantined:
		c.Quarantined++
	case KindRepeat:
		c.OverlapSkipped++
	case KindFastPath:
		c.FastPathSkipped++
	}
}

// Balanced reports whether every counted line ended as exactly one outcome.
func (c Counts) Balanced() bool {
	return c.Lines == c.Events+c.OutsideWindow+c.Filtered+c.Quarantined+c.OverlapSkipped+c.FastPathSkipped
}
