package runctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func commitPayload(name, export string) string {
	return fmt.Sprintf(`{"action":"commit","executionId":%q,"executionName":%q,"results":null,"export":%s}`, arn(name), name, export)
}

// Issue 11.4 at the Lambda's payloads: a two-part export is delivered by
// two runs; the second gets the C2 reuse object of part 1.
func TestTwoPartExportThroughThePayloads(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	a, err := f.invoke(t, acquirePayload("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	ew, _ := json.Marshal(a["exportWindow"])
	exp := fmt.Sprintf(`{"bucket":"b","manifestKey":"manifests/run-1/part-00000.json","manifestRunId":"run-1","part":0,"parts":2,`+
		`"partFiles":[3,1],"partBatches":[2,1],"fileCount":3,"batchCount":2,"jobId":"job-1","datastoreId":"ds","window":%s,"completedWithErrors":false}`, ew)
	got, err := f.invoke(t, commitPayload("run-1", exp))
	if err != nil {
		t.Fatal(err)
	}
	if got["outcome"] != "PARTIAL" || got["checkpoint"] != "2026-11-21T09:00:00.000Z" || got["nextPart"] != 1.0 || got["parts"] != 2.0 {
		t.Fatalf("commit of part 0 = %v", got)
	}
	f.owners.set(arn("run-2"), "RUNNING")
	a2, err := f.invoke(t, acquirePayload("run-2"))
	if err != nil {
		t.Fatal(err)
	}
	reuse, ok := a2["reuse"].(map[string]any)
	if !ok {
		t.Fatalf("acquire of run-2 = %v, want a reuse object", a2)
	}
	want := map[string]any{"bucket": "b", "manifestKey": "manifests/run-1/part-00001.json", "manifestRunId": "run-1",
		"part": 1.0, "parts": 2.0, "fileCount": 1.0, "batchCount": 1.0, "jobId": "job-1", "datastoreId": "ds",
		"completedWithErrors": false}
	for k, v := range want {
		if reuse[k] != v {
			t.Errorf("reuse.%s = %v, want %v", k, reuse[k], v)
		}
	}
	if fmt.Sprint(reuse["window"]) != fmt.Sprint(a["exportWindow"]) || fmt.Sprint(a2["window"]) != fmt.Sprint(a["window"]) ||
		fmt.Sprint(a2["exportWindow"]) != fmt.Sprint(a["exportWindow"]) {
		t.Errorf("run-2 windows %v / %v / reuse %v, want run-1's %v / %v", a2["window"], a2["exportWindow"], reuse["window"], a["window"], a["exportWindow"])
	}
	raw, _ := json.Marshal(reuse)
	got, err = f.invoke(t, commitPayload("run-2", string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if got["outcome"] != "SUCCEEDED" || got["checkpoint"] != "2026-11-21T09:58:00.000Z" {
		t.Fatalf("commit of the last part = %v", got)
	}
}

func TestCommitWithABadExportIsAnInputError(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	for _, exp := range []string{
		`{"parts":2,"part":5,"partFiles":[1,1]}`,
		`"not an object"`,
		`{"bucket":"b","manifestKey":"manifests/run-1/part-00001.json","manifestRunId":"run-1","part":1,"parts":2,"partFiles":[1,1],"fileCount":1}`,
	} {
		_, err := f.invoke(t, commitPayload("run-1", exp))
		var ie *InputError
		if !errors.As(err, &ie) {
			t.Errorf("export %s: err = %v, want an InputError", exp, err)
		}
	}
	// The placeholder of a run that exported nothing is no part information.
	if got, err := f.invoke(t, commitPayload("run-1", `{"jobId":null,"fileCount":0}`)); err != nil || got["outcome"] != "SUCCEEDED" {
		t.Fatalf("commit with the placeholder export = %v, %v", got, err)
	}
}

// Issue 11.10: the Cause of a failed Map carrying an eventId is stored
// without the resource id.
func TestFailStoresNoResourceIdFromTheCause(t *testing.T) {
	f := newFixture(t)
	f.owners.set(arn("run-1"), "RUNNING")
	if _, err := f.invoke(t, acquirePayload("run-1")); err != nil {
		t.Fatal(err)
	}
	const id = "7c4f0a2e-13b9-5d8e-a6f1-09b2c3d4e5f6"
	cause, _ := json.Marshal(map[string]string{"errorType": "PublishFailed",
		"errorMessage": "entry Patient/" + id + "/_history/2 rejected: MalformedDetail"})
	payload, _ := json.Marshal(map[string]string{"action": "fail", "executionId": arn("run-1"), "executionName": "run-1",
		"error": "States.TaskFailed", "cause": string(cause)})
	if _, err := f.invoke(t, string(payload)); err != nil {
		t.Fatal(err)
	}
	st, err := f.store.Status(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{st.LastRun.Reason, st.History[0].Reason} {
		if strings.Contains(r, id) || !strings.Contains(r, "PublishFailed") || !strings.Contains(r, "[id:") {
			t.Fatalf("stored reason %q", r)
		}
	}
	if strings.Contains(f.logs.String(), id) {
		t.Fatal("the id reached the run-lock's logs")
	}
}
