package prepare_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
)

// Every invocation logs one line with the run context and counts, and emits
// EMF metrics: totals and the resources exported per resource type.
func TestInvocationLogsRunContextAndEmitsMetrics(t *testing.T) {
	r := newRig(t, 0)
	var logs, emf bytes.Buffer
	h := r.handler(t, func(c *prepare.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		c.Metrics = metrics.New(&emf, "test")
	})
	keys := putFiles(t, r, 3, true) // 1 + 2 + 3 = 6 events, 3 bad lines
	in := batchInput(keys...)
	in.Files[2].ResourceType = "Observation" // counted under its own type
	// The third file declares Observation but holds Patients: its lines are quarantined.
	if _, err := invoke(t, h, in); err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("want one JSON log line, got %q: %v", logs.String(), err)
	}
	for k, want := range map[string]any{"executionId": in.ExecutionID, "runId": "run-1", "jobId": "job1",
		"window": in.Window.String(), "files": 3.0, "events": 3.0, "quarantined": 6.0} {
		if line[k] != want {
			t.Errorf("log %s = %v, want %v", k, line[k], want)
		}
	}
	if strings.Contains(logs.String(), "f0-p0") || strings.Contains(logs.String(), "oops") {
		t.Errorf("log carries resource content: %s", logs.String())
	}
	got := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(emf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("EMF line %q: %v", l, err)
		}
		for _, name := range []string{metrics.EventsPublished, metrics.QuarantinedLines, metrics.ClaimChecks, metrics.EntriesFailed, metrics.ResourcesExported} {
			if v, ok := rec[name].(float64); ok {
				key := name
				if rt, ok := rec["ResourceType"].(string); ok {
					key += "/" + rt
				}
				got[key] += v
			}
		}
	}
	want := map[string]float64{metrics.EventsPublished: 3, metrics.QuarantinedLines: 6, metrics.ClaimChecks: 0, metrics.EntriesFailed: 0,
		metrics.ResourcesExported + "/Patient": 5, metrics.ResourcesExported + "/Observation": 4}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
