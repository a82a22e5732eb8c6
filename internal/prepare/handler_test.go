package prepare_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	bucket    = "artifacts"
	exportKey = "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-1-1-0.ndjson"
	bus       = "cdc-bus"
)

var (
	since = time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	until = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
)

type rig struct {
	env  *localaws.Env
	s3   *s3.Client
	em   *fakeeventbridge.Emulator
	sink *fakeeventbridge.MemorySink
	eb   *eventbridge.Client
}

func newRig(t testing.TB, maxRequestBytes int) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	em := fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink, MaxRequestBytes: maxRequestBytes})
	env.Gateway.Handle(localaws.ServiceEventBridge, em)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return &rig{env: env, s3: s3c, em: em, sink: sink, eb: eventbridge.NewFromConfig(cfg)}
}

func (r *rig) put(t testing.TB, key string, body []byte) {
	t.Helper()
	if _, err := r.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (r *rig) get(t testing.TB, key string) []byte {
	t.Helper()
	out, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}

func (r *rig) handler(t testing.TB, mod func(*prepare.Config)) *prepare.Handler {
	t.Helper()
	cfg := prepare.Config{
		Bucket:     bucket,
		Validation: fhir.ValidateJSON,
		Publish: publish.Config{EventBus: bus, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, Concurrency: 1,
			Sleep: func(context.Context, time.Duration) error { return nil }},
	}
	if mod != nil {
		mod(&cfg)
	}
	h, err := prepare.New(r.s3, r.eb, cfg)
	if err != nil {
		t.Fatalf("prepare.New: %v", err)
	}
	return h
}

// invoke runs the handler the way the Lambda runtime does.
func invoke(t testing.TB, h *prepare.Handler, in prepare.Input) (prepare.Output, error) {
	t.Helper()
	payload, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := lambda.NewHandler(h.Handle).Invoke(context.Background(), payload)
	if err != nil {
		return prepare.Output{}, err
	}
	var out prepare.Output
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("decode output %s: %v", raw, err)
	}
	if len(raw) > 2048 { // counts and at most MaxListedQuarantineKeys keys
		t.Fatalf("summary is %d bytes", len(raw))
	}
	return out, nil
}

func input(key string) prepare.Input {
	return prepare.Input{
		Files:  []manifest.File{{Bucket: bucket, Key: key, ResourceType: "Patient"}},
		Window: envelope.Window{Since: since, Until: until},
		Export: envelope.ExportRef{DatastoreID: "ds1", JobID: "job1"},
		RunID:  "run-1", ExecutionID: "arn:aws:states:us-east-1:000000000000:execution:cdc:run-1",
	}
}

func patient(id, version, lastUpdated string, pad int) string {
	meta := `"lastUpdated":"` + lastUpdated + `"`
	if version != "" {
		meta = `"versionId":"` + version + `",` + meta
	}
	return `{"resourceType":"Patient","id":"` + id + `","meta":{` + meta + `},"name":[{"family":"Müller` + strings.Repeat("ö", pad) + `"}]}`
}

func eventIDs(t testing.TB, sink *fakeeventbridge.MemorySink) []string {
	t.Helper()
	var ids []string
	for _, ev := range sink.Events() {
		var d envelope.Detail
		if err := json.Unmarshal(ev.Event.Detail, &d); err != nil {
			t.Fatalf("decode detail: %v", err)
		}
		ids = append(ids, d.EventID)
	}
	return ids
}

func quarantineRecords(t testing.TB, b []byte) []prepare.QuarantineRecord {
	t.Helper()
	var recs []prepare.QuarantineRecord
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 8<<20)
	for sc.Scan() {
		var rec prepare.QuarantineRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("quarantine line %q: %v", sc.Text(), err)
		}
		recs = append(recs, rec)
	}
	return recs
}

