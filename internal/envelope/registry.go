package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// RegistrySchemaType is the EventBridge schema registry type of the document
// RegistrySchema returns (AWS::EventSchemas::Schema Type).
const RegistrySchemaType = "OpenApi3"

// RegistrySchema returns the detail schema v1 as the OpenAPI 3.0 document the
// EventBridge schema registry holds for discovered schemas: an "AWSEvent"
// component for the envelope, tagged with x-amazon-events-source and
// x-amazon-events-detail-type, whose detail refers to a component named
// after the detail type. The registry accepts OpenAPI 3 and JSON Schema
// draft 4 only, while SchemaJSON is draft 2020-12: $defs become components,
// const a one-value enum, a $ref with siblings an allOf, and the
// conditional keywords (if/then/else), which OpenAPI 3.0 lacks, are left out
// with their meaning written into the description. Any keyword the
// conversion does not know is an error, so a later schema revision cannot
// silently lose a constraint.
func RegistrySchema(source, detailType string) ([]byte, error) {
	return registrySchema(SchemaJSON, source, detailType)
}

// RegistryDetailComponent is the name of the detail's component in the
// document RegistrySchema returns for detailType: its letters and digits
// ("FHIR Resource Changed" → "FHIRResourceChanged"), as EventBridge names
// the detail of a discovered schema.
func RegistryDetailComponent(detailType string) string {
	var b strings.Builder
	for _, r := range detailType {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || b.String()[0] >= '0' && b.String()[0] <= '9' {
		return "Detail" + b.String()
	}
	return b.String()
}

func registrySchema(schema []byte, source, detailType string) ([]byte, error) {
	if source == "" || detailType == "" {
		return nil, fmt.Errorf("registry schema: source and detail type must not be empty")
	}
	var root map[string]any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("registry schema: detail schema is not a JSON object: %w", err)
	}
	detailName := RegistryDetailComponent(detailType)
	if detailName == "AWSEvent" {
		return nil, fmt.Errorf("registry schema: detail type %q names the envelope component", detailType)
	}
	components := map[string]any{}
	if defs, ok := root["$defs"]; ok {
		m, ok := defs.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("registry schema: $defs is not an object")
		}
		for name, def := range m {
			if name == "AWSEvent" || name == detailName {
				return nil, fmt.Errorf("registry schema: $defs/%s collides with a component the envelope uses", name)
			}
			conv, err := convertSchema(def, "$defs/"+name)
			if err != nil {
				return nil, err
			}
			components[name] = conv
		}
	}
	detailSrc := map[string]any{}
	for k, v := range root {
		switch k {
		case "$schema", "$id", "$defs":
		default:
			detailSrc[k] = v
		}
	}
	detail, err := convertSchema(detailSrc, "")
	if err != nil {
		return nil, err
	}
	components[detailName] = detail
	components["AWSEvent"] = map[string]any{
		"type":                        "object",
		"x-amazon-events-source":      source,
		"x-amazon-events-detail-type": detailType,
		"required":                    []any{"detail-type", "resources", "detail", "id", "source", "time", "region", "version", "account"},
		"properties": map[string]any{
			"detail":      map[string]any{"$ref": "#/components/schemas/" + detailName},
			"account":     map[string]any{"type": "string"},
			"detail-type": map[string]any{"type": "string"},
			"id":          map[string]any{"type": "string"},
			"region":      map[string]any{"type": "string"},
			"resources":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"source":      map[string]any{"type": "string"},
			"time":        map[string]any{"type": "string", "format": "date-time"},
			"version":     map[string]any{"type": "string"},
		},
	}
	title, _ := root["title"].(string)
	if title == "" {
		title = detailType
	}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"version": "1.0.0", "title": title},
		"paths":      map[string]any{},
		"components": map[string]any{"schemas": components},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("registry schema: %w", err)
	}
	return out, nil
}

// openAPIKeywords are the JSON Schema keywords an OpenAPI 3.0 Schema Object
// shares with JSON Schema, copied as they are (subschemas converted).
var openAPIKeywords = map[string]bool{
	"title": true, "description": true, "type": true, "format": true, "default": true,
	"multipleOf": true, "maximum": true, "minimum": true, "maxLength": true, "minLength": true,
	"pattern": true, "maxItems": true, "minItems": true, "uniqueItems": true,
	"maxProperties": true, "minProperties": true, "required": true, "enum": true,
	"properties": true, "additionalProperties": true, "items": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true, "deprecated": true,
}

