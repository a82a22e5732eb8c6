package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// localMetricsPath is where cdc-local serves the totals of the metrics its
// Lambdas emitted (there is no CloudWatch locally); see local/stack.
const localMetricsPath = "/_local/metrics"

// localMetrics is what cdc-local serves: metric totals and the cost so far.
type localMetrics struct {
	Metrics map[string]float64 `json:"metrics"`
	Cost    struct {
		Changes              int64   `json:"changes"`
		USDPerMillionChanges float64 `json:"usdPerMillionChanges"`
		Bill                 struct {
			Total float64 `json:"total"`
		} `json:"bill"`
	} `json:"cost"`
}

// fetchLocalMetrics reads the local runtime's metric totals from endpoint.
// ok is false when the endpoint is not a cdc-local (AWS has CloudWatch).
func fetchLocalMetrics(ctx context.Context, endpoint string) (*localMetrics, bool) {
	if endpoint == "" {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+localMetricsPath, nil)
	if err != nil {
		return nil, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil, false
	}
	var m localMetrics
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil || m.Metrics == nil {
		return nil, false
	}
	return &m, true
}

// printLocalMetrics prints the metric totals of the local runtime, the
// figures CloudWatch would show in AWS.
func printLocalMetrics(w io.Writer, m *localMetrics) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "metrics (local runtime, totals since start):")
	names := make([]string, 0, len(m.Metrics))
	for k := range m.Metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", k, strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", m.Metrics[k]), "0"), "."))
	}
	_ = tw.Flush()
	if m.Cost.Changes > 0 {
		fmt.Fprintf(w, "cost         $%.6f for %d changes: $%.2f per million changes at list prices\n",
			m.Cost.Bill.Total, m.Cost.Changes, m.Cost.USDPerMillionChanges)
	}
}

// localConfigPath is where cdc-local serves its resource names (CDC_TABLE,
// CDC_BUCKET, CDC_STATE_MACHINE_ARN, queue URLs, …).
const localConfigPath = "/_local/config"

// applyLocalDefaults makes `cdcctl --endpoint URL …` work against cdc-local
// without exporting its names first: when the command names an endpoint (flag
// or AWS_ENDPOINT_URL) that serves /_local/config, every CDC_* variable that
// is unset is set from it for the duration of the command. The returned func
// restores the environment. Against AWS it does nothing.
func applyLocalDefaults(ctx context.Context, args []string) (restore func()) {
	restore = func() {}
	endpoint := endpointArg(args)
	if endpoint == "" {
		endpoint = os.Getenv(envEndpoint)
	}
	if endpoint == "" {
		return restore
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+localConfigPath, nil)
	if err != nil {
		return restore
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return restore
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return restore
	}
	var cfg map[string]string
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&cfg); err != nil {
		return restore
	}
	var set []string
	for k, v := range cfg {
		if (strings.HasPrefix(k, "CDC_") || k == "AWS_REGION") && v != "" && os.Getenv(k) == "" {
			if os.Setenv(k, v) == nil {
				set = append(set, k)
			}
		}
	}
	return func() {
		for _, k := range set {
			_ = os.Unsetenv(k)
		}
	}
}

// endpointArg finds --endpoint URL (or -endpoint, or =URL forms) in args.
func endpointArg(args []string) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "endpoint" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
