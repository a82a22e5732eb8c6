// Package fhir reads the NDJSON files of an AWS HealthLake FHIR R4 export as a
// stream: one Line per non-blank line, with the line's top-level resourceType,
// id, meta.versionId and meta.lastUpdated found without decoding the resource,
// and each line checked at one of three Validation levels. A line that cannot
// become an event is never dropped: it is returned with a Problem, a sentence a
// person understands that names byte offsets and sizes but never resource
// content.
//
// Lines: only LF ends a line; a CR right before it (or at the end of the
// stream) is not part of the line, a CR anywhere else is. A UTF-8 byte order
// mark at the very start of the stream is skipped; anywhere else it is an
// error in the line. Lines that are empty or hold only JSON whitespace (space,
// tab, CR) are blank: counted in Stats.Blank and not returned. The last line
// may lack its LF. A line longer than Options.MaxLineBytes (CR and LF not
// counted) is returned without Raw and with a Problem giving its size.
//
// Options.Start and End read one byte range of a file: the lines that begin
// in it, so that a file cut into ranges anywhere is read once, range by range
// (docs/EXPORT.md, "A file larger than a batch").
//
// Memory stays flat whatever the size of the stream: the Reader holds one
// buffer that grows to the longest line it has had to hold, and never beyond
// Options.MaxLineBytes plus two bytes; the rest of a longer line is skipped
// without being held.
//
// At ValidateJSON, each line is checked and its fields found in one
// hand-written pass that allocates only the strings it returns; see
// bench_test.go for its throughput against encoding/json.Valid.
package fhir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// Validation is how strictly a line is checked.
type Validation int

const (
	// ValidateNone only peeks at the line: it must be an object whose
	// resourceType and id are non-empty strings; the rest of the line is not
	// checked.
	ValidateNone Validation = iota
	// ValidateJSON also requires the line to be exactly one valid JSON object
	// (RFC 8259, valid UTF-8) without duplicate top-level keys and nested no
	// deeper than MaxDepth. It is the default for callers.
	ValidateJSON
	// ValidateR4 also decodes the line into the FHIR R4 type its resourceType
	// names (github.com/samply/golang-fhir-models), rejecting unknown types and
	// elements of the wrong shape, and checks that id and meta.versionId follow
	// the R4 id pattern and meta.lastUpdated is an R4 instant.
	ValidateR4
)

// ParseValidation returns the Validation named "none", "json" or "r4" (in any
// case, surrounding spaces ignored); the empty string means ValidateJSON.
func ParseValidation(s string) (Validation, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return ValidateNone, nil
	case "json", "":
		return ValidateJSON, nil
	case "r4":
		return ValidateR4, nil
	}
	return ValidateJSON, fmt.Errorf("fhir: unknown validation level %q, want none, json or r4", s)
}

// String returns the level's name as ParseValidation accepts it.
func (v Validation) String() string {
	switch v {
	case ValidateNone:
		return "none"
	case ValidateJSON:
		return "json"
	case ValidateR4:
		return "r4"
	}
	return fmt.Sprintf("Validation(%d)", int(v))
}

// DefaultMaxLineBytes is the longest line a Reader accepts when
// Options.MaxLineBytes is 0.
const DefaultMaxLineBytes = 32 << 20

// Options configure a Reader.
type Options struct {
	File         string     // name reported in quarantine records (e.g. the S3 key)
	DeclaredType string     // the file's resource type ("" = unknown); a line of another type is quarantined
	MaxLineBytes int        // 0 (or less) = DefaultMaxLineBytes
	Validation   Validation // how strictly each line is checked; the zero value is ValidateNone, callers normally want ValidateJSON

	// Start and End make the Reader read one byte range of a file, so that
	// ranges cut at any offsets read each line of the file exactly once: it
	// returns the lines that begin at an offset in [Start, End) (End ≤ 0: to
	// the end of the stream), each to its end, past End if need be. With
	// Start > 0 the stream must begin at byte Start−1 of the file (an S3 GET
	// with Range "bytes={Start−1}-"), and the Reader first skips through its
	// first LF: the end of a line that began before Start, which the range
	// before returns. Offsets are then the file's and Number counts from the
	// range's first line. A byte order mark is skipped only at Start 0, and
	// the line after it belongs to the range at 0 whatever its offset.
	Start, End int64
}

