// Package delivered is the index of resource versions: what consumers were
// told (the delivered index, written by every path that publishes: the
// window's prepare-change, its delete scan, the reconciliation) and what a
// full export holds (the reconciliation's store index). It holds the index
// entries, their partitioning, order and gzip-compressed TSV form, and the
// keys of the delivered-index objects. It is a leaf: the 5-minute path and
// the daily reconciliation both import it, neither imports the other.
// docs/RECONCILE.md describes the format.
package delivered

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Entry is one line of an index: a resource version. In the delivered
// index Deleted marks a published delete (the D4 "D" column). In the store
// index File and Offset/Length locate the version's line in the export
// (File is an index into the run's file table), so a repair can re-read it.
type Entry struct {
	Type, ID, VersionID, LastUpdated string
	Deleted                          bool
	File                             int
	Offset, Length                   int64
}

// Partition returns the partition of a resource among n: an FNV-1a hash of
// "type/id" modulo n. Every index uses it, so one partition of the store
// index meets the same partition of the delivered index.
func Partition(resourceType, id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(resourceType))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// CompareKey orders entries by resource type, then id (byte order).
func CompareKey(a, b *Entry) int {
	if c := strings.Compare(a.Type, b.Type); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// SortEntries sorts entries by key and, within a key, newest first (Newer),
// so Reduce keeps the first of each key.
func SortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int {
		if c := CompareKey(&a, &b); c != 0 {
			return c
		}
		switch {
		case Newer(a, b):
			return -1
		case Newer(b, a):
			return 1
		}
		return 0
	})
}

// Reduce keeps the newest entry of each key of sorted es (sorted by
// SortEntries), in place, and returns the shortened slice.
func Reduce(es []Entry) []Entry {
	out := es[:0]
	for i := range es {
		if len(out) > 0 && CompareKey(&out[len(out)-1], &es[i]) == 0 {
			continue
		}
		out = append(out, es[i])
	}
	clear(es[len(out):])
	return out[:len(out):len(out)]
}

// Newer reports whether a is a later state of the resource than b: a later
// lastUpdated; at the same instant a delete beats an upsert, then a higher
// version (numerically when both are numbers, else in byte order).
func Newer(a, b Entry) bool {
	ta, errA := envelope.ParseTime(a.LastUpdated)
	tb, errB := envelope.ParseTime(b.LastUpdated)
	switch {
	case errA == nil && errB == nil:
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
	case errA == nil:
		return true // a time beats an unreadable one
	case errB == nil:
		return false
	default:
		if c := strings.Compare(a.LastUpdated, b.LastUpdated); c != 0 {
			return c > 0
		}
	}
	if a.Deleted != b.Deleted {
		return a.Deleted
	}
	return compareVersion(a.VersionID, b.VersionID) > 0
}

// compareVersion compares version ids numerically when both are numbers.
func compareVersion(a, b string) int {
	na, errA := strconv.ParseUint(a, 10, 64)
	nb, errB := strconv.ParseUint(b, 10, 64)
	if errA == nil && errB == nil {
		switch {
		case na < nb:
			return -1
		case na > nb:
			return 1
		}
		return 0
	}
	return strings.Compare(a, b)
}

// lastUpdatedAt parses an entry's lastUpdated.
// LastUpdatedAt parses the entry's lastUpdated.
func (e Entry) LastUpdatedAt() (time.Time, error) { return envelope.ParseTime(e.LastUpdated) }

// ErrBadField: a field holds a tab or a line break, which the text form cannot carry.
var ErrBadField = errors.New("delivered: index field holds a tab or line break")

func clean(s string) bool { return !strings.ContainsAny(s, "\t\r\n") }

