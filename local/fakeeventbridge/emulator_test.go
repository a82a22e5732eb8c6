package fakeeventbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// setup starts local AWS with the emulator and returns a real SDK client
// that does not retry (so injected throttling is visible).
func setup(t *testing.T, opts fakeeventbridge.Options) (*sdk.Client, *fakeeventbridge.Emulator, *localaws.Env) {
	t.Helper()
	env := localawstest.Start(t)
	if opts.Region == "" {
		opts.Region = env.Region
		opts.AccountID = env.AccountID
	}
	em := fakeeventbridge.New(opts)
	env.Gateway.Handle(localaws.ServiceEventBridge, em)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	return sdk.NewFromConfig(cfg), em, env
}

func entry(bus, detail string) types.PutEventsRequestEntry {
	return types.PutEventsRequestEntry{
		EventBusName: aws.String(bus), Source: aws.String("healthlake.cdc"),
		DetailType: aws.String("FHIR Resource Changed"), Detail: aws.String(detail),
	}
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestPutEventsDeliversWhatARuleTargetReceives(t *testing.T) {
	sink := &fakeeventbridge.MemorySink{}
	fixed := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	c, em, env := setup(t, fakeeventbridge.Options{Buses: []string{"cdc"}, Sink: sink, Now: func() time.Time { return fixed }})
	ctx := context.Background()

	e1 := entry("cdc", `{"eventId":"Patient/1/_history/2","name":"Zoë"}`)
	e2 := entry(em.BusARN("cdc"), `{"eventId":"Patient/2/_history/1"}`)
	e2.Resources = []string{"arn:aws:healthlake:us-east-1:000000000000:datastore/fhir/abc"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e2.Time = &at
	out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{e1, e2}})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if out.FailedEntryCount != 0 || len(out.Entries) != 2 || aws.ToString(out.Entries[0].EventId) == "" {
		t.Fatalf("result = %+v", out)
	}
	got := sink.Events()
	if len(got) != 2 {
		t.Fatalf("sink got %d events, want 2", len(got))
	}
	ev := got[0]
	if ev.Bus != "cdc" || ev.Event.Version != "0" || ev.Event.Source != "healthlake.cdc" || ev.Event.DetailType != "FHIR Resource Changed" ||
		ev.Event.Account != env.AccountID || ev.Event.Region != env.Region || ev.Event.Time != "2026-11-21T10:00:00Z" ||
		ev.Event.ID != aws.ToString(out.Entries[0].EventId) || len(ev.Event.Resources) != 0 {
		t.Fatalf("event = %+v", ev)
	}
	if string(ev.Event.Detail) != `{"eventId":"Patient/1/_history/2","name":"Zoë"}` {
		t.Fatalf("detail = %s", ev.Event.Detail)
	}
	// The JSON form is the rule-target event.
	b, _ := json.Marshal(ev.Event)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"} {
		if _, ok := m[k]; !ok {
			t.Errorf("event JSON lacks %q: %s", k, b)
		}
	}
	if got[1].Bus != "cdc" || got[1].Event.Time != "2026-01-02T03:04:05Z" || len(got[1].Event.Resources) != 1 {
		t.Fatalf("second event = %+v", got[1])
	}
	st := em.Stats()
	if st.PutEventsCalls != 1 || st.EntriesAccepted != 2 || st.Chunks != 2 {
		t.Fatalf("stats = %+v", st)
	}
	if env.Gateway.Calls()["events:PutEvents"] != 1 {
		t.Fatalf("gateway calls = %v", env.Gateway.Calls())
	}
}

func TestPutEventsEntryCountLimit(t *testing.T) {
	sink := &fakeeventbridge.MemorySink{}
	c, em, _ := setup(t, fakeeventbridge.Options{Sink: sink})
	ctx := context.Background()
	var ten []types.PutEventsRequestEntry
	for i := 0; i < 10; i++ {
		ten = append(ten, entry("default", `{"n":1}`))
	}
	out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: ten})
	if err != nil || out.FailedEntryCount != 0 || len(out.Entries) != 10 {
		t.Fatalf("10 entries: out=%+v err=%v", out, err)
	}
	_, err = c.PutEvents(ctx, &sdk.PutEventsInput{Entries: append(ten, entry("default", `{}`))})
	if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), "Member must have length less than or equal to 10") {
		t.Fatalf("11 entries: err = %v", err)
	}
	if sink.Len() != 10 {
		t.Fatalf("sink has %d events, want 10", sink.Len())
	}
	if st := em.Stats(); st.RejectedCalls != 1 || st.EntriesAccepted != 10 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestPutEventsTakesUpTo1MB: by default a request may carry up to 1 MB
