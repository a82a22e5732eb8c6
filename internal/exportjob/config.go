package exportjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// MaxSQSDelay is the largest DelaySeconds SQS accepts.
const MaxSQSDelay = 900 * time.Second

// DefaultMaxCheckDelay is the default re-check cap (contract C7): polling is
// the fallback of HealthLake's job events, so it stays short.
const DefaultMaxCheckDelay = 60 * time.Second

// Manifest defaults (contract C1).
const (
	DefaultBatchMaxFiles    = 10
	DefaultBatchMaxBytes    = 128 << 20
	DefaultPartBatches      = 1000
	defaultQuarantinePrefix = "quarantine/"
)

// What check-export does with a job that ended COMPLETED_WITH_ERRORS
// (CDC_EXPORT_ERRORS_POLICY).
const (
	// ErrorsLenient publishes the good files, quarantines the entries of
	// HealthLake's error files with their reasons, counts them (ExportErrors)
	// and lets the run commit. The default.
	ErrorsLenient = "lenient"
	// ErrorsStrict fails the run (ExportCompletedWithErrors); the checkpoint
	// stays until someone acts.
	ErrorsStrict = "strict"
)

// Config is the export Lambdas' configuration (see ConfigFromEnv for the
// environment variables).
type Config struct {
	// Table is the CDC DynamoDB table holding the export ledger (CDC_TABLE).
	Table string
	// Bucket is the artifact bucket: exports and manifests (CDC_BUCKET).
	Bucket string
	// DatastoreID is the HealthLake data store (CDC_DATASTORE_ID).
	DatastoreID string
	// HealthLakeEndpoint is the HealthLake base URL (CDC_HEALTHLAKE_ENDPOINT;
	// default https://healthlake.{region}.amazonaws.com).
	HealthLakeEndpoint string
	// ExportRoleARN is the role HealthLake assumes (CDC_EXPORT_ROLE_ARN).
	ExportRoleARN string
	// KMSKeyID encrypts exports (CDC_KMS_KEY_ID, optional).
	KMSKeyID string
	// DatastoreKey is the data store's customer-managed key the stack was
	// deployed for (CDC_DATASTORE_KEY; empty: an AWS owned key): a refused
	// export start compares it with the data store's own (datastorehint.go).
	DatastoreKey string
	// RecheckQueueURL is the delayed re-check queue (CDC_RECHECK_QUEUE_URL).
	RecheckQueueURL string
	// ResourceTypes is the `_type` filter (CDC_RESOURCE_TYPES, comma-separated).
	ResourceTypes []string
	// ExportPrefix is the key prefix exports are written under; default "exports/".
	ExportPrefix string
	// QuarantinePrefix is where the entries of export error files are
	// quarantined: {prefix}{runId}/{error file key}.ndjson; default "quarantine/".
	QuarantinePrefix string
	// BatchLimits bound one prepare-change batch of the manifest
	// (CDC_BATCH_MAX_FILES, default 10; CDC_BATCH_MAX_BYTES, default 128 MiB).
	BatchLimits manifest.Limits
	// PartBatches is the most batches per manifest part
	// (CDC_MANIFEST_PART_BATCHES, default 1000).
	PartBatches int
	// FirstCheckDelay delays the first re-check (CDC_RECHECK_DELAY; default 30 s).
	FirstCheckDelay time.Duration
	// MaxCheckDelay caps the backed-off re-check delay (CDC_RECHECK_MAX_DELAY;
	// default 60 s, at most 900 s). The wait's HeartbeatSeconds is derived
	// from it (internal/stackconfig).
	MaxCheckDelay time.Duration
	// MaxWait fails the run and cancels the job when the export has run this
	// long (CDC_EXPORT_MAX_WAIT; default 2 h; a negative value disables it).
	MaxWait time.Duration
	// ClaimLease is how long a start-export claim on a run blocks others
	// (CDC_EXPORT_CLAIM_LEASE; default 2 min). Keep it above the Lambda timeout.
	ClaimLease time.Duration
	// LedgerTTL is how long ledger items live (CDC_EXPORT_LEDGER_TTL; default 30 days).
	LedgerTTL time.Duration
	// ErrorsPolicy is ErrorsLenient (default) or ErrorsStrict
	// (CDC_EXPORT_ERRORS_POLICY).
	ErrorsPolicy string
}

