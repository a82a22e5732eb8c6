package fhir

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// addBadCorpusSeeds adds every file of testdata/bad, and each of its lines,
// as a seed.
func addBadCorpusSeeds(f *testing.F, add func(data []byte)) {
	files, err := filepath.Glob(filepath.Join(badDir, "*.ndjson"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no bad corpus at %s", badDir)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			add(line)
		}
	}
}

// refLine is what the reader must make of one physical line, worked out
// independently of its code.
type refLine struct {
	number  int64
	offset  int64
	content []byte
}

// refSplit splits a stream the way the package documents it: a BOM at the
// start is skipped, LF ends a line, a CR before it (or at the end) is not part
// of the line, lines of JSON whitespace only are blank.
func refSplit(data []byte) (lines []refLine, blank int64, largest int) {
	off := int64(0)
	if bytes.HasPrefix(data, bom) {
		data = data[len(bom):]
		off = int64(len(bom))
	}
	n := int64(0)
	for len(data) > 0 {
		seg := data
		next := len(data)
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			seg = data[:i]
			next = i + 1
		}
		n++
		content := bytes.TrimSuffix(seg, []byte("\r"))
		if isBlank(content) {
			blank++
		} else {
			lines = append(lines, refLine{number: n, offset: off, content: content})
			largest = max(largest, len(content))
		}
		off += int64(next)
		data = data[next:]
	}
	return lines, blank, largest
}

func FuzzReader(f *testing.F) {
	addBadCorpusSeeds(f, func(data []byte) {
		f.Add(data, uint16(0), uint8(1))
		f.Add(data, uint16(64), uint8(0))
	})
	f.Add([]byte("\xef\xbb\xbf{\"resourceType\":\"A\",\"id\":\"b\"}\r\n\r\n  \n{}"), uint16(3), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16, level uint8) {
		opts := Options{File: "f", MaxLineBytes: int(maxLine), Validation: Validation(level % 3)}
		limit := opts.MaxLineBytes
		if limit == 0 {
			limit = DefaultMaxLineBytes
		}
		want, blank, largest := refSplit(data)
		var reader io.Reader = bytes.NewReader(data)
		if len(data) > 0 && data[0]&1 == 1 {
			reader = &oneByteReader{data: data}
		}
		r := NewReader(reader, opts)
		var quarantined int64
		for i := 0; ; i++ {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				if i != len(want) {
					t.Fatalf("got %d lines, want %d", i, len(want))
				}
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if i >= len(want) {
				t.Fatalf("line %d is extra", l.Number)
			}
			w := want[i]
			if l.Number != w.number || l.Offset != w.offset || l.File != "f" {
				t.Fatalf("line %d at %d, want line %d at %d", l.Number, l.Offset, w.number, w.offset)
			}
			if len(w.content) > limit {
				if l.Raw != nil || !strings.Contains(l.Problem, "over the limit") {
					t.Fatalf("line %d of %d bytes over limit %d: Raw %d bytes, problem %q", l.Number, len(w.content), limit, len(l.Raw), l.Problem)
				}
			} else if !bytes.Equal(l.Raw, w.content) {
				t.Fatalf("line %d: Raw %q, want %q", l.Number, l.Raw, w.content)
			}
			if l.Problem != "" {
				quarantined++
				continue
			}
			if l.ResourceType == "" || l.ID == "" {
				t.Fatalf("line %d has no problem but resourceType %q id %q", l.Number, l.ResourceType, l.ID)
			}
			if l.TrailingData && (opts.Validation != ValidateNone || json.Valid(l.Raw)) {
				t.Fatalf("line %d at %s: TrailingData on a line that is one JSON object or was validated", l.Number, opts.Validation)
			}
			if opts.Validation >= ValidateJSON {
				if !json.Valid(l.Raw) || !utf8.Valid(l.Raw) {
					t.Fatalf("line %d passed at %s but is not valid JSON", l.Number, opts.Validation)
				}
				pf, err := Peek(l.Raw)
				if err != nil || pf != (Fields{l.ResourceType, l.ID, l.VersionID, l.LastUpdated}) {
					t.Fatalf("line %d: Peek %+v, %v disagrees with the Line", l.Number, pf, err)
				}
			}
		}
		checkRanges(t, data, opts, int64(maxLine%251)+1, len(data) > 0 && data[0]&2 == 2)
		st := r.Stats()
		if st.Lines != int64(len(want)) || st.Blank != blank || st.Quarantined != quarantined || st.Bytes != int64(len(data)) || st.LargestLine != largest {
			t.Fatalf("stats %+v, want lines %d blank %d quarantined %d bytes %d largest %d", st, len(want), blank, quarantined, len(data), largest)
		}
	})
}

