package deletes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/deletes"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

const (
	bucket = "artifacts"
	bus    = "cdc-bus"
	dsID   = "ds1"
)

// rig is the delete scan over real SDK clients: the HealthLake emulator
// (type-level history), the EventBridge emulator and S3, all behind the
// local AWS endpoint.
type rig struct {
	t     *testing.T
	s3    *s3.Client
	sink  *fakeeventbridge.MemorySink
	ds    *fakehealthlake.Datastore
	hle   *fakehealthlake.Emulator
	hc    *fhirrest.Client
	eb    *eventbridge.Client
	clock *clock
}

// clock is the emulator's clock: each write a millisecond after the last,
// so windows can be cut between writes.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func newRig(t *testing.T) *rig {
	t.Helper()
	env := localawstest.Start(t)
	sink := &fakeeventbridge.MemorySink{}
	env.Gateway.Handle(localaws.ServiceEventBridge, fakeeventbridge.New(fakeeventbridge.Options{Region: env.Region, AccountID: env.AccountID, Buses: []string{bus}, Sink: sink}))
	c := &clock{t: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)}
	hl := fakehealthlake.New(fakehealthlake.Options{Region: env.Region, AccountID: env.AccountID, Datastores: []string{dsID}, Now: c.now})
	env.Gateway.Handle(localaws.ServiceHealthLake, hl)
	ds, _ := hl.Datastore(dsID)
	cfg := env.Config()
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	hc, err := fhirrest.NewFromConfig(cfg, env.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, s3: s3c, sink: sink, ds: ds, hle: hl, hc: hc, eb: eventbridge.NewFromConfig(cfg), clock: c}
}

func (r *rig) finder(hl deletes.HistoryAPI, pageSize int) *deletes.Finder {
	r.t.Helper()
	f, err := deletes.New(hl, r.eb, r.s3, deletes.Config{
		Types: []string{"Observation", "Patient"}, PageSize: pageSize, Concurrency: 2,
		Publish: publish.Config{EventBus: bus}, Bucket: bucket,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

func (r *rig) load(typ, id string) {
	r.t.Helper()
	if _, err := r.ds.Load(typ, id, []byte(`{"resourceType":"`+typ+`","id":"`+id+`"}`)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) del(typ, id string) string {
	r.t.Helper()
	v, ok := r.ds.Delete(typ, id)
	if !ok {
		r.t.Fatalf("delete %s/%s: not there", typ, id)
	}
	return typ + "/" + id + "/_history/" + v
}

// mark is an instant between two writes.
func (r *rig) mark() time.Time { return r.clock.now() }

// published returns the delete events' eventIds, sorted, and checks each
// detail against the v1 envelope.
func (r *rig) published(w envelope.Window) []string {
	r.t.Helper()
	var out []string
	for _, ev := range r.sink.Events() {
		var d struct {
			EventID, Operation, ResourceType, ResourceID, VersionID, LastUpdated string
			Window                                                               map[string]string
			Export                                                               map[string]string
		}
		if err := json.Unmarshal(ev.Event.Detail, &d); err != nil {
			r.t.Fatal(err)
		}
		if d.Operation != envelope.OperationDelete || d.EventID != d.ResourceType+"/"+d.ResourceID+"/_history/"+d.VersionID {
			r.t.Errorf("event %s: operation %q, not a v1 delete", d.EventID, d.Operation)
		}
		at, err := envelope.ParseTime(d.LastUpdated)
		if err != nil || !w.Contains(at) {
			r.t.Errorf("event %s: lastUpdated %s outside the window %s", d.EventID, d.LastUpdated, w)
		}
		if d.Window["since"] != envelope.FormatTime(w.Since) || d.Export["jobId"] != "job1" {
			r.t.Errorf("event %s: window %v export %v", d.EventID, d.Window, d.Export)
		}
		out = append(out, d.EventID)
	}
	sort.Strings(out)
	return out
}

// recorded returns the delivered-index entries the scan wrote for the run.
func (r *rig) recorded(runID string, seq int) []delivered.Entry {
	r.t.Helper()
	obj, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(deletes.RecordKey(time.Now(), runID, seq))})
	if err != nil {
		return nil
	}
	defer obj.Body.Close()
	body, _ := io.ReadAll(obj.Body)
	var out []delivered.Entry
	if err := delivered.ReadAll(bytes.NewReader(body), nil, func(e delivered.Entry) error { out = append(out, e); return nil }); err != nil {
		r.t.Fatal(err)
	}
	return out
}

func input(w envelope.Window, cur *deletes.Cursor) deletes.Input {
	return deletes.Input{Action: deletes.Action, Window: w, Export: envelope.ExportRef{DatastoreID: dsID, JobID: "job1"}, RunID: "run-1", Cursor: cur}
}

// TestFindPublishesTheWindowsDeletes: every resource of every scanned type
// with a DELETE in (since, until] gets one v1 delete event with its newest
// DELETE version's eventId, across history pages; deletes before since or
// after until, upserts, and resources created and deleted inside the window
// (never announced) get none; what was published is in the delivered index,
// marked deleted.
func TestFindPublishesTheWindowsDeletes(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		r.load("Patient", id)
	}
	r.load("Observation", "o1")
	r.load("Observation", "o2")
	r.del("Patient", "p6") // before the window
	since := r.mark()
	want := []string{r.del("Patient", "p1"), r.del("Patient", "p2")}
	r.load("Patient", "p3") // an update: not a delete
	// Created and deleted inside the window: no export saw them, no
	// consumer was told of them, no delete goes out.
	r.load("Observation", "o3")
	r.del("Observation", "o3")
	r.load("Patient", "p7")
	r.load("Patient", "p7")
	r.del("Patient", "p7")
	// Updated, then deleted, re-created and deleted again: announced before
	// the window, so its newest delete goes out.
	r.load("Observation", "o2")
	r.del("Observation", "o2")
	r.load("Observation", "o2")
	want = append(want, r.del("Observation", "o2"))
	until := r.mark()
	r.del("Patient", "p4") // after until: the next window's
	r.del("Observation", "o1")
	w := envelope.Window{Since: since, Until: until}

	out, err := r.finder(r.hc, 2).Find(context.Background(), input(w, nil))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	if got := r.published(w); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("published %v, want %v", got, want)
	}
	if !out.Done || out.Cursor != nil {
		t.Errorf("out = %+v, want done", out)
	}
	if out.Totals.Deletes != 3 || out.Totals.Outside != 2 || out.Totals.NeverAnnounced != 2 || out.Totals.Types != 2 || out.Totals.Pages < 4 {
		t.Errorf("totals = %+v, want 3 deletes, 2 outside, 2 never announced, 2 types, several pages of 2", out.Totals)
	}
	rec := r.recorded("run-1", 0)
	if len(rec) != 3 {
		t.Fatalf("delivered index holds %d entries, want 3", len(rec))
	}
	for _, e := range rec {
		if !e.Deleted {
			t.Errorf("delivered entry %s/%s is not marked deleted", e.Type, e.ID)
		}
	}
}

