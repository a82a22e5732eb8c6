package exportjob

// HealthLake publishes its job state events on the account's default
// EventBridge bus (Amazon EventBridge events reference, "AWS HealthLake
// events": source aws.healthlake, delivery type durable). The stack's rule
// matches the export job detail types of its data store and targets the
// re-check queue through an InputTransformer producing a JobEventMessage;
// cdc-local applies the same transformer. These values are that rule, once.

// JobEventSource is the source of HealthLake's events.
const JobEventSource = "aws.healthlake"

// JobEventDetailTypes are the export job detail types the rule matches: the
// ones after which a check can act (a finished job).
var JobEventDetailTypes = []string{
	"Export Job Completed",
	"Export Job Completed With Errors",
	"Export Job Failed",
}

// JobEventInputPathsMap is the rule target's InputTransformer InputPathsMap.
var JobEventInputPathsMap = map[string]string{
	"datastoreId": "$.detail.datastoreId",
	"jobId":       "$.detail.jobId",
	"jobStatus":   "$.detail-type",
}

// JobEventInputTemplate is the rule target's InputTransformer InputTemplate:
// a JobEventMessage. Placeholders stand outside quotes, so EventBridge
// inserts each value as the JSON string it is.
const JobEventInputTemplate = `{"kind":"jobEvent","datastoreId":<datastoreId>,"jobId":<jobId>,"jobStatus":<jobStatus>}`