// convertSchema converts one draft 2020-12 schema to an OpenAPI 3.0 Schema
// Object; at names its place for errors.
func convertSchema(v any, at string) (any, error) {
	if b, ok := v.(bool); ok {
		// true accepts anything: the empty schema. false has no OpenAPI 3.0
		// form except "not: {}".
		if b {
			return map[string]any{}, nil
		}
		return map[string]any{"not": map[string]any{}}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("registry schema: %s: a schema must be an object or a boolean, got %T", where(at), v)
	}
	out := map[string]any{}
	var conditional []string
	for _, k := range sortedKeys(m) {
		val := m[k]
		switch {
		case k == "$ref":
			ref, _ := val.(string)
			name, ok := strings.CutPrefix(ref, "#/$defs/")
			if !ok || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("registry schema: %s: $ref %q does not name a $defs entry", where(at), ref)
			}
			out["$ref"] = "#/components/schemas/" + name
		case k == "const":
			if _, both := m["enum"]; both {
				return nil, fmt.Errorf("registry schema: %s: both const and enum", where(at))
			}
			out["enum"] = []any{val}
		case k == "exclusiveMinimum" || k == "exclusiveMaximum":
			// A number in draft 2020-12, a flag on minimum/maximum in 3.0.
			bound := "minimum"
			if k == "exclusiveMaximum" {
				bound = "maximum"
			}
			if _, both := m[bound]; both {
				return nil, fmt.Errorf("registry schema: %s: both %s and %s", where(at), k, bound)
			}
			out[bound] = val
			out[k] = true
		case k == "if" || k == "then" || k == "else":
			conditional = append(conditional, k)
		case k == "properties":
			props, ok := val.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("registry schema: %s: properties is not an object", where(at))
			}
			conv := map[string]any{}
			for name, sub := range props {
				c, err := convertSchema(sub, at+"/properties/"+name)
				if err != nil {
					return nil, err
				}
				conv[name] = c
			}
			out[k] = conv
		case k == "items" || k == "not" || k == "additionalProperties" && isObject(val):
			c, err := convertSchema(val, at+"/"+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			list, ok := val.([]any)
			if !ok || len(list) == 0 {
				return nil, fmt.Errorf("registry schema: %s: %s is not a non-empty array", where(at), k)
			}
			conv := make([]any, len(list))
			for i, sub := range list {
				c, err := convertSchema(sub, fmt.Sprintf("%s/%s/%d", at, k, i))
				if err != nil {
					return nil, err
				}
				conv[i] = c
			}
			out[k] = conv
		case k == "type":
			if _, ok := val.(string); !ok {
				return nil, fmt.Errorf("registry schema: %s: type must be one name in OpenAPI 3.0, got %v", where(at), val)
			}
			out[k] = val
		case openAPIKeywords[k]:
			out[k] = val
		default:
			return nil, fmt.Errorf("registry schema: %s: keyword %q has no OpenAPI 3.0 form", where(at), k)
		}
	}
	if len(conditional) > 0 {
		if _, ok := m["if"]; !ok {
			return nil, fmt.Errorf("registry schema: %s: then/else without if", where(at))
		}
		desc, _ := out["description"].(string)
		out["description"] = strings.TrimSpace(desc + " " + describeConditional(m))
	}
	// OpenAPI 3.0 ignores the siblings of a $ref: keep them around an allOf.
	if ref, ok := out["$ref"]; ok && len(out) > 1 {
		delete(out, "$ref")
		out["allOf"] = append([]any{map[string]any{"$ref": ref}}, asList(out["allOf"])...)
	}
	return out, nil
}

// describeConditional renders a schema's if/then/else as a sentence:
// readable for conditions on constant properties and for (not) one/any of
// required fields, as compact JSON otherwise, so no meaning is lost.
func describeConditional(m map[string]any) string {
	var b strings.Builder
	b.WriteString("Not expressible in OpenAPI 3.0, so not checked by this document (the JSON Schema of the detail checks it): ")
	b.WriteString("when " + describe(m["if"]) + ", then " + describe(m["then"]))
	if e, ok := m["else"]; ok {
		b.WriteString("; otherwise " + describe(e))
	}
	b.WriteString(".")
	return b.String()
}

// describe renders a condition schema in words where its shape is known.
func describe(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return compact(v)
	}
	if list, ok := fieldSets(m["oneOf"]); ok && len(m) == 1 {
		return "exactly one of " + strings.Join(list, ", ") + " is present"
	}
	if list, ok := fieldSets(m["anyOf"]); ok && len(m) == 1 {
		return "at least one of " + strings.Join(list, ", ") + " is present"
	}
	if not, ok := m["not"].(map[string]any); ok && len(m) == 1 {
		if list, ok := fieldSets(not["anyOf"]); ok && len(not) == 1 {
			return "none of " + strings.Join(list, ", ") + " is present"
		}
	}
	// {properties: {p: {const: v}}, required: [p]}
	props, _ := m["properties"].(map[string]any)
	req := asList(m["required"])
	if len(m) == 2 && len(props) == 1 && len(req) == 1 {
		for name, p := range props {
			pm, _ := p.(map[string]any)
			if c, ok := pm["const"]; ok && len(pm) == 1 && req[0] == name {
				return name + " is " + compact(c)
			}
		}
	}
	return "the detail matches " + compact(v)
}

// fieldSets returns the single required field of each alternative of a list
// of {required: [name]} schemas.
func fieldSets(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, false
	}
	var names []string
	for _, alt := range list {
		am, _ := alt.(map[string]any)
		req := asList(am["required"])
		if len(am) != 1 || len(req) != 1 {
			return nil, false
		}
		name, ok := req[0].(string)
		if !ok {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func where(at string) string {
	if at == "" {
		return "detail schema"
	}
	return "detail schema at " + at
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