// Line is one non-blank line of an export file.
//
// ResourceType, ID, VersionID and LastUpdated are the decoded values of the
// top-level resourceType and id and of meta.versionId and meta.lastUpdated
// ("" if absent). On a quarantined line they hold what could be found before
// the problem (for an over-long line: in its first MaxLineBytes bytes) and may
// be empty; rely on them only when Problem is empty.
type Line struct {
	File   string // Options.File
	Number int64  // 1-based physical line number, blank lines included, counted from the range's first line (Options.Start)
	Offset int64  // byte offset of the line's first byte (after a BOM) in the file: file[Offset:Offset+len(Raw)] == Raw
	Raw    []byte // the line without BOM / CR / LF; valid only until the next call to Next; nil for over-long lines

	ResourceType, ID, VersionID, LastUpdated string

	Problem string // non-empty: the line is quarantined for this reason (a sentence a person understands)

	// TrailingData is set at ValidateNone, which does not look past the
	// top-level object, when anything but whitespace follows that object.
	// Such a line cannot be copied into an event as its resource (the rest
	// of the line would continue the detail's own object); at the other
	// levels it has a Problem instead.
	TrailingData bool
}

// Stats are a Reader's counts so far.
type Stats struct {
	Lines       int64 // lines returned by Next (non-blank lines)
	Blank       int64 // empty or whitespace-only lines, not returned
	Quarantined int64 // lines returned with a Problem
	Bytes       int64 // bytes of the lines read, line endings and BOM included (not what a range's start skipped)
	LargestLine int   // length of the longest line in bytes, without BOM / CR / LF (over-long ones included)
}

// Reader reads the lines of one NDJSON export file. It is not safe for
// concurrent use.
type Reader struct {
	src  io.Reader
	opts Options
	max  int

	buf        []byte
	start, end int   // unread data is buf[start:end]
	scanned    int   // buf[start:scanned] holds no '\n'
	off        int64 // stream offset of buf[start]
	eof        bool
	err        error // sticky read error
	bomChecked bool
	lineNo     int64

	stats Stats
	sc    scanner
}

// NewReader returns a Reader of r configured by opts.
func NewReader(r io.Reader, opts Options) *Reader {
	max := opts.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	max = min(max, math.MaxInt/2) // room for the buffer's arithmetic
	rd := &Reader{src: r, opts: opts, max: max}
	if opts.Start > 0 {
		rd.off = opts.Start - 1
	}
	return rd
}

// Stats returns the counts so far.
func (r *Reader) Stats() Stats { return r.stats }

// initialBufferBytes is the buffer a Reader starts with, unless the line limit
// is smaller.
const initialBufferBytes = 64 << 10

// maxEmptyReads is how many reads in a row may return no data and no error
// before the Reader gives up with io.ErrNoProgress.
const maxEmptyReads = 100

// physical is one physical line as nextPhysical finds it.
type physical struct {
	raw    []byte // content without LF; nil when long
	offset int64  // stream offset of the line's first byte
	long   bool   // longer than the limit and skipped; size counts its bytes
	blank  bool   // (long lines only) every byte was whitespace
	size   int64  // (long lines only) bytes without the LF and a final CR
	fields Fields // (long lines only) what the held start of the line shows
}

// Next returns the next non-blank line. It returns io.EOF at the end of the
// stream; any other error is a read error of the underlying reader, after
// which the Reader is done. The returned Line is the caller's; its Raw is
// valid only until the next call to Next.
func (r *Reader) Next() (*Line, error) {
	for {
		p, err := r.nextPhysical()
		if err != nil {
			return nil, err
		}
		if p.long {
			if p.blank {
				r.stats.Blank++
				continue
			}
			r.noteSize(p.size)
			return r.quarantineLong(p.offset, p.size, p.fields), nil
		}
		raw := p.raw
		if n := len(raw); n > 0 && raw[n-1] == '\r' {
			raw = raw[:n-1]
		}
		if isBlank(raw) {
			r.stats.Blank++
			continue
		}
		r.noteSize(int64(len(raw)))
		if len(raw) > r.max {
			return r.quarantineLong(p.offset, int64(len(raw)), r.prefixFields(raw[:r.max])), nil
		}
		l := &Line{File: r.opts.File, Number: r.lineNo, Offset: p.offset, Raw: raw}
		r.stats.Lines++
		if l.Problem = r.check(l, raw); l.Problem != "" {
			r.stats.Quarantined++
		}
		return l, nil
	}
}

func (r *Reader) noteSize(n int64) {
	if n > int64(r.stats.LargestLine) {
		r.stats.LargestLine = int(n)
	}
}