func TestHandlerWindowQuarantineClaimCheckAndSummary(t *testing.T) {
	r := newRig(t, 4096)
	h := r.handler(t, func(c *prepare.Config) { c.Publish.MaxEntryBytes = 4096 })
	big := patient("big", "3", "2026-11-21T09:45:00Z", 3000) // ~6 KB: claim-checked
	noVersion := patient("nov", "", "2026-11-21T09:10:00.5+01:00", 0)
	lines := []string{
		patient("a", "1", "2026-11-21T09:00:00.000Z", 0), // 1: lastUpdated == since: outside
		patient("b", "2", "2026-11-21T10:00:00.000Z", 0), // 2: == until: event
		"", // 3: blank
		patient("c", "1", "2026-11-21T10:00:00.001Z", 0),       // 4: just after until: outside
		patient("d", "1", "2026-11-21T09:00:00.001Z", 0),       // 5: just after since: event
		`{"resourceType":"Patient","id":"e","meta":{"versionI`, // 6: truncated JSON: quarantined
		`{"resourceType":"Patient","id":"f"}`,                  // 7: no lastUpdated: quarantined
		big,                                                    // 8: claim-checked event
		`{"resourceType":"Observation","id":"g","meta":{"lastUpdated":"2026-11-21T09:30:00Z"}}`, // 9: wrong type
		noVersion, // 10: 08:10Z, outside (offset parsed)
		patient("h", "", "2026-11-21T09:59:59.999Z", 1), // 11: content version
		"\xff\xfe not json",                             // 12: invalid UTF-8: quarantined, raw in base64
	}
	r.put(t, exportKey, []byte(strings.Join(lines, "\n")+"\n"))

	out, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	wantKey := "quarantine/run-1/" + exportKey + ".ndjson"
	want := prepare.Output{Lines: 11, Events: 4, OutsideWindow: 3, Quarantined: 4, ClaimChecked: 1,
		Bytes: int64(len(strings.Join(lines, "\n")) + 1), Blank: 1, PutEventsCalls: 1, Chunks: 4,
		Files: 1, QuarantineKeys: []string{wantKey}, QuarantineObjects: 1}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", out, want)
	}
	contentVersion := envelope.ContentVersion([]byte(lines[10]))
	ids := eventIDs(t, r.sink)
	wantIDs := []string{"Patient/b/_history/2", "Patient/d/_history/1", "Patient/big/_history/3", "Patient/h/_history/" + contentVersion}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("events %v, want %v", ids, wantIDs)
	}
	// The inline events carry the line byte for byte; the large one a reference.
	var d envelope.Detail
	_ = json.Unmarshal(r.sink.Events()[0].Event.Detail, &d)
	if string(d.Resource) != lines[1] || d.Window.Since != since || d.Export.JobID != "job1" || d.LastUpdated != "2026-11-21T10:00:00.000Z" {
		t.Fatalf("detail = %+v", d)
	}
	_ = json.Unmarshal(r.sink.Events()[2].Event.Detail, &d)
	sum := sha256.Sum256([]byte(big))
	if d.ResourceRef == nil || d.ResourceRef.Key != "claim-check/Patient/"+hex.EncodeToString(sum[:])+".json" || d.ResourceRef.SHA256 != hex.EncodeToString(sum[:]) || d.ResourceRef.Size != int64(len(big)) {
		t.Fatalf("resourceRef = %+v", d.ResourceRef)
	}
	if got := r.get(t, d.ResourceRef.Key); string(got) != big {
		t.Fatal("claim-check object differs from the line")
	}

	recs := quarantineRecords(t, r.get(t, wantKey))
	if len(recs) != 4 {
		t.Fatalf("%d quarantine records, want 4", len(recs))
	}
	for i, wantLine := range []int64{6, 7, 9, 12} {
		rec := recs[i]
		if rec.Line != wantLine || rec.File != exportKey || rec.Reason == "" {
			t.Errorf("record %d = %+v", i, rec)
		}
	}
	if recs[0].Raw != lines[5] || recs[0].Offset != int64(strings.Index(strings.Join(lines, "\n"), lines[5])) || recs[0].Length != len(lines[5]) {
		t.Errorf("record of line 6 = %+v", recs[0])
	}
	if recs[1].Reason != "meta.lastUpdated missing" {
		t.Errorf("reason of line 7 = %q", recs[1].Reason)
	}
	if raw, _ := base64.StdEncoding.DecodeString(recs[3].RawBase64); string(raw) != lines[11] || recs[3].Raw != "" {
		t.Errorf("invalid UTF-8 record = %+v", recs[3])
	}
	// No resource content in the reasons (they name fields, offsets and sizes).
	for _, rec := range recs {
		if strings.Contains(rec.Reason, "Müller") {
			t.Errorf("reason carries content: %q", rec.Reason)
		}
	}
}

