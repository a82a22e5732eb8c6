package prepare

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

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/share"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// DefaultQuarantineRawBytes caps the raw bytes one quarantine record keeps.
const DefaultQuarantineRawBytes = 256 << 10

// DefaultLineCountMaxBytes is how far into an export object a byte range
// reads to number its quarantine records when Config.LineCountMaxBytes is 0:
// 1 GiB, some 15 s of an invocation's S3 reads.
const DefaultLineCountMaxBytes = 1 << 30

// DefaultDeadlineMargin is CDC_DEADLINE_MARGIN's default: the invocation
// stops taking lines this long before its context's deadline.
const DefaultDeadlineMargin = 30 * time.Second

// Config configures the prepare-change handler.
type Config struct {
	// Bucket is the artifact bucket for claim-checks and quarantine objects (CDC_BUCKET).
	Bucket string
	// KMSKeyID encrypts claim-checks and quarantine objects with SSE-KMS
	// (CDC_KMS_KEY_ID); empty sends no encryption header (local emulators).
	KMSKeyID string
	// Publish configures the bus, source, detail type, size limit, rate and
	// retries (CDC_EVENT_BUS, CDC_EVENT_SOURCE, CDC_DETAIL_TYPE,
	// CDC_MAX_ENTRY_BYTES, CDC_PUTEVENTS_RATE).
	Publish publish.Config
	// MapMaxConcurrency is the Distributed Map's MaxConcurrency, the number
	// of invocations Publish.Rate assumes share the PutEvents budget
	// (CDC_MAP_MAX_CONCURRENCY); 0 = unknown, the rate is used as it is.
	MapMaxConcurrency int
	// DeadlineMargin is how long before its context's deadline an
	// invocation stops taking lines and fails with BatchDeadlineExceeded
	// (CDC_DEADLINE_MARGIN; ConfigFromEnv defaults it to 30 s). 0 = at the
	// deadline itself; a context without a deadline has none.
	DeadlineMargin time.Duration
	// Validation is how strictly lines are checked (CDC_VALIDATE, default json).
	Validation fhir.Validation
	// Filter keeps or drops resource types (CDC_RESOURCE_TYPES, CDC_EXCLUDE_TYPES).
	Filter change.Filter
	// MaxLineBytes is the longest line read; 0 = fhir.DefaultMaxLineBytes.
	MaxLineBytes int
	// QuarantineRawBytes caps the raw line kept per quarantine record;
	// 0 = DefaultQuarantineRawBytes.
	QuarantineRawBytes int
	// QuarantinePartBytes is the buffer after which the quarantine object is
	// uploaded in multipart parts; 0 = 8 MiB (S3's minimum part is 5 MiB).
	QuarantinePartBytes int
	// LineCountMaxBytes bounds what a byte range of a large export file
	// (manifest.File.Start) reads to count the lines before it, which it
	// does once, on its first quarantined line, to give its records the
	// file's own line numbers. A range starting further in does not count:
	// its records number lines from its first line and carry lineFrom, its
	// start. 0 = DefaultLineCountMaxBytes.
	LineCountMaxBytes int64
	// Logger receives one line per invocation with the run context and the
	// counts (never resource content); nil logs nothing.
	Logger *slog.Logger
	// Metrics receives the invocation's EMF metrics; nil writes none.
	Metrics *metrics.Recorder
	// NoWindowDeletes turns the window's delete scan off
	// (CDC_WINDOW_DELETES=false): the action "deletes" answers done at
	// once, and deletions reach consumers through the reconciliation only.
	NoWindowDeletes bool
	// FastPath (CDC_FAST_PATH=true): the Subscriptions fast path runs
	// (docs/FASTPATH.md). A window that continues the committed one skips
	// the versions the fast path recorded (fastPathSkipped) and counts what
	// it publishes as FastPathMissed; the delete scan skips the deletes the
	// fast path published.
	FastPath bool
	// FastPathRecord is where the fast path records what it published
	// (required with FastPath; NewFromEnv reads the CDC_TABLE items,
	// internal/fastrecord).
	FastPathRecord FastPathRecord
	// Now is the clock that bounds the fast path's record read (the newest
	// a window may meet are written now); nil: time.Now.
	Now func() time.Time
	// Share, when set, divides the Map's whole PutEvents share (Publish.Rate
	// × MapMaxConcurrency) among the run's children publishing at once:
	// each beats on the board every SharePeriod (share.DefaultPeriod when
	// 0) and publishes at its part (internal/share). NewFromEnv sets it
	// when CDC_TABLE is set. Nil: each child keeps the rate
	// RateFor gives it at its start.
	Share       *share.Board
	SharePeriod time.Duration
}