// TestFindSkipsTheSnapshotWindow: the first window publishes the store as
// it is; a deletion before it concerns nothing a consumer was told of.
func TestFindSkipsTheSnapshotWindow(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.del("Patient", "p1")
	until := r.mark()
	calls := &countingHistory{api: r.hc}
	out, err := r.finder(calls, 2).Find(context.Background(), input(envelope.Window{Since: envelope.SnapshotSince, Until: until}, nil))
	if err != nil || !out.Done {
		t.Fatalf("out %+v err %v", out, err)
	}
	if calls.n() != 0 || len(r.sink.Events()) != 0 {
		t.Fatalf("%d history calls and %d events for the snapshot window, want none", calls.n(), len(r.sink.Events()))
	}
}

// TestFindResumesFromItsCursor: a cursor names the types left and where
// each stands; the scan reads only those and records under the next seq.
func TestFindResumesFromItsCursor(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.load("Observation", "o1")
	since := r.mark()
	r.del("Patient", "p1")
	obs := r.del("Observation", "o1")
	w := envelope.Window{Since: since, Until: r.mark()}
	cur := &deletes.Cursor{Pending: []deletes.TypeCursor{{Type: "Observation"}}, Seq: 3, Totals: deletes.Totals{Types: 2, Deletes: 1}}
	out, err := r.finder(r.hc, 2).Find(context.Background(), input(w, cur))
	if err != nil || !out.Done {
		t.Fatalf("out %+v err %v", out, err)
	}
	if got := r.published(w); len(got) != 1 || got[0] != obs {
		t.Fatalf("published %v, want only %s", got, obs)
	}
	if out.Totals.Deletes != 2 {
		t.Errorf("totals carried over: %+v, want 2 deletes in all", out.Totals)
	}
	if len(r.recorded("run-1", 3)) != 1 {
		t.Error("the resumed invocation's record is not under its seq")
	}
}