// withDefaults fills unset durations and prefixes.
func (c Config) withDefaults() Config {
	if c.ExportPrefix == "" {
		c.ExportPrefix = "exports/"
	}
	if c.QuarantinePrefix == "" {
		c.QuarantinePrefix = defaultQuarantinePrefix
	}
	if c.BatchLimits.MaxFiles <= 0 {
		c.BatchLimits.MaxFiles = DefaultBatchMaxFiles
	}
	if c.BatchLimits.MaxBytes <= 0 {
		c.BatchLimits.MaxBytes = DefaultBatchMaxBytes
	}
	if c.PartBatches <= 0 {
		c.PartBatches = DefaultPartBatches
	}
	if c.ErrorsPolicy == "" {
		c.ErrorsPolicy = ErrorsLenient
	}
	if c.FirstCheckDelay <= 0 {
		c.FirstCheckDelay = 30 * time.Second
	}
	if c.MaxCheckDelay <= 0 {
		c.MaxCheckDelay = DefaultMaxCheckDelay
	}
	if c.MaxCheckDelay > MaxSQSDelay {
		c.MaxCheckDelay = MaxSQSDelay
	}
	if c.FirstCheckDelay > c.MaxCheckDelay {
		c.FirstCheckDelay = c.MaxCheckDelay
	}
	if c.MaxWait == 0 {
		c.MaxWait = 2 * time.Hour
	}
	if c.ClaimLease <= 0 {
		c.ClaimLease = 2 * time.Minute
	}
	if c.LedgerTTL <= 0 {
		c.LedgerTTL = 30 * 24 * time.Hour
	}
	return c
}

