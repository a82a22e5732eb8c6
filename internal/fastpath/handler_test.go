package fastpath_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging/loggingtest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	bucket    = "artifacts"
	table     = "cdc"
	bus       = "cdc-bus"
	dsID      = "ds1"
	requestID = "3f1b2c4d-0000-4000-8000-00000000abcd"
)

// now is the handler's clock: after every write of the rig's data store.
var now = time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)

// rig is the fast path over real SDK clients: S3 (gofakes3), DynamoDB
// (minidyn) with the pipeline's table, the EventBridge emulator with a sink
// and the HealthLake emulator, all behind the local AWS endpoint.
type rig struct {
	t       *testing.T
	env     *localaws.Env
	s3      *s3.Client
	db      *dynamodb.Client
	ebe     *fakeeventbridge.Emulator
	sink    *fakeeventbridge.MemorySink
	eb      *eventbridge.Client
	hle     *fakehealthlake.Emulator
	ds      *fakehealthlake.Datastore
	hl      *fhirrest.Client
	logs    *loggingtest.Buffer
	metrics *metrics.Recorder
}

func newRig(t *testing.T) *rig { return newRigHealthLake(t, nil) }

// newRigHealthLake is newRig whose HealthLake emulator takes the options
// hlMutate sets.
func newRigHealthLake(t *testing.T, hlMutate func(*fakehealthlake.Options)) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	ebe := fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink})
	env.Gateway.Handle(localaws.ServiceEventBridge, ebe)
	var mu sync.Mutex
	clock := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	hlOpts := fakehealthlake.Options{Region: env.Region, AccountID: env.AccountID, Datastores: []string{dsID}, Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(1234567 * time.Nanosecond)
		return clock
	}}
	if hlMutate != nil {
		hlMutate(&hlOpts)
	}
	hle := fakehealthlake.New(hlOpts)
	env.Gateway.Handle(localaws.ServiceHealthLake, hle)
	ds, _ := hle.Datastore(dsID)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	if err := runlock.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	hc, _ := cfg.HTTPClient.(*http.Client)
	hl, err := fhirrest.New(fhirrest.Options{Endpoint: env.URL, Region: env.Region, Credentials: cfg.Credentials, HTTPClient: hc,
		MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, env: env, s3: s3c, db: db, ebe: ebe, sink: sink, eb: eventbridge.NewFromConfig(cfg), hle: hle, ds: ds, hl: hl,
		logs: &loggingtest.Buffer{}, metrics: metrics.New(io.Discard, "test")}
}

// config is the handler's configuration of the tests: publisher retries
// without waiting.
func (r *rig) config() fastpath.Config {
	return fastpath.Config{
		Bucket: bucket, Table: table, DatastoreID: dsID,
		Publish: publish.Config{EventBus: bus, MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond,
			Sleep: func(context.Context, time.Duration) error { return nil }},
		Logger:  slog.New(slog.NewJSONHandler(r.logs, nil)),
		Metrics: r.metrics,
		Now:     func() time.Time { return now },
	}
}

func (r *rig) handler(s3c fastpath.S3API, mod func(*fastpath.Config)) *fastpath.Handler {
	r.t.Helper()
	return r.handlerWith(s3c, nil, mod)
}

// handlerWith is handler with db (the rig's DynamoDB client when nil) for
// the record.
func (r *rig) handlerWith(s3c fastpath.S3API, db fastrecord.PutAPI, mod func(*fastpath.Config)) *fastpath.Handler {
	r.t.Helper()
	if db == nil {
		db = r.db
	}
	cfg := r.config()
	if mod != nil {
		mod(&cfg)
	}
	if s3c == nil {
		s3c = r.s3
	}
	h, err := fastpath.New(s3c, db, r.eb, r.hl, cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// load writes a resource version to the data store and returns its bytes
// as HealthLake stores them.
func (r *rig) load(typ, id, extra string) []byte {
	r.t.Helper()
	if _, err := r.ds.Load(typ, id, []byte(`{"resourceType":"`+typ+`","id":"`+id+`"`+extra+`}`)); err != nil {
		r.t.Fatal(err)
	}
	b, ok := r.ds.Read(typ, id)
	if !ok {
		r.t.Fatalf("read %s back", typ)
	}
	return b
}

// handle runs one SQS batch through the Lambda runtime's JSON handler, as
// the event source mapping invokes it, and returns the failed message ids.
func handle(t *testing.T, h *fastpath.Handler, bodies ...string) []string {
	t.Helper()
	var ev lambdaevents.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, lambdaevents.SQSMessage{MessageId: "m" + string(rune('1'+i)), Body: b, EventSource: "aws:sqs"})
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: requestID})
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	raw, err := lambda.NewHandler(h.Handle).Invoke(ctx, payload)
	if err != nil {
		t.Fatalf("handle: %v", err)
	}
	var resp struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || !bytes.Contains(raw, []byte(`"batchItemFailures":[`)) {
		t.Fatalf("answer %s: %v", raw, err)
	}
	failed := []string{}
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

// fullResource is the full-resource notification of a stored version.
func fullResource(t *testing.T, body []byte, ts string) string {
	t.Helper()
	return message(fullResourceBundle(t, body, ts))
}

