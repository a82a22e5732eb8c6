package fakehealthlake_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func statusOf(t *testing.T, f *fx, jobID string) string {
	t.Helper()
	_, p := describe(t, f, jobID)
	return p["jobStatus"].(string)
}

// HealthLake runs one export per account and Region ("concurrent
// StartFHIRExportJob jobs": 1); the others wait and start first in, first
// out, each when the one before it ends.
func TestOneRunningExportOthersQueueFirstInFirstOut(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.Manual = false; o.ExportStartup = 10 * time.Second })
	f.clk.Set(t0)
	a := startExport(t, f, "", "a")
	b := startExport(t, f, "", "b")
	c := startExport(t, f, "", "c")
	if got := []string{statusOf(t, f, a), statusOf(t, f, b), statusOf(t, f, c)}; strings.Join(got, ",") != "IN_PROGRESS,QUEUED,QUEUED" {
		t.Fatalf("statuses = %v", got)
	}
	f.clk.Set(t0.Add(10 * time.Second))
	if got := []string{statusOf(t, f, a), statusOf(t, f, b), statusOf(t, f, c)}; strings.Join(got, ",") != "COMPLETED,IN_PROGRESS,QUEUED" {
		t.Fatalf("after the first ends: %v", got)
	}
	f.clk.Set(t0.Add(20 * time.Second))
	if got := []string{statusOf(t, f, b), statusOf(t, f, c)}; strings.Join(got, ",") != "COMPLETED,IN_PROGRESS" {
		t.Fatalf("after the second ends: %v", got)
	}
	if m := f.emu.MaxConcurrentExports(); m != 1 {
		t.Errorf("max concurrent exports = %d", m)
	}
}

// An export runs ExportStartup + ExportPerMB per MiB it exports, and ends at
// that modelled time even when nobody asks until later.
func TestExportDurationIsStartupPlusPerMB(t *testing.T) {
	eachStore(t, testExportDurationIsStartupPlusPerMB)
}

func testExportDurationIsStartupPlusPerMB(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) {
		o.Manual = false
		o.ExportStartup = 2 * time.Second
		o.ExportPerMB = 8 * time.Second
	})
	ds, _ := f.emu.Datastore("ds1")
	f.clk.Set(t0)
	pad := strings.Repeat("x", 1000)
	for i := 0; i < 512; i++ { // about half a MiB
		mustLoad(t, ds, "Patient", "p"+strings.Repeat("0", 4-len(itoa(i)))+itoa(i), `{"resourceType":"Patient","name":[{"text":"`+pad+`"}]}`)
	}
	j := startExport(t, f, "", "timed")
	if s := statusOf(t, f, j); s != "IN_PROGRESS" {
		t.Fatalf("status = %s", s)
	}
	f.clk.Set(t0.Add(5 * time.Second)) // before 2 s + ~0.5 MiB × 8 s
	if s := statusOf(t, f, j); s != "IN_PROGRESS" {
		t.Fatalf("status at 5 s = %s, want IN_PROGRESS", s)
	}
	f.clk.Set(t0.Add(time.Minute))
	_, p := describe(t, f, j)
	if p["jobStatus"] != "COMPLETED" || p["endTime"] != "Nov 21, 2026 10:00:06 AM" {
		t.Errorf("job = %v, want COMPLETED at the modelled 6 s, not when asked", p)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A write becomes visible to exports only VisibilityLag after it commits:
// an export reading the data store sooner sees the version before it.
func TestWritesReachExportsAfterTheVisibilityLag(t *testing.T) {
	eachStore(t, testWritesReachExportsAfterTheVisibilityLag)
}

func testWritesReachExportsAfterTheVisibilityLag(t *testing.T) {
	ctx := context.Background()
	f := setup(t, func(o *fakehealthlake.Options) { o.VisibilityLag = 30 * time.Second })
	ds, _ := f.emu.Datastore("ds1")
	f.clk.Set(t0)
	mustLoad(t, ds, "Patient", "old", `{"resourceType":"Patient","active":true}`)
	f.clk.Set(t0.Add(time.Minute))
	mustLoad(t, ds, "Patient", "old", `{"resourceType":"Patient","active":false}`) // version 2
	mustLoad(t, ds, "Patient", "new", `{"resourceType":"Patient"}`)
	f.clk.Set(t0.Add(time.Minute + 10*time.Second))
	j := startExport(t, f, "", "early")
	if err := f.emu.RunJobs(ctx); err != nil {
		t.Fatal(err)
	}
	job, _ := f.emu.Job(j)
	body := readAll(t, f, job.Output)
	if !strings.Contains(body, `"active":true`) || strings.Contains(body, `"active":false`) || strings.Contains(body, `"id":"new"`) {
		t.Errorf("export 10 s after the writes = %s, want only the older version", body)
	}
	f.clk.Set(t0.Add(2 * time.Minute))
	j = startExport(t, f, "", "late")
	if err := f.emu.RunJobs(ctx); err != nil {
		t.Fatal(err)
	}
	job, _ = f.emu.Job(j)
	body = readAll(t, f, job.Output)
	if !strings.Contains(body, `"active":false`) || !strings.Contains(body, `"id":"new"`) {
		t.Errorf("export after the lag = %s, want both writes", body)
	}
}

func readAll(t *testing.T, f *fx, files []fakehealthlake.OutputFile) string {
	t.Helper()
	var b strings.Builder
	for _, o := range files {
		b.WriteString(getObject(t, f, strings.TrimPrefix(o.URL, "s3://art/")))
	}
	return b.String()
}

// The emulator sends HealthLake's job state events (source aws.healthlake,
// the documented export detail types) as a job's status changes.
func TestJobStateEvents(t *testing.T) {
	var mu sync.Mutex
	var got []fakehealthlake.JobEvent
	f := setup(t, func(o *fakehealthlake.Options) {
		o.OnJobEvent = func(ev fakehealthlake.JobEvent) { mu.Lock(); got = append(got, ev); mu.Unlock() }
	})
	f.clk.Set(t0)
	j := startExport(t, f, "", "evented")
	if err := f.emu.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var types []string
	for _, ev := range got {
		types = append(types, ev.DetailType)
		var d map[string]any
		if err := json.Unmarshal(ev.Detail, &d); err != nil || ev.Source != "aws.healthlake" || d["datastoreId"] != "ds1" || d["jobId"] != j {
			t.Errorf("event %+v detail %s", ev, ev.Detail)
		}
	}
	if strings.Join(types, "|") != "Export Job Submitted|Export Job In Progress|Export Job Completed" {
		t.Errorf("events = %v", types)
	}
}

func getObject(t *testing.T, f *fx, key string) string {
	t.Helper()
	obj, err := f.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("art"), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Body.Close()
	b, _ := io.ReadAll(obj.Body)
	return string(b)
}
