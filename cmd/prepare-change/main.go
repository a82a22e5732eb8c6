// Command prepare-change is the Lambda the Distributed Map runs for each
// batch of export files: it streams the files, publishes one event per
// changed resource and returns a summary. Wiring only; the logic is in
// internal/prepare.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

func main() {
	lambdart.Start("prepare-change", prepare.NewFromEnv, func(h *prepare.Handler) any { return h.Invoke })
}
