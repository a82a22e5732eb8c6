// Command fast-path-setup is the CloudFormation custom resource Lambda that
// keeps the fast path's HealthLake SubscriptionTopic and Subscription (see
// internal/subscription and docs/FASTPATH.md). Wiring only.
package main

import (
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
)

func main() {
	lambdart.Start("fast-path-setup", subscription.NewFromEnv, func(h *subscription.CustomResource) any { return h.Serve })
}
