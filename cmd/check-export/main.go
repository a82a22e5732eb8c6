// Command check-export is the SQS-triggered Lambda that polls a run's
// HealthLake export, writes the manifest and answers the task token
// (see internal/exportjob and docs/EXPORT.md). Wiring only.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
)

func main() {
	rt, err := exportjob.LambdaRuntime(context.Background(), "check-export")
	if err != nil {
		exit(err)
	}
	h, err := exportjob.NewCheckFromEnv(os.Getenv, rt)
	if err != nil {
		exit(err)
	}
	lambda.Start(h.Handle)
}

func exit(err error) {
	slog.Error("check-export cannot start", "error", err.Error())
	os.Exit(1)
}
