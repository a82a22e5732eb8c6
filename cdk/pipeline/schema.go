package pipeline

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awseventschemas"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// SchemaRegistryName is the name of the EventBridge schema registry the
// stack of a pipeline creates for its change events.
func SchemaRegistryName(pipeline string) string { return pipeline + "-events" }

// EventSchemaName is the name of the change event's schema in the registry:
// "{source}@{detail component}", as EventBridge names discovered schemas
// (e.g. "healthlake.cdc@FHIRResourceChanged").
func EventSchemaName(source, detailType string) string {
	return source + "@" + envelope.RegistryDetailComponent(detailType)
}

// maxSchemaDescription is the longest description of a registry schema.
const maxSchemaDescription = 256

// eventSchema is the registered schema of the change events.
type eventSchema struct {
	registry awseventschemas.CfnRegistry
	schema   awseventschemas.CfnSchema
}

// registryContent returns the OpenAPI 3.0 document registered for the
// change events of source and detailType (envelope.RegistrySchema).
func registryContent(source, detailType string) (string, error) {
	doc, err := envelope.RegistrySchema(source, detailType)
	if err != nil {
		return "", fmt.Errorf("event schema for the registry: %w", err)
	}
	return string(doc), nil
}

// newEventSchema registers the change event's schema (content, made by
// registryContent) in a registry of its own, so consumers find it in the
// EventBridge console and their IDE toolkits and can download code
// bindings. Each content change becomes a new schema version.
func newEventSchema(scope constructs.Construct, pipeline, source, detailType, content string) eventSchema {
	reg := awseventschemas.NewCfnRegistry(scope, jsii.String("SchemaRegistry"), &awseventschemas.CfnRegistryProps{
		RegistryName: jsii.String(SchemaRegistryName(pipeline)),
		Description:  jsii.String("healthlake-cdc: schema of the change events of " + pipeline),
	})
	// A schema's description has at most 256 characters: a long source
	// and detail type (up to 256 and 128) are left out of it.
	desc := fmt.Sprintf("The event of source %s, detail-type %s: detail schema version %s (docs/EVENTS.md)",
		source, detailType, envelope.SchemaVersion)
	if len(desc) > maxSchemaDescription {
		desc = fmt.Sprintf("The change event: detail schema version %s (docs/EVENTS.md)", envelope.SchemaVersion)
	}
	sch := awseventschemas.NewCfnSchema(scope, jsii.String("EventSchema"), &awseventschemas.CfnSchemaProps{
		RegistryName: reg.AttrRegistryName(),
		SchemaName:   jsii.String(EventSchemaName(source, detailType)),
		Type:         jsii.String(envelope.RegistrySchemaType),
		Content:      jsii.String(content),
		Description:  jsii.String(desc),
	})
	return eventSchema{registry: reg, schema: sch}
}
