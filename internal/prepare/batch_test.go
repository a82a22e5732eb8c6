package prepare_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// batchInput is the payload the Distributed Map's ItemSelector builds for a
// manifest batch of keys.
func batchInput(keys ...string) prepare.Input {
	in := prepare.Input{
		Window: envelope.Window{Since: since, Until: until},
		Export: envelope.ExportRef{DatastoreID: "ds1", JobID: "job1"},
		RunID:  "run-1", ExecutionID: "arn:aws:states:us-east-1:000000000000:execution:cdc:run-1",
	}
	for _, k := range keys {
		in.Files = append(in.Files, manifest.File{Bucket: bucket, Key: k, ResourceType: "Patient"})
	}
	return in
}

// putFiles writes n files; file i holds i+1 in-window patients and, when
// bad, one line that is not JSON after them.
func putFiles(t *testing.T, r *rig, n int, bad bool) []string {
	t.Helper()
	var keys []string
	for i := 0; i < n; i++ {
		var b strings.Builder
		for j := 0; j <= i; j++ {
			fmt.Fprintln(&b, patient(fmt.Sprintf("f%d-p%d", i, j), "1", "2026-11-21T09:30:00Z", j))
		}
		if bad {
			b.WriteString("{oops\n")
		}
		key := fmt.Sprintf("exports/ds1-FHIR_EXPORT-job1/Patient/Patient-%d-0-0.ndjson", i)
		r.put(t, key, []byte(b.String()))
		keys = append(keys, key)
	}
	return keys
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func TestBatchSharesPutEventsBatchesAcrossFiles(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	keys := putFiles(t, r, 12, true) // 1 + 2 + … + 12 = 78 events, 12 bad lines
	out, err := invoke(t, h, batchInput(keys...))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var wantKeys []string
	for _, k := range keys[:prepare.MaxListedQuarantineKeys] {
		wantKeys = append(wantKeys, prepare.QuarantineKey("run-1", k))
	}
	// ⌈78 ÷ 10⌉ = 8 calls; one invocation per file makes Σ⌈(i+1) ÷ 10⌉ = 14.
	want := prepare.Output{Files: 12, Lines: 90, Events: 78, Quarantined: 12, Bytes: out.Bytes, PutEventsCalls: 8, Chunks: 78,
		QuarantineKeys: wantKeys, QuarantineObjects: 12}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", out, want)
	}
	if r.sink.Len() != 78 {
		t.Fatalf("delivered %d events", r.sink.Len())
	}
	// Quarantine objects stay per file: each holds its own file's bad line.
	for _, k := range keys {
		recs := quarantineRecords(t, r.get(t, prepare.QuarantineKey("run-1", k)))
		if len(recs) != 1 || recs[0].File != k || recs[0].Raw != "{oops" {
			t.Fatalf("quarantine of %s = %+v", k, recs)
		}
	}

	// The same files one invocation each: the same events, more calls.
	r.sink.Reset()
	ids := map[string]bool{}
	var calls int64
	for _, k := range keys {
		o, err := invoke(t, h, input(k))
		if err != nil {
			t.Fatal(err)
		}
		if o.Files != 1 || len(o.QuarantineKeys) != 1 || o.QuarantineKeys[0] != prepare.QuarantineKey("run-1", k) {
			t.Fatalf("single-file summary %+v", o)
		}
		calls += o.PutEventsCalls
	}
	for _, id := range eventIDs(t, r.sink) {
		ids[id] = true
	}
	if len(ids) != 78 || calls != 14 {
		t.Fatalf("one file per invocation: %d events in %d calls", len(ids), calls)
	}
}

func TestBatchPayloadFromStepFunctions(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	keys := putFiles(t, r, 2, false)
	// Exactly what the ItemSelector hands the child's Task as its Payload (C4).
	payload := `{"files":[{"bucket":"artifacts","key":"` + keys[0] + `","resourceType":"Patient","bytes":100},{"bucket":"artifacts","key":"` + keys[1] + `","resourceType":"Patient"}],` +
		`"window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T10:00:00.000Z"},` +
		`"export":{"datastoreId":"ds1","jobId":"job1"},"runId":"run-1","executionId":"arn:aws:states:us-east-1:000000000000:execution:cdc:run-1"}`
	raw, err := lambda.NewHandler(h.Handle).Invoke(context.Background(), []byte(payload))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out["files"] != 2.0 || out["events"] != 3.0 || out["putEventsCalls"] != 1.0 {
		t.Fatalf("output %s", raw)
	}
	if _, ok := out["file"]; ok {
		t.Fatalf("a batch output names a file: %s", raw)
	}
}