// ConfigFromEnv reads the configuration from the environment variables of
// docs/ARCHITECTURE.md through getenv (os.Getenv in the Lambda).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{
		Bucket:   strings.TrimSpace(getenv(stackconfig.EnvBucket)),
		KMSKeyID: strings.TrimSpace(getenv(stackconfig.EnvKMSKeyID)),
		Publish: publish.Config{
			EventBus:   strings.TrimSpace(getenv(stackconfig.EnvEventBus)),
			Source:     strings.TrimSpace(getenv(stackconfig.EnvEventSource)),
			DetailType: strings.TrimSpace(getenv(stackconfig.EnvDetailType)),
		},
		Filter: change.Filter{
			Include: change.ParseTypeList(getenv(stackconfig.EnvResourceTypes)),
			Exclude: change.ParseTypeList(getenv(stackconfig.EnvExcludeTypes)),
		},
	}
	if cfg.Bucket == "" {
		return Config{}, errors.New("prepare-change configuration: CDC_BUCKET is required")
	}
	if cfg.Publish.EventBus == "" {
		return Config{}, errors.New("prepare-change configuration: CDC_EVENT_BUS is required")
	}
	if s := strings.TrimSpace(getenv(stackconfig.EnvMaxEntryBytes)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1024 {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_MAX_ENTRY_BYTES=%q is not a byte count of at least 1024", s)
		}
		cfg.Publish.MaxEntryBytes = n
	}
	v, err := fhir.ParseValidation(getenv(stackconfig.EnvValidate))
	if err != nil {
		return Config{}, fmt.Errorf("prepare-change configuration: CDC_VALIDATE: %w", err)
	}
	cfg.Validation = v
	cfg.DeadlineMargin = DefaultDeadlineMargin
	if s := strings.TrimSpace(getenv(stackconfig.EnvDeadlineMargin)); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_DEADLINE_MARGIN=%q is not a duration ≥ 0 such as 30s", s)
		}
		cfg.DeadlineMargin = d
	}
	if s := strings.TrimSpace(getenv(stackconfig.EnvWindowDeletes)); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_WINDOW_DELETES=%q is not true or false", s)
		}
		cfg.NoWindowDeletes = !on
	}
	if s := strings.TrimSpace(getenv(stackconfig.EnvFastPath)); s != "" {
		on, err := strconv.ParseBool(s)
		if err != nil {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_FAST_PATH=%q is not true or false", s)
		}
		cfg.FastPath = on
	}
	if s := strings.TrimSpace(getenv(stackconfig.EnvMapMaxConcurrency)); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_MAP_MAX_CONCURRENCY=%q is not a whole number ≥ 1", s)
		}
		cfg.MapMaxConcurrency = n
	}
	if s := strings.TrimSpace(getenv(stackconfig.EnvPutEventsRate)); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r != r {
			return Config{}, fmt.Errorf("prepare-change configuration: CDC_PUTEVENTS_RATE=%q is not a rate ≥ 0 in requests per second", s)
		}
		cfg.Publish.Rate = r
	}
	return cfg, nil
}

