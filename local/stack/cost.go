package stack

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// lambdaMemoryGB is the memory of the named Lambda in GB, as the CDK stack
// deploys it (internal/stackconfig's Function).
func lambdaMemoryGB(name string) float64 {
	if f, ok := stackconfig.Default().Function(name); ok {
		return float64(f.MemoryMB) / 1024
	}
	return 0.25
}

// expressMemoryGB is the memory EXPRESS workflows are billed at (64 MB minimum).
const expressMemoryGB = 0.0625

// countTransition is the Step Functions emulator's transition hook: it counts
// STANDARD transitions and the distinct EXPRESS child executions.
func (s *Stack) countTransition(executionARN, _ string) {
	if strings.Contains(executionARN, ":express:") {
		s.expressMu.Lock()
		s.expressRuns[executionARN] = true
		s.expressMu.Unlock()
		return
	}
	s.standardTransitions.Add(1)
}

// Usage returns what the run used so far, as the cost model counts it: the
// requests the gateway served, the state transitions, the EXPRESS children,
// the Lambda requests and GB-seconds at the deployed memory sizes, and the
// EventBridge 64 KB chunks.
func (s *Stack) Usage() cost.Usage {
	u := cost.FromCalls(s.Env.Gateway.Calls())
	u.StateTransitions = float64(s.standardTransitions.Load())
	s.expressMu.Lock()
	u.ExpressRequests = float64(len(s.expressRuns))
	s.expressMu.Unlock()
	u.LambdaArm64 = true
	for name, st := range s.Lambdas.Stats() {
		mem := lambdaMemoryGB(name)
		u.LambdaRequests += float64(st.Invocations)
		u.LambdaGBSeconds += st.DurationMs / 1000 * mem
		if name == FnPrepareChange {
			// Each EXPRESS child waits on its prepare-change invocation.
			u.ExpressGBSeconds += st.DurationMs / 1000 * expressMemoryGB
		}
	}
	u.EventChunks = float64(s.EventBridge.Stats().Chunks)
	return u
}

// Cost prices Usage at list prices per million distinct changes delivered.
func (s *Stack) Cost() report.Cost {
	u := s.Usage()
	bill := cost.Price(u, cost.ListPrices())
	distinct, _ := s.Delivered.Counts()
	changes := int64(distinct)
	c := report.Cost{Changes: changes, Usage: u, Bill: bill}
	if perM, err := cost.PerMillion(bill, float64(changes)); err == nil {
		c.USDPerMillionChanges = perM
	}
	if month, ok := s.monthly(u, changes); ok {
		c.Monthly = &month
		c.USDPerMonth = month.Total
	}
	return c
}

// runsPerDay is the schedule the stack deploys: a run every 5 minutes.
const runsPerDay = 288

// monthly extrapolates the run to a month of 5-minute windows that each look
// like this run's average window (its measured usage and changes), and adds
// what the stack is billed by the month or the byte (cost.Monthly), with the
// metric series the Lambdas really emitted counted as custom metrics.
func (s *Stack) monthly(u cost.Usage, changes int64) (cost.Bill, bool) {
	windows := float64(s.Env.Gateway.Calls()["states:StartExecution"])
	if windows == 0 {
		return cost.Bill{}, false
	}
	// The local event-source mappings poll every second (so that Stop is
	// quick) with one poller, the fast path's with five and a receive or
	// two more per batching window; the deployed ones long-poll (20 s, five
	// pollers a queue: the model's always-on usage). The month prices the
	// deployed polling, not the local receives.
	u.SQSRequests = max(0, u.SQSRequests-float64(s.Env.Gateway.Calls()["sqs:ReceiveMessage"]))
	d := cost.Design{PerWindow: u.Scale(1 / windows), PerDay: cost.ThisDesign().PerDay}
	fp := cost.ThisFootprint()
	fp.CustomMetrics = len(s.Metrics.Totals())
	eb := s.EventBridge.Stats()
	v := cost.Volume{ChangesPerDay: float64(changes) / windows * runsPerDay, RunsPerDay: runsPerDay, Redelivery: 1}
	if eb.EntriesAccepted > 0 {
		v.AvgResourceBytes = float64(eb.AcceptedBytes) / float64(eb.EntriesAccepted)
	}
	return cost.Monthly(d, fp, v, cost.ListPrices(), cost.ListMonthlyPrices()), true
}

// LocalMetricsPath is where the gateway serves the stack's metric totals,
// for `cdcctl status --endpoint` (there is no CloudWatch locally).
const LocalMetricsPath = "/_local/metrics"

// LocalConfigPath is where the gateway serves the names cdcctl needs (table,
// bucket, state machine, queues), so `cdcctl --endpoint URL …` works without
// exporting them first.
const LocalConfigPath = "/_local/config"

// serveConfig answers GET /_local/config with the CDC_* settings of CLIEnv.
func (s *Stack) serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	cfg := map[string]string{}
	for _, kv := range s.CLIEnv() {
		if strings.HasPrefix(kv[0], "CDC_") || kv[0] == "AWS_REGION" {
			cfg[kv[0]] = kv[1]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cfg)
}

// serveMetrics answers GET /_local/metrics with the metric totals, the
// checkpoint lag's source figures and the cost so far.
func (s *Stack) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	c := s.Cost()
	body := struct {
		Metrics map[string]float64 `json:"metrics"`
		Cost    report.Cost        `json:"cost"`
	}{Metrics: s.Metrics.Totals(), Cost: c}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// FastPathUsage is what the fast path used so far, measured, as the cost
// model's cost.FastPathDaily counts it: the SQS requests its role made (the
// mapping's receives, empty long polls included, and deletes), one send per
// notification HealthLake put on the bus (EventBridge's target sends it to
// the queue), the DynamoDB calls its role made (a record item per
// invocation, a write unit per call) and the windows' strongly consistent
// queries of the record (prepare-change's only DynamoDB queries, a read unit
// per call), and its Lambda's requests and GB-seconds. Its PutEvents are
// not in it: they replace the windows' PutEvents of the same versions. Nor
// are its logs: cdc-local keeps no CloudWatch Logs, and the model's figure
// for them stands. Zero without the fast path.
func (s *Stack) FastPathUsage() cost.Usage {
	if !s.opts.FastPath {
		return cost.Usage{}
	}
	u := cost.FromCalls(s.Env.Gateway.CallsBy(localaws.PrincipalAccessKeyID(string(iampolicy.FastPath))))
	sub := s.HealthLake.SubscriptionStats()
	u.SQSRequests += float64(sub.Bundles + sub.Handshakes)
	u.DynamoReadUnits += float64(s.Env.Gateway.CallsBy(localaws.PrincipalAccessKeyID(string(iampolicy.PrepareChange)))["dynamodb:Query"])
	u.LambdaArm64 = true
	if st, ok := s.Lambdas.Stats()[FnFastPath]; ok {
		u.LambdaRequests = float64(st.Invocations)
		u.LambdaGBSeconds = st.DurationMs / 1000 * lambdaMemoryGB(FnFastPath)
	}
	return u
}

// FastPathModel is the cost model's fast path as this stack deploys it
// (cost.DeployedFastPath with the stack's batching window).
func (s *Stack) FastPathModel() cost.FastPathModel {
	m := cost.DeployedFastPath()
	m.BatchingWindowSeconds = s.deployedConfig().FastPathBatchingWindow.Seconds()
	return m
}
