package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	models "github.com/samply/golang-fhir-models/fhir-models/fhir"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// decoders decode a line into the golang-fhir-models type of its resource
// type and return its id, so that the test checks the right type was filled.
var decoders = map[string]func([]byte) (string, error){
	"Organization": func(b []byte) (string, error) { r, err := models.UnmarshalOrganization(b); return deref(r.Id), err },
	"Practitioner": func(b []byte) (string, error) { r, err := models.UnmarshalPractitioner(b); return deref(r.Id), err },
	"Patient": func(b []byte) (string, error) {
		r, err := models.UnmarshalPatient(b)
		if err == nil && (r.Gender == nil || r.BirthDate == nil || len(r.Name) == 0) {
			err = errors.New("patient without gender, birthDate or name")
		}
		return deref(r.Id), err
	},
	"Encounter":   func(b []byte) (string, error) { r, err := models.UnmarshalEncounter(b); return deref(r.Id), err },
	"Observation": func(b []byte) (string, error) { r, err := models.UnmarshalObservation(b); return deref(r.Id), err },
	"Condition":   func(b []byte) (string, error) { r, err := models.UnmarshalCondition(b); return deref(r.Id), err },
	"MedicationRequest": func(b []byte) (string, error) {
		r, err := models.UnmarshalMedicationRequest(b)
		return deref(r.Id), err
	},
	"Procedure":    func(b []byte) (string, error) { r, err := models.UnmarshalProcedure(b); return deref(r.Id), err },
	"Immunization": func(b []byte) (string, error) { r, err := models.UnmarshalImmunization(b); return deref(r.Id), err },
	"AllergyIntolerance": func(b []byte) (string, error) {
		r, err := models.UnmarshalAllergyIntolerance(b)
		return deref(r.Id), err
	},
	"DiagnosticReport": func(b []byte) (string, error) {
		r, err := models.UnmarshalDiagnosticReport(b)
		return deref(r.Id), err
	},
	"DocumentReference": func(b []byte) (string, error) {
		r, err := models.UnmarshalDocumentReference(b)
		if err == nil && (len(r.Content) == 0 || r.Content[0].Attachment.Data == nil) {
			err = errors.New("document without attachment data")
		}
		return deref(r.Id), err
	},
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// readR4 runs lines through the fhir reader at level r4 and returns its lines.
func readR4(t *testing.T, declared string, ndjson []byte) []fhir.Line {
	t.Helper()
	r := fhir.NewReader(bytes.NewReader(ndjson), fhir.Options{File: "gen", DeclaredType: declared, Validation: fhir.ValidateR4})
	var out []fhir.Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Problem != "" {
			t.Errorf("%s line %d quarantined at r4: %s", declared, l.Number, l.Problem)
		}
		c := *l
		c.Raw = nil
		out = append(out, c)
	}
}

func TestEveryTypeDecodesAndPassesR4(t *testing.T) {
	if len(Types()) < 8 {
		t.Fatalf("only %d types", len(Types()))
	}
	g := New(1)
	for _, typ := range Types() {
		dec, ok := decoders[typ]
		if !ok {
			t.Fatalf("test has no decoder for %s", typ)
		}
		var nd []byte
		ids := map[string]bool{}
		for i := 0; i < 25; i++ {
			o := Options{}
			if i%5 == 4 {
				o.OmitVersionID = true
			}
			line, err := g.Resource(typ, o)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			id, err := dec(line)
			if err != nil {
				t.Fatalf("%s does not decode: %v\n%s", typ, err, line)
			}
			if id == "" || ids[id] {
				t.Fatalf("%s: empty or repeated id %q", typ, id)
			}
			ids[id] = true
			nd = append(append(nd, line...), '\n')
		}
		lines := readR4(t, typ, nd)
		if len(lines) != 25 {
			t.Fatalf("%s: reader returned %d lines", typ, len(lines))
		}
		for i, l := range lines {
			if l.ResourceType != typ || !ids[l.ID] || l.LastUpdated == "" {
				t.Errorf("%s line %d: peeked %q %q %q", typ, i+1, l.ResourceType, l.ID, l.LastUpdated)
			}
			if (i%5 == 4) != (l.VersionID == "") {
				t.Errorf("%s line %d: versionId %q", typ, i+1, l.VersionID)
			}
		}
	}
}

func TestMetaAndIDOptions(t *testing.T) {
	g := New(7)
	at := time.Date(2026, 11, 21, 10, 3, 4, 567000000, time.UTC)
	line, err := g.Resource("Patient", Options{ID: "fixed-id", VersionID: "42", LastUpdated: at})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fhir.Peek(line)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "fixed-id" || f.VersionID != "42" || f.LastUpdated != "2026-11-21T10:03:04.567Z" {
		t.Fatalf("peek = %+v", f)
	}
	line, _ = g.Resource("Condition", Options{OmitVersionID: true, OmitLastUpdated: true})
	if f, _ := fhir.Peek(line); f.VersionID != "" || f.LastUpdated != "" {
		t.Fatalf("omitted meta present: %+v", f)
	}
	if _, err := g.Resource("Spaceship", Options{}); err == nil {
		t.Fatal("unknown type accepted")
	}
	if _, err := g.Resource("Patient", Options{Size: MaxSize + 1}); err == nil {
		t.Fatal("oversized request accepted")
	}
}