func TestBatchFailureFailsTheInvocationAndARetryPublishesTheSameEventIDs(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	keys := putFiles(t, r, 3, true)
	missing := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-late-0-0.ndjson"
	in := batchInput(keys[0], keys[1], missing, keys[2])

	// The third file is not there yet: the whole invocation fails, naming it.
	_, err := invoke(t, h, in)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("a missing file in the batch: err = %v", err)
	}
	before := eventIDs(t, r.sink)

	// Step Functions retries the whole batch.
	var b strings.Builder
	for j := 0; j < 4; j++ {
		fmt.Fprintln(&b, patient(fmt.Sprintf("late-p%d", j), "2", "2026-11-21T09:40:00Z", j))
	}
	r.put(t, missing, []byte(b.String()))
	r.sink.Reset()
	out, err := invoke(t, h, in)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	after := eventIDs(t, r.sink)
	if out.Files != 4 || out.Events != 1+2+3+4 || len(after) != 10 {
		t.Fatalf("retry summary %+v, %d delivered", out, len(after))
	}
	got := map[string]bool{}
	for _, id := range after {
		got[id] = true
	}
	for _, id := range before {
		if !got[id] {
			t.Fatalf("event %s of the failed attempt has another id on the retry (%v)", id, after)
		}
	}
	q1 := r.get(t, prepare.QuarantineKey("run-1", keys[0]))
	again, err := invoke(t, h, in)
	if err != nil || !reflect.DeepEqual(again, out) || string(r.get(t, prepare.QuarantineKey("run-1", keys[0]))) != string(q1) {
		t.Fatalf("a second retry differs: %+v %v", again, err)
	}
	if fmt.Sprint(sorted(eventIDs(t, r.sink)[10:])) != fmt.Sprint(sorted(after)) {
		t.Fatal("a second retry published other eventIds")
	}
}

func TestMalformedDetailIsQuarantinedNotAPoisonPill(t *testing.T) {
	// At validation level none a line that peeks well but is not JSON
	// becomes an event; EventBridge rejects its detail with MalformedDetail.
	broken := `{"resourceType":"Patient","id":"broken","meta":{"versionId":"1","lastUpdated":"2026-11-21T09:30:00Z"},"name":[{"family":"Müller"}],"active":tru}`
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency %d", conc), func(t *testing.T) {
			r := newRig(t, 0)
			h := r.handler(t, func(c *prepare.Config) { c.Validation = fhir.ValidateNone; c.Publish.Concurrency = conc })
			var first, second strings.Builder
			for j := 0; j < 3; j++ {
				fmt.Fprintln(&first, patient(fmt.Sprintf("a%d", j), "1", "2026-11-21T09:30:00Z", j))
			}
			first.WriteString(broken + "\n") // line 4, sent with the next file's events
			for j := 0; j < 5; j++ {
				fmt.Fprintln(&second, patient(fmt.Sprintf("b%d", j), "1", "2026-11-21T09:30:00Z", j))
			}
			k1, k2 := "exports/x/Patient/Patient-1-0-0.ndjson", "exports/x/Patient/Patient-2-0-0.ndjson"
			r.put(t, k1, []byte(first.String()))
			r.put(t, k2, []byte(second.String()))

			out, err := invoke(t, h, batchInput(k1, k2))
			if err != nil {
				t.Fatalf("a malformed detail failed the invocation: %v", err)
			}
			if out.Events != 8 || out.Quarantined != 1 || out.Rejected != 1 || out.Lines != 9 || out.PutEventsCalls != 1 || out.EntriesRetried != 0 || out.Chunks != 8 {
				t.Fatalf("summary %+v", out)
			}
			if st := r.em.Stats(); st.FailedByCode["MalformedDetail"] != 1 {
				t.Fatalf("the emulator did not reject the detail: %+v", st)
			}
			ids := eventIDs(t, r.sink)
			if len(ids) != 8 || strings.Contains(strings.Join(ids, " "), "broken") {
				t.Fatalf("delivered %v", ids)
			}
			if !reflect.DeepEqual(out.QuarantineKeys, []string{prepare.QuarantineKey("run-1", k1)}) || out.QuarantineObjects != 1 {
				t.Fatalf("quarantine keys %v", out.QuarantineKeys)
			}
			recs := quarantineRecords(t, r.get(t, prepare.QuarantineKey("run-1", k1)))
			if len(recs) != 1 || recs[0].Reason != prepare.ReasonMalformedDetail || recs[0].Line != 4 || recs[0].Raw != broken ||
				recs[0].File != k1 || recs[0].Offset != int64(strings.Index(first.String(), broken)) || recs[0].Length != len(broken) {
				t.Fatalf("quarantine records %+v", recs)
			}
		})
	}
}