// quarantineLong returns the Line of an over-long line, with the fields found
// in its first bytes so that the quarantine record can name the resource.
func (r *Reader) quarantineLong(offset, size int64, f Fields) *Line {
	r.stats.Lines++
	r.stats.Quarantined++
	return &Line{
		File:         r.opts.File,
		Number:       r.lineNo,
		Offset:       offset,
		ResourceType: f.ResourceType, ID: f.ID, VersionID: f.VersionID, LastUpdated: f.LastUpdated,
		Problem: fmt.Sprintf("line is %d bytes, over the limit of %d", size, r.max),
	}
}

// prefixFields returns the fields that the first bytes of an over-long line
// show in full; a field cut off by the end of b stays "".
func (r *Reader) prefixFields(b []byte) Fields {
	raw, _ := scanLenient(b)
	f, _ := r.sc.fields(b, &raw)
	return f
}

// nextPhysical returns the next physical line, blank or not.
func (r *Reader) nextPhysical() (physical, error) {
	if !r.bomChecked {
		if r.opts.Start > 0 {
			r.skipPartial()
		} else {
			for r.end-r.start < len(bom) && !r.eof && r.err == nil {
				r.fill()
			}
			if bytes.HasPrefix(r.buf[r.start:r.end], bom) {
				r.consume(len(bom))
			}
		}
		r.bomChecked = true
	}
	if r.opts.End > 0 && r.off >= r.opts.End && (r.opts.Start > 0 || r.lineNo > 0) {
		return physical{}, io.EOF // the next line begins in the range after
	}
	for {
		if i := bytes.IndexByte(r.buf[r.scanned:r.end], '\n'); i >= 0 {
			nl := r.scanned + i
			p := physical{raw: r.buf[r.start:nl], offset: r.off}
			r.consume(nl + 1 - r.start)
			r.lineNo++
			return p, nil
		}
		r.scanned = r.end
		if r.end-r.start > r.max+1 { // over the limit even if its last byte is a CR
			return r.skipLong()
		}
		if r.err != nil {
			return physical{}, r.err
		}
		if r.eof {
			if r.start == r.end {
				return physical{}, io.EOF
			}
			p := physical{raw: r.buf[r.start:r.end], offset: r.off}
			r.consume(r.end - r.start)
			r.lineNo++
			return p, nil
		}
		r.fill()
	}
}

// skipPartial consumes the stream through its first LF, without holding
// it: the end of the line that began before Options.Start. It leaves a read
// error or the end of the stream for nextPhysical to report.
func (r *Reader) skipPartial() {
	for {
		if i := bytes.IndexByte(r.buf[r.start:r.end], '\n'); i >= 0 {
			r.consume(i + 1)
			break
		}
		r.consume(r.end - r.start)
		if r.err != nil || r.eof {
			break
		}
		r.fill()
	}
	r.stats.Bytes = 0
}

// skipLong consumes the rest of a line that is over the limit without
// holding it, counting its bytes.
func (r *Reader) skipLong() (physical, error) {
	r.lineNo++
	p := physical{long: true, offset: r.off, blank: true}
	p.fields = r.prefixFields(r.buf[r.start : r.start+r.max])
	var last byte
	for {
		seg := r.buf[r.start:r.end]
		i := bytes.IndexByte(seg, '\n')
		if i >= 0 {
			seg = seg[:i]
		}
		if len(seg) > 0 {
			last = seg[len(seg)-1]
			if p.blank && !isBlank(seg) {
				p.blank = false
			}
		}
		p.size += int64(len(seg))
		if i >= 0 {
			r.consume(i + 1)
			break
		}
		r.consume(len(seg))
		if r.err != nil {
			return physical{}, r.err
		}
		if r.eof {
			break
		}
		r.fill()
	}
	if last == '\r' {
		p.size--
	}
	return p, nil
}

// consume marks n buffered bytes as read.
func (r *Reader) consume(n int) {
	r.start += n
	r.off += int64(n)
	r.stats.Bytes += int64(n)
	if r.scanned < r.start {
		r.scanned = r.start
	}
	if r.start == r.end {
		r.start, r.end, r.scanned = 0, 0, 0
	}
}

