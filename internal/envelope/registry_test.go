package envelope

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

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

const (
	testSource     = "healthlake.cdc"
	testDetailType = "FHIR Resource Changed"
)

// compileRegistry compiles a component of the registry document as JSON
// Schema draft 4 (what an OpenAPI 3.0 Schema Object is a dialect of).
func compileRegistry(t *testing.T, doc []byte, component string) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("registry document is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource("registry.json", v); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("registry.json#/components/schemas/" + component)
	if err != nil {
		t.Fatalf("compile %s: %v", component, err)
	}
	return sch
}

func registryDoc(t *testing.T) (map[string]any, []byte) {
	t.Helper()
	b, err := RegistrySchema(testSource, testDetailType)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, b
}

// The document has the shape of an EventBridge discovered schema: OpenAPI
// 3.0.0, an AWSEvent envelope tagged with source and detail type whose
// detail refers to the detail component, and no JSON Schema 2020-12 keyword
// OpenAPI 3.0 lacks.
func TestRegistrySchemaIsAnOpenAPIAWSEvent(t *testing.T) {
	doc, raw := registryDoc(t)
	if doc["openapi"] != "3.0.0" {
		t.Errorf("openapi = %v", doc["openapi"])
	}
	schemas, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)
	ev, _ := schemas["AWSEvent"].(map[string]any)
	if ev["x-amazon-events-source"] != testSource || ev["x-amazon-events-detail-type"] != testDetailType {
		t.Errorf("envelope tags = %v / %v", ev["x-amazon-events-source"], ev["x-amazon-events-detail-type"])
	}
	name := RegistryDetailComponent(testDetailType)
	if name != "FHIRResourceChanged" {
		t.Errorf("detail component = %q", name)
	}
	if ref := ev["properties"].(map[string]any)["detail"].(map[string]any)["$ref"]; ref != "#/components/schemas/"+name {
		t.Errorf("detail $ref = %v", ref)
	}
	for _, def := range []string{"timestamp", "instant"} {
		if schemas[def] == nil {
			t.Errorf("$defs/%s is not a component", def)
		}
	}
	for _, kw := range []string{`"$defs"`, `"const"`, `"if"`, `"then"`, `"else"`, `"$schema"`, `"$id"`, `#/$defs/`} {
		if bytes.Contains(raw, []byte(kw)) {
			t.Errorf("document still holds %s", kw)
		}
	}
	detail := schemas[name].(map[string]any)
	desc, _ := detail["description"].(string)
	for _, want := range []string{"when operation is \"delete\"", "none of resource, resourceRef", "otherwise exactly one of resource, resourceRef"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the dropped if/then/else is not described (%q missing): %s", want, desc)
		}
	}
	// A $ref with a description keeps both (OpenAPI 3.0 ignores $ref siblings).
	lu := detail["properties"].(map[string]any)["lastUpdated"].(map[string]any)
	if lu["description"] == nil || lu["allOf"] == nil {
		t.Errorf("lastUpdated lost its description or its reference: %v", lu)
	}
	if sv := detail["properties"].(map[string]any)["schemaVersion"].(map[string]any); !jsonEqual(sv["enum"], []any{SchemaVersion}) {
		t.Errorf("schemaVersion const became %v", sv)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// The converted detail schema accepts and refuses the same details as the
// original, except the if/then/else conditions OpenAPI 3.0 cannot express,
// which the converted one accepts (they are in its description instead).
func TestRegistrySchemaValidatesLikeTheOriginal(t *testing.T) {
	_, raw := registryDoc(t)
	orig := compileSchema(t)
	conv := compileRegistry(t, raw, RegistryDetailComponent(testDetailType))

	exp := ExportRef{DatastoreID: "0123456789abcdef0123456789abcdef", JobID: "a1b2c3"}
	r := Resource{ResourceType: "Patient", ID: "p-1", VersionID: "12", LastUpdated: "2026-11-21T10:01:00.123+02:00",
		Raw: []byte(`{"resourceType":"Patient","id":"p-1","meta":{"versionId":"12"}}`)}
	ref := &ResourceRef{Bucket: "artifacts", Key: "claim-check/x.json", Size: 61, SHA256: strings.Repeat("0f", 32)}
	good := AppendDetail(nil, r, testWindow, exp, nil)
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	refJSON := map[string]any{"bucket": ref.Bucket, "key": ref.Key, "size": ref.Size, "sha256": ref.SHA256}
	cases := map[string]struct {
		detail   []byte
		valid    bool
		ifThenOK bool // refused only by if/then/else: the converted schema accepts it
	}{
		"inline upsert":      {detail: good, valid: true},
		"claim-checked":      {detail: AppendDetail(nil, r, testWindow, exp, ref), valid: true},
		"delete":             {detail: AppendDeleteDetail(nil, Deletion{ResourceType: "Patient", ResourceID: "p-1", VersionID: "13", LastUpdated: "2026-11-21T10:02:00.123Z", Window: testWindow, Export: exp}), valid: true},
		"added field":        {detail: mutate(func(m map[string]any) { m["traceId"] = "t" }), valid: true},
		"missing eventId":    {detail: mutate(func(m map[string]any) { delete(m, "eventId") })},
		"wrong version":      {detail: mutate(func(m map[string]any) { m["schemaVersion"] = "2" })},
		"unknown operation":  {detail: mutate(func(m map[string]any) { m["operation"] = "remove" })},
		"bad eventId":        {detail: mutate(func(m map[string]any) { m["eventId"] = "Patient/p1" })},
		"window not UTC ms":  {detail: mutate(func(m map[string]any) { m["window"].(map[string]any)["since"] = "2026-11-21T10:00:00Z" })},
		"window extra field": {detail: mutate(func(m map[string]any) { m["window"].(map[string]any)["x"] = "y" })},
		"bad lastUpdated":    {detail: mutate(func(m map[string]any) { m["lastUpdated"] = "2026-11-21" })},
		"empty jobId":        {detail: mutate(func(m map[string]any) { m["export"].(map[string]any)["jobId"] = "" })},
		"resource a string":  {detail: mutate(func(m map[string]any) { m["resource"] = "x" })},
		"ref bad sha256": {detail: mutate(func(m map[string]any) {
			delete(m, "resource")
			m["resourceRef"] = map[string]any{"bucket": "b", "key": "k", "size": 1, "sha256": "ABC"}
		})},
		"ref negative size": {detail: mutate(func(m map[string]any) {
			delete(m, "resource")
			m["resourceRef"] = map[string]any{"bucket": "b", "key": "k", "size": -1, "sha256": ref.SHA256}
		})},
		"both resource and ref":    {detail: mutate(func(m map[string]any) { m["resourceRef"] = refJSON }), ifThenOK: true},
		"neither resource nor ref": {detail: mutate(func(m map[string]any) { delete(m, "resource") }), ifThenOK: true},
		"delete with resource":     {detail: mutate(func(m map[string]any) { m["operation"] = "delete" }), ifThenOK: true},
	}
	for name, c := range cases {
		origErr := validate(t, orig, c.detail)
		convErr := validate(t, conv, c.detail)
		if (origErr == nil) != c.valid {
			t.Errorf("%s: original schema: valid=%v, want %v (%v)", name, origErr == nil, c.valid, origErr)
		}
		wantConv := c.valid || c.ifThenOK
		if (convErr == nil) != wantConv {
			t.Errorf("%s: registry schema: valid=%v, want %v (%v)", name, convErr == nil, wantConv, convErr)
		}
	}
}

// A whole event as EventBridge delivers it validates against AWSEvent; one
// without its envelope fields, or with a broken detail, does not.
func TestRegistrySchemaValidatesTheEnvelope(t *testing.T) {
	_, raw := registryDoc(t)
	sch := compileRegistry(t, raw, "AWSEvent")
	detail := AppendDetail(nil, Resource{ResourceType: "Patient", ID: "p1", VersionID: "1", LastUpdated: "2026-11-21T10:01:00.000Z",
		Raw: []byte(`{"resourceType":"Patient","id":"p1"}`)}, testWindow, ExportRef{DatastoreID: "d", JobID: "j"}, nil)
	envelope := func(detail json.RawMessage, drop string) []byte {
		m := map[string]any{"version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718", "detail-type": testDetailType,
			"source": testSource, "account": "111122223333", "time": "2026-11-21T10:05:00Z", "region": "eu-west-1",
			"resources": []string{}, "detail": detail}
		delete(m, drop)
		b, _ := json.Marshal(m)
		return b
	}
	if err := validate(t, sch, envelope(detail, "")); err != nil {
		t.Errorf("event refused: %v", err)
	}
	if err := validate(t, sch, envelope(detail, "detail-type")); err == nil {
		t.Errorf("event without detail-type accepted")
	}
	if err := validate(t, sch, envelope(json.RawMessage(`{"schemaVersion":"1"}`), "")); err == nil {
		t.Errorf("event with an incomplete detail accepted")
	}
}

// Keywords without an OpenAPI 3.0 form, foreign references and empty names
// are refused with the place they occur; supported keywords are converted.
func TestRegistrySchemaRefusesWhatItCannotConvert(t *testing.T) {
	for name, schema := range map[string]string{
		"unevaluated":  `{"type":"object","unevaluatedProperties":false}`,
		"nested":       `{"properties":{"a":{"type":"array","prefixItems":[{"type":"string"}]}}}`,
		"foreign ref":  `{"properties":{"a":{"$ref":"other.json#/x"}}}`,
		"type list":    `{"properties":{"a":{"type":["string","null"]}}}`,
		"then no if":   `{"then":{"required":["a"]}}`,
		"not JSON":     `{`,
		"defs clash":   `{"$defs":{"AWSEvent":{"type":"string"}}}`,
		"empty oneOf":  `{"oneOf":[]}`,
		"const + enum": `{"const":"a","enum":["a"]}`,
	} {
		_, err := registrySchema([]byte(schema), testSource, testDetailType)
		if err == nil {
			t.Errorf("%s: converted", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "registry schema: ") {
			t.Errorf("%s: error without context: %v", name, err)
		}
	}
	if _, err := RegistrySchema("", testDetailType); err == nil {
		t.Errorf("empty source accepted")
	}
	out, err := registrySchema([]byte(`{"properties":{"n":{"type":"number","exclusiveMinimum":0},"any":true,"none":false}}`), testSource, "x")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"exclusiveMinimum": true`, `"minimum": 0`, `"not": {}`} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("converted schema lacks %s:\n%s", want, out)
		}
	}
	if got := RegistryDetailComponent("42 things"); got != "Detail42things" {
		t.Errorf("component of a detail type starting with a digit = %q", got)
	}
}

// Every detail built from the generated corpus and the Synthea sample (when
// present) validates against the registry's detail component, as it does
// against the original schema (TestCorpusDetailsMatchSchema).
func TestRegistrySchemaAcceptsTheCorpus(t *testing.T) {
	_, raw := registryDoc(t)
	conv := compileRegistry(t, raw, RegistryDetailComponent(testDetailType))
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "generated", "*.ndjson"))
	synthea, _ := filepath.Glob("../../../shared/fhir-samples/synthea-10-patients/*.000.ndjson")
	files = append(files, synthea...)
	if len(files) == 0 {
		t.Skip("no corpus present")
	}
	w := Window{Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}
	n := 0
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
			if err != nil || l.Problem != "" {
				t.Fatalf("%s: %v %s", f, err, l.Problem)
			}
			if l.LastUpdated == "" {
				l.LastUpdated = "2026-11-21T10:00:00.000Z"
			}
			d := AppendDetail(nil, Resource{ResourceType: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Raw: l.Raw},
				w, ExportRef{DatastoreID: "ds", JobID: "job"}, nil)
			if err := validate(t, conv, d); err != nil {
				t.Fatalf("%s:%d: detail fails the registry schema: %v", f, l.Number, err)
			}
			n++
		}
	}
	if n < 300 {
		t.Fatalf("validated %d details", n)
	}
}
