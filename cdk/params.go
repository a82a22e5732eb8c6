package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Parameter names of the stack. They are CloudFormation parameters, so one
// synthesized template serves every account, region and datastore; set them
// with `cdk deploy --parameters Name=Value` (docs/DEPLOY.md). Each becomes
// the token of a deploy-time field of pipeline.Props; only values that must
// change without a new synth are parameters (the event source and detail
// type, the consumers' contract, are synth-time context).
const (
	ParamDatastoreID            = "DatastoreId"
	ParamEventBusName           = "EventBusName"
	ParamScheduleMinutes        = "ScheduleMinutes"
	ParamScheduleState          = "ScheduleState"
	ParamResourceTypes          = "ResourceTypes"
	ParamExcludeTypes           = "ExcludeTypes"
	ParamValidateLevel          = "ValidateLevel"
	ParamMaxEntryBytes          = "MaxEntryBytes"
	ParamSafetyLag              = "SafetyLag"
	ParamInitialCheckpoint      = "InitialCheckpoint"
	ParamCheckpointLagThreshold = "CheckpointLagThresholdSeconds"
	ParamLogRetentionDays       = "LogRetentionDays"
	ParamArchiveRetentionDays   = "ArchiveRetentionDays"
	ParamExportsExpiryDays      = "ExportsExpiryDays"
	ParamManifestsExpiryDays    = "ManifestsExpiryDays"
	ParamMapResultsExpiryDays   = "MapResultsExpiryDays"
	ParamClaimChecksExpiryDays  = "ClaimChecksExpiryDays"
	ParamQuarantineExpiryDays   = "QuarantineExpiryDays"
	ParamAccessLogsExpiryDays   = "AccessLogsExpiryDays"
	ParamAlarmEmail             = "AlarmEmail"
)

// Timeouts, memory, queue limits, the export wait, the run timeout and the
// PutEvents budget are not parameters: they depend on each other, so they
// are synth-time settings (internal/stackconfig, CDK context "settings")
// that Validate checks together before anything is synthesized.
// CloudFormation Rules cannot compare numbers, so a parameter could not be
// held to those relations at deploy time.

// params holds the stack's CloudFormation parameters.
type params struct {
	DatastoreID, EventBusName                   awscdk.CfnParameter
	ScheduleMinutes, ScheduleState              awscdk.CfnParameter
	ResourceTypes, ExcludeTypes, ValidateLevel  awscdk.CfnParameter
	MaxEntryBytes, SafetyLag, InitialCheckpoint awscdk.CfnParameter
	CheckpointLagThreshold, LogRetentionDays    awscdk.CfnParameter
	ArchiveRetentionDays                        awscdk.CfnParameter
	ExportsExpiryDays, ManifestsExpiryDays      awscdk.CfnParameter
	MapResultsExpiryDays, ClaimChecksExpiryDays awscdk.CfnParameter
	AccessLogsExpiryDays                        awscdk.CfnParameter
	QuarantineExpiryDays                        awscdk.CfnParameter
	AlarmEmail                                  awscdk.CfnParameter
}

func strParam(stack awscdk.Stack, name, def, pattern, desc string) awscdk.CfnParameter {
	p := &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String(def), Description: jsii.String(desc)}
	if pattern != "" {
		p.AllowedPattern = jsii.String(pattern)
	}
	return awscdk.NewCfnParameter(stack, jsii.String(name), p)
}

func numParam(stack awscdk.Stack, name string, def, min, max float64, desc string) awscdk.CfnParameter {
	return awscdk.NewCfnParameter(stack, jsii.String(name), &awscdk.CfnParameterProps{
		Type:        jsii.String("Number"),
		Default:     jsii.Number(def),
		MinValue:    jsii.Number(min),
		MaxValue:    jsii.Number(max),
		Description: jsii.String(desc),
	})
}