// fill reads more data into the buffer, moving unread data to its front and
// growing it (up to the line limit plus two bytes) when it is full.
func (r *Reader) fill() {
	if r.buf == nil {
		n := initialBufferBytes
		if r.max+2 < n {
			n = r.max + 2
		}
		r.buf = make([]byte, n)
	}
	if r.start > 0 {
		copy(r.buf, r.buf[r.start:r.end])
		r.end -= r.start
		r.scanned -= r.start
		r.start = 0
	}
	if r.end == len(r.buf) {
		n := 2 * len(r.buf)
		if limit := r.max + 2; n > limit {
			n = limit
		}
		if n <= len(r.buf) { // cannot happen: callers skip lines over the limit first
			n = len(r.buf) + 1
		}
		nb := make([]byte, n)
		copy(nb, r.buf[:r.end])
		r.buf = nb
	}
	for tries := 0; tries < maxEmptyReads; tries++ {
		n, err := r.src.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.err = fmt.Errorf("fhir: read %s: reader returned an invalid count %d", r.opts.File, n)
			return
		}
		r.end += n
		if err != nil {
			if errors.Is(err, io.EOF) {
				r.eof = true
			} else {
				r.err = err
			}
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

var bom = []byte{0xEF, 0xBB, 0xBF}

// isBlank reports whether b holds only JSON whitespace.
func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// check validates one line at the Reader's level, fills in l's fields and
// returns the line's problem ("" if none).
func (r *Reader) check(l *Line, b []byte) string {
	var raw rawFields
	var prob string
	if r.opts.Validation == ValidateNone {
		var end int
		raw, end, prob = scanLenientEnd(b)
		l.TrailingData = prob == "" && !isBlank(b[end:])
	} else {
		raw, prob = r.sc.scan(b)
	}
	f, fprob := r.sc.fields(b, &raw)
	l.ResourceType, l.ID, l.VersionID, l.LastUpdated = f.ResourceType, f.ID, f.VersionID, f.LastUpdated
	if prob != "" {
		return prob
	}
	if fprob != "" {
		return fprob
	}
	if p := requireFields(&raw, &f); p != "" {
		return p
	}
	if d := r.opts.DeclaredType; d != "" && f.ResourceType != d {
		if _, known := r4Unmarshal[f.ResourceType]; known { // a closed vocabulary, not content
			return fmt.Sprintf("resourceType is %s but the file holds %s", f.ResourceType, d)
		}
		return fmt.Sprintf("resourceType does not match the file's type %s", d)
	}
	if r.opts.Validation >= ValidateR4 {
		return checkR4(b, &f)
	}
	return ""
}

// fields converts found spans into strings, interning the resource type.
func (r *scanner) fields(b []byte, raw *rawFields) (Fields, string) {
	var f Fields
	var prob string
	if s := raw.resourceType; s.kind == kindString && !s.escaped {
		if v := b[s.start:s.end]; string(v) == r.lastType {
			f.ResourceType = r.lastType
		} else {
			f.ResourceType = string(v)
			r.lastType = f.ResourceType
		}
	} else {
		f.ResourceType, prob = r.str(b, s, "resourceType", prob)
	}
	f.ID, prob = r.str(b, raw.id, "id", prob)
	if k := raw.meta.kind; k != kindAbsent && k != kindObject && prob == "" {
		prob = "meta is " + k.String() + ", want an object"
	}
	f.VersionID, prob = r.str(b, raw.versionID, "meta.versionId", prob)
	f.LastUpdated, prob = r.str(b, raw.lastUpdated, "meta.lastUpdated", prob)
	return f, prob
}

// str decodes one field, keeping the first problem.
func (r *scanner) str(b []byte, s span, name, prob string) (string, string) {
	switch s.kind {
	case kindAbsent:
		return "", prob
	case kindString:
		if !s.escaped {
			return string(b[s.start:s.end]), prob
		}
		r.scratch = unescape(r.scratch[:0], b[s.start:s.end])
		return string(r.scratch), prob
	}
	if prob == "" {
		prob = name + " is " + s.kind.String() + ", want a string"
	}
	return "", prob
}

// requireFields checks what every line needs to become an event.
func requireFields(raw *rawFields, f *Fields) string {
	switch {
	case raw.resourceType.kind == kindAbsent:
		return "resourceType is missing"
	case f.ResourceType == "":
		return "resourceType is empty"
	case raw.id.kind == kindAbsent:
		return "id is missing"
	case f.ID == "":
		return "id is empty"
	case raw.versionID.kind != kindAbsent && f.VersionID == "":
		return "meta.versionId is empty"
	case raw.lastUpdated.kind != kindAbsent && f.LastUpdated == "":
		return "meta.lastUpdated is empty"
	}
	return ""
}