// TestFindFailsWithoutRecordingOnABadPage: a history read that fails for
// good (a page that does not parse) fails the invocation with ScanFailed, records nothing, and names
// no resource; the retry from the same cursor publishes the same eventIds.
func TestFindFailsWithoutRecordingOnABadPage(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "secret-id-1")
	r.load("Observation", "o1")
	since := r.mark()
	id := r.del("Patient", "secret-id-1")
	r.del("Observation", "o1")
	w := envelope.Window{Since: since, Until: r.mark()}
	bad := &failingHistory{api: r.hc, failType: "Patient"}
	_, err := r.finder(bad, 2).Find(context.Background(), input(w, nil))
	var sf *deletes.ScanFailed
	if !errors.As(err, &sf) {
		t.Fatalf("err = %v, want ScanFailed", err)
	}
	if strings.Contains(err.Error(), "secret-id") {
		t.Errorf("error names a resource: %v", err)
	}
	if rec := r.recorded("run-1", 0); len(rec) != 0 {
		t.Fatalf("a failed scan recorded %d deletes", len(rec))
	}
	out, err := r.finder(r.hc, 2).Find(context.Background(), input(w, nil))
	if err != nil || !out.Done {
		t.Fatalf("retry: out %+v err %v", out, err)
	}
	ids := map[string]int{}
	for _, e := range r.published(w) {
		ids[e]++
	}
	if ids[id] == 0 || len(ids) != 2 {
		t.Fatalf("after the retry the eventIds are %v, want the same two ids (repeats allowed)", ids)
	}
}

// TestFindReadsAThrottledPageAgain: a history page HealthLake still
// throttles after the client's retries is read again at the slower pace,
// not a failed scan (it was until stop 35: the window failed, and its retry
// published the window's events again).
func TestFindReadsAThrottledPageAgain(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.load("Observation", "o1")
	since := r.mark()
	want := []string{r.del("Observation", "o1"), r.del("Patient", "p1")}
	w := envelope.Window{Since: since, Until: r.mark()}
	// Each type has one page, read at once (Concurrency 2): 12 throttles
	// are more than the 4 each page's 5 attempts can take and still succeed.
	r.hle.ThrottleNext(12)
	out, err := r.finder(r.hc, 2).Find(context.Background(), input(w, nil))
	if err != nil || !out.Done {
		t.Fatalf("out %+v, err %v; want done", out, err)
	}
	if got := r.published(w); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("published %v, want %v", got, want)
	}
}