// (1,000,000 bytes) of entries, AWS's limit since January 2026; 256 KB was
// the limit before.
func TestPutEventsTakesUpTo1MB(t *testing.T) {
	c, _, _ := setup(t, fakeeventbridge.Options{})
	ctx := context.Background()
	overhead := len("healthlake.cdc") + len("FHIR Resource Changed") + len(`{"a":""}`)
	detail := func(size int) *string { return aws.String(`{"a":"` + strings.Repeat("x", size-overhead) + `"}`) }
	e := entry("default", "{}")
	e.Detail = detail(fakeeventbridge.DefaultMaxRequestBytes)
	if out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{e}}); err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("an entry of 1,000,000 bytes: out=%+v err=%v", out, err)
	}
	e.Detail = detail(fakeeventbridge.DefaultMaxRequestBytes + 1)
	if _, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{e}}); apiCode(err) != "ValidationException" {
		t.Fatalf("an entry of 1,000,001 bytes: err = %v, want ValidationException", err)
	}
}

func TestPutEventsSizeLimitCountsUTF8BytesAndTime(t *testing.T) {
	c, em, _ := setup(t, fakeeventbridge.Options{MaxRequestBytes: 1000})
	ctx := context.Background()
	overhead := len("healthlake.cdc") + len("FHIR Resource Changed")
	// "é" is two bytes in UTF-8: fill the detail to exactly the limit.
	detailFor := func(size int) string {
		inner := size - overhead - len(`{"a":""}`)
		s := strings.Repeat("é", inner/2) + strings.Repeat("x", inner%2)
		return `{"a":"` + s + `"}`
	}
	atLimit := entry("default", detailFor(1000))
	if n := (fakeeventbridge.Entry{Source: "healthlake.cdc", DetailType: "FHIR Resource Changed", Detail: *atLimit.Detail}).Size(); n != 1000 {
		t.Fatalf("test entry size %d, want 1000", n)
	}
	out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{atLimit}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("entry at the limit: out=%+v err=%v", out, err)
	}
	over := entry("default", detailFor(1001))
	_, err = c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{over}})
	if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), "Total size of the entries in the request is over the limit.") {
		t.Fatalf("entry one byte over: err = %v", err)
	}
	// Time counts 14 bytes.
	withTime := entry("default", detailFor(1000-14))
	now := time.Now()
	withTime.Time = &now
	if _, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{withTime}}); err != nil {
		t.Fatalf("entry with Time at the limit: %v", err)
	}
	withTime.Detail = aws.String(detailFor(1000 - 13))
	if _, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{withTime}}); apiCode(err) != "ValidationException" {
		t.Fatalf("entry with Time one over: err = %v", err)
	}
	// The limit is on the sum over the request.
	half := entry("default", detailFor(500))
	if _, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{half, half}}); err != nil {
		t.Fatalf("two halves: %v", err)
	}
	if _, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{half, half, entry("default", "{}")}}); apiCode(err) != "ValidationException" {
		t.Fatalf("two halves and one more: err = %v", err)
	}
	if st := em.Stats(); st.EntriesAccepted != 4 || st.RejectedCalls != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPutEventsPerEntryValidation(t *testing.T) {
	sink := &fakeeventbridge.MemorySink{}
	c, em, _ := setup(t, fakeeventbridge.Options{Sink: sink})
	ctx := context.Background()
	noSource := entry("default", `{}`)
	noSource.Source = nil
	noType := entry("default", `{}`)
	noType.DetailType = nil
	noDetail := entry("default", `{}`)
	noDetail.Detail = nil
	cases := []struct {
		e          types.PutEventsRequestEntry
		code, want string
	}{
		{noSource, "InvalidArgument", "Parameter Source is not valid. Reason: Source is a required argument."},
		{noType, "InvalidArgument", "Parameter DetailType is not valid. Reason: DetailType is a required argument."},
		{noDetail, "InvalidArgument", "Parameter Detail is not valid. Reason: Detail is a required argument."},
		{entry("default", `[1,2]`), "MalformedDetail", "Detail is malformed."},
		{entry("default", `{"a":`), "MalformedDetail", "Detail is malformed."},
		{entry("no-such-bus", `{}`), "ResourceNotFoundException", "Event bus no-such-bus does not exist."},
		{entry("default", `{"ok":true}`), "", ""},
	}
	var in []types.PutEventsRequestEntry
	for _, tc := range cases {
		in = append(in, tc.e)
	}
	out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: in})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if out.FailedEntryCount != 6 {
		t.Fatalf("FailedEntryCount = %d, want 6", out.FailedEntryCount)
	}
	for i, tc := range cases {
		r := out.Entries[i]
		if aws.ToString(r.ErrorCode) != tc.code || aws.ToString(r.ErrorMessage) != tc.want {
			t.Errorf("entry %d: %s %q, want %s %q", i, aws.ToString(r.ErrorCode), aws.ToString(r.ErrorMessage), tc.code, tc.want)
		}
		if (tc.code == "") != (r.EventId != nil) {
			t.Errorf("entry %d: EventId %v", i, r.EventId)
		}
	}
	if sink.Len() != 1 || em.Stats().FailedByCode["InvalidArgument"] != 3 {
		t.Fatalf("sink %d, stats %+v", sink.Len(), em.Stats())
	}
}

