// Command run-lock is the run-lock Lambda: the state machine's acquire,
// commit and fail actions on the RUN record (internal/runctl over
// internal/runlock). runctl.NewFromEnv reads the configuration from the
// environment (docs/RUNLOCK.md).
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
)

func main() {
	log := logging.New(os.Stdout, "run-lock")
	h, err := newHandler(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("run-lock: start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// newHandler wires the handler from the environment.
func newHandler(ctx context.Context, getenv func(string) string, log *slog.Logger) (*runctl.Handler, error) {
	awsCfg, err := awsclient.Load(ctx)
	if err != nil {
		return nil, err
	}
	return runctl.NewFromEnv(ctx, awsCfg, getenv, runctl.Options{Logger: log, Metrics: metrics.FromEnv()})
}
