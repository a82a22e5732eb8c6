package fhir

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// readAll returns every line of data read as the range [start, end), given
// the stream a range reader gets (from byte start−1), read a byte at a time
// when slow is set.
func readRange(t testing.TB, data []byte, opts Options, start, end int64, slow bool) ([]Line, Stats) {
	t.Helper()
	opts.Start, opts.End = start, end
	from := max(start-1, 0)
	var src io.Reader = bytes.NewReader(data[from:])
	if slow {
		src = &oneByteReader{data: data[from:]}
	}
	r := NewReader(src, opts)
	var out []Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, r.Stats()
		}
		if err != nil {
			t.Fatalf("range [%d, %d): Next: %v", start, end, err)
		}
		c := *l
		c.Raw = bytes.Clone(l.Raw)
		out = append(out, c)
	}
}

// checkRanges cuts data every step bytes and checks that the ranges, read
// one after the other, return exactly the lines of the whole file: the same
// offsets, bytes, fields and problems, each once, with numbers counted from
// each range's first line.
func checkRanges(t testing.TB, data []byte, opts Options, step int64, slow bool) {
	t.Helper()
	whole, wst := readRange(t, data, opts, 0, 0, false)
	var got []Line
	var bytesRead int64
	for start := int64(0); start < int64(len(data)); start += step {
		end := start + step
		if end >= int64(len(data)) {
			end = 0 // the last range reads to the end
		}
		lines, st := readRange(t, data, opts, start, end, slow)
		before := int64(0)
		if start > 0 {
			before = int64(bytes.Count(data[:start-1], []byte("\n"))) + 1
		}
		for _, l := range lines {
			afterBOM := start == 0 && l.Offset == int64(len(bom)) && bytes.HasPrefix(data, bom)
			if l.Offset < start || end > 0 && l.Offset >= end && !afterBOM {
				t.Fatalf("range [%d, %d) returned a line at %d", start, end, l.Offset)
			}
			l.Number += before
			got = append(got, l)
		}
		bytesRead += st.Bytes
		if end == 0 {
			break
		}
	}
	if len(got) != len(whole) {
		t.Fatalf("step %d: the ranges returned %d lines, the whole file %d", step, len(got), len(whole))
	}
	for i := range whole {
		w, g := whole[i], got[i]
		if w.Number != g.Number || w.Offset != g.Offset || !bytes.Equal(w.Raw, g.Raw) || w.Problem != g.Problem ||
			w.ResourceType != g.ResourceType || w.ID != g.ID || w.VersionID != g.VersionID || w.TrailingData != g.TrailingData {
			t.Fatalf("step %d, line %d: ranges gave %d at %d problem %q, the whole file %d at %d problem %q",
				step, i, g.Number, g.Offset, g.Problem, w.Number, w.Offset, w.Problem)
		}
	}
	if bytesRead < wst.Bytes {
		t.Fatalf("step %d: the ranges read %d bytes of lines, the whole file %d", step, bytesRead, wst.Bytes)
	}
}

// TestRangesReadEachLineOnce: a file cut into byte ranges anywhere — inside a
// line, on an LF, on a CR before it, inside an over-long line, inside the
// BOM — is read by its ranges as one read of the whole file: every line
// once, at its offset, with the same problems.
func TestRangesReadEachLineOnce(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(badDir, "*.ndjson"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no bad corpus at %s", badDir)
	}
	var corpus [][]byte
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		corpus = append(corpus, data)
	}
	rnd := rand.New(rand.NewSource(7))
	var gen bytes.Buffer
	gen.Write(bom)
	for i := range 200 {
		switch rnd.Intn(6) {
		case 0:
			gen.WriteString("\n")
		case 1:
			gen.WriteString("  \r\n")
		case 2:
			gen.WriteString(`{"resourceType":"Patient","id":"p` + string(rune('a'+i%26)) + `","note":"` + string(bytes.Repeat([]byte("x"), rnd.Intn(300))) + "\"}\r\n")
		default:
			gen.WriteString(`{"resourceType":"Observation","id":"o` + string(rune('a'+i%26)) + `","meta":{"versionId":"2"}}` + "\n")
		}
	}
	gen.WriteString(`{"resourceType":"Patient","id":"last"}`) // no final LF
	corpus = append(corpus, gen.Bytes())
	for _, data := range corpus {
		for _, level := range []Validation{ValidateNone, ValidateJSON} {
			for _, step := range []int64{1, 2, 3, 7, 64, 301, 4096} {
				checkRanges(t, data, Options{File: "f", MaxLineBytes: 100, Validation: level}, step, step == 7)
			}
		}
	}
}