func TestAcceptUnknownBusDropsLikeAWS(t *testing.T) {
	sink := &fakeeventbridge.MemorySink{}
	c, _, _ := setup(t, fakeeventbridge.Options{Sink: sink, AcceptUnknownBus: true})
	out, err := c.PutEvents(context.Background(), &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("nope", `{}`)}})
	if err != nil || out.FailedEntryCount != 0 || out.Entries[0].EventId == nil {
		t.Fatalf("out=%+v err=%v", out, err)
	}
	if sink.Len() != 0 {
		t.Fatalf("an entry for an unknown bus was delivered")
	}
}

func TestInjectedEntryFailuresAndThrottling(t *testing.T) {
	sink := &fakeeventbridge.MemorySink{}
	c, em, _ := setup(t, fakeeventbridge.Options{Sink: sink})
	ctx := context.Background()
	em.FailNextEntries(2, "InternalFailure")
	em.SetEntryFault(func(call, index int, e fakeeventbridge.Entry) (string, string) {
		if strings.Contains(e.Detail, "throttle-me") {
			return "ThrottlingException", ""
		}
		return "", ""
	})
	in := []types.PutEventsRequestEntry{entry("default", `{"i":0}`), entry("default", `{"i":1}`), entry("default", `{"i":"throttle-me"}`), entry("default", `{"i":3}`)}
	out, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: in})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	codes := []string{}
	for _, r := range out.Entries {
		codes = append(codes, aws.ToString(r.ErrorCode))
	}
	if out.FailedEntryCount != 3 || strings.Join(codes, ",") != "InternalFailure,InternalFailure,ThrottlingException," {
		t.Fatalf("failed=%d codes=%v", out.FailedEntryCount, codes)
	}
	if aws.ToString(out.Entries[0].ErrorMessage) != "Internal Service Failure" {
		t.Fatalf("message = %q", aws.ToString(out.Entries[0].ErrorMessage))
	}
	if sink.Len() != 1 || string(sink.Events()[0].Event.Detail) != `{"i":3}` {
		t.Fatalf("sink = %+v", sink.Events())
	}

	em.ThrottleNextCalls(1)
	_, err = c.PutEvents(ctx, &sdk.PutEventsInput{Entries: in[:1]})
	if apiCode(err) != "ThrottlingException" {
		t.Fatalf("throttled call: err = %v", err)
	}
	out, err = c.PutEvents(ctx, &sdk.PutEventsInput{Entries: in[:1]})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("call after throttling: out=%+v err=%v", out, err)
	}
	st := em.Stats()
	if st.PutEventsCalls != 3 || st.ThrottledCalls != 1 || st.EntriesFailed != 3 || st.EntriesAccepted != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestSinkErrorFailsTheEntry(t *testing.T) {
	n := 0
	sink := fakeeventbridge.SinkFunc(func(ctx context.Context, bus string, ev fakeeventbridge.Event) error {
		n++
		if n == 1 {
			return errors.New("target down")
		}
		return nil
	})
	c, _, _ := setup(t, fakeeventbridge.Options{Sink: sink})
	out, err := c.PutEvents(context.Background(), &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("default", `{}`), entry("default", `{}`)}})
	if err != nil || out.FailedEntryCount != 1 || aws.ToString(out.Entries[0].ErrorCode) != "InternalFailure" || out.Entries[1].EventId == nil {
		t.Fatalf("out=%+v err=%v", out, err)
	}
}

