package pipeline

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// Lambdas lists the Lambda functions of the pipeline (the four of the runs,
// the reconciliation's and the deploy's data store check), by the name of
// their cmd/ directory and of their <LambdaDir>/<name>/bootstrap binary.
var Lambdas = []string{"start-export", "check-export", "prepare-change", "run-lock", "reconcile", "check-datastore"}

// Settings is the deployed configuration shared with cdc-local: Lambda
// timeouts and memory, queue limits, the export wait, the run timeout and
// lease, the PutEvents budget (internal/stackconfig). Start from
// DefaultSettings and change it with Set; New validates it.
type Settings = stackconfig.Config

// DefaultSettings returns the default deployed configuration.
func DefaultSettings() Settings { return stackconfig.Default() }

// Props configures a pipeline. Name, LambdaDir, ASLFile and DatastoreID are
// required; every other field has the default its comment names.
//
// The synth-time fields (Name, LambdaDir, ASLFile, EventSource, DetailType,
// Settings) shape the template: resource names, the registered schema, the
// state machine definition and values that must hold relations to each
// other. The deploy-time fields are pointers: give a literal
// (jsii.String, jsii.Number) or a token — a CfnParameter's ValueAsString /
// ValueAsNumber — to change the value at deploy time without a new synth,
// as the app in cdk/ does. Literals are checked at synth; tokens are
// CloudFormation's to check (give the parameter an AllowedPattern).
type Props struct {
	// Name is the pipeline name: the `Pipeline` metric dimension,
	// CDC_PIPELINE_NAME, and the prefix of the state machine, dashboard,
	// schema registry, archive and rule names: 1–MaxNameLength letters,
	// digits, '-' or '_' (CheckName).
	Name string
	// LambdaDir holds <name>/bootstrap (linux/arm64) for every name of Lambdas.
	LambdaDir string
	// ASLFile is the state machine definition with ${...} placeholders.
	ASLFile string
	// EventSource and DetailType are the `source` and `detail-type` of every
	// change event (default cdcevent.DefaultSource, DefaultDetailType).
	EventSource, DetailType string
	// Settings defaults to DefaultSettings().
	Settings *Settings

	// DatastoreID is the HealthLake data store id (in the stack's Region).
	DatastoreID *string
	// EventBusName of the bus the pipeline creates (default "healthlake-cdc").
	EventBusName *string
	// ScheduleMinutes between two scheduled runs, 1–1440 (default 5).
	ScheduleMinutes *float64
	// ScheduleState ENABLED or DISABLED (default ENABLED).
	ScheduleState *string
	// ResourceTypes and ExcludeTypes: comma-separated FHIR types exported
	// (_type) and dropped after export (default "": all, none).
	ResourceTypes, ExcludeTypes *string
	// ValidateLevel none, json or r4 (default json).
	ValidateLevel *string
	// MaxEntryBytes is the PutEvents entry limit above which resources are
	// claim-checked, 1024–MaxPutEventsBytes (default 262144).
	MaxEntryBytes *float64
	// SafetyLag is CDC_SAFETY_LAG ("" keeps the Lambda's default).
	SafetyLag *string
	// InitialCheckpoint is CDC_INITIAL_CHECKPOINT (default "snapshot").
	InitialCheckpoint *string
	// CheckpointLagThresholdSeconds of the checkpoint lag alarm (default 1800).
	CheckpointLagThresholdSeconds *float64
	// LogRetentionDays of every log group, a value CloudWatch Logs accepts (default 30).
	LogRetentionDays *float64
	// ArchiveRetentionDays of the bus archive, 1–36500 (default the
	// ArchiveRetentionDays setting).
	ArchiveRetentionDays *float64
	// Expiry of the artifact bucket's prefixes and of its access logs, in
	// days (defaults 7, 30, 30, 30, 90 and 365).
	ExportsExpiryDays, ManifestsExpiryDays, MapResultsExpiryDays      *float64
	ClaimChecksExpiryDays, QuarantineExpiryDays, AccessLogsExpiryDays *float64
	// AlarmEmail is subscribed to the alarm topic when not empty (default "").
	AlarmEmail *string

	// VPC, when set, places every function of the pipeline in the
	// account's subnets (default nil: outside any VPC).
	VPC *VPC
	// ClaimCheckReaders are other AWS accounts (12-digit ids) whose
	// principals may read the claim-check objects, for consumers in those
	// accounts (docs/CONSUMERS.md, "A consumer in another account"); at
	// most MaxClaimCheckReaders. Default none: this account only.
	ClaimCheckReaders []string
}

