// Command check-datastore is the CloudFormation custom resource Lambda that
// checks, at a deploy, that the pipeline can run on its HealthLake data
// store (see internal/datastorecheck and docs/DEPLOY.md). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
)

func main() {
	lambdart.Start("check-datastore", datastorecheck.NewFromEnv, func(h *datastorecheck.CustomResource) any { return h.Handle })
}