func TestChunksAreBilledPer64KB(t *testing.T) {
	c, em, _ := setup(t, fakeeventbridge.Options{})
	big := `{"a":"` + strings.Repeat("x", 70000) + `"}`
	if _, err := c.PutEvents(context.Background(), &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("default", big), entry("default", `{}`)}}); err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if st := em.Stats(); st.Chunks != 3 {
		t.Fatalf("chunks = %d, want 3 (2 for the 70 KB entry, 1 for the small one)", st.Chunks)
	}
	for size, want := range map[int]int{0: 1, 1: 1, 65536: 1, 65537: 2, 262144: 4} {
		if got := fakeeventbridge.Chunks(size); got != want {
			t.Errorf("Chunks(%d) = %d, want %d", size, got, want)
		}
	}
}

func TestEventBusLifecycle(t *testing.T) {
	c, em, _ := setup(t, fakeeventbridge.Options{})
	ctx := context.Background()
	cr, err := c.CreateEventBus(ctx, &sdk.CreateEventBusInput{Name: aws.String("cdc-bus")})
	if err != nil || aws.ToString(cr.EventBusArn) != em.BusARN("cdc-bus") {
		t.Fatalf("create: %+v %v", cr, err)
	}
	if _, err := c.CreateEventBus(ctx, &sdk.CreateEventBusInput{Name: aws.String("cdc-bus")}); apiCode(err) != "ResourceAlreadyExistsException" {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := c.CreateEventBus(ctx, &sdk.CreateEventBusInput{Name: aws.String("bad name!")}); apiCode(err) != "ValidationException" {
		t.Fatalf("bad name: %v", err)
	}
	d, err := c.DescribeEventBus(ctx, &sdk.DescribeEventBusInput{Name: aws.String("cdc-bus")})
	if err != nil || aws.ToString(d.Name) != "cdc-bus" || aws.ToString(d.Arn) != em.BusARN("cdc-bus") || d.CreationTime == nil {
		t.Fatalf("describe: %+v %v", d, err)
	}
	def, err := c.DescribeEventBus(ctx, &sdk.DescribeEventBusInput{})
	if err != nil || aws.ToString(def.Name) != "default" {
		t.Fatalf("describe default: %+v %v", def, err)
	}
	if _, err := c.DescribeEventBus(ctx, &sdk.DescribeEventBusInput{Name: aws.String("missing")}); apiCode(err) != "ResourceNotFoundException" {
		t.Fatalf("describe missing: %v", err)
	}
	l, err := c.ListEventBuses(ctx, &sdk.ListEventBusesInput{})
	if err != nil || len(l.EventBuses) != 2 || aws.ToString(l.EventBuses[0].Name) != "cdc-bus" {
		t.Fatalf("list: %+v %v", l, err)
	}
	l, err = c.ListEventBuses(ctx, &sdk.ListEventBusesInput{NamePrefix: aws.String("def")})
	if err != nil || len(l.EventBuses) != 1 || aws.ToString(l.EventBuses[0].Name) != "default" {
		t.Fatalf("list prefix: %+v %v", l, err)
	}
	l, err = c.ListEventBuses(ctx, &sdk.ListEventBusesInput{Limit: aws.Int32(1)})
	if err != nil || len(l.EventBuses) != 1 || l.NextToken == nil {
		t.Fatalf("list page 1: %+v %v", l, err)
	}
	l, err = c.ListEventBuses(ctx, &sdk.ListEventBusesInput{Limit: aws.Int32(1), NextToken: l.NextToken})
	if err != nil || len(l.EventBuses) != 1 || aws.ToString(l.EventBuses[0].Name) != "default" {
		t.Fatalf("list page 2: %+v %v", l, err)
	}
	if _, err := c.DeleteEventBus(ctx, &sdk.DeleteEventBusInput{Name: aws.String("cdc-bus")}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.DeleteEventBus(ctx, &sdk.DeleteEventBusInput{Name: aws.String("default")}); apiCode(err) != "ValidationException" {
		t.Fatalf("delete default: %v", err)
	}
	if _, err := c.DescribeEventBus(ctx, &sdk.DescribeEventBusInput{Name: aws.String("cdc-bus")}); apiCode(err) != "ResourceNotFoundException" {
		t.Fatalf("describe deleted: %v", err)
	}
}

func TestNewUUIDIsVersion4(t *testing.T) {
	a, b := fakeeventbridge.NewUUID(), fakeeventbridge.NewUUID()
	if len(a) != 36 || a == b || a[14] != '4' || !strings.ContainsRune("89ab", rune(a[19])) {
		t.Fatalf("uuids %q %q", a, b)
	}
}