func TestClockAdvances(t *testing.T) {
	g := New(3)
	var last time.Time
	for i := 0; i < 50; i++ {
		line, _ := g.Resource("Observation", Options{})
		f, _ := fhir.Peek(line)
		lu, err := envelope.ParseTime(f.LastUpdated)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !lu.Equal(DefaultStart) {
			t.Fatalf("first lastUpdated %v, want %v", lu, DefaultStart)
		}
		if i > 0 && !lu.After(last) {
			t.Fatalf("clock did not advance: %v then %v", last, lu)
		}
		last = lu
	}
}

func TestSizesHonourRequests(t *testing.T) {
	g := New(11)
	for _, typ := range Types() {
		for _, size := range []int{100, 4 << 10, 64<<10 + 1, 300_000} {
			line, err := g.Resource(typ, Options{Size: size})
			if err != nil {
				t.Fatal(err)
			}
			natural := 2500
			if len(line) < size || len(line) > max(size+300, natural) {
				t.Errorf("%s size %d: got %d bytes", typ, size, len(line))
			}
			if _, err := decoders[typ](line); err != nil {
				t.Errorf("%s size %d does not decode: %v", typ, size, err)
			}
			if size > 64<<10 {
				readR4(t, typ, append(line, '\n'))
			}
		}
	}
	// Observations grow by components, documents by attachment data.
	obs, _ := g.Resource("Observation", Options{Size: 100_000})
	o, _ := models.UnmarshalObservation(obs)
	if len(o.Component) < 100 {
		t.Errorf("large Observation has %d components", len(o.Component))
	}
	doc, _ := g.Resource("DocumentReference", Options{Size: 300_000})
	d, _ := models.UnmarshalDocumentReference(doc)
	if d.Content[0].Attachment.Data == nil || len(*d.Content[0].Attachment.Data) < 290_000 {
		t.Error("large DocumentReference without large attachment")
	}
}

func TestDeterministic(t *testing.T) {
	run := func(seed int64) []byte {
		g := New(seed)
		var out []byte
		for i, typ := range Types() {
			l, _ := g.Resource(typ, Options{Size: i * 100})
			out = append(append(out, l...), '\n')
		}
		return out
	}
	if !bytes.Equal(run(5), run(5)) {
		t.Fatal("same seed, different output")
	}
	if bytes.Equal(run(5), run(6)) {
		t.Fatal("different seeds, same output")
	}
}

func TestReferencesPointAtGeneratedResources(t *testing.T) {
	dir := t.TempDir()
	spec := ExportSpec{Seed: 9, Counts: map[string]int{"Organization": 2, "Practitioner": 3, "Patient": 5, "Encounter": 10, "Observation": 20, "DocumentReference": 4}}
	files, err := WriteExport(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var all []map[string]any
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatal(err)
			}
			ids[m["resourceType"].(string)+"/"+m["id"].(string)] = true
			all = append(all, m)
		}
	}
	refs := 0
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["reference"].(string); ok {
				refs++
				if !ids[r] {
					t.Errorf("dangling reference %s", r)
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, m := range all {
		walk(m)
	}
	if refs < 40 {
		t.Errorf("only %d references", refs)
	}
}

func TestWriteExportFilesAndCounts(t *testing.T) {
	dir := t.TempDir()
	spec := ExportSpec{
		Seed:             2,
		Counts:           map[string]int{"Patient": 4, "Observation": 6, "Immunization": 3},
		Large:            []Large{{"Observation", 70_000}, {"DocumentReference", 270_000}},
		OmitVersionEvery: 3,
	}
	files, err := WriteExport(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Patient.ndjson", "Observation.ndjson", "Immunization.ndjson", "DocumentReference.ndjson"}
	if strings.Join(files, ",") != strings.Join(want, ",") {
		t.Fatalf("files %v, want %v", files, want)
	}
	counts := map[string]int{"Patient.ndjson": 4, "Observation.ndjson": 7, "Immunization.ndjson": 3, "DocumentReference.ndjson": 1}
	for name, n := range counts {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		typ := strings.TrimSuffix(name, ".ndjson")
		lines := readR4(t, typ, b)
		if len(lines) != n {
			t.Errorf("%s: %d lines, want %d", name, len(lines), n)
		}
		noVersion := 0
		for _, l := range lines {
			if l.VersionID == "" {
				noVersion++
			}
		}
		if typ == "Observation" && noVersion != 2 {
			t.Errorf("Observation: %d lines without versionId, want 2", noVersion)
		}
		if typ == "DocumentReference" && len(b) < 270_000 {
			t.Errorf("large DocumentReference only %d bytes", len(b))
		}
	}
	if _, err := WriteExport(dir, ExportSpec{Counts: map[string]int{"Nope": 1}}); err == nil {
		t.Fatal("unknown type accepted")
	}
}

func TestStreamLengthAndLines(t *testing.T) {
	s := NewStream(StreamSpec{Seed: 4, Bytes: 2 << 20, LargeEvery: 500, LargeSize: 100_000})
	r := fhir.NewReader(s, fhir.Options{Validation: fhir.ValidateJSON})
	var n, total int64
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Problem != "" {
			t.Fatalf("line %d: %s", l.Number, l.Problem)
		}
		n++
		total += int64(len(l.Raw)) + 1
	}
	if total < 2<<20 || total > 2<<20+200_000 {
		t.Errorf("stream length %d, want just over %d", total, 2<<20)
	}
	if n != s.Lines() || s.MaxLine() < 100_000 {
		t.Errorf("lines %d (stream says %d), max line %d", n, s.Lines(), s.MaxLine())
	}
	bad := NewStream(StreamSpec{Bytes: 10, Types: []string{"Nope"}})
	if _, err := io.ReadAll(bad); err == nil {
		t.Error("unknown stream type read without error")
	}
}
