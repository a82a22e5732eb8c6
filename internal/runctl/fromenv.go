package runctl

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl/s3objects"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// Options are what the run-lock Lambda takes from its host rather than its
// environment.
type Options struct {
	Logger  *slog.Logger
	Metrics *metrics.Recorder
	// Now is the clock of the checkpoint-lag metric; nil means time.Now.
	Now func() time.Time
}

// NewFromEnv builds the run-lock Lambda's handler from its environment
// (runlock.ConfigFromEnv: CDC_TABLE, CDC_SAFETY_LAG, CDC_MAX_WINDOW,
// CDC_OVERLAP, CDC_INITIAL_CHECKPOINT, CDC_LOCK_LEASE, CDC_RUN_TIMEOUT,
// CDC_HISTORY_TTL; exportjob.ConfigFromEnv for cancelling a run's export)
// with SDK clients from awsCfg. cmd/run-lock and cdc-local both use it.
func NewFromEnv(_ context.Context, awsCfg aws.Config, getenv func(string) string, opts Options) (*Handler, error) {
	cfg, err := runlock.ConfigFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.Owners = runlock.SFNOwnerChecker{Client: sfn.NewFromConfig(awsCfg)}
	cfg.Logger = opts.Logger
	store, err := runlock.New(dynamodb.NewFromConfig(awsCfg), cfg)
	if err != nil {
		return nil, fmt.Errorf("run lock store: %w", err)
	}
	expCfg, err := exportjob.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("export canceller configuration: %w", err)
	}
	deps, err := exportjob.NewDeps(awsCfg, expCfg)
	if err != nil {
		return nil, fmt.Errorf("export canceller clients: %w", err)
	}
	deps.Logger = opts.Logger
	deps.Metrics = opts.Metrics
	canceller, err := exportjob.NewCanceller(expCfg, deps)
	if err != nil {
		return nil, fmt.Errorf("export canceller: %w", err)
	}
	return &Handler{
		Lock:    store,
		Results: MapResults{Objects: s3objects.Opener{Client: awsclient.NewS3(awsCfg)}},
		Exports: canceller,
		Logger:  opts.Logger,
		Metrics: opts.Metrics,
		Now:     opts.Now,
	}, nil
}
