package runctl

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl/s3objects"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// NewFromEnv builds the run-lock Lambda's handler from its environment
// (runlock.ConfigFromEnv: CDC_TABLE, CDC_SAFETY_LAG, CDC_MAX_WINDOW,
// CDC_OVERLAP, CDC_INITIAL_CHECKPOINT, CDC_LOCK_LEASE, CDC_RUN_TIMEOUT,
// CDC_HISTORY_TTL; exportjob.ConfigFromEnv for cancelling a run's export)
// and the host's runtime (the same shape as the export Lambdas'
// constructors). cmd/run-lock and cdc-local both use it.
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*Handler, error) {
	cfg, err := runlock.ConfigFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("run-lock: %w", err)
	}
	cfg.Owners = runlock.SFNOwnerChecker{Client: sfn.NewFromConfig(rt.AWS)}
	cfg.Logger = rt.Logger
	store, err := runlock.New(dynamodb.NewFromConfig(rt.AWS), cfg)
	if err != nil {
		return nil, fmt.Errorf("run-lock: %w", err)
	}
	canceller, err := exportjob.NewCancellerFromEnv(getenv, rt)
	if err != nil {
		return nil, fmt.Errorf("run-lock: %w", err)
	}
	return &Handler{
		Lock:    store,
		Results: MapResults{Objects: s3objects.Opener{Client: awsclient.NewS3(rt.AWS)}},
		Exports: canceller,
		Logger:  rt.Logger,
		Metrics: rt.Metrics,
		Now:     rt.Now,
	}, nil
}
