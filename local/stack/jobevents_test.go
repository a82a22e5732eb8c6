package stack

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// The rule's InputTransformer (exportjob's, which the CDK app deploys) turns
// HealthLake's event into the message check-export handles.
func TestJobEventTransformMakesTheCheckExportMessage(t *testing.T) {
	ev := `{"version":"0","id":"e1","detail-type":"Export Job Completed","source":"aws.healthlake","account":"000000000000",` +
		`"time":"2026-11-21T10:05:00Z","region":"us-east-1","resources":[],` +
		`"detail":{"datastoreId":"ds1","jobId":"j\"1","submitTime":"2026-11-21T10:00:00Z","outputDataConfig":{"s3Uri":"s3://b/exports/"}}}`
	body, err := applyInputTransformer(exportjob.JobEventInputPathsMap, exportjob.JobEventInputTemplate, []byte(ev))
	if err != nil {
		t.Fatal(err)
	}
	m, err := exportjob.ParseJobEventMessage(body)
	want := exportjob.JobEventMessage{Kind: "jobEvent", DatastoreID: "ds1", JobID: `j"1`, JobStatus: "Export Job Completed"}
	if err != nil || m != want {
		t.Errorf("%s → %+v, %v; want %+v", body, m, err, want)
	}
}

func TestInputTransformerQuotedPlaceholdersAndMissingPaths(t *testing.T) {
	out, err := applyInputTransformer(map[string]string{"a": "$.detail.a", "n": "$.detail.n", "x": "$.detail.none"},
		`{"s":"a is <a>","v":<n>,"m":<x>}`, []byte(`{"detail":{"a":"x\"y","n":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil || got["s"] != `a is x"y` || got["v"] != 3.0 || got["m"] != nil {
		t.Errorf("%s → %v, %v", out, got, err)
	}
}

// HealthLake's "Export Job Completed" event, routed by the stack's rule to
// the re-check queue, finishes the wait at once: with the first poll 200 s
// away the window still commits (runWindow gives up after 2 minutes), and
// the report carries the delay from the job's end to its manifest.
func TestJobEventEndsTheWaitBeforeThePoll(t *testing.T) {
	st := startStack(t, func(o *Options) {
		o.RecheckDelay = 200 * time.Second
		o.ExportStartup = 300 * time.Millisecond
	})
	w := runWindow(t, st)
	if w.Outcome != report.OutcomeCommitted {
		t.Fatalf("window = %+v", w)
	}
	d := st.Report.Snapshot().ExportNotice
	if d == nil || d.Count != 1 || d.Max < 0 {
		t.Errorf("export notice = %+v, want one window's delay", d)
	}
}