func newParams(stack awscdk.Stack, set stackconfig.Config) *params {
	p := &params{}
	p.DatastoreID = awscdk.NewCfnParameter(stack, jsii.String(ParamDatastoreID), &awscdk.CfnParameterProps{
		Type:           jsii.String("String"),
		AllowedPattern: jsii.String(pipeline.DatastoreIDPattern),
		Description:    jsii.String("HealthLake FHIR data store id (in this stack's region). Required."),
	})
	p.EventBusName = strParam(stack, ParamEventBusName, "healthlake-cdc", pipeline.EventBusNamePattern,
		"Name of the custom EventBridge bus this stack creates.")
	p.ScheduleMinutes = numParam(stack, ParamScheduleMinutes, 5, 1, 1440,
		"Minutes between two scheduled runs.")
	p.ScheduleState = awscdk.NewCfnParameter(stack, jsii.String(ParamScheduleState), &awscdk.CfnParameterProps{
		Type:          jsii.String("String"),
		Default:       jsii.String("ENABLED"),
		AllowedValues: jsii.Strings("ENABLED", "DISABLED"),
		Description:   jsii.String("DISABLED stops new scheduled runs (roll back, maintenance)."),
	})
	p.ResourceTypes = strParam(stack, ParamResourceTypes, "", pipeline.TypeListPattern,
		"Comma-separated FHIR types to export (_type); empty exports every type.")
	p.ExcludeTypes = strParam(stack, ParamExcludeTypes, "", pipeline.TypeListPattern,
		"Comma-separated FHIR types dropped after export; empty drops none.")
	p.ValidateLevel = awscdk.NewCfnParameter(stack, jsii.String(ParamValidateLevel), &awscdk.CfnParameterProps{
		Type:          jsii.String("String"),
		Default:       jsii.String("json"),
		AllowedValues: jsii.Strings("none", "json", "r4"),
		Description:   jsii.String("Validation of exported lines before publishing (CDC_VALIDATE)."),
	})
	p.MaxEntryBytes = numParam(stack, ParamMaxEntryBytes, 262144, 1024, pipeline.MaxPutEventsBytes,
		"PutEvents entry size limit; larger resources are claim-checked to S3.")
	p.SafetyLag = strParam(stack, ParamSafetyLag, "", "",
		"CDC_SAFETY_LAG for run-lock; empty keeps the Lambda's default (2 minutes).")
	p.InitialCheckpoint = strParam(stack, ParamInitialCheckpoint, "snapshot", pipeline.InitialCheckpointPattern,
		"CDC_INITIAL_CHECKPOINT for run-lock, used only while the table has no RUN record: snapshot (publish the whole store, then continue incrementally), now, or an RFC 3339 time.")
	p.CheckpointLagThreshold = numParam(stack, ParamCheckpointLagThreshold, 1800, 60, 31536000,
		"Alarm when CheckpointLagSeconds stays above this many seconds.")
	p.LogRetentionDays = awscdk.NewCfnParameter(stack, jsii.String(ParamLogRetentionDays), &awscdk.CfnParameterProps{
		Type: jsii.String("Number"),
		// A string, like the allowed values: CloudFormation takes either,
		// but cfn-lint (E2015) refuses a number among strings, and
		// deployment pipelines that run it would stop there.
		Default:       jsii.String("30"),
		AllowedValues: jsii.Strings(pipeline.LogRetentionValues...),
		Description:   jsii.String("Retention of every log group of the stack, in days."),
	})
	// At least one day: the archive holds every event in full (PHI), so it
	// never keeps them indefinitely.
	p.ArchiveRetentionDays = numParam(stack, ParamArchiveRetentionDays, float64(set.ArchiveRetentionDays), 1, 36500,
		"Retention of the event bus archive in days (1 to 36500; never indefinite).")
	p.ExportsExpiryDays = numParam(stack, ParamExportsExpiryDays, 7, 1, 36500, "Expiry of exports/ objects, in days.")
	p.ManifestsExpiryDays = numParam(stack, ParamManifestsExpiryDays, 30, 1, 36500, "Expiry of manifests/ objects, in days.")
	p.MapResultsExpiryDays = numParam(stack, ParamMapResultsExpiryDays, 30, 1, 36500, "Expiry of map-results/ objects, in days.")
	p.ClaimChecksExpiryDays = numParam(stack, ParamClaimChecksExpiryDays, 30, 1, 36500, "Expiry of claim-check/ objects, in days.")
	p.QuarantineExpiryDays = numParam(stack, ParamQuarantineExpiryDays, 90, 1, 36500, "Expiry of quarantine/ objects, in days.")
	p.AccessLogsExpiryDays = numParam(stack, ParamAccessLogsExpiryDays, 365, 1, 36500,
		"Expiry of the artifact bucket's server access logs, in days.")
	p.AlarmEmail = strParam(stack, ParamAlarmEmail, "", pipeline.AlarmEmailPattern,
		"Optional e-mail address subscribed to the alarm topic.")
	return p
}
