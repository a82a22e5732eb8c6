package main

import (
	"encoding/json"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// The stack registers the change event's schema: one registry, one OpenAPI 3
// schema in it whose content is envelope.RegistrySchema of the source and
// detail type prepare-change publishes with, named source@DetailComponent.
func TestEventSchemaRegistered(t *testing.T) {
	regID, reg := oneOfType(t, "AWS::EventSchemas::Registry", "SchemaRegistry")
	if got := path(props(reg), "RegistryName"); got != SchemaRegistryName(stackName) {
		t.Errorf("registry name = %v", got)
	}
	_, sch := oneOfType(t, "AWS::EventSchemas::Schema", "EventSchema")
	p := props(sch)
	if !jsonEq(p["RegistryName"], getAtt(regID, "RegistryName")) {
		t.Errorf("schema registry = %v, want the stack's registry", p["RegistryName"])
	}
	if p["Type"] != "OpenApi3" {
		t.Errorf("schema type = %v, want OpenApi3 (the registry accepts OpenApi3 and JSONSchemaDraft4)", p["Type"])
	}

	// The envelope names what prepare-change really publishes.
	_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	source, _ := path(props(pc), "Environment", "Variables", "CDC_EVENT_SOURCE").(string)
	detailType, _ := path(props(pc), "Environment", "Variables", "CDC_DETAIL_TYPE").(string)
	if source != cdcevent.DefaultSource || detailType != cdcevent.DefaultDetailType {
		t.Errorf("prepare-change publishes %q / %q, want the defaults", source, detailType)
	}
	if p["SchemaName"] != "healthlake.cdc@FHIRResourceChanged" || p["SchemaName"] != EventSchemaName(source, detailType) {
		t.Errorf("schema name = %v", p["SchemaName"])
	}
	content, _ := p["Content"].(string)
	want, err := envelope.RegistrySchema(source, detailType)
	if err != nil {
		t.Fatal(err)
	}
	if content != string(want) {
		t.Errorf("schema content is not envelope.RegistrySchema(%q, %q)", source, detailType)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(content), &doc); err != nil {
		t.Fatalf("content is not JSON: %v", err)
	}
	ev := path(doc, "components", "schemas", "AWSEvent")
	if path(ev, "x-amazon-events-source") != source || path(ev, "x-amazon-events-detail-type") != detailType {
		t.Errorf("AWSEvent names %v / %v", path(ev, "x-amazon-events-source"), path(ev, "x-amazon-events-detail-type"))
	}
	outputs, _ := synthesized.json["Outputs"].(map[string]any)
	for _, o := range []string{"SchemaRegistryName", "EventSchemaArn"} {
		if outputs[o] == nil {
			t.Errorf("output %s missing", o)
		}
	}
}

// Source and detail type are synth-time values (the registered schema and
// consumers' rules are built from them), no longer parameters; context sets
// them, and a bad one fails the synth with the context key to fix.
func TestEventNamesAreSynthTime(t *testing.T) {
	for _, name := range []string{"EventSource", "DetailType"} {
		if parameters()[name] != nil {
			t.Errorf("parameter %s: the event names are synth-time values now", name)
		}
	}
	ctx := map[string]any{ContextEventSource: "org.example.cdc", ContextDetailType: "Resource Changed"}
	c, err := ConfigFromContext(func(k string) any { return ctx[k] })
	if err != nil || c.EventSource != "org.example.cdc" || c.DetailType != "Resource Changed" {
		t.Errorf("context not applied: %+v, %v", c, err)
	}
	for _, bad := range [][2]string{{"has space", "x"}, {"", "x"}, {"ok", ""}, {"ok", string(make([]byte, 129))}} {
		if err := ValidateEventNames(bad[0], bad[1]); err == nil {
			t.Errorf("ValidateEventNames(%q, %q) passed", bad[0], bad[1])
		}
	}
	if err := ValidateEventNames(cdcevent.DefaultSource, cdcevent.DefaultDetailType); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}