// fullResourceBundle is the notification bundle of fullResource.
func fullResourceBundle(t *testing.T, body []byte, ts string) string {
	t.Helper()
	f, err := fhir.Peek(body)
	if err != nil {
		t.Fatal(err)
	}
	ref := f.ResourceType + "/" + f.ID
	return bundle(status("event-notification", event("n-"+f.ID+"-"+f.VersionID, ts, ref, ref+"/_history/"+f.VersionID)),
		full(string(body), "UPDATE", ref))
}

// idOnly is the id-only notification of a version.
func idOnly(ref, version, ts string) string {
	return message(bundle(status("event-notification", event("n-"+version, ts, ref, ref+"/_history/"+version))))
}

// details returns the events on the bus, decoded, and checks each envelope.
func (r *rig) details() []envelope.Detail {
	r.t.Helper()
	var out []envelope.Detail
	for _, d := range r.sink.Events() {
		if d.Bus != bus || d.Event.Source != publish.DefaultSource || d.Event.DetailType != publish.DefaultDetailType {
			r.t.Errorf("event on %s from %s / %s", d.Bus, d.Event.Source, d.Event.DetailType)
		}
		var det envelope.Detail
		if err := json.Unmarshal(d.Event.Detail, &det); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, det)
	}
	return out
}

// records returns the entries of the fast path's record items, and their
// keys ("pk sk"), in key order.
func (r *rig) records() ([]delivered.Entry, []string) {
	r.t.Helper()
	out, err := r.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		r.t.Fatal(err)
	}
	items := out.Items
	key := func(it map[string]ddbtypes.AttributeValue) string {
		return it["pk"].(*ddbtypes.AttributeValueMemberS).Value + " " + it["sk"].(*ddbtypes.AttributeValueMemberS).Value
	}
	slices.SortFunc(items, func(a, b map[string]ddbtypes.AttributeValue) int { return strings.Compare(key(a), key(b)) })
	var entries []delivered.Entry
	var keys []string
	for _, it := range items {
		if !strings.HasPrefix(key(it), fastrecord.PKPrefix) {
			continue
		}
		keys = append(keys, key(it))
		v, ok := it["v"].(*ddbtypes.AttributeValueMemberB)
		if !ok {
			r.t.Fatalf("item %s has no binary v", key(it))
		}
		if err := delivered.ReadAll(bytes.NewReader(v.Value), nil, func(e delivered.Entry) error { entries = append(entries, e); return nil }); err != nil {
			r.t.Fatal(err)
		}
	}
	return entries, keys
}

func (r *rig) total(name string) float64 { return r.metrics.Totals()[name] }

// logLine is the handler's last log line, decoded.
func (r *rig) logLine() map[string]any {
	r.t.Helper()
	lines := strings.Split(strings.TrimSpace(r.logs.String()), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		r.t.Fatalf("log line %q: %v", lines[len(lines)-1], err)
	}
	return m
}

func TestFullResourceUpsertReachesTheBusWithTheExportPathsEventID(t *testing.T) {
	r := newRig(t)
	body := r.load("Patient", "pat-7f3a9", `,"active":true,"name":[{"text":"Ann \u00e9"}]`)
	f, _ := fhir.Peek(body)
	failed := handle(t, r.handler(nil, nil), fullResource(t, body, ts1), message(handshake))
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	got := r.details()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1", len(got))
	}
	// The eventId the export path gives the same line (prepare-change's
	// versionOf: meta.versionId, else the content hash).
	exportID := envelope.EventID(f.ResourceType, f.ID, envelope.VersionOf(envelope.Resource{VersionID: f.VersionID, Raw: body}))
	d := got[0]
	if d.EventID != exportID || d.EventID != "Patient/pat-7f3a9/_history/1" || d.Operation != envelope.OperationUpsert || d.LastUpdated != f.LastUpdated {
		t.Errorf("detail = %+v, want eventId %s", d, exportID)
	}
	at, _ := envelope.ParseTime(f.LastUpdated)
	w := fastpath.InstantWindow(at)
	if !w.Contains(at) || w.Until.Sub(w.Since) != time.Millisecond || !d.Window.Until.Equal(w.Until) || !d.Window.Since.Equal(w.Since) {
		t.Errorf("window %s (want %s) does not hold lastUpdated %s", d.Window, w, f.LastUpdated)
	}
	if d.Export.DatastoreID != dsID || d.Export.JobID != "Subscription/sub-1" {
		t.Errorf("export = %+v", d.Export)
	}
	// The detail is the v1 builder's, byte for byte: the resource as received.
	want := envelope.AppendDetail(nil, envelope.Resource{ResourceType: f.ResourceType, ID: f.ID, VersionID: f.VersionID, LastUpdated: f.LastUpdated, Raw: body},
		w, envelope.ExportRef{DatastoreID: dsID, JobID: "Subscription/sub-1"}, nil)
	if det := r.sink.Events()[0].Event.Detail; !bytes.Equal(det, want) {
		t.Errorf("detail\n%s\nwant\n%s", det, want)
	}
	entries, keys := r.records()
	if want := fastrecord.PK(now, fastrecord.Shard(requestID)) + " " + fastrecord.SK(now, requestID, 0); len(keys) != 1 || keys[0] != want {
		t.Fatalf("record items %v, want %s", keys, want)
	}
	if len(entries) != 1 || entries[0] != (delivered.Entry{Type: "Patient", ID: "pat-7f3a9", VersionID: "1", LastUpdated: f.LastUpdated}) {
		t.Errorf("record = %+v", entries)
	}
	if r.total(fastpath.MetricPublished) != 1 || r.total(fastpath.MetricVReads) != 0 || r.total(fastpath.MetricFailed) != 0 {
		t.Errorf("metrics = %v", r.metrics.Totals())
	}
	if lag := r.total(fastpath.MetricLagSeconds); lag != now.Sub(at).Seconds() {
		t.Errorf("lag = %v, want %v", lag, now.Sub(at).Seconds())
	}
	line := r.logLine()
	if line["published"] != 1.0 || line["handshakes"] != 1.0 || line["messages"] != 2.0 || line["record"] != keys[0] {
		t.Errorf("log line = %v", line)
	}
	if logs := r.logs.String(); strings.Contains(logs, "pat-7f3a9") || strings.Contains(logs, "Ann") {
		t.Errorf("the log names the resource: %s", logs)
	}
}

