package envelope_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// TestCorpusDetailsMatchSchema builds the detail of every line of the
// generated test data and of the Synthea sample (when present) and validates
// each against the embedded schema; large ones also claim-checked.
func TestCorpusDetailsMatchSchema(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(envelope.SchemaJSON))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("detail-v1.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("detail-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "generated", "*.ndjson"))
	synthea, _ := filepath.Glob("../../../shared/fhir-samples/synthea-10-patients/*.000.ndjson")
	files = append(files, synthea...)
	if len(files) == 0 {
		t.Skip("no corpus present")
	}
	w := envelope.Window{Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	exp := envelope.ExportRef{DatastoreID: "ds", JobID: "job"}
	n, hashed := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := fhir.NewReader(bytes.NewReader(data), fhir.Options{File: f, Validation: fhir.ValidateJSON})
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Problem != "" {
				t.Fatalf("%s:%d: %s", f, l.Number, l.Problem)
			}
			if l.LastUpdated == "" { // Synthea: HealthLake would set it
				l.LastUpdated = "2026-11-21T10:00:00.000Z"
			}
			res := envelope.Resource{ResourceType: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Raw: l.Raw}
			var ref *envelope.ResourceRef
			if len(l.Raw) > 64<<10 {
				ref = &envelope.ResourceRef{Bucket: "b", Key: "claim-check/x.json", Size: int64(len(l.Raw)), SHA256: strings.Repeat("0", 64)}
			}
			d := envelope.AppendDetail(nil, res, w, exp, ref)
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(d))
			if err != nil {
				t.Fatalf("%s:%d: detail is not JSON: %v", f, l.Number, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Fatalf("%s:%d: detail fails the schema: %v", f, l.Number, err)
			}
			if l.VersionID == "" {
				hashed++
			}
			n++
		}
	}
	if n < 300 || hashed == 0 {
		t.Fatalf("validated %d details, %d with content-hash versions", n, hashed)
	}
}
