package sim

import (
	"math"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// TestFastPathCostAgreesWithTheModelOnTheModelsUsage: usage equal to the
// model's for a day at the run's rate prices to the model's figure, item
// by item, the logs left out of both; twice the SQS requests show as a
// higher measured SQS item; a run that delivered nothing has no figure.
func TestFastPathCostAgreesWithTheModelOnTheModelsUsage(t *testing.T) {
	m := cost.DeployedFastPath()
	u, _, _ := cost.FastPathDaily(10_000, m)
	u.LogBytes = 0
	c := fastPathCost(u, 5_000, 12*time.Hour, m)
	if c == nil || c.ChangesPerDay != 10_000 {
		t.Fatalf("cost = %+v, want a rate of 10,000 a day", c)
	}
	// A day's usage over half a day's changes: twice the model per change.
	if math.Abs(c.USDPerMillionChanges-2*c.ModelUSDPerMillionChanges) > 1e-9 || c.ModelItems["logs"] != 0 {
		t.Errorf("measured $%v, model $%v per million (logs %v)", c.USDPerMillionChanges, c.ModelUSDPerMillionChanges, c.ModelItems["logs"])
	}
	c = fastPathCost(u, 10_000, 24*time.Hour, m)
	for k, v := range c.ModelItems {
		if math.Abs(c.Items[k]-v) > 1e-9 {
			t.Errorf("%s: measured %v, model %v", k, c.Items[k], v)
		}
	}
	if c.ModelUSDPerMillionChanges < 3 || c.ModelUSDPerMillionChanges > 3.5 {
		t.Errorf("model at 10,000 a day without logs: $%v per million; docs/COST.md gives $3.89 with $0.59 of logs", c.ModelUSDPerMillionChanges)
	}
	u.SQSRequests *= 2
	if more := fastPathCost(u, 10_000, 24*time.Hour, m); math.Abs(more.Items["sqs"]-2*c.Items["sqs"]) > 1e-9 || more.ModelItems["sqs"] != c.ModelItems["sqs"] {
		t.Errorf("doubled SQS: measured %v (was %v), model %v", more.Items["sqs"], c.Items["sqs"], more.ModelItems["sqs"])
	}
	if fastPathCost(u, 0, time.Hour, m) != nil {
		t.Error("a run that delivered nothing has a figure")
	}
}
