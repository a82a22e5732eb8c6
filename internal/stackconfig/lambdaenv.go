package stackconfig

// Resources are the values a deployment gives the Lambdas' environment: its
// resources' names, ARNs and URLs and its deploy-time settings. The CDK app
// passes CloudFormation tokens (they are strings too), cdc-local its local
// values. An empty value is set as empty, which every handler reads as
// unset (its default).
type Resources struct {
	// Pipeline is CDC_PIPELINE_NAME, the metrics' Pipeline dimension.
	Pipeline string
	// Bucket, Table: the artifact bucket and the DynamoDB table.
	Bucket, Table string
	// DatastoreID and HealthLakeEndpoint: the HealthLake data store and the
	// base URL of its API (the Region's endpoint in AWS).
	DatastoreID, HealthLakeEndpoint string
	// ExportRoleARN is the role HealthLake assumes to write exports;
	// KMSKeyID the key of exports, claim-checks and quarantine objects.
	ExportRoleARN, KMSKeyID string
	// RecheckQueueURL is the delayed re-check queue.
	RecheckQueueURL string
	// EventBus, EventSource, DetailType: where and as what events are published.
	EventBus, EventSource, DetailType string
	// ResourceTypes and ExcludeTypes: comma-separated type lists.
	ResourceTypes, ExcludeTypes string
	// MaxEntryBytes (a decimal byte count) and Validate (none, json, r4).
	MaxEntryBytes, Validate string
	// SafetyLag (a Go duration) and InitialCheckpoint: run-lock's window rules.
	SafetyLag, InitialCheckpoint string
}

// lambdaVars names, per Lambda, the variables it takes from Resources: what
// its handler reads. Every Lambda also gets EnvPipelineName and EnvBucket.
var lambdaVars = map[string][]string{
	RunLock: {EnvTable, EnvDatastoreID, EnvHealthLakeEndpoint, EnvSafetyLag, EnvInitialCheckpoint},
	StartExport: {EnvTable, EnvDatastoreID, EnvHealthLakeEndpoint, EnvExportRoleARN, EnvKMSKeyID,
		EnvRecheckQueueURL, EnvResourceTypes},
	CheckExport: {EnvTable, EnvDatastoreID, EnvHealthLakeEndpoint, EnvRecheckQueueURL},
	// The endpoint for the delete scan's history reads; the table for the
	// PutEvents share (internal/share).
	PrepareChange: {EnvTable, EnvHealthLakeEndpoint, EnvKMSKeyID, EnvResourceTypes, EnvExcludeTypes, EnvEventBus,
		EnvEventSource, EnvDetailType, EnvMaxEntryBytes, EnvValidate},
	Reconcile: {EnvTable, EnvDatastoreID, EnvHealthLakeEndpoint, EnvKMSKeyID, EnvResourceTypes, EnvExcludeTypes,
		EnvEventBus, EnvEventSource, EnvDetailType},
	// The fast path publishes as prepare-change does, reads versions back
	// from the data store, and records what it published in the table.
	FastPath: {EnvTable, EnvDatastoreID, EnvHealthLakeEndpoint, EnvKMSKeyID, EnvResourceTypes, EnvExcludeTypes, EnvEventBus,
		EnvEventSource, EnvDetailType, EnvMaxEntryBytes},
}

// value is the Resources field a variable of lambdaVars takes.
func (r Resources) value(name string) string {
	switch name {
	case EnvTable:
		return r.Table
	case EnvDatastoreID:
		return r.DatastoreID
	case EnvHealthLakeEndpoint:
		return r.HealthLakeEndpoint
	case EnvExportRoleARN:
		return r.ExportRoleARN
	case EnvKMSKeyID:
		return r.KMSKeyID
	case EnvRecheckQueueURL:
		return r.RecheckQueueURL
	case EnvEventBus:
		return r.EventBus
	case EnvEventSource:
		return r.EventSource
	case EnvDetailType:
		return r.DetailType
	case EnvResourceTypes:
		return r.ResourceTypes
	case EnvExcludeTypes:
		return r.ExcludeTypes
	case EnvMaxEntryBytes:
		return r.MaxEntryBytes
	case EnvValidate:
		return r.Validate
	case EnvSafetyLag:
		return r.SafetyLag
	case EnvInitialCheckpoint:
		return r.InitialCheckpoint
	}
	panic("stackconfig: no resource value for " + name) // lambdaVars and value are written together
}

// LambdaEnv returns the whole environment the stack gives the named Lambda
// (StartExport, CheckExport, PrepareChange, RunLock or Reconcile): the
// pipeline name and bucket, the variables of r its handler reads, and those
// derived from this configuration (Env). The CDK app and cdc-local both
// build the Lambdas' environment with it; an unknown name gets the pipeline
// name and bucket only.
func (c Config) LambdaEnv(name string, r Resources) map[string]string {
	env := c.Env(name)
	env[EnvPipelineName] = r.Pipeline
	env[EnvBucket] = r.Bucket
	for _, k := range lambdaVars[name] {
		env[k] = r.value(k)
	}
	return env
}