// ConfigFromEnv reads the configuration from environment variables:
// CDC_TABLE, CDC_BUCKET, CDC_DATASTORE_ID, CDC_HEALTHLAKE_ENDPOINT (else
// AWS_ENDPOINT_URL_HEALTHLAKE, else AWS_ENDPOINT_URL),
// CDC_EXPORT_ROLE_ARN, CDC_KMS_KEY_ID, CDC_RECHECK_QUEUE_URL,
// CDC_RESOURCE_TYPES, CDC_EXPORT_PREFIX, CDC_RECHECK_DELAY,
// CDC_RECHECK_MAX_DELAY, CDC_EXPORT_MAX_WAIT, CDC_EXPORT_CLAIM_LEASE,
// CDC_EXPORT_LEDGER_TTL (durations as Go durations like "90s" or plain
// seconds), CDC_BATCH_MAX_FILES, CDC_BATCH_MAX_BYTES,
// CDC_MANIFEST_PART_BATCHES and CDC_EXPORT_ERRORS_POLICY (lenient or
// strict). getenv is os.Getenv when nil.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Table:              getenv(stackconfig.EnvTable),
		Bucket:             getenv(stackconfig.EnvBucket),
		DatastoreID:        getenv(stackconfig.EnvDatastoreID),
		HealthLakeEndpoint: getenv(stackconfig.EnvHealthLakeEndpoint),
		ExportRoleARN:      getenv(stackconfig.EnvExportRoleARN),
		KMSKeyID:           getenv(stackconfig.EnvKMSKeyID),
		DatastoreKey:       getenv(stackconfig.EnvDatastoreKey),
		RecheckQueueURL:    getenv(stackconfig.EnvRecheckQueueURL),
		ExportPrefix:       getenv(stackconfig.EnvExportPrefix),
	}
	if c.HealthLakeEndpoint == "" {
		// cdc-local points every client at one port with the SDK's variables.
		c.HealthLakeEndpoint = getenv("AWS_ENDPOINT_URL_HEALTHLAKE")
	}
	if c.HealthLakeEndpoint == "" {
		c.HealthLakeEndpoint = getenv("AWS_ENDPOINT_URL")
	}
	for _, t := range strings.Split(getenv(stackconfig.EnvResourceTypes), ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.ResourceTypes = append(c.ResourceTypes, t)
		}
	}
	durations := []struct {
		name string
		dst  *time.Duration
	}{
		{stackconfig.EnvRecheckDelay, &c.FirstCheckDelay},
		{stackconfig.EnvRecheckMaxDelay, &c.MaxCheckDelay},
		{stackconfig.EnvExportMaxWait, &c.MaxWait},
		{stackconfig.EnvExportClaimLease, &c.ClaimLease},
		{stackconfig.EnvExportLedgerTTL, &c.LedgerTTL},
	}
	for _, d := range durations {
		v := strings.TrimSpace(getenv(d.name))
		if v == "" {
			continue
		}
		dur, err := parseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", d.name, err)
		}
		*d.dst = dur
	}
	if c.MaxCheckDelay > MaxSQSDelay {
		return Config{}, fmt.Errorf("CDC_RECHECK_MAX_DELAY: %s is above the SQS maximum of 900 s", c.MaxCheckDelay)
	}
	ints := []struct {
		name string
		dst  func(int64)
	}{
		{stackconfig.EnvBatchMaxFiles, func(n int64) { c.BatchLimits.MaxFiles = int(n) }},
		{stackconfig.EnvBatchMaxBytes, func(n int64) { c.BatchLimits.MaxBytes = n }},
		{stackconfig.EnvManifestPartBatches, func(n int64) { c.PartBatches = int(n) }},
	}
	for _, n := range ints {
		v := strings.TrimSpace(getenv(n.name))
		if v == "" {
			continue
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil || i < 1 || i > 1<<40 {
			return Config{}, fmt.Errorf("%s: %q is not a positive whole number", n.name, v)
		}
		n.dst(i)
	}
	switch v := strings.ToLower(strings.TrimSpace(getenv(stackconfig.EnvExportErrorsPolicy))); v {
	case "", ErrorsLenient, ErrorsStrict:
		c.ErrorsPolicy = v
	default:
		return Config{}, fmt.Errorf("CDC_EXPORT_ERRORS_POLICY: %q is neither %q nor %q", v, ErrorsLenient, ErrorsStrict)
	}
	if getenv("CDC_ALLOW_COMPLETED_WITH_ERRORS") != "" {
		return Config{}, errors.New("CDC_ALLOW_COMPLETED_WITH_ERRORS is replaced by CDC_EXPORT_ERRORS_POLICY (lenient, the default, or strict)")
	}
	return c.withDefaults(), nil
}

func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0, errors.New("negative duration")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("not a duration or a number of seconds: %q", v)
	}
	if d < 0 {
		return 0, errors.New("negative duration")
	}
	return d, nil
}

