package reconcile

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// ConfigFromEnv reads the configuration from the Lambda's environment:
// CDC_BUCKET, CDC_KMS_KEY_ID, CDC_TABLE, CDC_DATASTORE_ID, CDC_EVENT_BUS,
// CDC_EVENT_SOURCE, CDC_DETAIL_TYPE, CDC_RESOURCE_TYPES, CDC_EXCLUDE_TYPES,
// CDC_PUTEVENTS_RATE, CDC_HEALTHLAKE_READ_RATE (default 0: unpaced) and
// CDC_MAP_MAX_CONCURRENCY (the children that share it; default 1),
// CDC_RECONCILE_PARTITIONS (default 16) and
// CDC_INITIAL_CHECKPOINT (a time: the origin when RUN/STATE lacks one).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	cfg := Config{
		Bucket: get(stackconfig.EnvBucket), KMSKeyID: get(stackconfig.EnvKMSKeyID), Table: get(stackconfig.EnvTable), DatastoreID: get(stackconfig.EnvDatastoreID),
		Publish: publish.Config{EventBus: get(stackconfig.EnvEventBus), Source: get(stackconfig.EnvEventSource), DetailType: get(stackconfig.EnvDetailType)},
		Filter: change.Filter{Include: change.ParseTypeList(getenv(stackconfig.EnvResourceTypes)),
			Exclude: change.ParseTypeList(getenv(stackconfig.EnvExcludeTypes))},
		Partitions: DefaultPartitions,
	}
	if cfg.Bucket == "" || cfg.Table == "" || cfg.DatastoreID == "" || cfg.Publish.EventBus == "" {
		return Config{}, errors.New("reconcile configuration: CDC_BUCKET, CDC_TABLE, CDC_DATASTORE_ID and CDC_EVENT_BUS are required")
	}
	if s := get(stackconfig.EnvReconcilePartitions); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPartitions {
			return Config{}, fmt.Errorf("reconcile configuration: CDC_RECONCILE_PARTITIONS=%q is not a count in [1, %d]", s, MaxPartitions)
		}
		cfg.Partitions = n
	}
	// A time as the initial checkpoint is the origin a RUN record written
	// before it kept its own implies ("snapshot" and "now": RUN/STATE has it).
	if s := get(stackconfig.EnvInitialCheckpoint); s != "" && s != "snapshot" && s != "now" {
		t, err := envelope.ParseTime(s)
		if err != nil {
			return Config{}, fmt.Errorf("reconcile configuration: CDC_INITIAL_CHECKPOINT=%q is not snapshot, now or a time", s)
		}
		cfg.Origin = t
	}
	if s := get(stackconfig.EnvHealthLakeReadRate); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || !(r >= 0) || math.IsInf(r, 0) {
			return Config{}, fmt.Errorf("reconcile configuration: CDC_HEALTHLAKE_READ_RATE=%q is not a rate ≥ 0", s)
		}
		cfg.ReadRate = r
	}
	if s := get(stackconfig.EnvMapMaxConcurrency); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return Config{}, fmt.Errorf("reconcile configuration: CDC_MAP_MAX_CONCURRENCY=%q is not a count ≥ 1", s)
		}
		cfg.MapMaxConcurrency = n
	}
	if s := get(stackconfig.EnvPutEventsRate); s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r != r {
			return Config{}, fmt.Errorf("reconcile configuration: CDC_PUTEVENTS_RATE=%q is not a rate ≥ 0", s)
		}
		cfg.Publish.Rate = r
	}
	return cfg, nil
}

// NewFromEnv is the one way the reconcile Lambda is built, deployed
// (cmd/reconcile) and in cdc-local.
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*Handler, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Metrics = rt.Logger, rt.Metrics
	hl, err := fhirrest.NewFromConfig(rt.AWS, strings.TrimSpace(getenv(stackconfig.EnvHealthLakeEndpoint)))
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return New(awsclient.NewS3(rt.AWS), dynamodb.NewFromConfig(rt.AWS), hl, eventbridge.NewFromConfig(rt.AWS), cfg)
}