func TestRetriedInvocationPublishesTheSameEventIDs(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	var b strings.Builder
	for i := 0; i < 23; i++ {
		v := ""
		if i%3 != 0 {
			v = "1"
		}
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", i), v, "2026-11-21T09:30:00Z", i))
	}
	b.WriteString("{bad\n")
	r.put(t, exportKey, []byte(b.String()))
	first, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("first: %v", err)
	}
	q1 := r.get(t, first.QuarantineKeys[0])
	ids1 := eventIDs(t, r.sink)
	r.sink.Reset()
	second, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("second: %v", err)
	}
	ids2 := eventIDs(t, r.sink)
	if !reflect.DeepEqual(first, second) || len(ids1) != 23 || fmt.Sprint(ids1) != fmt.Sprint(ids2) {
		t.Fatalf("runs differ:\n%+v %v\n%+v %v", first, ids1, second, ids2)
	}
	if !bytes.Equal(q1, r.get(t, second.QuarantineKeys[0])) {
		t.Fatal("quarantine object differs between runs")
	}
	if first.PutEventsCalls != 3 {
		t.Fatalf("PutEvents calls for 23 events = %d, want 3", first.PutEventsCalls)
	}
}

func TestPartialFailuresAreRetriedAndPersistentOnesFailTheInvocation(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	var b strings.Builder
	for i := 0; i < 12; i++ {
		fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", i), "1", "2026-11-21T09:30:00Z", 0))
	}
	r.put(t, exportKey, []byte(b.String()))

	r.em.FailNextEntries(3, "InternalFailure")
	r.em.ThrottleNextCalls(1)
	out, err := invoke(t, h, input(exportKey))
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	if out.Events != 12 || out.EntriesRetried != 13 || r.sink.Len() != 12 {
		t.Fatalf("summary %+v, delivered %d", out, r.sink.Len())
	}
	if len(out.QuarantineKeys) != 0 || out.QuarantineObjects != 0 {
		t.Fatalf("a quarantine object for a clean file: %q", out.QuarantineKeys)
	}
	if _, err := r.s3.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(prepare.QuarantineKey("run-1", exportKey))}); err == nil {
		t.Fatal("quarantine object written for a clean file")
	}

	r.em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		if strings.Contains(e.Detail, `"eventId":"Patient/p4/`) || strings.Contains(e.Detail, `"eventId":"Patient/p7/`) {
			return "InternalFailure", ""
		}
		return "", ""
	})
	_, err = invoke(t, h, input(exportKey))
	if err == nil {
		t.Fatal("persistent entry failures did not fail the invocation")
	}
	for _, want := range []string{"2 entries failed", "InternalFailure×2", exportKey} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Müller") {
		t.Errorf("error carries content: %v", err)
	}
}

func TestPutEventsCallsPerThousandResources(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	for _, n := range []int{1000, 1001, 10} {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintln(&b, patient(fmt.Sprintf("p%d", i), "1", "2026-11-21T09:30:00Z", i%50))
		}
		key := fmt.Sprintf("exports/n%d.ndjson", n)
		r.put(t, key, []byte(b.String()))
		out, err := invoke(t, h, input(key))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64((n + 9) / 10); out.Events != int64(n) || out.PutEventsCalls != want {
			t.Fatalf("%d resources: %d events in %d PutEvents calls, want %d calls", n, out.Events, out.PutEventsCalls, want)
		}
	}
}

