// Command check-export is the SQS-triggered Lambda that polls a run's
// HealthLake export, writes the manifest and answers the task token
// (see internal/exportjob and docs/EXPORT.md). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
)

func main() {
	lambdart.Start("check-export", exportjob.NewCheckFromEnv, func(h *exportjob.CheckHandler) any { return h.Handle })
}
