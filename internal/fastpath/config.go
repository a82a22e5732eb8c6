package fastpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/readpace"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// DefaultDeadlineMargin is how long before the invocation's deadline the
// handler stops reading and publishing, so that its record is still
// written and its answer returned: what it had not settled is reported
// failed and comes again.
const DefaultDeadlineMargin = 5 * time.Second

// DefaultReportEvery is how often an execution environment reports the
// counts of its invocations (Config.ReportEvery).
const DefaultReportEvery = stackconfig.FastPathReportEvery

// Config configures the fast path (ConfigFromEnv reads it from the
// environment).
type Config struct {
	// Bucket is the artifact bucket of claim-checks (CDC_BUCKET, required).
	Bucket string
	// KMSKeyID encrypts claim-checks with SSE-KMS (CDC_KMS_KEY_ID); empty
	// sends no encryption header (local emulators).
	KMSKeyID string
	// Table is the pipeline's DynamoDB table (CDC_TABLE, required): each
	// invocation records what it published there (internal/fastrecord)
	// before it answers its batch.
	Table string
	// DatastoreID is the HealthLake data store (CDC_DATASTORE_ID,
	// required): versions are read from it, events name it, and a
	// notification of another data store is not published.
	DatastoreID string
	// HealthLakeEndpoint is the HealthLake base URL (CDC_HEALTHLAKE_ENDPOINT,
	// else AWS_ENDPOINT_URL_HEALTHLAKE, else AWS_ENDPOINT_URL; empty: the
	// region's public endpoint). Used by NewFromEnv only.
	HealthLakeEndpoint string
	// Publish is the bus and its limits: CDC_EVENT_BUS (required),
	// CDC_EVENT_SOURCE, CDC_DETAIL_TYPE, CDC_MAX_ENTRY_BYTES and
	// CDC_PUTEVENTS_RATE (requests per second, 0 or unset = unlimited).
	Publish publish.Config
	// Filter is the pipeline's type filter (CDC_RESOURCE_TYPES,
	// CDC_EXCLUDE_TYPES), the one the export path applies: a filtered
	// version is counted, not published.
	Filter change.Filter
	// DeadlineMargin: see DefaultDeadlineMargin (0 takes it; negative: none).
	DeadlineMargin time.Duration
	// Logger receives the environment's line of counts once per
	// ReportEvery (Handler.observe) and a line per failed invocation; nil
	// logs nothing.
	Logger *slog.Logger
	// Metrics receives the invocation's EMF metrics; nil emits none.
	Metrics *metrics.Recorder
	// Now is the clock (lag, record keys); nil is time.Now.
	Now func() time.Time
	// ReportEvery is how often an execution environment reports what its
	// invocations did: one log line and one EMF record of summed counts
	// (DefaultReportEvery when 0; negative: at every invocation). One per
	// invocation would cost more in CloudWatch Logs ingestion than the
	// invocation itself (docs/COST.md, "The fast path").
	ReportEvery time.Duration
}