func TestIDOnlyIsReadBackWithVRead(t *testing.T) {
	r := newRig(t)
	v1 := r.load("Observation", "obs-1", `,"status":"preliminary"`)
	r.load("Observation", "obs-1", `,"status":"final"`)
	failed := handle(t, r.handler(nil, nil), idOnly("Observation/obs-1", "1", ts1))
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	got := r.details()
	if len(got) != 1 || got[0].EventID != "Observation/obs-1/_history/1" || got[0].Operation != envelope.OperationUpsert {
		t.Fatalf("events = %+v", got)
	}
	// Version 1's bytes, not the current version's.
	if !bytes.Equal(got[0].Resource, v1) {
		t.Errorf("resource = %s, want version 1 %s", got[0].Resource, v1)
	}
	f, _ := fhir.Peek(v1)
	if got[0].LastUpdated != f.LastUpdated {
		t.Errorf("lastUpdated = %s, want the version's %s", got[0].LastUpdated, f.LastUpdated)
	}
	entries, _ := r.records()
	if len(entries) != 1 || entries[0].VersionID != "1" || entries[0].Deleted {
		t.Errorf("record = %+v", entries)
	}
	if r.total(fastpath.MetricVReads) != 1 || r.total(fastpath.MetricPublished) != 1 {
		t.Errorf("metrics = %v", r.metrics.Totals())
	}
}

func TestVReadOfADeletedVersionPublishesADelete(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "pat-2", "")
	del, _ := r.ds.Delete("Patient", "pat-2")
	r.load("Patient", "pat-3", "")
	del3, _ := r.ds.Delete("Patient", "pat-3")
	// id-only: the read answers 410 for the deletion's version; full-resource:
	// the modelled DELETE entry.
	modelled := message(bundle(status("event-notification", event("n-3", ts2, "Patient/pat-3", "Patient/pat-3/_history/"+del3)),
		`{"fullUrl":"Patient/pat-3","request":{"method":"DELETE","url":"Patient/pat-3"}}`))
	failed := handle(t, r.handler(nil, nil), idOnly("Patient/pat-2", del, ts1), modelled)
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	got := r.details()
	if len(got) != 2 {
		t.Fatalf("%d events, want 2", len(got))
	}
	for i, want := range []struct{ id, ts string }{{"Patient/pat-2/_history/" + del, ts1}, {"Patient/pat-3/_history/" + del3, ts2}} {
		d := got[i]
		at, _ := envelope.ParseTime(want.ts)
		if d.EventID != want.id || d.Operation != envelope.OperationDelete || d.Resource != nil || d.ResourceRef != nil || d.LastUpdated != want.ts ||
			!(envelope.Window{Since: d.Window.Since, Until: d.Window.Until}).Contains(at) {
			t.Errorf("event %d = %+v, want a delete %s at %s", i, d, want.id, want.ts)
		}
	}
	entries, _ := r.records()
	if len(entries) != 2 || !entries[0].Deleted || entries[0].VersionID != del || entries[0].LastUpdated != ts1 || !entries[1].Deleted {
		t.Errorf("record = %+v", entries)
	}
	if r.total(fastpath.MetricDeletes) != 2 || r.total(fastpath.MetricVReads) != 1 {
		t.Errorf("metrics = %v", r.metrics.Totals())
	}
}