func (c Config) require(names ...string) error {
	var missing []string
	for _, n := range names {
		var v string
		switch n {
		case stackconfig.EnvTable:
			v = c.Table
		case stackconfig.EnvBucket:
			v = c.Bucket
		case stackconfig.EnvDatastoreID:
			v = c.DatastoreID
		case stackconfig.EnvExportRoleARN:
			v = c.ExportRoleARN
		case stackconfig.EnvRecheckQueueURL:
			v = c.RecheckQueueURL
		}
		if v == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing configuration: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Small interfaces over the AWS clients, satisfied by the SDK v2 clients.

// ExportAPI starts, describes and cancels HealthLake exports
// (*fhirrest.Client satisfies it).
type ExportAPI interface {
	StartExport(ctx context.Context, in fhirrest.StartExportInput) (*fhirrest.StartExportOutput, error)
	DescribeExport(ctx context.Context, datastoreID, jobID string) (*fhirrest.ExportJob, error)
	CancelExport(ctx context.Context, datastoreID, jobID string) error
}

// JobLister finds export jobs by name (*healthlake SDK Client satisfies it).
type JobLister interface {
	ListFHIRExportJobs(ctx context.Context, in *hlsdk.ListFHIRExportJobsInput, optFns ...func(*hlsdk.Options)) (*hlsdk.ListFHIRExportJobsOutput, error)
}

// TaskCallbacks answers Step Functions task tokens (*sfn.Client satisfies it).
type TaskCallbacks interface {
	SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error)
	SendTaskFailure(ctx context.Context, in *sfn.SendTaskFailureInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskFailureOutput, error)
	SendTaskHeartbeat(ctx context.Context, in *sfn.SendTaskHeartbeatInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskHeartbeatOutput, error)
}

// Queue sends re-check messages (*sqs.Client satisfies it).
type Queue interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// ObjectStore writes manifests and quarantine objects, lists export
// prefixes and reads export error files (*s3.Client satisfies it).
type ObjectStore interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// Deps are the clients the handlers and the Canceller use.
type Deps struct {
	Export ExportAPI
	Jobs   JobLister
	// Datastores describes the data store when an export start is refused;
	// nil: the failure reason names nothing more.
	Datastores datastore.Describer
	DB         DynamoAPI
	S3         ObjectStore
	SQS        Queue
	SFN        TaskCallbacks
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives structured logs (ids, counts, durations only); default slog.Default().
	Logger *slog.Logger
	// Metrics receives EMF metrics (ExportWaitSeconds); nil writes none.
	Metrics *metrics.Recorder
}

func (d Deps) withDefaults() Deps {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return d
}

// fromEnv reads the configuration and builds the clients.
func fromEnv(getenv func(string) string, rt lambdart.Runtime) (Config, Deps, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return Config{}, Deps{}, fmt.Errorf("configuration: %w", err)
	}
	deps, err := NewDeps(rt.AWS, cfg)
	if err != nil {
		return Config{}, Deps{}, err
	}
	deps.Logger, deps.Metrics, deps.Now = rt.Logger, rt.Metrics, rt.Now
	return cfg, deps, nil
}

// NewStartFromEnv is the start-export Lambda built from its environment
// (see ConfigFromEnv) and the host's runtime.
func NewStartFromEnv(getenv func(string) string, rt lambdart.Runtime) (*StartHandler, error) {
	cfg, deps, err := fromEnv(getenv, rt)
	if err != nil {
		return nil, fmt.Errorf("start-export: %w", err)
	}
	return NewStartHandler(cfg, deps)
}

// NewCheckFromEnv is the check-export Lambda built from its environment
// (see ConfigFromEnv) and the host's runtime.
func NewCheckFromEnv(getenv func(string) string, rt lambdart.Runtime) (*CheckHandler, error) {
	cfg, deps, err := fromEnv(getenv, rt)
	if err != nil {
		return nil, fmt.Errorf("check-export: %w", err)
	}
	return NewCheckHandler(cfg, deps)
}

// NewCancellerFromEnv is run-lock's export Canceller built from its
// environment and the host's runtime.
func NewCancellerFromEnv(getenv func(string) string, rt lambdart.Runtime) (*Canceller, error) {
	cfg, deps, err := fromEnv(getenv, rt)
	if err != nil {
		return nil, fmt.Errorf("export canceller: %w", err)
	}
	return NewCanceller(cfg, deps)
}

// NewDeps builds the real clients from an AWS configuration. The HealthLake
// REST client and the SDK client both use cfg.HealthLakeEndpoint when set.
func NewDeps(awsCfg aws.Config, cfg Config) (Deps, error) {
	hl, err := fhirrest.NewFromConfig(awsCfg, cfg.HealthLakeEndpoint)
	if err != nil {
		return Deps{}, fmt.Errorf("build HealthLake client: %w", err)
	}
	lister := datastore.NewClient(awsCfg, cfg.HealthLakeEndpoint)
	return Deps{
		Export:     hl,
		Jobs:       lister,
		Datastores: lister,
		DB:         dynamodb.NewFromConfig(awsCfg),
		S3:         awsclient.NewS3(awsCfg),
		SQS:        sqs.NewFromConfig(awsCfg),
		SFN:        sfn.NewFromConfig(awsCfg),
	}, nil
}