// TestFindRefusesBadInput: a malformed input is an error, not a scan.
func TestFindRefusesBadInput(t *testing.T) {
	r := newRig(t)
	f := r.finder(r.hc, 2)
	w := envelope.Window{Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)}
	for name, in := range map[string]deletes.Input{
		"no window":    {RunID: "r", Export: envelope.ExportRef{DatastoreID: dsID}},
		"empty window": {Window: envelope.Window{Since: w.Since, Until: w.Since}, RunID: "r", Export: envelope.ExportRef{DatastoreID: dsID}},
		"no run":       {Window: w, Export: envelope.ExportRef{DatastoreID: dsID}},
		"no datastore": {Window: w, RunID: "r"},
	} {
		if _, err := f.Find(context.Background(), in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// countingHistory counts the history pages asked for.
type countingHistory struct {
	api   deletes.HistoryAPI
	mu    sync.Mutex
	calls int
}

func (c *countingHistory) TypeHistoryPage(ctx context.Context, ds, typ string, since time.Time, count int, next string) ([]fhirrest.HistoryEntry, string, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	return c.api.TypeHistoryPage(ctx, ds, typ, since, count, next)
}

func (c *countingHistory) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// failingHistory fails every page of one type as the client fails a page
// that does not parse.
type failingHistory struct {
	api      deletes.HistoryAPI
	failType string
}

func (f *failingHistory) TypeHistoryPage(ctx context.Context, ds, typ string, since time.Time, count int, next string) ([]fhirrest.HistoryEntry, string, error) {
	if typ == f.failType {
		return nil, "", errors.New("history of " + typ + ": answer is not a JSON Bundle")
	}
	return f.api.TypeHistoryPage(ctx, ds, typ, since, count, next)
}

// TestFindSkipsTheDeletesTheFastPathPublished: with the fast path's record
// consulted (a run that continues the committed window), a delete whose
// version the fast path published is recorded in the delivered index but
// not published again, and the others count as missed by the fast path;
// after a replay (continues false) every delete goes out again.
func TestFindSkipsTheDeletesTheFastPathPublished(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.load("Patient", "p2")
	since := r.mark()
	viaFast := r.del("Patient", "p1")
	missed := r.del("Patient", "p2")
	w := envelope.Window{Since: since, Until: r.mark()}
	var asked []bool
	fast := func(_ context.Context, from time.Time, continues bool) (*delivered.Set, error) {
		asked = append(asked, continues)
		if !continues || !from.Equal(since) {
			return nil, nil
		}
		set := &delivered.Set{}
		parts := strings.Split(viaFast, "/")
		set.Add(delivered.Entry{Type: parts[0], ID: parts[1], VersionID: parts[3]})
		return set, nil
	}
	f, err := deletes.New(r.hc, r.eb, r.s3, deletes.Config{
		Types: []string{"Patient"}, Publish: publish.Config{EventBus: bus}, Bucket: bucket, FastPath: fast,
	})
	if err != nil {
		t.Fatal(err)
	}
	in := input(w, nil)
	in.Continues = true
	out, err := f.Find(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.published(w); strings.Join(got, " ") != missed {
		t.Errorf("published %v, want only %s (the fast path published %s)", got, missed, viaFast)
	}
	if out.Totals.Deletes != 1 || out.Totals.FastPathSkipped != 1 || out.Totals.FastPathMissed != 1 {
		t.Errorf("totals %+v: want 1 delete published (missed by the fast path), 1 skipped", out.Totals)
	}
	if rec := r.recorded("run-1", 0); len(rec) != 2 {
		t.Errorf("delivered index holds %d entries, want both deletes (consumers have both)", len(rec))
	}

	r.sink.Reset()
	in.Continues, in.RunID = false, "run-2"
	out, err = f.Find(context.Background(), in)
	if err != nil || out.Totals.Deletes != 2 || out.Totals.FastPathSkipped != 0 || out.Totals.FastPathMissed != 0 {
		t.Fatalf("after a replay: %+v, %v; want both deletes published again", out.Totals, err)
	}
	if len(asked) != 2 || !asked[0] || asked[1] {
		t.Errorf("the fast path was asked with continues %v, want [true false]", asked)
	}
}

// TestFastPathCreatedAndDeletedInsideTheWindowGetsItsDelete: with the fast
// path on, a resource created and deleted inside one window may have been
// announced within seconds (its creation's notification), so the scan
// publishes its delete rather than counting it never announced — unless
// the fast path published that delete too.
func TestFastPathCreatedAndDeletedInsideTheWindowGetsItsDelete(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p0")
	since := r.mark()
	r.load("Patient", "brief")
	del := r.del("Patient", "brief")
	w := envelope.Window{Since: since, Until: r.mark()}
	empty := func(context.Context, time.Time, bool) (*delivered.Set, error) { return &delivered.Set{}, nil }
	f, err := deletes.New(r.hc, r.eb, r.s3, deletes.Config{
		Types: []string{"Patient"}, Publish: publish.Config{EventBus: bus}, Bucket: bucket, FastPath: empty,
	})
	if err != nil {
		t.Fatal(err)
	}
	in := input(w, nil)
	in.Continues = true
	out, err := f.Find(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.published(w); strings.Join(got, " ") != del {
		t.Errorf("published %v, want the delete %s (the fast path may have announced the creation)", got, del)
	}
	if out.Totals.NeverAnnounced != 0 || out.Totals.FastPathMissed != 1 {
		t.Errorf("totals %+v: want the delete published as missed by the fast path, none never announced", out.Totals)
	}
}

// TestFindTakesItsPartOfTheShareOnlyWhilePublishing: the scan runs beside
// the window's Map; it joins the run's share board (Config.Share) once it
// has deletes to publish, and leaves only after EventBridge accepted the
// last of them. A window without deletes never joins.
func TestFindTakesItsPartOfTheShareOnlyWhilePublishing(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.load("Patient", "p2")
	since := r.mark()
	want := r.del("Patient", "p1")
	r.del("Patient", "p2")
	until := r.mark()
	var joined []string
	accepted := -1
	f, err := deletes.New(r.hc, r.eb, r.s3, deletes.Config{
		Types: []string{"Observation", "Patient"}, PageSize: 1, Concurrency: 2,
		Publish: publish.Config{EventBus: bus, Rate: 100}, Bucket: bucket,
		Share: func(_ context.Context, runID string, setRate func(float64)) func() {
			joined = append(joined, runID)
			if len(r.sink.Events()) != 0 {
				t.Errorf("joined the board after publishing")
			}
			setRate(50) // the part the board gives it
			return func() { accepted = len(r.sink.Events()) }
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w := envelope.Window{Since: since, Until: until}
	if _, err := f.Find(context.Background(), input(w, nil)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(joined, " ") != "run-1" || accepted != 2 {
		t.Fatalf("joined %v, %d deletes accepted when it left; want run-1 once, after both", joined, accepted)
	}
	if got := r.published(w); len(got) != 2 || (got[0] != want && got[1] != want) {
		t.Fatalf("published %v", got)
	}
	quiet := envelope.Window{Since: until, Until: r.mark()}
	if _, err := f.Find(context.Background(), input(quiet, nil)); err != nil {
		t.Fatal(err)
	}
	if len(joined) != 1 {
		t.Errorf("a window without deletes joined the board: %v", joined)
	}
}

// TestFindIsDoneAtOnceForAReusedExport: a run that publishes a later
// manifest part of an export (run-lock's reuse) reads no history and
// publishes nothing: the run that exported scanned the window.
func TestFindIsDoneAtOnceForAReusedExport(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	since := r.mark()
	r.del("Patient", "p1")
	w := envelope.Window{Since: since, Until: r.mark()}
	in := input(w, nil)
	in.Reuse = json.RawMessage(`{"manifestKey":"manifests/run-0/part-00001.json","part":1}`)
	out, err := r.finder(r.hc, 10).Find(context.Background(), in)
	if err != nil || !out.Done || out.Totals.Pages != 0 || len(r.sink.Events()) != 0 {
		t.Fatalf("reused: %+v, %v, %d events; want done, no page, nothing published", out, err, len(r.sink.Events()))
	}
	in.Reuse = json.RawMessage(`null`)
	if out, err := r.finder(r.hc, 10).Find(context.Background(), in); err != nil || out.Totals.Deletes != 1 {
		t.Fatalf("reuse null: %+v, %v; want the scan", out, err)
	}
}

// slowPages is a HistoryAPI whose pages arrive after a pause: the reading
// deadline passes while one is on its way.
type slowPages struct {
	deletes.HistoryAPI
	pause time.Duration
}

func (s slowPages) TypeHistoryPage(ctx context.Context, datastoreID, resourceType string, since time.Time, count int, next string) ([]fhirrest.HistoryEntry, string, error) {
	entries, link, err := s.HistoryAPI.TypeHistoryPage(ctx, datastoreID, resourceType, since, count, next)
	time.Sleep(s.pause)
	return entries, link, err
}

// TestFindReadsTheFastPathRecordAfterItsReadingDeadline: an invocation
// whose reading deadline passes with deletes found still reads the fast
// path's record (in the margin the deadline keeps), publishes them and
// returns its cursor; it does not fail on a context its reading already
// spent — which, after a burst, failed every retry of the window.
func TestFindReadsTheFastPathRecordAfterItsReadingDeadline(t *testing.T) {
	r := newRig(t)
	r.load("Patient", "p1")
	r.load("Observation", "o1")
	since := r.mark()
	p1 := r.del("Patient", "p1")
	r.del("Observation", "o1")
	w := envelope.Window{Since: since, Until: r.mark()}
	var askedLive bool
	fast := func(ctx context.Context, _ time.Time, _ bool) (*delivered.Set, error) {
		if err := ctx.Err(); err != nil {
			return nil, err // as a DynamoDB query on a spent context fails
		}
		askedLive = true
		return &delivered.Set{}, nil
	}
	const margin = 5 * time.Second
	f, err := deletes.New(slowPages{r.hc, 300 * time.Millisecond}, r.eb, r.s3, deletes.Config{
		Types: []string{"Patient", "Observation"}, Concurrency: 1, DeadlineMargin: margin,
		Publish: publish.Config{EventBus: bus}, Bucket: bucket, FastPath: fast,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The reading deadline 100 ms from now: Patient's page comes after it.
	ctx, cancel := context.WithTimeout(context.Background(), margin+100*time.Millisecond)
	defer cancel()
	in := input(w, nil)
	in.Continues = true
	out, err := f.Find(ctx, in)
	if err != nil {
		t.Fatalf("Find: %v", err)
	}
	if !askedLive {
		t.Error("the fast path's record was not read")
	}
	if out.Done || out.Cursor == nil || len(out.Cursor.Pending) != 1 || out.Cursor.Pending[0].Type != "Observation" {
		t.Fatalf("out %+v: want a cursor at Observation", out)
	}
	if got := r.published(w); strings.Join(got, " ") != p1 {
		t.Errorf("published %v, want %s", got, p1)
	}
}
