package stack

import (
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func runlockReplay(since time.Time) runlock.ReplayRequest {
	return runlock.ReplayRequest{Since: since, Actor: "e2e-test", Reason: "replay test"}
}