func TestQuarantineWriteFailureFailsTheInvocation(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	r.put(t, exportKey, []byte(patient("a", "1", "2026-11-21T09:30:00Z", 0)+"\n{oops\n"))
	r.env.Gateway.SetFaults(func(service, op string) (int, string, bool) {
		if service == localaws.ServiceS3 && op == "PUTObject" {
			return 503, `<Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>`, true
		}
		return 0, "", false
	})
	defer r.env.Gateway.SetFaults(nil)
	_, err := invoke(t, h, input(exportKey))
	if err == nil || !strings.Contains(err.Error(), "quarantine") {
		t.Fatalf("a lost quarantine record did not fail the invocation: %v", err)
	}
}

func TestTypeFilter(t *testing.T) {
	r := newRig(t, 0)
	r.put(t, exportKey, []byte(patient("a", "1", "2026-11-21T09:30:00Z", 0)+"\n"+patient("b", "1", "2026-11-21T09:31:00Z", 0)+"\n"))
	h := r.handler(t, func(c *prepare.Config) { c.Filter.Exclude = []string{"Patient"} })
	out, err := invoke(t, h, input(exportKey))
	if err != nil || out.Filtered != 2 || out.Events != 0 || r.sink.Len() != 0 || out.Lines != 2 {
		t.Fatalf("exclude: %+v %v", out, err)
	}
	h = r.handler(t, func(c *prepare.Config) { c.Filter.Include = []string{"Observation", "Patient"} })
	out, err = invoke(t, h, input(exportKey))
	if err != nil || out.Events != 2 || out.Filtered != 0 {
		t.Fatalf("include: %+v %v", out, err)
	}
	h = r.handler(t, func(c *prepare.Config) { c.Filter.Include = []string{"Observation"} })
	out, err = invoke(t, h, input(exportKey))
	if err != nil || out.Events != 0 || out.Filtered != 2 {
		t.Fatalf("include other: %+v %v", out, err)
	}
}

func TestOverLongLinesAreQuarantinedWithoutRaw(t *testing.T) {
	r := newRig(t, 0)
	long := patient("long", "1", "2026-11-21T09:30:00Z", 2000)
	ok := patient("ok", "1", "2026-11-21T09:30:00Z", 0)
	r.put(t, exportKey, []byte(ok+"\n"+long+"\n"+ok+"\n"))
	h := r.handler(t, func(c *prepare.Config) { c.MaxLineBytes = 1024 })
	out, err := invoke(t, h, input(exportKey))
	if err != nil || out.Events != 2 || out.Quarantined != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	recs := quarantineRecords(t, r.get(t, out.QuarantineKeys[0]))
	if len(recs) != 1 || recs[0].Line != 2 || recs[0].Offset != int64(len(ok)+1) || recs[0].Raw != "" || recs[0].RawBase64 != "" || recs[0].Reason == "" {
		t.Fatalf("records = %+v", recs)
	}
}

