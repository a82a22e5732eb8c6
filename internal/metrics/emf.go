// Package metrics writes CloudWatch Embedded Metric Format (EMF) records: one
// JSON log line per flush that CloudWatch Logs turns into metrics. Lambda
// writes them to stdout; the local runtime also keeps running totals so that
// `cdcctl status` and the cdc-local report show the same figures.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Namespace is the CloudWatch namespace of every metric the pipeline emits.
const Namespace = "HealthLakeCDC"

// Metric names (docs/ARCHITECTURE.md "Metrics"); the CDK alarms use them.
const (
	CheckpointLagSeconds = "CheckpointLagSeconds"
	ResourcesExported    = "ResourcesExported"
	EventsPublished      = "EventsPublished"
	EntriesRetried       = "EntriesRetried"
	EntriesFailed        = "EntriesFailed"
	QuarantinedLines     = "QuarantinedLines"
	ClaimChecks          = "ClaimChecks"
	ExportWaitSeconds    = "ExportWaitSeconds"
	SkippedRuns          = "SkippedRuns"
	RunsFailed           = "RunsFailed"
	// ExportErrors counts the entries of HealthLake's error files of jobs that
	// ended COMPLETED_WITH_ERRORS (at least 1 per such job); the stack alarms on it.
	ExportErrors = "ExportErrors"
	// ExportNoticeSeconds is the time from a job's end (HealthLake's endTime)
	// to its manifest: how late the pipeline noticed the export finished.
	ExportNoticeSeconds = "ExportNoticeSeconds"
	// ExportQueuedSeconds is how long a run's export has waited so far while
	// HealthLake reports it QUEUED: behind another job of the account (an
	// `$import`, another pipeline's or a customer's export) in HealthLake's
	// one export slot (docs/DEPLOY.md).
	ExportQueuedSeconds = "ExportQueuedSeconds"
	// OverlapSkipped counts lines of a window's overlap not published again
	// because the previous window had published their version.
	OverlapSkipped = "OverlapSkipped"
	// ReadsResumed counts export-file reads S3 ended part way that
	// prepare-change went on with from the byte they had reached.
	ReadsResumed = "ReadsResumed"
	// FastPathSkipped counts exported lines a window did not publish
	// because the Subscriptions fast path had (docs/FASTPATH.md);
	// FastPathMissed the versions a window published that the fast path had
	// not delivered by then — lost, late or never notified (its alarm).
	FastPathSkipped = "FastPathSkipped"
	FastPathMissed  = "FastPathMissed"
	// FastPathSubscriptionInactive is 0 when the scheduled check found the
	// fast path's Subscription active, else 1 (internal/subscription,
	// Check; its alarm).
	FastPathSubscriptionInactive = "FastPathSubscriptionInactive"
)

// Units used by the pipeline's metrics.
const (
	UnitCount   = "Count"
	UnitSeconds = "Seconds"
	UnitBytes   = "Bytes"
)

// DefaultPipeline is the Pipeline dimension when CDC_PIPELINE_NAME is unset.
const DefaultPipeline = "healthlake-cdc"

// Value is one metric observation.
type Value struct {
	Name  string
	Value float64
	Unit  string
}

// Count returns a Count observation.
func Count(name string, n int64) Value { return Value{Name: name, Value: float64(n), Unit: UnitCount} }

// Seconds returns a Seconds observation.
func Seconds(name string, d time.Duration) Value {
	return Value{Name: name, Value: d.Seconds(), Unit: UnitSeconds}
}

// Recorder emits EMF records for one pipeline and keeps running totals of
// every metric it emitted. It is safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	w        io.Writer
	pipeline string
	now      func() time.Time
	totals   map[string]float64
}

// New returns a Recorder writing to w with the given Pipeline dimension
// ("" means DefaultPipeline).
func New(w io.Writer, pipeline string) *Recorder {
	if pipeline == "" {
		pipeline = DefaultPipeline
	}
	return &Recorder{w: w, pipeline: pipeline, now: time.Now, totals: map[string]float64{}}
}

// FromEnv returns a Recorder writing to stdout with the Pipeline dimension
// from CDC_PIPELINE_NAME.
func FromEnv() *Recorder { return New(os.Stdout, os.Getenv(stackconfig.EnvPipelineName)) }

// SetClock replaces the clock that stamps records (for tests).
func (r *Recorder) SetClock(now func() time.Time) { r.now = now }

// Emit writes one EMF record holding values under the Pipeline dimension
// only. breakdown (for example {"ResourceType": "Patient"}) and properties
// are added to the record as searchable log fields, not as dimensions: every
// dimension value would be one more custom metric billed by the month
// (docs/COST.md), and Logs Insights answers per-type questions from the
// fields. They must hold ids and counts only, never PHI.
func (r *Recorder) Emit(values []Value, breakdown map[string]string, properties map[string]any) error {
	if r == nil || len(values) == 0 {
		return nil
	}
	record := map[string]any{}
	for k, v := range properties {
		record[k] = v
	}
	for k, v := range breakdown {
		record[k] = v
	}
	dims := [][]string{{"Pipeline"}}
	record["Pipeline"] = r.pipeline
	defs := make([]map[string]string, 0, len(values))
	seen := map[string]bool{}
	for _, v := range values {
		if v.Name == "" {
			return fmt.Errorf("emit metrics: a value has no name")
		}
		if seen[v.Name] {
			return fmt.Errorf("emit metrics: %s given twice in one record", v.Name)
		}
		seen[v.Name] = true
		unit := v.Unit
		if unit == "" {
			unit = UnitCount
		}
		defs = append(defs, map[string]string{"Name": v.Name, "Unit": unit})
		record[v.Name] = v.Value
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	record["_aws"] = map[string]any{
		"Timestamp": r.now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": dims,
			"Metrics":    defs,
		}},
	}
	line, err := json.Marshal(record)
	if err != nil {
		return fmt.Errorf("emit metrics: %w", err)
	}
	for _, v := range values {
		r.totals[v.Name] += v.Value
	}
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("emit metrics: %w", err)
	}
	return nil
}

// Totals returns the sum of every metric emitted so far, keyed by name: one
// entry per metric series CloudWatch would store.
func (r *Recorder) Totals() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(r.totals))
	for k, v := range r.totals {
		out[k] = v
	}
	return out
}

// Metrics of the reconciliation (docs/RECONCILE.md). ReconcileRepairs counts
// versions that were due and never delivered, re-published by a
// reconciliation: each means a gap somewhere, and the stack alarms on it.
const (
	ReconcileRepairs   = "ReconcileRepairs"
	ReconcileDeletes   = "ReconcileDeletes"
	ReconcileResources = "ReconcileResources"
)