func TestPutEventsFailureReportsTheMessageAndRecordsNothingOfIt(t *testing.T) {
	r := newRig(t)
	b1, b2 := r.load("Patient", "pat-a", ""), r.load("Patient", "pat-b", "")
	// The first entry fails on both attempts (MaxAttempts 2), the second is
	// accepted at once.
	r.ebe.FailNextEntries(1, "InternalFailure")
	h := r.handler(nil, func(c *fastpath.Config) {
		c.Publish.Sleep = func(context.Context, time.Duration) error {
			r.ebe.FailNextEntries(1, "InternalFailure")
			return nil
		}
	})
	failed := handle(t, h, fullResource(t, b1, ts1), fullResource(t, b2, ts1))
	if strings.Join(failed, ",") != "m1" {
		t.Fatalf("failed = %v, want m1", failed)
	}
	got := r.details()
	if len(got) != 1 || got[0].ResourceID != "pat-b" {
		t.Fatalf("events = %+v", got)
	}
	entries, _ := r.records()
	if len(entries) != 1 || entries[0].ID != "pat-b" {
		t.Errorf("record = %+v, want pat-b only", entries)
	}
	if r.total(fastpath.MetricFailed) != 1 || r.total(fastpath.MetricPublished) != 1 {
		t.Errorf("metrics = %v", r.metrics.Totals())
	}
	// Every attempt fails: the message comes again, and no record item
	// is written for an invocation that published nothing.
	r2 := newRig(t)
	b := r2.load("Patient", "pat-c", "")
	r2.ebe.FailNextEntries(10, "InternalFailure")
	if failed := handle(t, r2.handler(nil, nil), fullResource(t, b, ts1), message(handshake)); strings.Join(failed, ",") != "m1" {
		t.Fatalf("failed = %v, want m1", failed)
	}
	if entries, keys := r2.records(); len(keys) != 0 || len(entries) != 0 || r2.sink.Len() != 0 {
		t.Errorf("records %v, events %d after a failed publish", keys, r2.sink.Len())
	}
	if line := r2.logLine(); line["level"] != "WARN" || !strings.Contains(line["error"].(string), "InternalFailure") {
		t.Errorf("log line = %v", line)
	}
}

func TestOversizeResourceGoesAsAClaimCheck(t *testing.T) {
	r := newRig(t)
	body := r.load("DocumentReference", "doc-1", `,"status":"current","description":"`+strings.Repeat("x", 6000)+`"`)
	h := r.handler(nil, func(c *fastpath.Config) { c.Publish.MaxEntryBytes = 4096 })
	if failed := handle(t, h, fullResource(t, body, ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	got := r.details()
	if len(got) != 1 || got[0].Resource != nil || got[0].ResourceRef == nil {
		t.Fatalf("events = %+v, want one with a resourceRef", got)
	}
	ref := got[0].ResourceRef
	sum := sha256.Sum256(body)
	if ref.Bucket != bucket || ref.Key != publish.ClaimCheckKey("DocumentReference", hex.EncodeToString(sum[:])) || ref.Size != int64(len(body)) || ref.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("resourceRef = %+v", ref)
	}
	obj, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(ref.Key)})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(stored, body) {
		t.Errorf("claim-check object differs from the resource")
	}
	if r.total(fastpath.MetricClaimChecked) != 1 {
		t.Errorf("metrics = %v", r.metrics.Totals())
	}
	if entries, _ := r.records(); len(entries) != 1 || entries[0].ID != "doc-1" {
		t.Errorf("record = %+v", entries)
	}
}

func TestUnrecognizedMessageIsNotPublishedNorFailed(t *testing.T) {
	r := newRig(t)
	body := r.load("Patient", "pat-u", "")
	other := r.load("Patient", "pat-v", "")
	mismatch := message(bundle(status("event-notification", event("n-1", ts1, "Patient/pat-u", "Patient/pat-u/_history/1")),
		full(string(other), "UPDATE", "Patient/pat-v")))
	otherStore := messageFrom("healthlake", "FHIR Subscription Notification",
		"https://healthlake.us-east-1.amazonaws.com/datastore/ds2/r4/Subscription/sub-1", fullResourceBundle(t, body, ts1))
	failed := handle(t, r.handler(nil, nil),
		messageFrom("aws.healthlake", "FHIR Subscription Notification", subURL, handshake), // wrong source
		`not json`,
		mismatch,   // the entry is of another resource: 2 reasons
		otherStore, // another data store
		message(bundle(status("heartbeat"))),
	)
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if r.sink.Len() != 0 {
		t.Fatalf("%d events published", r.sink.Len())
	}
	if _, keys := r.records(); len(keys) != 0 {
		t.Errorf("record items %v", keys)
	}
	if got := r.total(fastpath.MetricUnrecognized); got != 5 {
		t.Errorf("unrecognized = %v, want 5", got)
	}
	line := r.logLine()
	reasons, _ := line["unrecognizedReasons"].(map[string]any)
	if line["heartbeats"] != 1.0 || reasons[fastpath.ReasonSource] != 1.0 || reasons[fastpath.ReasonOtherDatastore] != 1.0 || reasons[fastpath.ReasonUnmatchedEntry] != 1.0 {
		t.Errorf("log line = %v", line)
	}
}

func TestFilteredTypesAndRepeatsAreCountedNotPublished(t *testing.T) {
	r := newRig(t)
	obs := r.load("Observation", "obs-f", "")
	pat := r.load("Patient", "pat-f", "")
	h := r.handler(nil, func(c *fastpath.Config) { c.Filter.Exclude = []string{"Observation"} })
	// The same version in two messages: one event, both messages done.
	failed := handle(t, h, fullResource(t, obs, ts1), fullResource(t, pat, ts1), idOnly("Patient/pat-f", "1", ts1))
	if len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if got := r.details(); len(got) != 1 || got[0].EventID != "Patient/pat-f/_history/1" {
		t.Fatalf("events = %+v", got)
	}
	line := r.logLine()
	if line["filtered"] != 1.0 || line["duplicates"] != 1.0 || line["vreads"] != 0.0 || line["published"] != 1.0 {
		t.Errorf("log line = %v", line)
	}
}

