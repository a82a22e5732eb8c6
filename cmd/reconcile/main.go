// Command reconcile is the reconciliation Lambda: plan, index (one
// Distributed Map child per manifest batch), diff (one child per index
// partition) and finish. Wiring only; the logic is in internal/reconcile.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
)

func main() {
	awsCfg, err := awsclient.Load(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h, err := reconcile.NewFromEnv(os.Getenv, awsCfg, logging.New(os.Stdout, "reconcile"), metrics.FromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