// AppendLine appends e's index line: "type\tid\tversionId\tlastUpdated",
// then "\tD" for a delete (the D4 delivered-index form) and, when
// withLocation, "\t{D or empty}\tfile\toffset\tlength" (the store runs).
func AppendLine(dst []byte, e Entry, withLocation bool) ([]byte, error) {
	if e.Type == "" || e.ID == "" || !clean(e.Type) || !clean(e.ID) || !clean(e.VersionID) || !clean(e.LastUpdated) {
		return dst, ErrBadField
	}
	dst = append(dst, e.Type...)
	dst = append(dst, '\t')
	dst = append(dst, e.ID...)
	dst = append(dst, '\t')
	dst = append(dst, e.VersionID...)
	dst = append(dst, '\t')
	dst = append(dst, e.LastUpdated...)
	if withLocation {
		dst = append(dst, '\t')
		if e.Deleted {
			dst = append(dst, 'D')
		}
		dst = append(dst, '\t')
		dst = strconv.AppendInt(dst, int64(e.File), 10)
		dst = append(dst, '\t')
		dst = strconv.AppendInt(dst, e.Offset, 10)
		dst = append(dst, '\t')
		dst = strconv.AppendInt(dst, e.Length, 10)
	} else if e.Deleted {
		dst = append(dst, "\tD"...)
	}
	return append(dst, '\n'), nil
}

