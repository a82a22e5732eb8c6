package sim

import (
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// FastPathCost is the fast path's own cost in a run: its usage as the
// stack measured it (stack.FastPathUsage: its queue's requests, empty long
// polls included, its Lambda, its record's writes and the windows' reads
// of it) at list prices, per million changes notified, beside what the
// cost model (cost.FastPathDaily, the deployed fast path with the run's
// batching window) gives for the run's rate. The model's logs are left
// out of both: the local Lambda writes no CloudWatch Logs to measure
// (docs/COST.md prices them). This, not the difference of two runs'
// usdPerMillionChanges, is the figure to hold against the model: a run's
// whole cost carries local-only receives of the export path's queues,
// which the fast path changes.
type FastPathCost struct {
	// Changes are the changes HealthLake's Subscription matched (dropped
	// notifications included; not the initial load, which no notification
	// carries), ChangesPerDay their rate from the activation to the end of
	// the run (writes and drain).
	Changes       int64      `json:"changes"`
	ChangesPerDay float64    `json:"changesPerDay"`
	Usage         cost.Usage `json:"usage"`
	// USDPerMillionChanges and Items are the measured usage priced, per
	// million changes (Items by service: sqs, lambda, dynamoDB, s3).
	USDPerMillionChanges float64            `json:"usdPerMillionChanges"`
	Items                map[string]float64 `json:"items"`
	// ModelUSDPerMillionChanges and ModelItems are the model's, at
	// ChangesPerDay, its logs left out.
	ModelUSDPerMillionChanges float64            `json:"modelUsdPerMillionChanges"`
	ModelItems                map[string]float64 `json:"modelItems"`
}

// fastPathCost prices u, the fast path's usage in a run whose Subscription
// matched changes over span (activation to end), and the model m at that
// rate; nil when none was matched.
func fastPathCost(u cost.Usage, changes int64, span time.Duration, m cost.FastPathModel) *FastPathCost {
	if changes <= 0 || span <= 0 {
		return nil
	}
	c := &FastPathCost{Changes: changes, ChangesPerDay: float64(changes) / span.Hours() * 24, Usage: u}
	c.Items, c.USDPerMillionChanges = perMillion(u, float64(changes))
	mu, _, _ := cost.FastPathDaily(c.ChangesPerDay, m)
	mu.LogBytes = 0
	c.ModelItems, c.ModelUSDPerMillionChanges = perMillion(mu, c.ChangesPerDay)
	return c
}

// perMillion prices u at list prices per million of changes: the items
// that cost anything, and their sum.
func perMillion(u cost.Usage, changes float64) (map[string]float64, float64) {
	items, total := map[string]float64{}, 0.0
	for k, v := range cost.Price(u, cost.ListPrices()).Items {
		if v > 0 {
			items[k] = v / changes * 1e6
			total += items[k]
		}
	}
	return items, total
}