func TestVReadFailureFailsTheMessage(t *testing.T) {
	r := newRig(t)
	b := r.load("Patient", "pat-r", "")
	r.load("Patient", "pat-s", "")
	r.hle.FailNextCalls(2, 500) // both attempts of the one read
	failed := handle(t, r.handler(nil, nil), idOnly("Patient/pat-s", "1", ts1), fullResource(t, b, ts1))
	if strings.Join(failed, ",") != "m1" {
		t.Fatalf("failed = %v, want m1", failed)
	}
	if got := r.details(); len(got) != 1 || got[0].ResourceID != "pat-r" {
		t.Fatalf("events = %+v", got)
	}
	line := r.logLine()
	if msg, _ := line["error"].(string); !strings.Contains(msg, "500") || strings.Contains(msg, "pat-s") {
		t.Errorf("error = %q", msg)
	}
	// A 404 (not visible yet, or erased) is no proof of a deletion: counted, not published.
	r.sink.Reset()
	if failed := handle(t, r.handler(nil, nil), idOnly("Patient/pat-s", "9", ts1)); len(failed) != 0 || r.sink.Len() != 0 {
		t.Fatalf("404: failed %v, %d events", failed, r.sink.Len())
	}
	if reasons, _ := r.logLine()["unrecognizedReasons"].(map[string]any); reasons[fastpath.ReasonVersionNotFound] != 1.0 {
		t.Errorf("reasons = %v", reasons)
	}
}

// failingRecords fails the record's PutItem while fail is set.
type failingRecords struct {
	fastrecord.PutAPI
	fail *atomic.Bool
}

func (f failingRecords) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.fail.Load() {
		return nil, errors.New("injected: DynamoDB unavailable")
	}
	return f.PutAPI.PutItem(ctx, in, opts...)
}

