package main

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
)

// Names the app and its tests share with the pipeline construct.
const (
	MetricNamespace          = pipeline.MetricNamespace
	MetricDimension          = pipeline.MetricDimension
	MetricCheckpointLag      = pipeline.MetricCheckpointLag
	MetricQuarantinedLines   = pipeline.MetricQuarantinedLines
	MetricEntriesFailed      = pipeline.MetricEntriesFailed
	MetricExportErrors       = pipeline.MetricExportErrors
	EventsNamespace          = pipeline.EventsNamespace
	MetricPutEventsThrottled = pipeline.MetricPutEventsThrottled

	PrefixExports    = pipeline.PrefixExports
	PrefixManifests  = pipeline.PrefixManifests
	PrefixMapResults = pipeline.PrefixMapResults
	PrefixClaimCheck = pipeline.PrefixClaimCheck
	PrefixQuarantine = pipeline.PrefixQuarantine
	PrefixDelivered  = pipeline.PrefixDelivered
	PrefixReconcile  = pipeline.PrefixReconcile
)

// Functions of the pipeline construct the app's tests use.
var (
	StateMachineName   = pipeline.StateMachineName
	DashboardName      = pipeline.DashboardName
	SchemaRegistryName = pipeline.SchemaRegistryName
	EventSchemaName    = pipeline.EventSchemaName
	ApplyNagPacks      = pipeline.ApplyNagPacks
)

// NewPipelineStack builds the app's one stack: the CloudFormation parameters
// (params.go) for what may change at deploy time without a new synth, and
// the pipeline construct (cdk/pipeline) with the configuration and those
// parameters. The construct's id is "Default", which CDK leaves out of
// logical ids: the stack's resources keep the ids they had before the
// pipeline became a construct, so an update replaces none of them.
func NewPipelineStack(scope constructs.Construct, cfg Config, props *awscdk.StackProps) (awscdk.Stack, error) {
	if err := cfg.validateValues(); err != nil {
		return nil, err
	}
	if cfg.Region != "" {
		if err := cfg.Settings.CheckFIPSRegion(cfg.Region); err != nil {
			return nil, fmt.Errorf("%w (%s, the Region synth deploys to: CDK_DEFAULT_REGION)", err, cfg.Region)
		}
	}
	source, detailType := cfg.eventNames()
	if props == nil {
		props = &awscdk.StackProps{}
	}
	if cfg.PermissionsBoundary != "" && props.PermissionsBoundary == nil {
		props.PermissionsBoundary = permissionsBoundary(cfg.PermissionsBoundary)
	}
	if props.Description == nil {
		props.Description = jsii.String("healthlake-cdc: AWS HealthLake change-data-capture to EventBridge")
	}
	stack := awscdk.NewStack(scope, jsii.String(cfg.StackName), props)
	if advice := cfg.Settings.QuotaAdvice(cfg.Region); advice != "" {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("healthlake-cdc:PutEventsQuota"), jsii.String(advice))
	}
	p := newParams(stack, cfg.Settings)
	set := cfg.Settings
	_, err := pipeline.New(stack, "Default", pipeline.Props{
		Name: cfg.StackName, LambdaDir: cfg.LambdaDir, ASLFile: cfg.ASLFile,
		EventSource: source, DetailType: detailType, Settings: &set,

		DatastoreID:                   p.DatastoreID.ValueAsString(),
		EventBusName:                  p.EventBusName.ValueAsString(),
		ScheduleMinutes:               p.ScheduleMinutes.ValueAsNumber(),
		ScheduleState:                 p.ScheduleState.ValueAsString(),
		ResourceTypes:                 p.ResourceTypes.ValueAsString(),
		ExcludeTypes:                  p.ExcludeTypes.ValueAsString(),
		ValidateLevel:                 p.ValidateLevel.ValueAsString(),
		MaxEntryBytes:                 p.MaxEntryBytes.ValueAsNumber(),
		SafetyLag:                     p.SafetyLag.ValueAsString(),
		InitialCheckpoint:             p.InitialCheckpoint.ValueAsString(),
		CheckpointLagThresholdSeconds: p.CheckpointLagThreshold.ValueAsNumber(),
		LogRetentionDays:              p.LogRetentionDays.ValueAsNumber(),
		ArchiveRetentionDays:          p.ArchiveRetentionDays.ValueAsNumber(),
		ExportsExpiryDays:             p.ExportsExpiryDays.ValueAsNumber(),
		ManifestsExpiryDays:           p.ManifestsExpiryDays.ValueAsNumber(),
		MapResultsExpiryDays:          p.MapResultsExpiryDays.ValueAsNumber(),
		ClaimChecksExpiryDays:         p.ClaimChecksExpiryDays.ValueAsNumber(),
		QuarantineExpiryDays:          p.QuarantineExpiryDays.ValueAsNumber(),
		AccessLogsExpiryDays:          p.AccessLogsExpiryDays.ValueAsNumber(),
		AlarmEmail:                    p.AlarmEmail.ValueAsString(),
		VPC:                           cfg.VPC,
		ClaimCheckReaders:             cfg.ClaimCheckReaders,
	})
	if err != nil {
		return nil, err
	}
	return stack, nil
}

// permissionsBoundary is the boundary of every role in the stack: CDK sets
// PermissionsBoundary on each AWS::IAM::Role (and user) under it.
func permissionsBoundary(v string) awscdk.PermissionsBoundary {
	if strings.HasPrefix(v, "arn:") {
		return awscdk.PermissionsBoundary_FromArn(jsii.String(v))
	}
	return awscdk.PermissionsBoundary_FromName(jsii.String(v))
}
