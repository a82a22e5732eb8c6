package cdcevent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

// published runs the producer side for real: the publish package puts the
// events of lines on the emulated bus (claim-checking large ones to gofakes3
// through the real S3 client) and returns what a rule target receives.
func published(t *testing.T, lines ...string) ([][]byte, *s3.Client) {
	t.Helper()
	ctx := context.Background()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	env.Gateway.Handle(localaws.ServiceEventBridge, fakeeventbridge.New(fakeeventbridge.Options{Buses: []string{"cdc"}, Sink: sink, MaxRequestBytes: 2048}))
	s3c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("artifacts")}); err != nil {
		t.Fatal(err)
	}
	pub, err := publish.New(eventbridge.NewFromConfig(env.Config()), publish.Config{EventBus: "cdc", MaxEntryBytes: 2048})
	if err != nil {
		t.Fatal(err)
	}
	em := &publish.Emitter{
		Publisher: pub, ClaimCheck: &publish.ClaimCheck{S3: s3c, Bucket: "artifacts"},
		Window: envelope.Window{Since: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)},
		Export: envelope.ExportRef{DatastoreID: "ds1", JobID: "job1"},
	}
	for _, l := range lines {
		var f struct {
			ResourceType, ID string
			Meta             struct{ VersionID, LastUpdated string }
		}
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatal(err)
		}
		if _, err := em.Emit(ctx, envelope.Resource{ResourceType: f.ResourceType, ID: f.ID, VersionID: f.Meta.VersionID, LastUpdated: f.Meta.LastUpdated, Raw: []byte(l)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range sink.Events() {
		b, err := json.Marshal(d.Event)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out, s3c
}

func line(id, version string, pad int) string {
	return `{"resourceType":"Observation","id":"` + id + `","meta":{"versionId":"` + version + `","lastUpdated":"2026-11-21T09:30:00.000Z"},"valueString":"` + strings.Repeat("ß", pad) + `"}`
}

func TestDecodeAndResolveWhatThePipelinePublishes(t *testing.T) {
	small, big := line("o1", "4", 10), line("o2", "9", 3000)
	evs, s3c := published(t, small, big)
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	ctx := context.Background()
	objs := s3getter.New(s3c)

	ev, err := cdcevent.Decode(evs[0])
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if ev.Version != "0" || ev.Source != cdcevent.DefaultSource || ev.DetailType != cdcevent.DefaultDetailType || ev.Time.IsZero() ||
		ev.Detail.DedupeKey() != "Observation/o1/_history/4" || ev.Detail.ResourceRef != nil || ev.Detail.Window.Until.Hour() != 10 {
		t.Fatalf("event = %+v", ev)
	}
	got, err := cdcevent.Resolve(ctx, objs, &ev.Detail)
	if err != nil || string(got) != small {
		t.Fatalf("inline resolve: %v %s", err, got)
	}
	if ts, err := ev.Detail.LastUpdatedTime(); err != nil || ts.Minute() != 30 {
		t.Fatalf("LastUpdatedTime = %v %v", ts, err)
	}

	ev2, err := cdcevent.Decode(evs[1])
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	ref := ev2.Detail.ResourceRef
	if ref == nil || ev2.Detail.Resource != nil || ref.Key != "claim-check/Observation/"+ref.SHA256+".json" || len(ref.SHA256) != 64 || ref.Size != int64(len(big)) {
		t.Fatalf("claim-checked event = %+v", ev2.Detail)
	}
	got, err = cdcevent.Resolve(ctx, objs, &ev2.Detail)
	if err != nil || string(got) != big {
		t.Fatalf("resolve claim-check: %v", err)
	}

	// Tampered: same size, one byte changed.
	tampered := []byte(big)
	tampered[len(tampered)-3] = 'X'
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), Body: bytes.NewReader(tampered)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cdcevent.Resolve(ctx, objs, &ev2.Detail); !errors.Is(err, cdcevent.ErrChecksumMismatch) {
		t.Fatalf("tampered object: err = %v", err)
	}
	// Truncated and extended objects.
	for _, body := range [][]byte{[]byte(big[:100]), []byte(big + "\n")} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		if _, err := cdcevent.Resolve(ctx, objs, &ev2.Detail); !errors.Is(err, cdcevent.ErrSizeMismatch) {
			t.Fatalf("object of %d bytes: err = %v", len(body), err)
		}
	}
	// Gone.
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(ref.Bucket), Key: aws.String(ref.Key)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cdcevent.Resolve(ctx, objs, &ev2.Detail); !errors.Is(err, s3getter.ErrNotFound) || !strings.Contains(err.Error(), ref.Key) {
		t.Fatalf("missing object: err = %v", err)
	}
}