func TestOtherPermanentEntryErrorsStillFailTheInvocation(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	keys := putFiles(t, r, 2, false)
	r.em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		if strings.Contains(e.Detail, `"eventId":"Patient/f1-p0/`) {
			return "AccessDeniedException", "denied"
		}
		return "", ""
	})
	_, err := invoke(t, h, batchInput(keys...))
	if err == nil || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Fatalf("err = %v", err)
	}
}

func TestInvalidBatchInputFails(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	for name, mod := range map[string]func(*prepare.Input){
		"no files":         func(in *prepare.Input) { in.Files = nil },
		"empty files":      func(in *prepare.Input) { in.Files = []manifest.File{} },
		"file without key": func(in *prepare.Input) { in.Files[1].Key = "" },
		"no run":           func(in *prepare.Input) { in.RunID = "" },
		"empty window":     func(in *prepare.Input) { in.Window.Until = in.Window.Since },
	} {
		in := batchInput(exportKey, exportKey+"2")
		mod(&in)
		if _, err := h.Handle(context.Background(), in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestDataAfterTheObjectCannotForgeDetailFields(t *testing.T) {
	// At validation level none the reader does not look past the top-level
	// object. A line whose trailing data continues the detail's own object
	// would make a valid detail with a second eventId (and any other field):
	// such a line must be quarantined, not published.
	forged := `{"resourceType":"Patient","id":"p1","meta":{"versionId":"1","lastUpdated":"2026-11-21T09:30:00Z"}},"eventId":"Patient/forged/_history/9"`
	r := newRig(t, 0)
	h := r.handler(t, func(c *prepare.Config) { c.Validation = fhir.ValidateNone })
	body := patient("ok", "1", "2026-11-21T09:30:00Z", 0) + "\n" + forged + "\n"
	r.put(t, exportKey, []byte(body))
	out, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if out.Lines != 2 || out.Events != 1 || out.Quarantined != 1 {
		t.Fatalf("summary %+v", out)
	}
	for _, ev := range r.sink.Events() {
		d, err := cdcevent.DecodeDetail(ev.Event.Detail)
		if err != nil || d.EventID != "Patient/ok/_history/1" {
			t.Fatalf("delivered %s (%v)", ev.Event.Detail, err)
		}
	}
	recs := quarantineRecords(t, r.get(t, prepare.QuarantineKey("run-1", exportKey)))
	if len(recs) != 1 || recs[0].Line != 2 || recs[0].Raw != forged || recs[0].Reason == "" || strings.Contains(recs[0].Reason, "forged") {
		t.Fatalf("quarantine records %+v", recs)
	}
}

func TestLargeBrokenLineAtLevelNoneIsQuarantinedNotClaimChecked(t *testing.T) {
	// Inline, EventBridge rejects a broken line with MalformedDetail and it is
	// quarantined; a line too large to go inline must not escape that check
	// by being claim-checked: consumers would get a resourceRef to bytes
	// that are not a JSON object.
	broken := patient("big", "1", "2026-11-21T09:30:00Z", 3000)
	broken = broken[:len(broken)-1] + `,"active":tru}`
	good := patient("good", "1", "2026-11-21T09:30:00Z", 3000)
	r := newRig(t, 4096)
	h := r.handler(t, func(c *prepare.Config) { c.Validation = fhir.ValidateNone; c.Publish.MaxEntryBytes = 4096 })
	r.put(t, exportKey, []byte(broken+"\n"+good+"\n"))
	out, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if out.Lines != 2 || out.Events != 1 || out.Quarantined != 1 || out.ClaimChecked != 1 {
		t.Fatalf("summary %+v", out)
	}
	if ids := eventIDs(t, r.sink); len(ids) != 1 || ids[0] != "Patient/good/_history/1" {
		t.Fatalf("delivered %v", ids)
	}
	recs := quarantineRecords(t, r.get(t, prepare.QuarantineKey("run-1", exportKey)))
	if len(recs) != 1 || recs[0].Line != 1 || recs[0].Raw != broken || recs[0].Reason == "" || strings.Contains(recs[0].Reason, "Müller") {
		t.Fatalf("quarantine records %+v", recs)
	}
}
