// Command start-export is the SQS-triggered Lambda that starts a run's
// HealthLake export (see internal/exportjob and docs/EXPORT.md). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
)

func main() {
	lambdart.Start("start-export", exportjob.NewStartFromEnv, func(h *exportjob.StartHandler) any { return h.Handle })
}