// RateFor returns the PutEvents requests per second one invocation of a Map
// of batches batches may send. Publish.Rate is the budget's share of one of
// MapMaxConcurrency invocations running at once; a Map of fewer batches
// never runs that many, so each gets Publish.Rate × MapMaxConcurrency ÷
// batches — together still the same budget (quota × share). Without a rate,
// a concurrency or a batch count the rate is Publish.Rate.
func (c Config) RateFor(batches int) float64 {
	r := c.Publish.Rate
	if r <= 0 || c.MapMaxConcurrency <= 1 || batches <= 0 || batches >= c.MapMaxConcurrency {
		return r
	}
	return r * float64(c.MapMaxConcurrency) / float64(batches)
}

// NewFromEnv is the one way the prepare-change Lambda is built, deployed
// (cmd/prepare-change) and in cdc-local: configuration from getenv, S3 and
// EventBridge clients from rt.AWS, one log line per invocation to rt.Logger
// and EMF metrics to rt.Metrics (either may be nil).
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*Handler, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Metrics = rt.Logger, rt.Metrics
	s3c, eb := awsclient.NewS3(rt.AWS), eventbridge.NewFromConfig(rt.AWS)
	if table := strings.TrimSpace(getenv(stackconfig.EnvTable)); table != "" {
		db := dynamodb.NewFromConfig(rt.AWS)
		cfg.Share = &share.Board{DB: db, Table: table}
		if cfg.FastPath {
			cfg.FastPathRecord = &fastrecord.Reader{DB: db, Table: table}
		}
	}
	h, err := New(s3c, eb, cfg)
	if err != nil {
		return nil, err
	}
	hl, err := fhirrest.NewFromConfig(rt.AWS, strings.TrimSpace(getenv(stackconfig.EnvHealthLakeEndpoint)))
	if err != nil {
		return nil, fmt.Errorf("prepare-change configuration: %w", err)
	}
	if err := h.EnableDeleteScan(hl); err != nil {
		return nil, err
	}
	return h, nil
}

// ScanTypes returns the resource types the delete scan reads: every R4 type
// the pipeline's type filter allows.
func (c Config) ScanTypes() []string {
	var out []string
	for _, t := range fhir.R4Types() {
		if c.Filter.Allows(t) {
			out = append(out, t)
		}
	}
	return out
}

// internalDeadline returns ctx bounded by the earlier of its deadline and
// childEnd (the end of the Map child's EXPRESS execution; zero = none), less
// DeadlineMargin (ctx itself, cancellable, when there is neither). A Map
// child retries a failed attempt inside its own 5 minutes: bounding every
// attempt by the child's end makes each retry fit the child, stopping with
// BatchDeadlineExceeded instead of being cut off by the child's timeout.
func (c Config) internalDeadline(ctx context.Context, childEnd time.Time) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !childEnd.IsZero() && (!ok || childEnd.Before(dl)) {
		dl, ok = childEnd, true
	}
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-c.DeadlineMargin))
}

// maxPutConcurrency bounds the PutEvents calls one invocation keeps in
// flight (each holds a request of up to 256 KB).
const maxPutConcurrency = 32

// putLatencyBudget is the PutEvents round trip the in-flight calls must
// cover: with n calls in flight an invocation sends at most n ÷ round trip
// requests a second.
const putLatencyBudget = 40 * time.Millisecond

// concurrencyFor returns the calls one invocation keeps in flight: enough to
// reach the rate it may get when it publishes alone under the share
// (Publish.Rate × MapMaxConcurrency) at a putLatencyBudget round trip, at
// least configured, at most maxPutConcurrency.
func (c Config) concurrencyFor(configured int) int {
	most := c.Publish.Rate * float64(max(c.MapMaxConcurrency, 1))
	need := int(most*putLatencyBudget.Seconds()) + 1
	return min(max(configured, need), max(configured, maxPutConcurrency))
}