// ParseLine reads one index line (either form, without its newline).
func ParseLine(line string) (Entry, error) {
	f := strings.Split(line, "\t")
	if len(f) < 4 || f[0] == "" || f[1] == "" {
		return Entry{}, fmt.Errorf("delivered: index line has %d fields, want at least type, id, versionId, lastUpdated", len(f))
	}
	e := Entry{Type: f[0], ID: f[1], VersionID: f[2], LastUpdated: f[3]}
	switch len(f) {
	case 4:
	case 5:
		if f[4] != "D" {
			return Entry{}, errors.New("delivered: index line's 5th field is not D")
		}
		e.Deleted = true
	case 8:
		e.Deleted = f[4] == "D"
		file, err1 := strconv.Atoi(f[5])
		off, err2 := strconv.ParseInt(f[6], 10, 64)
		n, err3 := strconv.ParseInt(f[7], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil || file < 0 || off < 0 || n < 0 {
			return Entry{}, errors.New("delivered: index line's location is not three counts")
		}
		e.File, e.Offset, e.Length = file, off, n
	default:
		return Entry{}, fmt.Errorf("delivered: index line has %d fields, want 4, 5 or 8", len(f))
	}
	return e, nil
}

// FileHeader is the prefix of a store run's file-table line:
// "#file\t{n}\t{bucket}\t{key}".
const FileHeader = "#file"

// FileRef is an export file a store run refers to.
type FileRef struct{ Bucket, Key string }

// Writer writes index lines, gzip-compressed.
type Writer struct {
	zw       *gzip.Writer
	buf      []byte
	location bool
	n        int64
}

// NewWriter returns a writer of index lines to w; withLocation writes the
// store-run form.
func NewWriter(w io.Writer, withLocation bool) *Writer {
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	return &Writer{zw: zw, location: withLocation}
}

// Files writes a store run's file table; call it before any entry.
func (w *Writer) Files(files []FileRef) error {
	for i, f := range files {
		if !clean(f.Bucket) || !clean(f.Key) {
			return ErrBadField
		}
		if _, err := fmt.Fprintf(w.zw, "%s\t%d\t%s\t%s\n", FileHeader, i, f.Bucket, f.Key); err != nil {
			return err
		}
	}
	return nil
}

// Write writes one entry.
func (w *Writer) Write(e Entry) error {
	var err error
	w.buf, err = AppendLine(w.buf[:0], e, w.location)
	if err != nil {
		return err
	}
	w.n++
	_, err = w.zw.Write(w.buf)
	return err
}

// Count returns the entries written.
func (w *Writer) Count() int64 { return w.n }

// Close flushes the compressed stream (not the underlying writer).
func (w *Writer) Close() error { return w.zw.Close() }

// Encode returns entries as one gzip-compressed index without locations:
// the body of a delivered-index object, an overlap object or a fast-path
// record item. Errors name the entry's position, never its values.
func Encode(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	w := NewWriter(&buf, false)
	for i, e := range entries {
		if err := w.Write(e); err != nil {
			return nil, fmt.Errorf("index entry %d: %w", i+1, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	return buf.Bytes(), nil
}

// ReadAll reads an index object (gzip or plain text) and calls fn for each
// entry; a store run's file table goes to files (nil ignores it).
func ReadAll(r io.Reader, files func(FileRef), fn func(Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(2)
	var src io.Reader = br
	if err == nil && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("delivered: read index: %w", err)
		}
		defer zr.Close()
		src = zr
	}
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, FileHeader+"\t") {
			f := strings.Split(line, "\t")
			if len(f) != 4 {
				return fmt.Errorf("delivered: index line %d: bad file table line", n)
			}
			if files != nil {
				files(FileRef{Bucket: f[2], Key: f[3]})
			}
			continue
		}
		e, err := ParseLine(line)
		if err != nil {
			return fmt.Errorf("index line %d: %w", n, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("delivered: read index: %w", err)
	}
	return nil
}

// DeliveredPrefix is where the delivered-index objects live.
const DeliveredPrefix = "delivered/"

// DayLayout names a day's folder under DeliveredPrefix.
const DayLayout = "2006-01-02"

// DeliveredKey is a delivered-index object written on day (UTC) by run runID
// for one export file (or another source named by fileKey):
// "delivered/{YYYY-MM-DD}/{runId}/{sha-256 of fileKey, hex}.tsv.gz". The day
// lets a reader list only the days since it last read (DayPrefix); a retry
// on another day writes a second object with the same entries, which is
// harmless (the index is a union).
func DeliveredKey(day time.Time, runID, fileKey string) string {
	sum := sha256.Sum256([]byte(fileKey))
	return DayPrefix(day) + runID + "/" + hex.EncodeToString(sum[:]) + ".tsv.gz"
}

// DayPrefix is the folder of the delivered-index objects written on day (UTC).
func DayPrefix(day time.Time) string {
	return DeliveredPrefix + day.UTC().Format(DayLayout) + "/"
}

// OverlapPrefix is where each window keeps the versions it published in the
// last overlap of its checkpoint window: the lines the next window's export
// reads again (docs/RUNLOCK.md, "Overlap"). The next window skips them as
// repeats.
const OverlapPrefix = "overlap/"

// OverlapDir is the folder of the overlap objects of the windows whose
// checkpoint window ends at until: "overlap/{until}/", until in RFC 3339
// with milliseconds — the next window's since, as stored.
func OverlapDir(until time.Time) string {
	return OverlapPrefix + envelope.FormatTime(until) + "/"
}

// OverlapKey is the overlap object one invocation of run runID writes for
// the batch named by batchKey (its first file's key):
// "overlap/{until}/{runId}/{sha-256 of batchKey, hex}.tsv.gz". A retried
// invocation rewrites the same object.
func OverlapKey(until time.Time, runID, batchKey string) string {
	sum := sha256.Sum256([]byte(batchKey))
	return OverlapDir(until) + runID + "/" + hex.EncodeToString(sum[:]) + ".tsv.gz"
}

// Version names one resource version: what an eventId names.
type Version struct{ Type, ID, VersionID string }

// Set is a set of resource versions. The zero value is empty and ready.
type Set struct{ m map[Version]struct{} }

// Add puts e's version in the set.
func (s *Set) Add(e Entry) {
	if s.m == nil {
		s.m = map[Version]struct{}{}
	}
	s.m[Version{e.Type, e.ID, e.VersionID}] = struct{}{}
}

// Has reports whether v is in the set.
func (s *Set) Has(v Version) bool {
	_, ok := s.m[v]
	return ok
}

// Len is the number of versions in the set.
func (s *Set) Len() int { return len(s.m) }