func TestLargeQuarantineIsUploadedInParts(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads about 7 MB")
	}
	r := newRig(t, 0)
	var b bytes.Buffer
	bad := `{"resourceType":"Patient","id":"x","text":"` + strings.Repeat("ü", 150<<10) // 300 KB, unterminated
	for i := 0; i < 24; i++ {
		b.WriteString(bad + "\n")
	}
	b.WriteString(patient("ok", "1", "2026-11-21T09:30:00Z", 0) + "\n")
	r.put(t, exportKey, b.Bytes())
	h := r.handler(t, func(c *prepare.Config) { c.QuarantinePartBytes = 5 << 20 })
	out, err := invoke(t, h, input(exportKey))
	if err != nil || out.Quarantined != 24 || out.Events != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	// CreateMultipartUpload and CompleteMultipartUpload are POSTs; the export, two parts and the
	// delivered-index object are PUTs.
	if calls := r.env.Gateway.Calls(); calls["s3:POSTObject"] != 2 || calls["s3:PUTObject"] != 4 || calls["s3:DELETEObject"] != 0 {
		t.Fatalf("expected a two-part multipart upload, gateway calls %v", calls)
	}
	recs := quarantineRecords(t, r.get(t, out.QuarantineKeys[0]))
	if len(recs) != 24 {
		t.Fatalf("%d records", len(recs))
	}
	for i, rec := range recs {
		if !rec.Truncated || len(rec.Raw) > prepare.DefaultQuarantineRawBytes || len(rec.Raw) < prepare.DefaultQuarantineRawBytes-4 || rec.Line != int64(i+1) || rec.Length != len(bad) {
			t.Fatalf("record %d: truncated=%v raw=%d line=%d length=%d", i, rec.Truncated, len(rec.Raw), rec.Line, rec.Length)
		}
	}
}

