// Command run-lock is the run-lock Lambda: the state machine's acquire,
// commit and fail actions on the RUN record (internal/runctl over
// internal/runlock). runctl.NewFromEnv reads the configuration from the
// environment (docs/RUNLOCK.md). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
)

func main() {
	lambdart.Start("run-lock", runctl.NewFromEnv, func(h *runctl.Handler) any { return h.Handle })
}
