// Command prepare-change is the Lambda the Distributed Map runs for each
// batch of export files: it streams the files, publishes one event per
// changed resource and returns a summary. Wiring only; the logic is in
// internal/prepare.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

func main() {
	awsCfg, err := awsclient.Load(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	h, err := prepare.NewFromEnv(os.Getenv, awsCfg, logging.New(os.Stdout, "prepare-change"), metrics.FromEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lambda.Start(h.Handle)
}