func TestInvalidInputFails(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, nil)
	for name, mod := range map[string]func(*prepare.Input){
		"no key":       func(in *prepare.Input) { in.Files[0].Key = "" },
		"no window":    func(in *prepare.Input) { in.Window = envelope.Window{} },
		"empty window": func(in *prepare.Input) { in.Window.Until = in.Window.Since },
		"no run":       func(in *prepare.Input) { in.RunID = "" },
	} {
		in := input(exportKey)
		mod(&in)
		if _, err := h.Handle(context.Background(), in); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := h.Handle(context.Background(), input("exports/missing.ndjson")); err == nil || !strings.Contains(err.Error(), "exports/missing.ndjson") {
		t.Errorf("missing object: %v", err)
	}
	// The Lambda payload must carry the window as {"since","until"}.
	_, err := lambda.NewHandler(h.Handle).Invoke(context.Background(), []byte(`{"files":[{"bucket":"artifacts","key":"k"}],"window":{"since":"x"},"runId":"r"}`))
	if err == nil {
		t.Error("a malformed window was accepted")
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{
		"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_KMS_KEY_ID": "k", "CDC_MAX_ENTRY_BYTES": "1048576",
		"CDC_VALIDATE": "r4", "CDC_RESOURCE_TYPES": "Patient, Observation", "CDC_EXCLUDE_TYPES": "Observation",
	}
	cfg, err := prepare.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bucket != "b" || cfg.KMSKeyID != "k" || cfg.Publish.EventBus != "bus" || cfg.Publish.MaxEntryBytes != 1048576 ||
		cfg.Validation != fhir.ValidateR4 || fmt.Sprint(cfg.Filter.Include) != "[Patient Observation]" || fmt.Sprint(cfg.Filter.Exclude) != "[Observation]" {
		t.Fatalf("cfg = %+v", cfg)
	}
	// Defaults: source and detail type come from publish.
	if cfg.Publish.Source != "" || cfg.Publish.DetailType != "" {
		t.Fatalf("unexpected source/detail type %+v", cfg.Publish)
	}
	for _, bad := range []map[string]string{
		{"CDC_EVENT_BUS": "bus"},
		{"CDC_BUCKET": "b"},
		{"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_MAX_ENTRY_BYTES": "lots"},
		{"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_VALIDATE": "strict"},
		{"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_MAP_MAX_CONCURRENCY": "0"},
		{"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_MAP_MAX_CONCURRENCY": "ten"},
	} {
		if _, err := prepare.ConfigFromEnv(func(k string) string { return bad[k] }); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
	env["CDC_EVENT_SOURCE"], env["CDC_DETAIL_TYPE"] = "my.src", "My Type"
	cfg, _ = prepare.ConfigFromEnv(func(k string) string { return env[k] })
	if cfg.Publish.Source != "my.src" || cfg.Publish.DetailType != "My Type" {
		t.Fatalf("source/detail type not read: %+v", cfg.Publish)
	}
}

// TestRateForSharesTheBudgetAmongTheMapsInvocations: a Map of fewer
// batches than MaxConcurrency runs fewer invocations, each at a higher rate,
// together never above the budget the full Map would use.
func TestRateForSharesTheBudgetAmongTheMapsInvocations(t *testing.T) {
	env := map[string]string{"CDC_BUCKET": "b", "CDC_EVENT_BUS": "bus", "CDC_PUTEVENTS_RATE": "20", "CDC_MAP_MAX_CONCURRENCY": "10"}
	cfg, err := prepare.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MapMaxConcurrency != 10 || cfg.Publish.Rate != 20 {
		t.Fatalf("cfg: concurrency %d, rate %v", cfg.MapMaxConcurrency, cfg.Publish.Rate)
	}
	for batches, want := range map[int]float64{0: 20, 1: 200, 2: 100, 4: 50, 10: 20, 25: 20} {
		got := cfg.RateFor(batches)
		if got != want {
			t.Errorf("RateFor(%d) = %v, want %v", batches, got, want)
		}
		if running := min(max(batches, 1), 10); got*float64(running) > 200 {
			t.Errorf("RateFor(%d) = %v: %d invocations together exceed the budget of 200 requests/s", batches, got, running)
		}
	}
	cfg.MapMaxConcurrency = 0 // unknown: the rate as it is
	if got := cfg.RateFor(1); got != 20 {
		t.Errorf("without a concurrency RateFor(1) = %v, want 20", got)
	}
	cfg.Publish.Rate = 0 // unlimited stays unlimited
	cfg.MapMaxConcurrency = 10
	if got := cfg.RateFor(1); got != 0 {
		t.Errorf("without a rate RateFor(1) = %v, want 0", got)
	}
}

// syntheaDir is the shared Synthea sample, relative to the package directory.
const syntheaDir = "../../../shared/fhir-samples/synthea-10-patients"

// stampMeta gives a Synthea line the meta.versionId and meta.lastUpdated
// HealthLake adds on export (the sample has only meta.profile).
func stampMeta(line []byte, version, lastUpdated string) []byte {
	stamp := `"versionId":"` + version + `","lastUpdated":"` + lastUpdated + `"`
	if i := bytes.Index(line, []byte(`"meta":{`)); i >= 0 && i < 200 {
		j := i + len(`"meta":{`)
		out := append([]byte{}, line[:j]...)
		out = append(out, stamp...)
		if line[j] != '}' {
			out = append(out, ',')
		}
		return append(out, line[j:]...)
	}
	return append([]byte(`{"meta":{`+stamp+`},`), line[1:]...)
}

// syntheaExport returns the Synthea sample as HealthLake would export it:
// one body per resource type, every line stamped inside the test window.
func syntheaExport(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(syntheaDir, "*.ndjson"))
	out := map[string][]byte{}
	for _, f := range files {
		if filepath.Base(f) == "log.ndjson" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		typ, _, _ := strings.Cut(filepath.Base(f), ".")
		var buf bytes.Buffer
		for i, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
			ts := since.Add(time.Duration(i+1) * time.Millisecond).Format("2006-01-02T15:04:05.000Z")
			buf.Write(stampMeta(line, "1", ts))
			buf.WriteByte('\n')
		}
		out[typ] = buf.Bytes()
	}
	if len(out) == 0 {
		tb.Skip("Synthea sample not present at " + syntheaDir)
	}
	return out
}