func FuzzPeek(f *testing.F) {
	addBadCorpusSeeds(f, func(data []byte) { f.Add(data) })
	f.Add([]byte(`{"id":"\ud800\u0041","resourceType":"\ud83d\ude00","meta":{"lastUpdated":"\u00e9"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Peek(data)
		if err != nil {
			msg := err.Error()
			if !json.Valid(data) || !utf8.Valid(data) {
				return
			}
			// The line is valid JSON: the error must be one of the rules
			// Peek adds, and the rule must really be broken.
			shape := jsonShape(t, data)
			switch {
			case strings.HasPrefix(msg, "line is "):
				if shape.object {
					t.Fatalf("Peek says %q of an object", msg)
				}
			case strings.HasPrefix(msg, "duplicate top-level key"):
				if !shape.dupTop {
					t.Fatalf("Peek says %q but no top-level key repeats", msg)
				}
			case strings.HasPrefix(msg, "duplicate key meta."):
				if !shape.dupMeta {
					t.Fatalf("Peek says %q but meta has no such duplicate", msg)
				}
			case strings.HasPrefix(msg, "nesting deeper"):
				if shape.depth <= MaxDepth {
					t.Fatalf("Peek says %q but the depth is %d", msg, shape.depth)
				}
			case strings.Contains(msg, ", want a string") || strings.Contains(msg, ", want an object"):
				// A field of the wrong type: checked below through encoding/json.
				var top map[string]json.RawMessage
				if shape.depth <= MaxDepth && !shape.dupTop && json.Unmarshal(data, &top) == nil && fieldTypesFine(top) {
					t.Fatalf("Peek says %q but the fields have the right types", msg)
				}
			default:
				t.Fatalf("Peek rejects valid JSON: %q", msg)
			}
			return
		}
		if !json.Valid(data) || !utf8.Valid(data) {
			t.Fatalf("Peek accepted invalid JSON")
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("Peek accepted what encoding/json cannot decode as an object: %v", err)
		}
		var want Fields
		str := func(raw json.RawMessage, dst *string) {
			if raw == nil {
				return
			}
			if err := json.Unmarshal(raw, dst); err != nil {
				t.Fatalf("Peek accepted a field that is not a string: %s", raw)
			}
		}
		str(top["resourceType"], &want.ResourceType)
		str(top["id"], &want.ID)
		if m, ok := top["meta"]; ok {
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(m, &meta); err != nil {
				t.Fatalf("Peek accepted a meta that is not an object: %v", err)
			}
			str(meta["versionId"], &want.VersionID)
			str(meta["lastUpdated"], &want.LastUpdated)
		}
		if got != want {
			t.Fatalf("Peek %+v, encoding/json %+v", got, want)
		}
		// The lenient peek of level none must find the same on valid JSON.
		raw, prob := scanLenient(data)
		var sc scanner
		lf, fprob := sc.fields(data, &raw)
		if prob != "" || fprob != "" || lf != got {
			t.Fatalf("lenient peek %+v (%q %q), want %+v", lf, prob, fprob, got)
		}
	})
}

// shape is what encoding/json's tokenizer says about a valid JSON text.
type shape struct {
	object  bool // the value is an object
	dupTop  bool // a top-level key repeats
	dupMeta bool // meta.versionId or meta.lastUpdated repeats in a top-level meta object
	depth   int  // deepest nesting of objects and arrays
}

func jsonShape(t *testing.T, data []byte) shape {
	dec := json.NewDecoder(bytes.NewReader(data))
	var sh shape
	var stack []byte // '{' or '['
	keys := map[string]bool{}
	metaKeys := map[string]bool{}
	inMeta := false
	expectKey := false
	pendingMeta := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return sh
		}
		if err != nil {
			// encoding/json limits nesting to 10000 levels.
			sh.depth = max(sh.depth, len(stack)+1)
			return sh
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) == 0 && d == '{' {
					sh.object = true
				}
				if len(stack) == 1 && d == '{' && pendingMeta {
					inMeta = true
				}
				pendingMeta = false
				stack = append(stack, byte(d))
				sh.depth = max(sh.depth, len(stack))
				expectKey = d == '{'
			default:
				stack = stack[:len(stack)-1]
				if len(stack) == 1 {
					inMeta = false
				}
				expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
			}
			continue
		}
		if expectKey {
			k := tok.(string)
			if len(stack) == 1 {
				if keys[k] {
					sh.dupTop = true
				}
				keys[k] = true
				pendingMeta = k == "meta"
			} else if len(stack) == 2 && inMeta && (k == "versionId" || k == "lastUpdated") {
				if metaKeys[k] {
					sh.dupMeta = true
				}
				metaKeys[k] = true
			}
			expectKey = false
			continue
		}
		pendingMeta = false
		expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
	}
}

// fieldTypesFine reports whether the fields of interest have the JSON types
// Peek wants.
func fieldTypesFine(top map[string]json.RawMessage) bool {
	isString := func(raw json.RawMessage) bool {
		var s string
		return raw == nil || json.Unmarshal(raw, &s) == nil && raw[0] == '"'
	}
	if !isString(top["resourceType"]) || !isString(top["id"]) {
		return false
	}
	m, ok := top["meta"]
	if !ok {
		return true
	}
	var meta map[string]json.RawMessage
	if m[0] != '{' || json.Unmarshal(m, &meta) != nil {
		return false
	}
	return isString(meta["versionId"]) && isString(meta["lastUpdated"])
}
