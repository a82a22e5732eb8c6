package runlock

import (
	"encoding/json"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// jsonTime formats t like every time of the contract (RFC 3339 UTC with
// milliseconds), "" for the zero time.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return envelope.FormatTime(t)
}

// MarshalJSON encodes the record with times in the contract's format.
func (h HistoryRecord) MarshalJSON() ([]byte, error) {
	var ew *envelope.Window
	if !h.ExportWindow.Since.IsZero() {
		ew = &h.ExportWindow
	}
	return json.Marshal(struct {
		RunID        string           `json:"runId"`
		ExecutionID  string           `json:"executionId"`
		StartTime    string           `json:"startTime"`
		AcquiredAt   string           `json:"acquiredAt"`
		EndedAt      string           `json:"endedAt,omitempty"`
		Window       envelope.Window  `json:"window"`
		Empty        bool             `json:"empty"`
		Outcome      Outcome          `json:"outcome"`
		Reason       string           `json:"reason,omitempty"`
		ExportJobID  string           `json:"exportJobId,omitempty"`
		Counts       Counts           `json:"counts"`
		TookOverFrom string           `json:"tookOverFrom,omitempty"`
		ExportWindow *envelope.Window `json:"exportWindow,omitempty"`
		Part         int              `json:"part,omitempty"`
		Parts        int              `json:"parts,omitempty"`
	}{h.RunID, h.ExecutionID, jsonTime(h.StartTime), jsonTime(h.AcquiredAt), jsonTime(h.EndedAt), h.Window, h.Empty,
		h.Outcome, h.Reason, h.ExportJobID, h.Counts, h.TookOverFrom, ew, h.Part, h.Parts})
}

// MarshalJSON encodes the record with times in the contract's format.
func (r ReplayRecord) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		At     string `json:"at"`
		By     string `json:"by"`
		From   string `json:"from,omitempty"`
		To     string `json:"to"`
		Reason string `json:"reason,omitempty"`
	}{jsonTime(r.At), r.By, jsonTime(r.From), jsonTime(r.To), r.Reason})
}

// MarshalJSON encodes the record with times in the contract's format.
func (l LastRun) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		RunID   string  `json:"runId"`
		Outcome Outcome `json:"outcome"`
		Reason  string  `json:"reason,omitempty"`
		EndedAt string  `json:"endedAt,omitempty"`
	}{l.RunID, l.Outcome, l.Reason, jsonTime(l.EndedAt)})
}

// MarshalJSON encodes the pending export with times in the contract's format.
func (p Pending) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Window   envelope.Window `json:"window"`
		Next     any             `json:"next"`
		StoredAt string          `json:"storedAt,omitempty"`
		StoredBy string          `json:"storedBy,omitempty"`
	}{p.Window, p.Next, jsonTime(p.StoredAt), p.StoredBy})
}
