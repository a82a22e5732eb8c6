package manifest

import (
	"errors"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Export names one manifest part of a finished export job: the task output
// of the export wait (check-export's SendTaskSuccess) and the "reuse" object
// run-lock hands a run that delivers a later part of the same export
// (contract C2). The parts live under PartKey(ManifestRunID, part).
type Export struct {
	Bucket string `json:"bucket"`
	// ManifestKey is the key of part Part.
	ManifestKey string `json:"manifestKey"`
	// ManifestRunID is the run whose prefix holds the parts.
	ManifestRunID string `json:"manifestRunId"`
	// Part is 0-based; Parts ≥ 1.
	Part  int `json:"part"`
	Parts int `json:"parts"`
	// PartFiles is the number of files in each part.
	PartFiles []int `json:"partFiles"`
	// PartBatches, when set, is the number of batches in each part (an
	// addition to C2 so that a reuse object can carry batchCount).
	PartBatches []int `json:"partBatches,omitempty"`
	// FileCount and BatchCount count the files and batches of part Part.
	FileCount   int    `json:"fileCount"`
	BatchCount  int    `json:"batchCount"`
	JobID       string `json:"jobId"`
	DatastoreID string `json:"datastoreId"`
	// Window is the export window the job was started with.
	Window              envelope.Window `json:"window"`
	CompletedWithErrors bool            `json:"completedWithErrors"`
}

// Last reports whether Part is the export's last part.
func (e Export) Last() bool { return e.Part+1 >= e.Parts }

// Validate checks the part numbering: 0 ≤ Part < Parts, one PartFiles entry
// per part, FileCount = PartFiles[Part], ManifestKey = PartKey(ManifestRunID, Part).
func (e Export) Validate() error {
	switch {
	case e.Parts < 1:
		return fmt.Errorf("export manifest: parts = %d, want ≥ 1", e.Parts)
	case e.Part < 0 || e.Part >= e.Parts:
		return fmt.Errorf("export manifest: part %d is not in [0, %d)", e.Part, e.Parts)
	case len(e.PartFiles) != e.Parts:
		return fmt.Errorf("export manifest: %d partFiles entries for %d parts", len(e.PartFiles), e.Parts)
	case e.PartFiles[e.Part] != e.FileCount:
		return fmt.Errorf("export manifest: fileCount %d, but part %d has %d files", e.FileCount, e.Part, e.PartFiles[e.Part])
	case len(e.PartBatches) != 0 && len(e.PartBatches) != e.Parts:
		return fmt.Errorf("export manifest: %d partBatches entries for %d parts", len(e.PartBatches), e.Parts)
	case e.ManifestRunID == "" || e.Bucket == "":
		return errors.New("export manifest: bucket and manifestRunId are required")
	case e.ManifestKey != PartKey(e.ManifestRunID, e.Part):
		return fmt.Errorf("export manifest: manifestKey is not the key of part %d of run %s", e.Part, e.ManifestRunID)
	}
	return nil
}

// Next returns the Export of the part after e, with BatchCount from
// PartBatches when known (0 otherwise). ok is false after the last part.
func (e Export) Next() (Export, bool) {
	if e.Last() || len(e.PartFiles) != e.Parts {
		return Export{}, false
	}
	n := e
	n.Part = e.Part + 1
	n.ManifestKey = PartKey(e.ManifestRunID, n.Part)
	n.FileCount = e.PartFiles[n.Part]
	n.BatchCount = 0
	if len(e.PartBatches) == e.Parts {
		n.BatchCount = e.PartBatches[n.Part]
	}
	n.PartFiles = append([]int(nil), e.PartFiles...)
	n.PartBatches = append([]int(nil), e.PartBatches...)
	return n, true
}