func TestSyntheaSampleEndToEnd(t *testing.T) {
	r := newRig(t, 0)
	h := r.handler(t, func(c *prepare.Config) { c.Validation = fhir.ValidateR4; c.Publish.Concurrency = 4 })
	exp := syntheaExport(t)
	types := make([]string, 0, len(exp))
	for typ := range exp {
		types = append(types, typ)
	}
	sort.Strings(types)
	var total, calls, claims int64
	for _, typ := range types {
		key := "exports/ds1-FHIR_EXPORT-job1/" + typ + "/" + typ + "-1-1-0.ndjson"
		r.put(t, key, exp[typ])
		in := input(key)
		in.Files[0].ResourceType = typ
		out, err := invoke(t, h, in)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		lines := int64(bytes.Count(exp[typ], []byte("\n")))
		if out.Lines != lines || out.Events != lines || out.Quarantined != 0 || out.Bytes != int64(len(exp[typ])) {
			t.Fatalf("%s: %+v, want %d events", typ, out, lines)
		}
		total += out.Events
		calls += out.PutEventsCalls
		claims += out.ClaimChecked
	}
	seen := map[string]bool{}
	for _, id := range eventIDs(t, r.sink) {
		if seen[id] {
			t.Fatalf("%s delivered twice", id)
		}
		seen[id] = true
	}
	if int64(len(seen)) != total {
		t.Fatalf("delivered %d of %d", len(seen), total)
	}
	// One file per invocation: one call per 10, plus one partial batch per file.
	if calls > total/10+int64(len(types)) {
		t.Fatalf("%d calls for %d events", calls, total)
	}
	t.Logf("one invocation per file: %d events from %d files in %d PutEvents calls, %d claim-checks", total, len(types), calls, claims)

	// The 13 files as one batch share their PutEvents batches:
	// ⌈events ÷ 10⌉ calls, ≤ 101 per 1,000 resources.
	r.sink.Reset()
	var keys []string
	for _, typ := range types {
		keys = append(keys, "exports/ds1-FHIR_EXPORT-job1/"+typ+"/"+typ+"-1-1-0.ndjson")
	}
	in := batchInput(keys...)
	for i, typ := range types {
		in.Files[i].ResourceType = typ
	}
	out, err := invoke(t, h, in)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if out.Files != int64(len(types)) || out.Events != total || out.Quarantined != 0 || int64(r.sink.Len()) != total {
		t.Fatalf("batch summary %+v, %d delivered", out, r.sink.Len())
	}
	if out.PutEventsCalls != (total+9)/10 || out.PutEventsCalls*1000 > 101*total {
		t.Fatalf("batch: %d PutEvents calls for %d events, want %d", out.PutEventsCalls, total, (total+9)/10)
	}
	t.Logf("one batch: %d events from %d files in %d PutEvents calls (%.1f per 1,000)", total, len(types), out.PutEventsCalls, float64(out.PutEventsCalls)*1000/float64(total))
}

// TestDeleteScanCanBeTurnedOff: with CDC_WINDOW_DELETES=false the run's
// delete scan answers done at once and reads no history (the fallback for
// a data store without type-level history: the reconciliation publishes
// the deletes).
func TestDeleteScanCanBeTurnedOff(t *testing.T) {
	cfg, err := prepare.ConfigFromEnv(func(k string) string {
		return map[string]string{"CDC_BUCKET": bucket, "CDC_EVENT_BUS": bus, "CDC_WINDOW_DELETES": "false"}[k]
	})
	if err != nil || !cfg.NoWindowDeletes {
		t.Fatalf("config = %+v, %v", cfg.NoWindowDeletes, err)
	}
	r := newRig(t, 0)
	h, err := prepare.New(r.s3, r.eb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Invoke(context.Background(), json.RawMessage(`{"action":"deletes","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T10:00:00.000Z"},"export":{"datastoreId":"ds1","jobId":"j"},"runId":"r"}`))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(out); !strings.Contains(string(b), `"done":true`) {
		t.Fatalf("answer %s, want done", b)
	}
	if _, err := prepare.ConfigFromEnv(func(k string) string {
		return map[string]string{"CDC_BUCKET": bucket, "CDC_EVENT_BUS": bus, "CDC_WINDOW_DELETES": "maybe"}[k]
	}); err == nil {
		t.Error("CDC_WINDOW_DELETES=maybe accepted")
	}
}