// MaxClaimCheckReaders bounds ClaimCheckReaders: each account is a principal
// in the bucket policy and the key policy, which are limited in size (20 KB
// and 32 KB); 20 accounts keep both far below.
const MaxClaimCheckReaders = 20

var accountIDRE = regexp.MustCompile(`^[0-9]{12}$`)

// CheckClaimCheckReaders refuses what IAM would refuse as a principal (an
// account id is 12 digits), a repeated account, or more than
// MaxClaimCheckReaders.
func CheckClaimCheckReaders(accounts []string) error {
	if len(accounts) > MaxClaimCheckReaders {
		return fmt.Errorf("ClaimCheckReaders: %d accounts, at most %d", len(accounts), MaxClaimCheckReaders)
	}
	seen := map[string]bool{}
	for _, a := range accounts {
		if !accountIDRE.MatchString(a) {
			return fmt.Errorf("ClaimCheckReaders: %q is not an AWS account id (12 digits)", a)
		}
		if seen[a] {
			return fmt.Errorf("ClaimCheckReaders: account %s given twice", a)
		}
		seen[a] = true
	}
	return nil
}

// LogRetentionValues are the values CloudWatch Logs accepts for RetentionInDays.
var LogRetentionValues = []string{"1", "3", "5", "7", "14", "30", "60", "90", "120", "150", "180",
	"365", "400", "545", "731", "1096", "1827", "2192", "2557", "2922", "3288", "3653"}

// Patterns of the deploy-time string values (the app's parameters use them
// as AllowedPattern).
const (
	DatastoreIDPattern       = `^[A-Za-z0-9-]{1,64}$`
	EventBusNamePattern      = `^[A-Za-z0-9._\-]{1,256}$`
	TypeListPattern          = `^$|^[A-Z][A-Za-z]*(,[A-Z][A-Za-z]*)*$`
	InitialCheckpointPattern = `^(snapshot|now|[0-9]{4}-[0-9]{2}-[0-9]{2}T.+)?$`
	AlarmEmailPattern        = `^$|^[^@\s]+@[^@\s]+$`
)

// eventSourceRE is the shape of an event source: matched by consumers'
// rules and naming the registry schema.
var eventSourceRE = regexp.MustCompile(`^[A-Za-z0-9._\-]{1,256}$`)

// ValidateEventNames checks a `source` and `detail-type` of the change
// events: the source 1–256 letters, digits, '.', '_' or '-', the detail
// type 1–128 characters.
func ValidateEventNames(source, detailType string) error {
	if !eventSourceRE.MatchString(source) {
		return fmt.Errorf("event source %q: want 1–256 letters, digits, '.', '_' or '-'", source)
	}
	if n := utf8.RuneCountInString(detailType); n < 1 || n > 128 {
		return fmt.Errorf("detail type %q: want 1–128 characters", detailType)
	}
	return nil
}

// MaxNameLength is the longest pipeline name: the event archive's name
// (ArchiveName, Name + "-events") must fit EventBridge's 48 characters
// (CreateArchive ArchiveName), the tightest of the names derived from it.
const MaxNameLength = 41

// MaxPutEventsBytes is the largest MaxEntryBytes: PutEvents takes requests
// of up to 1 MB since January 2026 (AWS Compute Blog, "More room to build:
// serverless services now support payloads up to 1 MB"), read as 1,000,000
// bytes, the lesser reading of "MB", as the local EventBridge emulator
// reads it.
const MaxPutEventsBytes = 1_000_000

// nameRE is what every name derived from the pipeline name allows: state
// machine names no spaces, brackets, wildcards or punctuation; archive,
// rule and registry names [.-_A-Za-z0-9]; dashboard names [-_A-Za-z0-9].
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// DerivedName is one physical name derived from the pipeline name, with
// the length limit of the API that creates the resource.
type DerivedName struct {
	What, Name, API string
	Max             int
}

