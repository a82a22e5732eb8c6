package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestEmitWritesEMFRecordCloudWatchCanParse(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, "pipe-a")
	r.SetClock(func() time.Time { return time.UnixMilli(1700000000123) })
	err := r.Emit([]Value{Count(EventsPublished, 42), Seconds(ExportWaitSeconds, 1500*time.Millisecond)},
		map[string]string{"ResourceType": "Patient"}, map[string]any{"runId": "run-1"})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got %d: %q", len(lines), buf.String())
	}
	var rec struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Pipeline        string
		ResourceType    string
		RunID           string  `json:"runId"`
		EventsPublished float64 `json:"EventsPublished"`
		ExportWait      float64 `json:"ExportWaitSeconds"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("record is not JSON: %v", err)
	}
	if rec.AWS.Timestamp != 1700000000123 {
		t.Errorf("timestamp = %d", rec.AWS.Timestamp)
	}
	d := rec.AWS.CloudWatchMetrics[0]
	if d.Namespace != Namespace || len(d.Dimensions) != 1 || len(d.Dimensions[0]) != 1 || d.Dimensions[0][0] != "Pipeline" {
		t.Errorf("directive = %+v", d)
	}
	if len(d.Metrics) != 2 || d.Metrics[1].Unit != UnitSeconds {
		t.Errorf("metric definitions = %+v", d.Metrics)
	}
	if rec.Pipeline != "pipe-a" || rec.ResourceType != "Patient" || rec.RunID != "run-1" {
		t.Errorf("dimension/property values = %+v", rec)
	}
	if rec.EventsPublished != 42 || rec.ExportWait != 1.5 {
		t.Errorf("values = %v, %v", rec.EventsPublished, rec.ExportWait)
	}
}

func TestTotalsAccumulateAcrossRecords(t *testing.T) {
	r := New(&bytes.Buffer{}, "")
	for i := 0; i < 3; i++ {
		if err := r.Emit([]Value{Count(QuarantinedLines, 2)}, map[string]string{"ResourceType": "Observation"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Emit([]Value{Count(QuarantinedLines, 1)}, nil, nil); err != nil {
		t.Fatal(err)
	}
	got := r.Totals()
	if got[QuarantinedLines] != 7 || len(got) != 1 {
		t.Errorf("totals = %v", got)
	}
}

func TestEmitRejectsDuplicateAndUnnamedValues(t *testing.T) {
	r := New(&bytes.Buffer{}, "")
	if err := r.Emit([]Value{Count(ClaimChecks, 1), Count(ClaimChecks, 2)}, nil, nil); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate name: err = %v", err)
	}
	if err := r.Emit([]Value{{Value: 1}}, nil, nil); err == nil || !strings.Contains(err.Error(), "no name") {
		t.Errorf("unnamed: err = %v", err)
	}
	var nilRec *Recorder
	if err := nilRec.Emit([]Value{Count(ClaimChecks, 1)}, nil, nil); err != nil {
		t.Errorf("nil recorder must be a no-op, got %v", err)
	}
}