func TestDecodeRejectsWhatIsNotAV1Event(t *testing.T) {
	valid := `{"schemaVersion":"1","eventId":"Patient/1/_history/1","operation":"upsert","resourceType":"Patient","resourceId":"1","versionId":"1","lastUpdated":"2026-11-21T09:30:00Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T10:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"},"resource":{"resourceType":"Patient","id":"1"},"futureField":42}`
	if _, err := cdcevent.Decode([]byte(`{"version":"0","detail":` + valid + `}`)); err != nil {
		t.Fatalf("valid event with an unknown field: %v", err)
	}
	ref := `,"resourceRef":{"bucket":"b","key":"k","size":1,"sha256":"` + strings.Repeat("0", 64) + `"}`
	cases := map[string]struct {
		event string
		want  error
	}{
		"not json":             {`{"version":`, cdcevent.ErrMalformed},
		"no detail":            {`{"version":"0"}`, cdcevent.ErrMalformed},
		"schema 2":             {`{"detail":` + strings.Replace(valid, `"schemaVersion":"1"`, `"schemaVersion":"2"`, 1) + `}`, cdcevent.ErrUnsupportedSchema},
		"no eventId":           {`{"detail":` + strings.Replace(valid, `"eventId":"Patient/1/_history/1",`, ``, 1) + `}`, cdcevent.ErrMalformed},
		"both":                 {`{"detail":` + strings.TrimSuffix(valid, "}") + ref + `}}`, cdcevent.ErrMalformed},
		"neither":              {`{"detail":` + strings.Replace(valid, `"resource":{"resourceType":"Patient","id":"1"},`, ``, 1) + `}`, cdcevent.ErrMalformed},
		"detail string":        {`{"detail":"x"}`, cdcevent.ErrMalformed},
		"bad window":           {`{"detail":` + strings.Replace(valid, `"2026-11-21T10:00:00.000Z"`, `"soon"`, 1) + `}`, cdcevent.ErrMalformed},
		"resource null":        {`{"detail":` + strings.Replace(valid, `{"resourceType":"Patient","id":"1"}`, `null`, 1) + `}`, cdcevent.ErrMalformed},
		"bad event time":       {`{"time":"yesterday","detail":` + valid + `}`, cdcevent.ErrMalformed},
		"no operation":         {`{"detail":` + strings.Replace(valid, `"operation":"upsert",`, ``, 1) + `}`, cdcevent.ErrUnsupportedOperation},
		"new operation":        {`{"detail":` + strings.Replace(valid, `"operation":"upsert"`, `"operation":"merge"`, 1) + `}`, cdcevent.ErrUnsupportedOperation},
		"delete with resource": {`{"detail":` + strings.Replace(valid, `"operation":"upsert"`, `"operation":"delete"`, 1) + `}`, cdcevent.ErrMalformed},
		"delete with ref": {`{"detail":` + strings.Replace(strings.Replace(valid, `"operation":"upsert"`, `"operation":"delete"`, 1),
			`,"resource":{"resourceType":"Patient","id":"1"}`, ref, 1) + `}`, cdcevent.ErrMalformed},
	}
	for name, tc := range cases {
		if _, err := cdcevent.Decode([]byte(tc.event)); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// A reference with a malformed digest is not fetched.
	d, err := cdcevent.DecodeDetail([]byte(strings.Replace(valid, `"resource":{"resourceType":"Patient","id":"1"}`, strings.TrimPrefix(strings.Replace(ref, strings.Repeat("0", 64), "abc", 1), ","), 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cdcevent.Resolve(context.Background(), nil, d); !errors.Is(err, cdcevent.ErrMalformed) {
		t.Fatalf("short digest: %v", err)
	}
	if _, err := cdcevent.Resolve(context.Background(), nil, nil); !errors.Is(err, cdcevent.ErrMalformed) {
		t.Fatalf("nil detail: %v", err)
	}
}

func TestDecodeDeleteEvent(t *testing.T) {
	detail := envelope.AppendDeleteDetail(nil, envelope.Deletion{ResourceType: "Patient", ResourceID: "p1", VersionID: "3",
		LastUpdated: "2026-11-21T09:40:00.000Z", Export: envelope.ExportRef{DatastoreID: "ds1", JobID: "job1"},
		Window: envelope.Window{Since: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}})
	ev, err := cdcevent.Decode([]byte(`{"version":"0","source":"healthlake.cdc","detail":` + string(detail) + `}`))
	if err != nil {
		t.Fatalf("decode delete: %v\n%s", err, detail)
	}
	d := &ev.Detail
	if !d.IsDelete() || d.Operation != cdcevent.OperationDelete || d.DedupeKey() != "Patient/p1/_history/3" ||
		d.VersionID != "3" || d.Resource != nil || d.ResourceRef != nil {
		t.Fatalf("decoded %+v", d)
	}
	if lu, err := d.LastUpdatedTime(); err != nil || !lu.Equal(time.Date(2026, 11, 21, 9, 40, 0, 0, time.UTC)) {
		t.Fatalf("lastUpdated %v %v", lu, err)
	}
	if _, err := cdcevent.Resolve(context.Background(), nil, d); !errors.Is(err, cdcevent.ErrDeleted) {
		t.Fatalf("Resolve of a delete: %v", err)
	}
	// An upsert is not a delete.
	up, err := cdcevent.DecodeDetail(envelope.AppendDetail(nil, envelope.Resource{ResourceType: "Patient", ID: "p1", VersionID: "4",
		LastUpdated: "2026-11-21T09:41:00.000Z", Raw: []byte(`{"resourceType":"Patient","id":"p1"}`)}, envelope.Window{}, envelope.ExportRef{DatastoreID: "d", JobID: "j"}, nil))
	if err != nil || up.IsDelete() || up.Operation != cdcevent.OperationUpsert {
		t.Fatalf("upsert decoded as %+v, %v", up, err)
	}
}

// A consumer logs what Decode and Resolve return: no error names the
// resource (its id may be an MRN).
func TestErrorsNameNoResource(t *testing.T) {
	const id = "mrn-0042-7731"
	var errs []error
	_, err := cdcevent.DecodeDetail([]byte(`{"schemaVersion":"1","eventId":"Patient/` + id + `/_history/2","operation":"delete","resourceType":"Patient","resourceId":"` + id + `","versionId":"2","lastUpdated":"2026-11-21T10:00:00.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T10:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"},"resource":{"resourceType":"Patient"}}`))
	errs = append(errs, err)
	_, err = cdcevent.DecodeDetail([]byte(`{"schemaVersion":"1","eventId":"Patient/` + id + `/_history/2","operation":"upsert","resourceType":"Patient","resourceId":"` + id + `","versionId":"2","lastUpdated":"2026-11-21T10:00:00.000Z","window":{"since":"2026-11-21T09:00:00.000Z","until":"2026-11-21T10:00:00.000Z"},"export":{"datastoreId":"d","jobId":"j"}}`))
	errs = append(errs, err)
	del := &cdcevent.Detail{EventID: "Patient/" + id + "/_history/3", Operation: cdcevent.OperationDelete, ResourceType: "Patient", ResourceID: id, VersionID: "3"}
	_, err = cdcevent.Resolve(context.Background(), nil, del)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		if strings.Contains(err.Error(), id) {
			t.Errorf("case %d: error names the resource: %v", i, err)
		}
	}
}