// DerivedNames lists the physical names the pipeline gives its resources
// from its name, each with its length limit and where AWS states it. The
// other resources (queues, functions, roles, the table, alarms, schedules,
// the Lambdas' log groups) take names CloudFormation generates within
// their limits; the event bus is named by EventBusName (1–256).
func DerivedNames(pipeline string) []DerivedName {
	return []DerivedName{
		{"event archive", ArchiveName(pipeline), "EventBridge CreateArchive ArchiveName", 48},
		{"HealthLake job event rule", JobEventRuleName(pipeline), "EventBridge PutRule Name", 64},
		{"schema registry", SchemaRegistryName(pipeline), "EventBridge Schemas RegistryName (as the Terraform AWS provider checks it)", 64},
		{"state machine", StateMachineName(pipeline), "Step Functions CreateStateMachine name", 80},
		{"reconciliation state machine", ReconcileStateMachineName(pipeline), "Step Functions CreateStateMachine name", 80},
		{"dashboard", DashboardName(pipeline), "CloudWatch PutDashboard DashboardName", 255},
		// With the FastPath setting only (fastpath.go).
		{"notification bus (FastPath)", NotificationBusName(pipeline), "EventBridge CreateEventBus Name", 256},
		{"fast-path queue (FastPath)", FastPathQueueName(pipeline), "SQS CreateQueue QueueName", 80},
		{"fast-path dead-letter queue (FastPath)", FastPathDeadLetterName(pipeline), "SQS CreateQueue QueueName", 80},
	}
}

// CheckName refuses a pipeline name AWS would refuse in one of the names
// derived from it (DerivedNames) at deploy time: the error names the
// resource, its name and the limit.
func CheckName(pipeline string) error {
	if !nameRE.MatchString(pipeline) {
		return fmt.Errorf("pipeline name %q: want 1–%d letters, digits, '-' or '_' (it prefixes the state machine, archive, rule, registry and dashboard names)", pipeline, MaxNameLength)
	}
	for _, r := range DerivedNames(pipeline) {
		if len(r.Name) > r.Max {
			return fmt.Errorf("pipeline name %q is %d characters: the %s name %q would be %d, over the %d of %s (use at most %d characters)",
				pipeline, len(pipeline), r.What, r.Name, len(r.Name), r.Max, r.API, MaxNameLength)
		}
	}
	return nil
}

