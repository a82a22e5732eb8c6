// Command run-lock is the run-lock Lambda: the state machine's acquire,
// commit and fail actions on the RUN record (internal/runctl over
// internal/runlock). runctl.NewFromEnv reads the configuration from the
// environment (docs/RUNLOCK.md). Wiring only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
)

func main() {
	h, err := newHandler(context.Background(), os.Getenv)
	if err != nil {
		slog.Error("run-lock cannot start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}

// newHandler wires the handler from the environment.
func newHandler(ctx context.Context, getenv func(string) string) (*runctl.Handler, error) {
	rt, err := exportjob.LambdaRuntime(ctx, "run-lock")
	if err != nil {
		return nil, err
	}
	return runctl.NewFromEnv(getenv, rt)
}
