// Command fast-path is the SQS-triggered Lambda that publishes the v1 events
// of HealthLake's FHIR Subscription notifications as they arrive (see
// internal/fastpath). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
)

func main() {
	lambdart.Start("fast-path", fastpath.NewFromEnv, func(h *fastpath.Handler) any { return h.Handle })
}
