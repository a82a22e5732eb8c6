package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("detail-v1.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("detail-v1.schema.json")
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, detail []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(detail))
	if err != nil {
		t.Fatalf("detail is not JSON: %v\n%s", err, detail)
	}
	return sch.Validate(v)
}

func TestBuiltDetailsMatchSchema(t *testing.T) {
	sch := compileSchema(t)
	exp := ExportRef{DatastoreID: "0123456789abcdef0123456789abcdef", JobID: "a1b2c3"}
	withVersion := Resource{ResourceType: "Patient", ID: "p-1", VersionID: "12", LastUpdated: "2026-11-21T10:01:00.123Z",
		Raw: []byte(`{"resourceType":"Patient","id":"p-1","meta":{"versionId":"12","lastUpdated":"2026-11-21T10:01:00.123Z"},"_gender":{"extension":[]}}`)}
	hashed := Resource{ResourceType: "Condition", ID: "c.1", LastUpdated: "2026-11-21T12:01:00+02:00",
		Raw: []byte(`{"resourceType":"Condition","id":"c.1","meta":{"lastUpdated":"2026-11-21T12:01:00+02:00"}}`)}
	ref := &ResourceRef{Bucket: "artifacts", Key: "claim-check/Condition/c.1/_history/" + ContentVersion(hashed.Raw) + ".json",
		Size: int64(len(hashed.Raw)), SHA256: strings.Repeat("0f", 32)}
	del := Deletion{ResourceType: "Patient", ResourceID: "p-1", VersionID: "13", LastUpdated: "2026-11-21T10:02:00.123Z", Window: testWindow, Export: exp}
	hard := Deletion{ResourceType: "Condition", ResourceID: "c.1", VersionID: HardDeleteVersion(ContentVersion(hashed.Raw)), LastUpdated: "2026-11-22T00:00:00.000Z", Window: testWindow, Export: exp}
	for name, d := range map[string][]byte{
		"delete":                 AppendDeleteDetail(nil, del),
		"hard delete":            AppendDeleteDetail(nil, hard),
		"inline with versionId":  AppendDetail(nil, withVersion, testWindow, exp, nil),
		"inline content version": AppendDetail(nil, hashed, testWindow, exp, nil),
		"claim-checked":          AppendDetail(nil, hashed, testWindow, exp, ref),
		"claim-checked version":  AppendDetail(nil, withVersion, testWindow, exp, ref),
	} {
		if err := validate(t, sch, d); err != nil {
			t.Errorf("%s: built detail fails the schema: %v\n%s", name, err, d)
		}
	}
}

func TestBrokenDetailsFailSchema(t *testing.T) {
	sch := compileSchema(t)
	r := Resource{ResourceType: "Patient", ID: "p1", VersionID: "1", LastUpdated: "2026-11-21T10:01:00.000Z", Raw: []byte(`{"resourceType":"Patient","id":"p1"}`)}
	ref := &ResourceRef{Bucket: "b", Key: "k", Size: 36, SHA256: strings.Repeat("a", 64)}
	good := AppendDetail(nil, r, testWindow, ExportRef{DatastoreID: "d", JobID: "j"}, nil)
	if err := validate(t, sch, good); err != nil {
		t.Fatalf("baseline detail fails: %v", err)
	}
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	refJSON := map[string]any{"bucket": ref.Bucket, "key": ref.Key, "size": ref.Size, "sha256": ref.SHA256}
	broken := map[string][]byte{
		"missing eventId":          mutate(func(m map[string]any) { delete(m, "eventId") }),
		"missing window":           mutate(func(m map[string]any) { delete(m, "window") }),
		"missing export":           mutate(func(m map[string]any) { delete(m, "export") }),
		"both resource and ref":    mutate(func(m map[string]any) { m["resourceRef"] = refJSON }),
		"neither resource nor ref": mutate(func(m map[string]any) { delete(m, "resource") }),
		"wrong schemaVersion":      mutate(func(m map[string]any) { m["schemaVersion"] = "2" }),
		"unknown operation":        mutate(func(m map[string]any) { m["operation"] = "remove" }),
		"no operation":             mutate(func(m map[string]any) { delete(m, "operation") }),
		"delete with resource":     mutate(func(m map[string]any) { m["operation"] = "delete" }),
		"delete with ref": mutate(func(m map[string]any) {
			m["operation"] = "delete"
			delete(m, "resource")
			m["resourceRef"] = refJSON
		}),
		"delete without versionId": mutate(func(m map[string]any) {
			m["operation"] = "delete"
			delete(m, "resource")
			delete(m, "versionId")
		}),
		"delete with bad version": mutate(func(m map[string]any) {
			m["operation"] = "delete"
			delete(m, "resource")
			m["versionId"] = "1 deleted"
		}),
		"bad eventId":             mutate(func(m map[string]any) { m["eventId"] = "Patient/p1" }),
		"bad versionId":           mutate(func(m map[string]any) { m["versionId"] = "h-/../x" }),
		"window not UTC ms":       mutate(func(m map[string]any) { m["window"].(map[string]any)["since"] = "2026-11-21T10:00:00Z" }),
		"lastUpdated not instant": mutate(func(m map[string]any) { m["lastUpdated"] = "2026-11-21" }),
		"ref with bad sha256": mutate(func(m map[string]any) {
			delete(m, "resource")
			m["resourceRef"] = map[string]any{"bucket": "b", "key": "k", "size": 1, "sha256": "ABC"}
		}),
		"ref missing size": mutate(func(m map[string]any) {
			delete(m, "resource")
			m["resourceRef"] = map[string]any{"bucket": "b", "key": "k", "sha256": ref.SHA256}
		}),
		"resource not an object": mutate(func(m map[string]any) { m["resource"] = "x" }),
	}
	for name, d := range broken {
		if err := validate(t, sch, d); err == nil {
			t.Errorf("%s: schema accepted %s", name, d)
		}
	}
	// A delete without resource and resourceRef is valid.
	del := mutate(func(m map[string]any) { m["operation"] = "delete"; delete(m, "resource") })
	if err := validate(t, sch, del); err != nil {
		t.Errorf("delete without resource rejected: %v", err)
	}
	// Unknown top-level fields are allowed: fields may be added in v1.
	extra := mutate(func(m map[string]any) { m["traceId"] = "abc" })
	if err := validate(t, sch, extra); err != nil {
		t.Errorf("added top-level field rejected: %v", err)
	}
}