// ConfigFromEnv reads the configuration through getenv (os.Getenv in the
// Lambda): CDC_BUCKET, CDC_KMS_KEY_ID, CDC_DATASTORE_ID,
// CDC_HEALTHLAKE_ENDPOINT, CDC_EVENT_BUS, CDC_EVENT_SOURCE,
// CDC_DETAIL_TYPE, CDC_MAX_ENTRY_BYTES, CDC_RESOURCE_TYPES,
// CDC_EXCLUDE_TYPES and CDC_PUTEVENTS_RATE, read as prepare-change reads
// them.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := func(name string) string { return strings.TrimSpace(getenv(name)) }
	cfg := Config{
		Bucket:             env(stackconfig.EnvBucket),
		KMSKeyID:           env(stackconfig.EnvKMSKeyID),
		Table:              env(stackconfig.EnvTable),
		DatastoreID:        env(stackconfig.EnvDatastoreID),
		HealthLakeEndpoint: env(stackconfig.EnvHealthLakeEndpoint),
		Publish: publish.Config{
			EventBus:   env(stackconfig.EnvEventBus),
			Source:     env(stackconfig.EnvEventSource),
			DetailType: env(stackconfig.EnvDetailType),
		},
		Filter: change.Filter{
			Include: change.ParseTypeList(getenv(stackconfig.EnvResourceTypes)),
			Exclude: change.ParseTypeList(getenv(stackconfig.EnvExcludeTypes)),
		},
	}
	if cfg.HealthLakeEndpoint == "" {
		// cdc-local points every client at one port with the SDK's variables.
		cfg.HealthLakeEndpoint = env("AWS_ENDPOINT_URL_HEALTHLAKE")
	}
	if cfg.HealthLakeEndpoint == "" {
		cfg.HealthLakeEndpoint = env("AWS_ENDPOINT_URL")
	}
	var missing []string
	for _, m := range []struct{ name, v string }{
		{stackconfig.EnvBucket, cfg.Bucket}, {stackconfig.EnvTable, cfg.Table}, {stackconfig.EnvDatastoreID, cfg.DatastoreID}, {stackconfig.EnvEventBus, cfg.Publish.EventBus},
	} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("fast-path configuration: %s required", strings.Join(missing, ", "))
	}
	if s := env(stackconfig.EnvMaxEntryBytes); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1024 {
			return Config{}, fmt.Errorf("fast-path configuration: %s=%q is not a byte count of at least 1024", stackconfig.EnvMaxEntryBytes, s)
		}
		cfg.Publish.MaxEntryBytes = n
	}
	if s := env(stackconfig.EnvPutEventsRate); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r != r {
			return Config{}, fmt.Errorf("fast-path configuration: %s=%q is not a rate ≥ 0 in requests per second", stackconfig.EnvPutEventsRate, s)
		}
		cfg.Publish.Rate = r
	}
	return cfg, nil
}

// S3API is the part of the S3 client the fast path uses: claim-checks
// (*s3.Client satisfies it).
type S3API interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// VersionReader reads one version of a resource (*fhirrest.Client
// satisfies it): its bytes, or an error matching fhirrest.ErrVersionGone
// (a *fhirrest.VersionGoneError) for a 410 or 404 answer.
type VersionReader interface {
	VRead(ctx context.Context, datastoreID, resourceType, id, versionID string) ([]byte, error)
}

// NewFromEnv is the one way the fast-path Lambda is built, deployed
// (cmd/fast-path) and locally: configuration from getenv (ConfigFromEnv),
// S3, DynamoDB, EventBridge and HealthLake clients from rt.AWS, logs to rt.Logger,
// EMF metrics to rt.Metrics and rt.Now as the clock.
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*Handler, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Metrics, cfg.Now = rt.Logger, rt.Metrics, rt.Now
	hl, err := fhirrest.NewFromConfig(rt.AWS, cfg.HealthLakeEndpoint)
	if err != nil {
		return nil, fmt.Errorf("fast-path configuration: %w", err)
	}
	return New(awsclient.NewS3(rt.AWS), dynamodb.NewFromConfig(rt.AWS), eventbridge.NewFromConfig(rt.AWS), hl, cfg)
}

// New returns the fast-path handler: claim-checks through s3c, its record
// through db, events through eb, id-only versions read through hl.
func New(s3c S3API, db fastrecord.PutAPI, eb publish.PutEventsAPI, hl VersionReader, cfg Config) (*Handler, error) {
	if s3c == nil || db == nil || eb == nil || hl == nil {
		return nil, errors.New("fast-path: S3, DynamoDB, EventBridge and HealthLake clients are required")
	}
	if cfg.Bucket == "" || cfg.Table == "" || cfg.DatastoreID == "" {
		return nil, errors.New("fast-path: the artifact bucket, the table and the data store id are required")
	}
	if cfg.ReportEvery == 0 {
		cfg.ReportEvery = DefaultReportEvery
	}
	if cfg.DeadlineMargin == 0 {
		cfg.DeadlineMargin = DefaultDeadlineMargin
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if _, err := publish.New(eb, cfg.Publish); err != nil {
		return nil, fmt.Errorf("fast-path: %w", err)
	}
	return &Handler{s3: s3c, rec: &fastrecord.Writer{DB: db, Table: cfg.Table}, eb: eb, hl: hl, cfg: cfg,
		reads: readpace.New(0, nil)}, nil
}
