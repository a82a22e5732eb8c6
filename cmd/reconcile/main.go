// Command reconcile is the reconciliation Lambda: plan, index (one
// Distributed Map child per manifest batch), diff (one child per index
// partition) and finish. Wiring only; the logic is in internal/reconcile.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
)

func main() {
	lambdart.Start("reconcile", reconcile.NewFromEnv, func(h *reconcile.Handler) any { return h.Handle })
}
