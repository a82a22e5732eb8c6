// Package manifest defines the manifest of an export: the NDJSON files a
// finished export wrote, grouped into the batches that one prepare-change
// invocation each processes. check-export writes it to S3 as a JSON array of
// Batch; the Distributed Map reads it with ItemReader and gives each batch,
// with the run's context, to one prepare-change invocation.
package manifest

import (
	"fmt"
	"strconv"
)

// File is one NDJSON object of an export, one resource type, or one byte
// range of it: Plan cuts a file larger than a batch may be into ranges
// [Start, End) (End 0: to the end of the object), each the lines that
// begin in it (fhir.Options.Start). Bytes is the object's size, or the
// range's; 0 when the size is unknown.
type File struct {
	Bucket       string `json:"bucket"`
	Key          string `json:"key"`
	ResourceType string `json:"resourceType"`
	Bytes        int64  `json:"bytes,omitempty"`
	Start        int64  `json:"start,omitempty"`
	End          int64  `json:"end,omitempty"`
}

// Name names the file, or its range after the first: the key, then
// "@{Start}" when Start > 0. Objects written per file (quarantine, the
// delivered and overlap indexes) are named by it, so that no two ranges of
// one file share one.
func (f File) Name() string {
	if f.Start > 0 {
		return f.Key + "@" + strconv.FormatInt(f.Start, 10)
	}
	return f.Key
}

// Check reports a range that reads nothing or starts before the object.
func (f File) Check() error {
	if f.Start < 0 || f.End < 0 || f.End > 0 && f.End <= f.Start {
		return fmt.Errorf("manifest: file %s has the byte range [%d, %d)", f.Key, f.Start, f.End)
	}
	return nil
}

// Batch is the unit of work of one prepare-change invocation.
type Batch struct {
	Files []File `json:"files"`
	// Bytes is the sum of the files' sizes.
	Bytes int64 `json:"bytes"`
}

// Limits bound a batch by file count and by the sum of file sizes. A value
// ≤ 0 leaves that bound off.
type Limits struct {
	MaxFiles int
	MaxBytes int64
}

// Plan groups files into batches, in the order given, closing a batch when
// one more file would exceed a limit. A file of known size larger than
// MaxBytes is first cut into ranges of MaxBytes (the last to the end of the
// object), so that no batch holds more than MaxBytes of lines to begin
// reading, whatever the size of one export file. The result is never nil,
// and empty for no files.
func Plan(files []File, l Limits) []Batch {
	batches := []Batch{}
	var cur Batch
	for _, f := range cut(files, l.MaxBytes) {
		full := len(cur.Files) > 0 &&
			(l.MaxFiles > 0 && len(cur.Files) >= l.MaxFiles ||
				l.MaxBytes > 0 && cur.Bytes+f.Bytes > l.MaxBytes)
		if full {
			batches = append(batches, cur)
			cur = Batch{}
		}
		cur.Files = append(cur.Files, f)
		cur.Bytes += f.Bytes
	}
	if len(cur.Files) > 0 {
		batches = append(batches, cur)
	}
	return batches
}

// cut returns files with each one larger than maxBytes (> 0) replaced by its
// ranges of maxBytes.
func cut(files []File, maxBytes int64) []File {
	if maxBytes <= 0 {
		return files
	}
	out := make([]File, 0, len(files))
	for _, f := range files {
		if f.Bytes <= maxBytes || f.Start != 0 || f.End != 0 {
			out = append(out, f)
			continue
		}
		for start := int64(0); start < f.Bytes; start += maxBytes {
			r := f
			r.Start, r.End, r.Bytes = start, start+maxBytes, maxBytes
			if r.End >= f.Bytes {
				r.End, r.Bytes = 0, f.Bytes-start
			}
			out = append(out, r)
		}
	}
	return out
}

// FileCount is the number of files over all batches, a file cut into
// ranges counting once per range.
func FileCount(batches []Batch) int {
	n := 0
	for _, b := range batches {
		n += len(b.Files)
	}
	return n
}

// PartKey is the S3 key of part `part` (0-based) of the manifest of run
// runID: "manifests/{runID}/part-{part:05d}.json".
func PartKey(runID string, part int) string {
	return fmt.Sprintf("manifests/%s/part-%05d.json", runID, part)
}

// Split cuts batches, in order, into parts of at most maxBatchesPerPart
// batches each (maxBatchesPerPart ≤ 0: one part). It always returns at least
// one part: no batches give one empty, non-nil part, so an export with no
// changes still writes one manifest part holding [].
func Split(batches []Batch, maxBatchesPerPart int) [][]Batch {
	if maxBatchesPerPart <= 0 || len(batches) <= maxBatchesPerPart {
		part := batches
		if part == nil {
			part = []Batch{}
		}
		return [][]Batch{part}
	}
	parts := make([][]Batch, 0, (len(batches)+maxBatchesPerPart-1)/maxBatchesPerPart)
	for start := 0; start < len(batches); start += maxBatchesPerPart {
		end := min(start+maxBatchesPerPart, len(batches))
		parts = append(parts, batches[start:end:end])
	}
	return parts
}

// PartFiles is the number of files in each part (ranges counted as in
// FileCount).
func PartFiles(parts [][]Batch) []int {
	out := make([]int, len(parts))
	for i, p := range parts {
		out[i] = FileCount(p)
	}
	return out
}