// withDefaults returns p with every unset field at its default, after
// checking the required fields and the literal values.
func (p Props) withDefaults() (Props, error) {
	if p.Name == "" {
		return p, fmt.Errorf("pipeline: empty Name")
	}
	if err := CheckName(p.Name); err != nil {
		return p, fmt.Errorf("pipeline Name: %w", err)
	}
	if p.LambdaDir == "" || p.ASLFile == "" {
		return p, fmt.Errorf("pipeline %s: LambdaDir and ASLFile are required", p.Name)
	}
	if p.EventSource == "" {
		p.EventSource = cdcevent.DefaultSource
	}
	if p.DetailType == "" {
		p.DetailType = cdcevent.DefaultDetailType
	}
	if err := ValidateEventNames(p.EventSource, p.DetailType); err != nil {
		return p, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if p.Settings == nil {
		s := DefaultSettings()
		p.Settings = &s
	}
	if err := p.Settings.Validate(); err != nil {
		return p, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	if p.DatastoreID == nil {
		return p, fmt.Errorf("pipeline %s: DatastoreID is required", p.Name)
	}
	if p.VPC != nil {
		if err := p.VPC.Check(); err != nil {
			return p, fmt.Errorf("pipeline %s: %w", p.Name, err)
		}
	}
	if err := CheckClaimCheckReaders(p.ClaimCheckReaders); err != nil {
		return p, fmt.Errorf("pipeline %s: %w", p.Name, err)
	}
	str := func(v **string, def string) {
		if *v == nil {
			*v = jsii.String(def)
		}
	}
	num := func(v **float64, def float64) {
		if *v == nil {
			*v = jsii.Number(def)
		}
	}
	str(&p.EventBusName, "healthlake-cdc")
	num(&p.ScheduleMinutes, 5)
	str(&p.ScheduleState, "ENABLED")
	str(&p.ResourceTypes, "")
	str(&p.ExcludeTypes, "")
	str(&p.ValidateLevel, "json")
	num(&p.MaxEntryBytes, 262144)
	str(&p.SafetyLag, "")
	str(&p.InitialCheckpoint, "snapshot")
	num(&p.CheckpointLagThresholdSeconds, 1800)
	num(&p.LogRetentionDays, 30)
	num(&p.ArchiveRetentionDays, float64(p.Settings.ArchiveRetentionDays))
	num(&p.ExportsExpiryDays, 7)
	num(&p.ManifestsExpiryDays, 30)
	num(&p.MapResultsExpiryDays, 30)
	num(&p.ClaimChecksExpiryDays, 30)
	num(&p.QuarantineExpiryDays, 90)
	num(&p.AccessLogsExpiryDays, 365)
	str(&p.AlarmEmail, "")
	if err := p.checkLiterals(); err != nil {
		return p, err
	}
	return p, p.checkFastPath()
}

// checkLiterals checks the deploy-time values given as literals the way
// the app's parameters check them at deploy time.
func (p Props) checkLiterals() error {
	pattern := func(name string, v *string, re string) error {
		if isToken(v) || regexp.MustCompile(re).MatchString(*v) {
			return nil
		}
		return fmt.Errorf("pipeline %s: %s %q does not match %s", p.Name, name, *v, re)
	}
	rng := func(name string, v *float64, lo, hi float64) error {
		if unresolved(v) || *v >= lo && *v <= hi && *v == float64(int64(*v)) {
			return nil
		}
		return fmt.Errorf("pipeline %s: %s %v: want a whole number in %v–%v", p.Name, name, *v, lo, hi)
	}
	oneOf := func(name string, v *string, allowed ...string) error {
		if isToken(v) || slices.Contains(allowed, *v) {
			return nil
		}
		return fmt.Errorf("pipeline %s: %s %q: want one of %v", p.Name, name, *v, allowed)
	}
	logDays := "x"
	if !unresolved(p.LogRetentionDays) {
		logDays = strconv.FormatFloat(*p.LogRetentionDays, 'f', -1, 64)
	}
	for _, err := range []error{
		pattern("DatastoreID", p.DatastoreID, DatastoreIDPattern),
		pattern("EventBusName", p.EventBusName, EventBusNamePattern),
		rng("ScheduleMinutes", p.ScheduleMinutes, 1, 1440),
		oneOf("ScheduleState", p.ScheduleState, "ENABLED", "DISABLED"),
		pattern("ResourceTypes", p.ResourceTypes, TypeListPattern),
		pattern("ExcludeTypes", p.ExcludeTypes, TypeListPattern),
		oneOf("ValidateLevel", p.ValidateLevel, "none", "json", "r4"),
		rng("MaxEntryBytes", p.MaxEntryBytes, 1024, MaxPutEventsBytes),
		pattern("InitialCheckpoint", p.InitialCheckpoint, InitialCheckpointPattern),
		rng("CheckpointLagThresholdSeconds", p.CheckpointLagThresholdSeconds, 60, 31536000),
		rng("ArchiveRetentionDays", p.ArchiveRetentionDays, 1, 36500),
		rng("ExportsExpiryDays", p.ExportsExpiryDays, 1, 36500),
		rng("ManifestsExpiryDays", p.ManifestsExpiryDays, 1, 36500),
		rng("MapResultsExpiryDays", p.MapResultsExpiryDays, 1, 36500),
		rng("ClaimChecksExpiryDays", p.ClaimChecksExpiryDays, 1, 36500),
		rng("QuarantineExpiryDays", p.QuarantineExpiryDays, 1, 36500),
		rng("AccessLogsExpiryDays", p.AccessLogsExpiryDays, 1, 36500),
		pattern("AlarmEmail", p.AlarmEmail, AlarmEmailPattern),
	} {
		if err != nil {
			return err
		}
	}
	if logDays != "x" && !slices.Contains(LogRetentionValues, logDays) {
		return fmt.Errorf("pipeline %s: LogRetentionDays %s: want one of %v", p.Name, logDays, LogRetentionValues)
	}
	return nil
}

func isToken(v *string) bool { return unresolved(v) }

// unresolved reports whether v is a token (resolved only at deploy time).
func unresolved(v any) bool { return *awscdk.Token_IsUnresolved(v) }

// numString renders a number (literal or token) as a string value.
func numString(v *float64) *string {
	if unresolved(v) {
		return awscdk.Token_AsString(v, nil)
	}
	return jsii.String(strconv.FormatFloat(*v, 'f', -1, 64))
}