// TestRecordFailureKeepsTheVersionsForTheNextInvocation: a record that
// cannot be written fails no message (what was published stays published;
// a window may publish it again, never lose it): the versions are kept,
// counted as FastPathRecordFailed, and written with the next invocation's
// record — or, when the environment is shut down first, by Shutdown.
func TestRecordFailureKeepsTheVersionsForTheNextInvocation(t *testing.T) {
	r := newRig(t)
	b1, b2, b3 := r.load("Patient", "pat-x", ""), r.load("Patient", "pat-y", ""), r.load("Patient", "pat-z", "")
	fail := &atomic.Bool{}
	fail.Store(true)
	h := r.handlerWith(nil, failingRecords{r.db, fail}, nil)
	if failed := handle(t, h, fullResource(t, b1, ts1), message(handshake), fullResource(t, b2, ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v, want none: the versions were published", failed)
	}
	if r.sink.Len() != 2 || r.total(fastpath.MetricRecordFailed) != 1 || r.total(fastpath.MetricFailed) != 0 {
		t.Fatalf("%d events, metrics %v", r.sink.Len(), r.metrics.Totals())
	}
	if entries, _ := r.records(); len(entries) != 0 {
		t.Fatalf("a record was written: %v", entries)
	}
	fail.Store(false)
	if failed := handle(t, h, fullResource(t, b3, ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	entries, keys := r.records()
	if len(keys) != 1 || len(entries) != 3 {
		t.Fatalf("records %v hold %d versions, want one item with all 3", keys, len(entries))
	}

	// Failed again, then shut down: Shutdown writes what is kept.
	fail.Store(true)
	if failed := handle(t, h, fullResource(t, r.load("Patient", "pat-w", ""), ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	fail.Store(false)
	h.Shutdown(context.Background())
	if entries, keys := r.records(); len(keys) != 2 || len(entries) != 4 {
		t.Fatalf("after Shutdown: %d items with %d versions, want 2 with all 4", len(keys), len(entries))
	}
	if r.total(fastpath.MetricRecordFailed) != 2 {
		t.Errorf("FastPathRecordFailed = %v, want 2", r.total(fastpath.MetricRecordFailed))
	}
}

// TestRecordIsWrittenByEveryInvocationBeforeItAnswers: each invocation that
// published writes its own item before it returns its batch response — an
// environment keeps nothing between invocations, so a window that runs
// after the fast path answered finds every version it published, however
// long Lambda then leaves the environment without invocations. The item
// expires a day later (TTL), and an invocation that published nothing
// writes none.
func TestRecordIsWrittenByEveryInvocationBeforeItAnswers(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	clock := now
	at := func(d time.Duration) { mu.Lock(); clock = now.Add(d); mu.Unlock() }
	h := r.handler(nil, func(c *fastpath.Config) {
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	})
	for i, d := range []time.Duration{0, time.Second, 2 * time.Second, 200 * time.Second} {
		at(d)
		id := fmt.Sprintf("pat-f%d", i)
		if failed := handle(t, h, fullResource(t, r.load("Patient", id, ""), ts1)); len(failed) != 0 {
			t.Fatalf("step %d: failed %v", i, failed)
		}
		entries, keys := r.records()
		if len(keys) != i+1 || len(entries) != i+1 || entries[len(entries)-1].ID != id {
			t.Fatalf("step %d (at %s): %d items with %v once the batch was answered, want %d with %s last", i, d, len(keys), entries, i+1, id)
		}
	}
	if failed := handle(t, h, message(handshake)); len(failed) != 0 {
		t.Fatalf("handshake: failed %v", failed)
	}
	if _, keys := r.records(); len(keys) != 4 {
		t.Errorf("%d items after a batch that published nothing, want still 4", len(keys))
	}
	out, err := r.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		n, _ := it["ttl"].(*ddbtypes.AttributeValueMemberN)
		sk := it["sk"].(*ddbtypes.AttributeValueMemberS).Value
		written, err := envelope.ParseTime(sk[:strings.IndexByte(sk, '#')])
		if err != nil || n == nil || n.Value != strconv.FormatInt(written.Add(fastrecord.TTL).Unix(), 10) {
			t.Errorf("item %s: ttl %v, want a day after its write", sk, n)
		}
	}
}

// recordingS3 keeps the requests of PutObject.
type recordingS3 struct {
	fastpath.S3API
	mu  sync.Mutex
	ins []*s3.PutObjectInput
}

func (s *recordingS3) PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	s.mu.Lock()
	s.ins = append(s.ins, in)
	s.mu.Unlock()
	cp := *in
	cp.ServerSideEncryption, cp.SSEKMSKeyId = "", nil // the emulator has no KMS
	return s.S3API.PutObject(ctx, &cp, opts...)
}

// TestClaimCheckIsEncryptedWithTheKey: the claim-check of a resource over
// the entry limit is the fast path's only S3 object, under the stack's key;
// its record is an item of the table (under the table's key).
func TestClaimCheckIsEncryptedWithTheKey(t *testing.T) {
	r := newRig(t)
	body := r.load("DocumentReference", "doc-k", `,"status":"current","description":"`+strings.Repeat("y", 6000)+`"`)
	rec := &recordingS3{S3API: r.s3}
	h := r.handler(rec, func(c *fastpath.Config) { c.KMSKeyID = "alias/cdc"; c.Publish.MaxEntryBytes = 4096 })
	if failed := handle(t, h, fullResource(t, body, ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if len(rec.ins) != 1 {
		t.Fatalf("%d puts, want the claim-check only", len(rec.ins))
	}
	if in := rec.ins[0]; in.ServerSideEncryption != "aws:kms" || aws.ToString(in.SSEKMSKeyId) != "alias/cdc" || !strings.HasPrefix(aws.ToString(in.Key), "claim-check/") {
		t.Errorf("put %s: encryption %q %q", aws.ToString(in.Key), in.ServerSideEncryption, aws.ToString(in.SSEKMSKeyId))
	}
	if entries, _ := r.records(); len(entries) != 1 || entries[0].ID != "doc-k" {
		t.Errorf("record = %+v", entries)
	}
}

func TestNewFromEnvBuildsTheLambda(t *testing.T) {
	r := newRig(t)
	body := r.load("Patient", "pat-env", "")
	env := map[string]string{
		"CDC_BUCKET": bucket, "CDC_TABLE": table, "CDC_DATASTORE_ID": dsID, "CDC_EVENT_BUS": bus, "CDC_HEALTHLAKE_ENDPOINT": r.env.URL,
		"CDC_RESOURCE_TYPES": "Patient, Observation", "CDC_EXCLUDE_TYPES": "Observation", "CDC_PUTEVENTS_RATE": "50", "CDC_MAX_ENTRY_BYTES": "200000",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := fastpath.ConfigFromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Publish.Rate != 50 || cfg.Publish.MaxEntryBytes != 200000 || cfg.HealthLakeEndpoint != r.env.URL ||
		strings.Join(cfg.Filter.Include, ",") != "Patient,Observation" || strings.Join(cfg.Filter.Exclude, ",") != "Observation" {
		t.Errorf("config = %+v", cfg)
	}
	h, err := fastpath.NewFromEnv(getenv, lambdart.Runtime{AWS: r.env.Config(), Metrics: r.metrics, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if failed := handle(t, h, fullResource(t, body, ts1), idOnly("Patient/pat-env", "1", ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	if r.sink.Len() != 1 || r.total(fastpath.MetricPublished) != 1 {
		t.Errorf("%d events, metrics %v", r.sink.Len(), r.metrics.Totals())
	}
	if entries, _ := r.records(); len(entries) != 1 {
		t.Errorf("record = %+v", entries)
	}
}

func TestConfigFromEnvRefusesBadValues(t *testing.T) {
	base := map[string]string{"CDC_BUCKET": bucket, "CDC_TABLE": table, "CDC_DATASTORE_ID": dsID, "CDC_EVENT_BUS": bus}
	for name, c := range map[string]struct{ key, value, want string }{
		"no bucket":          {"CDC_BUCKET", "", "CDC_BUCKET"},
		"no table":           {"CDC_TABLE", "", "CDC_TABLE"},
		"no data store":      {"CDC_DATASTORE_ID", " ", "CDC_DATASTORE_ID"},
		"no bus":             {"CDC_EVENT_BUS", "", "CDC_EVENT_BUS"},
		"tiny entries":       {"CDC_MAX_ENTRY_BYTES", "100", "CDC_MAX_ENTRY_BYTES"},
		"negative rate":      {"CDC_PUTEVENTS_RATE", "-1", "CDC_PUTEVENTS_RATE"},
		"rate not a number":  {"CDC_PUTEVENTS_RATE", "fast", "CDC_PUTEVENTS_RATE"},
		"entries not number": {"CDC_MAX_ENTRY_BYTES", "1e6", "CDC_MAX_ENTRY_BYTES"},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		env[c.key] = c.value
		if _, err := fastpath.ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", name, err, c.want)
		}
	}
	env := map[string]string{"CDC_BUCKET": bucket, "CDC_TABLE": table, "CDC_DATASTORE_ID": dsID, "CDC_EVENT_BUS": bus, "AWS_ENDPOINT_URL": "http://localhost:4566"}
	cfg, err := fastpath.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || cfg.HealthLakeEndpoint != "http://localhost:4566" || cfg.Publish.Rate != 0 {
		t.Errorf("config = %+v, %v", cfg, err)
	}
	if _, err := fastpath.New(nil, nil, nil, nil, cfg); err == nil {
		t.Error("New without clients")
	}
}

func TestInstantWindowHoldsTheVersion(t *testing.T) {
	for _, s := range []string{"2025-09-05T00:18:43.219652906Z", "2025-09-05T00:18:43.219Z", "2025-09-05T00:18:43Z", "2025-09-05T02:18:43.0000001+02:00"} {
		at, err := envelope.ParseTime(s)
		if err != nil {
			t.Fatal(err)
		}
		w := fastpath.InstantWindow(at)
		if !w.Contains(at) || w.Until.Sub(w.Since) != time.Millisecond || w.Until.Sub(at) >= time.Millisecond || w.Until.Nanosecond()%int(time.Millisecond) != 0 {
			t.Errorf("%s: window %s", s, w)
		}
	}
}

// TestReportIsMadeOncePerReportInterval: an environment reports — one log
// line and one EMF record of summed counts — at most once per ReportEvery,
// at once after it was idle that long, and when Lambda shuts it down
// (Shutdown); an invocation that leaves a notification to come again is
// logged at once.
func TestReportIsMadeOncePerReportInterval(t *testing.T) {
	r := newRig(t)
	var emf loggingtest.Buffer
	r.metrics = metrics.New(&emf, "test")
	var mu sync.Mutex
	clock := now
	at := func(d time.Duration) { mu.Lock(); clock = now.Add(d); mu.Unlock() }
	h := r.handler(nil, func(c *fastpath.Config) {
		c.ReportEvery = 10 * time.Second
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	})
	lines := func(buf *loggingtest.Buffer) int { return strings.Count(buf.String(), "\n") }
	for i, step := range []struct {
		at    time.Duration
		lines int
	}{
		{0, 1},                // the first invocation: reported at once
		{2 * time.Second, 1},  // summed
		{4 * time.Second, 1},  // summed
		{11 * time.Second, 2}, // 11 s after the last report: the three since it
		{12 * time.Second, 2},
	} {
		at(step.at)
		if failed := handle(t, h, fullResource(t, r.load("Patient", fmt.Sprintf("pat-r%d", i), ""), ts1)); len(failed) != 0 {
			t.Fatalf("step %d: failed %v", i, failed)
		}
		if lines(r.logs) != step.lines || lines(&emf) != step.lines {
			t.Fatalf("step %d (at %s): %d log lines and %d EMF records, want %d", i, step.at, lines(r.logs), lines(&emf), step.lines)
		}
	}
	if line := r.logLine(); line["invocations"] != 3.0 || line["published"] != 3.0 || line["changes"] != 3.0 {
		t.Errorf("the second report = %v, want the three invocations since the first", line)
	}
	if r.total(fastpath.MetricPublished) != 4 {
		t.Errorf("FastPathPublished = %v before the shutdown, want the 4 reported", r.total(fastpath.MetricPublished))
	}

	// A failure is logged at once, beside the report it waits for.
	at(13 * time.Second)
	r.ebe.FailNextEntries(2, "InternalFailure") // both attempts (MaxAttempts 2)
	if failed := handle(t, h, fullResource(t, r.load("Patient", "pat-rx", ""), ts1)); len(failed) != 1 {
		t.Fatalf("failed = %v, want the message", failed)
	}
	if line := r.logLine(); line["level"] != "WARN" || line["failedMessages"] != 1.0 || lines(&emf) != 2 {
		t.Errorf("after a failure: last log line %v, %d EMF records", line, lines(&emf))
	}

	// One more version (recorded at once, reported later); Shutdown
	// reports what is pending: nothing is left out of the records or the
	// metrics.
	at(13500 * time.Millisecond)
	if failed := handle(t, h, fullResource(t, r.load("Patient", "pat-ry", ""), ts1)); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	at(14 * time.Second)
	h.Shutdown(context.Background())
	entries, keys := r.records()
	if len(keys) != 6 || len(entries) != 6 {
		t.Errorf("after Shutdown: %d record items with %d versions, want one per invocation that published: 6", len(keys), len(entries))
	}
	if r.total(fastpath.MetricPublished) != 6 || r.total(fastpath.MetricFailed) != 1 {
		t.Errorf("after Shutdown: FastPathPublished %v, FastPathFailed %v, want 6 and 1",
			r.total(fastpath.MetricPublished), r.total(fastpath.MetricFailed))
	}
	// Since the report at 11 s: the invocations at 12, 13 and 13.5 s; the
	// records of 12 and 13.5 s (the one at 13 s published nothing).
	if line := r.logLine(); line["level"] != "INFO" || line["invocations"] != 3.0 || line["published"] != 2.0 || line["recorded"] != 2.0 || line["records"] != 2.0 {
		t.Errorf("the last report = %v", line)
	}
}

// slowReader is a VersionReader that takes 20 ms a read and keeps the most
// reads it had in flight at once.
type slowReader struct {
	fastpath.VersionReader
	mu            sync.Mutex
	inFlight, max int
	reads         int
}

func (s *slowReader) VRead(ctx context.Context, datastoreID, resourceType, id, versionID string) ([]byte, error) {
	s.mu.Lock()
	s.inFlight++
	s.reads++
	s.max = max(s.max, s.inFlight)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	return s.VersionReader.VRead(ctx, datastoreID, resourceType, id, versionID)
}

// TestIDOnlyBatchIsReadBackTogether: an invocation reads back a batch's
// id-only versions VReadConcurrency at a time, each once, and still
// publishes them in the batch's order.
func TestIDOnlyBatchIsReadBackTogether(t *testing.T) {
	r := newRig(t)
	var bodies, want []string
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("obs-%02d", i)
		r.load("Observation", id, `,"status":"final"`)
		bodies = append(bodies, idOnly("Observation/"+id, "1", ts1))
		want = append(want, "Observation/"+id+"/_history/1")
	}
	bodies = append(bodies, idOnly("Observation/obs-03", "1", ts1)) // announced twice: read once
	reader := &slowReader{VersionReader: r.hl}
	h, err := fastpath.New(r.s3, r.db, r.eb, reader, r.config())
	if err != nil {
		t.Fatal(err)
	}
	if failed := handle(t, h, bodies...); len(failed) != 0 {
		t.Fatalf("failed = %v", failed)
	}
	var got []string
	for _, d := range r.details() {
		got = append(got, d.EventID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("published %v, want the batch's order %v", got, want)
	}
	if reader.reads != 20 || reader.max != fastpath.VReadConcurrency {
		t.Errorf("%d reads, at most %d at once; want 20, %d at once", reader.reads, reader.max, fastpath.VReadConcurrency)
	}
	if r.total(fastpath.MetricVReads) != 20 {
		t.Errorf("vreads metric %v, want 20", r.total(fastpath.MetricVReads))
	}
}

// TestIDOnlyReadsSlowDownWhenHealthLakeThrottles: on a data store created
// before 21 August 2023 (100 reads a second), an execution environment's
// version reads, 8 at once, are throttled; they slow down to what the store
// has room for (internal/readpace), so every version is read and published
// within the client's retries, no message fails, and most reads are served
// at their first attempt.
func TestIDOnlyReadsSlowDownWhenHealthLakeThrottles(t *testing.T) {
	const versions, batch = 300, 25
	// The emulator's clock runs at half real time: its 100 reads a second
	// are 50 a real second, well below what 8 reads at once send here.
	began := time.Now()
	r := newRigHealthLake(t, func(o *fakehealthlake.Options) {
		o.Now = func() time.Time { return began.Add(time.Since(began) / 2) }
		o.Quotas = true
		o.DatastoreCreatedAt = fakehealthlake.LegacyBefore.AddDate(0, -1, 0)
	})
	hl, err := fhirrest.NewFromConfig(r.env.Config(), r.env.URL) // the Lambda's client: its retries and backoff
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := 0; i < versions; i++ {
		id := fmt.Sprintf("obs-%03d", i)
		r.load("Observation", id, `,"status":"final"`)
		bodies = append(bodies, idOnly("Observation/"+id, "1", ts1))
	}
	h, err := fastpath.New(r.s3, r.db, r.eb, hl, r.config())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < versions; i += batch { // one environment's invocations
		if failed := handle(t, h, bodies[i:i+batch]...); len(failed) != 0 {
			t.Fatalf("batch %d: messages %v failed", i/batch, failed)
		}
	}
	throttled := r.hle.QuotaThrottles()["GET requests per data store"]
	t.Logf("%d reads, %d attempts throttled, %v", versions, throttled, time.Since(began))
	if throttled == 0 {
		t.Fatal("no read was throttled: the test does not exercise the quota")
	}
	if got := len(r.details()); got != versions {
		t.Errorf("%d events, want %d", got, versions)
	}
	if throttled > versions/6 {
		t.Errorf("%d of %d reads' attempts throttled: the reads did not slow down", throttled, versions)
	}
}
