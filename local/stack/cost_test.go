package stack

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// One window over the seeded data store: the report carries the metric
// totals every Lambda emitted and the cost of what the emulators counted,
// and the same figures are served at /_local/metrics for cdcctl status.
func TestReportCarriesMetricsAndCostPerMillionChanges(t *testing.T) {
	var emf bytes.Buffer
	st := startStack(t, func(o *Options) { o.MetricsOutput = &emf })
	w := runWindow(t, st)
	if w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window outcome %q (%s %s)", w.Outcome, w.Error, w.Cause)
	}
	snap := st.Report.Snapshot()
	seeded := float64(st.Seeded())
	if snap.Metrics[metrics.EventsPublished] != seeded {
		t.Errorf("EventsPublished = %v, want %v (totals %v)", snap.Metrics[metrics.EventsPublished], seeded, snap.Metrics)
	}
	if snap.Metrics[metrics.ResourcesExported] != seeded || snap.Metrics[metrics.QuarantinedLines] != 0 {
		t.Errorf("metric totals = %v", snap.Metrics)
	}
	if _, ok := snap.Metrics[metrics.CheckpointLagSeconds]; !ok {
		t.Errorf("no checkpoint lag reported: %v", snap.Metrics)
	}
	if _, ok := snap.Metrics[metrics.ExportWaitSeconds]; !ok {
		t.Errorf("no export wait reported: %v", snap.Metrics)
	}
	if !strings.Contains(emf.String(), `"Namespace":"HealthLakeCDC"`) {
		t.Errorf("EMF lines not written to MetricsOutput")
	}

	c := snap.Cost
	if c == nil {
		t.Fatal("report has no cost")
	}
	if c.Changes != int64(seeded) || c.Usage.EventChunks != seeded {
		t.Errorf("changes %d, event chunks %v; want %v each", c.Changes, c.Usage.EventChunks, seeded)
	}
	if c.Usage.StateTransitions < 5 || c.Usage.ExpressRequests < 1 || c.Usage.LambdaRequests < 5 || c.Usage.LambdaGBSeconds <= 0 {
		t.Errorf("usage = %+v", c.Usage)
	}
	if c.Bill.Items["eventBridge"] != seeded/1e6 {
		t.Errorf("EventBridge cost %v, want %v", c.Bill.Items["eventBridge"], seeded/1e6)
	}
	if want := c.Bill.Total / seeded * 1e6; c.USDPerMillionChanges != want || want <= 1.0 {
		t.Errorf("usdPerMillionChanges = %v, want %v (above EventBridge's $1 floor)", c.USDPerMillionChanges, want)
	}

	// A month of windows like this one, whole: every monthly line item, and
	// one custom metric per series the Lambdas emitted — only the Pipeline
	// dimension, so the fixed part does not grow with resource types.
	if c.Monthly == nil || c.USDPerMonth != c.Monthly.Total {
		t.Fatalf("monthly bill %+v, usdPerMonth %v", c.Monthly, c.USDPerMonth)
	}
	series := len(snap.Metrics)
	if want := float64(series) * cost.ListMonthlyPrices().CustomMetricMonth; c.Monthly.Items["cloudWatchMetrics"] != want {
		t.Errorf("cloudWatchMetrics = %v, want %v for %d series", c.Monthly.Items["cloudWatchMetrics"], want, series)
	}
	if series > cost.ThisFootprint().CustomMetrics {
		t.Errorf("the Lambdas emitted %d metric series, the cost model assumes %d: %v", series, cost.ThisFootprint().CustomMetrics, snap.Metrics)
	}
	for _, item := range []string{"kmsKeys", "cloudWatchAlarms", "logsIngestion", "s3Storage", "eventArchiveStorage", "eventBridge"} {
		if c.Monthly.Items[item] <= 0 {
			t.Errorf("monthly item %s = %v", item, c.Monthly.Items[item])
		}
	}

	resp, err := http.Get(st.Env.URL + LocalMetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var served struct {
		Metrics map[string]float64 `json:"metrics"`
		Cost    report.Cost        `json:"cost"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil {
		t.Fatal(err)
	}
	if served.Metrics[metrics.EventsPublished] != seeded || served.Cost.Changes != int64(seeded) {
		t.Errorf("served %+v", served)
	}

	// cdcctl status shows the same figures for the local runtime — with
	// nothing but --endpoint: the names come from the stack's /_local/config.
	out := cdcctlWithEnv(t, st, nil, "status")
	if !strings.Contains(out, st.Res.Table) {
		t.Errorf("cdcctl status --endpoint alone did not find the table %s:\n%s", st.Res.Table, out)
	}
	for _, want := range []string{"metrics (local runtime", metrics.EventsPublished, metrics.CheckpointLagSeconds, "per million changes"} {
		if !strings.Contains(out, want) {
			t.Errorf("cdcctl status lacks %q:\n%s", want, out)
		}
	}
	var js struct {
		LocalMetrics struct {
			Metrics map[string]float64 `json:"metrics"`
		} `json:"localMetrics"`
	}
	if err := json.Unmarshal([]byte(cdcctl(t, st, "status", "--json")), &js); err != nil {
		t.Fatalf("cdcctl status --json: %v", err)
	}
	if js.LocalMetrics.Metrics[metrics.EventsPublished] != seeded {
		t.Errorf("cdcctl status --json localMetrics = %v", js.LocalMetrics.Metrics)
	}
}
