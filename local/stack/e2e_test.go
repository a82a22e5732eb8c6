package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

var stackSeq atomic.Int64

// startStack starts a stack on a free port with test-sized timings. goaws
// is process-wide, so each stack gets its own queue names.
func startStack(t testing.TB, mutate func(*Options)) *Stack {
	t.Helper()
	opts := Options{
		Addr:              "127.0.0.1:0",
		Name:              fmt.Sprintf("e2e%d-%d", time.Now().UnixNano()%1e6, stackSeq.Add(1)),
		SampleSize:        24,
		Every:             time.Hour,
		VisibilityTimeout: 2 * time.Second,
		RecheckDelay:      time.Second,
		MaxReceiveCount:   5,
		RecordEvents:      true,
		// The 2 s visibility leaves no room for Lambda's 20 s wait at very
		// low traffic (esm refuses it): these tests are about what the fast
		// path delivers; TestABatchAfterAnEmptyPollWaitsTheLowTrafficWait
		// (local/esm) covers the wait, and cdc-local and the simulation
		// model it.
		FastPathLowTrafficWait: -1,
	}
	if mutate != nil {
		mutate(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start stack: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

func runWindow(t *testing.T, st *Stack) report.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := st.RunOnce(ctx)
	if err != nil {
		t.Fatalf("run window: %v", err)
	}
	return w
}

// detail decodes the detail of a delivery.
type detail struct {
	EventID      string          `json:"eventId"`
	ResourceType string          `json:"resourceType"`
	ResourceID   string          `json:"resourceId"`
	VersionID    string          `json:"versionId"`
	Resource     json.RawMessage `json:"resource"`
}

func decodeDetail(t *testing.T, d sink.Delivery) detail {
	t.Helper()
	var out detail
	if err := json.Unmarshal(d.Event.Detail, &out); err != nil {
		t.Fatalf("detail of %s: %v", d.Event.ID, err)
	}
	return out
}

func TestSeededDataGivesOneEventPerResource(t *testing.T) {
	st := startStack(t, nil)
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" || w.Outcome != report.OutcomeCommitted {
		t.Fatalf("first window = %+v", w)
	}
	ids := st.Delivered.EventIDs()
	if len(ids) != st.Seeded() || st.Seeded() != 24 {
		t.Fatalf("%d distinct events for %d seeded resources", len(ids), st.Seeded())
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s delivered %d times without faults", id, n)
		}
		if !strings.HasSuffix(id, "/_history/1") {
			t.Errorf("eventId %s is not a first version", id)
		}
	}
	for _, d := range st.Delivered.Deliveries() {
		ev := d.Event
		if ev.Version != "0" || ev.Source == "" || ev.DetailType == "" || ev.Account != st.Env.AccountID || ev.Region != st.Env.Region || ev.Time == "" || ev.ID == "" {
			t.Errorf("event envelope %+v is not what a rule target receives", ev)
		}
		det := decodeDetail(t, d)
		if det.EventID != envelope.EventID(det.ResourceType, det.ResourceID, det.VersionID) || len(det.Resource) == 0 {
			t.Errorf("detail %+v", det)
		}
		// The resource in the event is the data store's current version.
		cur, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
		if !ok {
			t.Fatal("no data store")
		}
		body, ok := cur.Read(det.ResourceType, det.ResourceID)
		if !ok || string(body) != string(det.Resource) {
			t.Errorf("%s: event resource differs from the stored bytes", det.EventID)
		}
	}
	if w.Events != int64(st.Seeded()) {
		t.Errorf("window counted %d events", w.Events)
	}
	// A second window with no change publishes nothing and still succeeds.
	w2 := runWindow(t, st)
	if w2.Status != "SUCCEEDED" || st.Delivered.Len() != st.Seeded() {
		t.Errorf("idle window %+v delivered %d events in all", w2, st.Delivered.Len())
	}
	cps, backwards := st.Checkpoints()
	if backwards || len(cps) < 2 {
		t.Errorf("checkpoints %v backwards=%v", cps, backwards)
	}
}

func TestSeedDirKeepsIDs(t *testing.T) {
	dir := t.TempDir()
	lines := `{"resourceType":"Patient","id":"pat-1","name":[{"family":"One"}]}
{"resourceType":"Patient","id":"pat-2","name":[{"family":"Two"}]}
`
	if err := os.WriteFile(filepath.Join(dir, "Patient.ndjson"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Organization.ndjson"), []byte(`{"resourceType":"Organization","id":"org-1","name":"Clinic"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An export log beside the resource files, and a resource the data store
	// refuses, are skipped with their reasons; seeding goes on.
	if err := os.WriteFile(filepath.Join(dir, "log.ndjson"), []byte(`{"fileUrl":"x","resourceCount":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Observation.ndjson"), []byte(`{"resourceType":"Observation","id":"obs-1","status":42}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := startStack(t, func(o *Options) { o.SeedDir = dir })
	if st.Seeded() != 3 || st.SeedSkipped() != 2 {
		t.Fatalf("seeded %d, skipped %d; want 3 and 2", st.Seeded(), st.SeedSkipped())
	}
	if w := runWindow(t, st); w.Status != "SUCCEEDED" {
		t.Fatalf("window %+v", w)
	}
	for _, id := range []string{"Patient/pat-1/_history/1", "Patient/pat-2/_history/1", "Organization/org-1/_history/1"} {
		if st.Delivered.Count(id) != 1 {
			t.Errorf("%s delivered %d times; got %v", id, st.Delivered.Count(id), st.Delivered.EventIDs())
		}
	}
	if got := len(st.Delivered.EventIDs()); got != 3 {
		t.Errorf("delivered %d distinct events, want 3", got)
	}
}

func TestAPutGivesItsEventInTheNextWindow(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(o *Options) { o.SampleSize = 6 })
	runWindow(t, st)
	before := st.Delivered.Len()

	ctx := context.Background()
	body := []byte(`{"resourceType":"Patient","id":"put-1","name":[{"family":"Put"}]}`)
	v1, err := st.PutResource(ctx, "Patient", "put-1", body)
	if err != nil {
		t.Fatal(err)
	}
	w := runWindow(t, st)
	got := st.Delivered.Since(before)
	if w.Status != "SUCCEEDED" || len(got) != 1 || got[0].EventID != "Patient/put-1/_history/"+v1 {
		t.Fatalf("window %+v delivered %v, want only Patient/put-1/_history/%s", w, ids(got), v1)
	}

	// An update is a new version and a new event; the next window has only it.
	v2, err := st.PutResource(ctx, "Patient", "put-1", []byte(`{"resourceType":"Patient","id":"put-1","name":[{"family":"Updated"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	before = st.Delivered.Len()
	runWindow(t, st)
	got = st.Delivered.Since(before)
	if len(got) != 1 || got[0].EventID != "Patient/put-1/_history/"+v2 || v2 == v1 {
		t.Fatalf("update delivered %v, want Patient/put-1/_history/%s", ids(got), v2)
	}
}

func ids(ds []sink.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.EventID
	}
	return out
}

func TestTwoExecutionsStartedTogetherRunOneExport(t *testing.T) {
	t.Parallel()
	// Each export status lasts 1 s, so the first execution certainly still
	// holds the lock when the second one tries to take it.
	st := startStack(t, func(o *Options) { o.SampleSize = 12; o.ExportDelay = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wins := make([]report.Run, 2)
	for i, arn := range []string{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := st.Wait(ctx, arn, time.Now(), 0)
			if err != nil {
				t.Errorf("wait: %v", err)
			}
			wins[i] = w
		}()
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, w := range wins {
		outcomes[w.Outcome]++
	}
	if outcomes[report.OutcomeCommitted] != 1 || outcomes[report.OutcomeSkipped] != 1 {
		t.Errorf("outcomes %v, want one committed and one skipped", outcomes)
	}
	if n := len(st.HealthLake.RequestsFor("StartExport")); n != 1 {
		t.Errorf("%d exports started, want 1", n)
	}
	if m := st.HealthLake.MaxConcurrentExports(); m > 1 {
		t.Errorf("maxConcurrentExports = %d", m)
	}
	if len(st.Delivered.EventIDs()) != st.Seeded() {
		t.Errorf("%d distinct events for %d resources", len(st.Delivered.EventIDs()), st.Seeded())
	}
}

func TestScheduleRunsWindowsAndRewritesTheReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.json")
	st := startStack(t, func(o *Options) { o.SampleSize = 6; o.Every = 500 * time.Millisecond; o.ReportPath = path })
	ctx, cancel := context.WithCancel(context.Background())
	var windows atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- st.Run(ctx, func(report.Run, error) { windows.Add(1) })
	}()
	waitFor(t, "three windows", func() bool { return windows.Load() >= 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.WindowsRun < 3 || r.Events < int64(st.Seeded()) || r.Calls["states:StartExecution"] < 3 || r.MaxConcurrentExports != 1 {
		t.Errorf("report windows=%d events=%d calls=%v maxExports=%d", r.WindowsRun, r.Events, r.Calls["states:StartExecution"], r.MaxConcurrentExports)
	}
	if r.Outcomes[report.OutcomeFailed] != 0 {
		t.Errorf("failed windows without faults: %v", r.Outcomes)
	}
}

// waitFor polls cond; the bound only stops a broken test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReplayReEmitsTheSameEventIDs(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 10 })
	first := runWindow(t, st)
	if first.Status != "SUCCEEDED" || first.Window == nil {
		t.Fatalf("first window %+v", first)
	}
	firstIDs := st.Delivered.EventIDs()

	// `cdcctl replay --since T`, the real binary against the stack's endpoint.
	cdcctl(t, st, "replay", "--since", first.Window.Since, "--reason", "e2e replay test")
	before := st.Delivered.Len()
	w := runWindow(t, st)
	if w.Status != "SUCCEEDED" {
		t.Fatalf("replayed window %+v", w)
	}
	again := map[string]int{}
	for _, d := range st.Delivered.Since(before) {
		again[d.EventID]++
	}
	if len(again) != len(firstIDs) {
		t.Fatalf("replay re-emitted %d eventIds, first window had %d", len(again), len(firstIDs))
	}
	for id := range firstIDs {
		if again[id] != 1 {
			t.Errorf("%s re-emitted %d times", id, again[id])
		}
	}
	if out := cdcctl(t, st, "status"); !strings.Contains(out, st.Res.Table) || !strings.Contains(out, w.RunID) {
		t.Errorf("cdcctl status does not show the table and the last run:\n%s", out)
	}
	cps, backwards := st.Checkpoints()
	// The replay moved the checkpoint back on purpose; the windows never did.
	if len(cps) < 2 {
		t.Errorf("checkpoints %v (backwards by replay: %v)", cps, backwards)
	}
}

func TestFaultsConvergeWithConcurrentWrites(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("long end-to-end test")
	}
	st := startStack(t, func(o *Options) {
		o.SampleSize = 24
		o.FaultRate = 0.2
		o.FaultSeed = 7
		// CDC_LOCAL_FAULT_SEED and CDC_LOCAL_FAULT_RATE explore other plans.
		if v, err := strconv.ParseUint(os.Getenv("CDC_LOCAL_FAULT_SEED"), 10, 64); err == nil {
			o.FaultSeed = v
		}
		if v, err := strconv.ParseFloat(os.Getenv("CDC_LOCAL_FAULT_RATE"), 64); err == nil {
			o.FaultRate = v
		}
		o.TimeScale = 0.1
		o.VisibilityTimeout = time.Second
		o.Every = 700 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	latest := map[string]string{} // Type/id → latest version acknowledged
	touched := map[string]bool{}  // Type/id → a write was sent
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			// Half the writes create resources, half update eight hot ones.
			// A hot resource updated faster than a window completes is
			// skipped as outside-window until writes stop (its exported
			// version is always newer than the window's until): state
			// transfer delivers it after quiescence.
			id := fmt.Sprintf("w-%d", (i/2)%8)
			if i%2 == 1 {
				id = fmt.Sprintf("w-new-%d", i)
			}
			body := fmt.Sprintf(`{"resourceType":"Patient","id":%q,"name":[{"family":"Writer%d"}]}`, id, i)
			mu.Lock()
			touched["Patient/"+id] = true
			mu.Unlock()
			// A write cut short by the end of the writer (ctx) may still
			// have been stored: the store, not the acknowledgement, says
			// what consumers must end with (below).
			v, err := st.PutResource(ctx, "Patient", id, []byte(body))
			if err == nil {
				mu.Lock()
				latest["Patient/"+id] = v
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(40 * time.Millisecond):
			}
		}
	}()
	// Scheduled windows overlap (every 700 ms, a window takes longer), so
	// the lock and the single export are exercised under faults too.
	var windows atomic.Int64
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- st.Run(runCtx, func(report.Run, error) { windows.Add(1) }) }()
	waitFor(t, "15 scheduled windows", func() bool { return windows.Load() >= 15 })
	stopRun()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()

	want := map[string]bool{}
	for _, d := range st.Delivered.Deliveries() {
		if strings.HasSuffix(d.EventID, "/_history/1") && !strings.HasPrefix(d.EventID, "Patient/w-") {
			want[d.EventID] = true
		}
	}
	// Consumers must end with the store's current version of every resource
	// written, which is never older than the writer's acknowledgement.
	ds, ok := st.HealthLake.Datastore(st.Res.DatastoreID)
	if !ok {
		t.Fatal("no data store")
	}
	mu.Lock()
	for k := range touched {
		typ, id, _ := strings.Cut(k, "/")
		body, ok := ds.Read(typ, id)
		if !ok {
			if acked, was := latest[k]; was {
				t.Errorf("%s: acknowledged version %s, not in the store", k, acked)
			}
			continue
		}
		var r struct {
			Meta struct {
				VersionID string `json:"versionId"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("%s: stored bytes: %v", k, err)
		}
		stored, _ := strconv.Atoi(r.Meta.VersionID)
		if acked, was := latest[k]; was {
			if a, _ := strconv.Atoi(acked); a > stored {
				t.Errorf("%s: acknowledged version %s, the store holds %s", k, acked, r.Meta.VersionID)
			} else if a < stored {
				t.Logf("%s: the write of version %s was stored, its answer cut short", k, r.Meta.VersionID)
			}
		}
		want[k+"/_history/"+r.Meta.VersionID] = true
	}
	mu.Unlock()
	missing := func() []string {
		var out []string
		for id := range want {
			if st.Delivered.Count(id) == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	// Quiescence: no more writes; windows run until everything arrived.
	for i := 0; i < 30 && (len(missing()) > 0 || !lastCommitted(st)); i++ {
		runWindow(t, st)
	}
	if m := missing(); len(m) > 0 {
		sort.Strings(m)
		got, acked := map[string][]string{}, map[string]string{}
		for _, w := range m {
			res, _, _ := strings.Cut(w, "/_history/")
			acked[res] = latest[res]
			for id := range st.Delivered.EventIDs() {
				if strings.HasPrefix(id, res+"/_history/") {
					got[res] = append(got[res], id)
				}
			}
		}
		t.Errorf("after quiescence %d current versions never delivered: %v (delivered of those resources: %v; acknowledged: %v)", len(m), m, got, acked)
	}
	seededSeen := 0
	for id := range st.Delivered.EventIDs() {
		if !strings.HasPrefix(id, "Patient/w-") {
			seededSeen++
		}
	}
	if seededSeen < st.Seeded() {
		t.Errorf("%d of %d seeded resources delivered", seededSeen, st.Seeded())
	}
	if m := st.HealthLake.MaxConcurrentExports(); m > 1 {
		t.Errorf("maxConcurrentExports = %d", m)
	}
	if cps, backwards := st.Checkpoints(); backwards {
		t.Errorf("checkpoint moved backwards: %v", cps)
	}
	// The committed windows, oldest first, are contiguous and move forward:
	// each starts where the previous one ended (no gap, no overlap).
	store, err := st.runStore()
	if err != nil {
		t.Fatal(err)
	}
	hist, err := store.History(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].StartTime.Before(hist[j].StartTime) })
	var prev time.Time
	committed := 0
	for _, h := range hist {
		if h.Outcome != runlock.OutcomeSucceeded {
			continue // failed, abandoned and empty runs leave the checkpoint
		}
		committed++
		if !prev.IsZero() && !h.Window.Since.Equal(prev) {
			t.Errorf("run %s window %s does not start at the previous checkpoint %s", h.RunID, h.Window, envelope.FormatTime(prev))
		}
		if !h.Window.Until.After(h.Window.Since) {
			t.Errorf("run %s window %s does not move forward", h.RunID, h.Window)
		}
		prev = h.Window.Until
	}
	if committed == 0 {
		t.Error("no committed run in the history")
	}
	inj := st.Faults.Injected()
	if len(inj) < 3 {
		t.Errorf("few kinds of fault injected: %v", inj)
	}
	writerEvents := 0
	for id := range st.Delivered.EventIDs() {
		if strings.HasPrefix(id, "Patient/w-") {
			writerEvents++
		}
	}
	mu.Lock()
	t.Logf("writer: %d resources written; %d distinct writer events delivered", len(latest), writerEvents)
	mu.Unlock()
	r := st.Report.Snapshot()
	if t.Failed() {
		seen := map[string]bool{}
		for _, w := range r.Windows {
			if w.Outcome == report.OutcomeFailed && !seen[w.Error+w.Cause] {
				seen[w.Error+w.Cause] = true
				t.Logf("failed window %s: %s: %s", w.RunID, w.Error, w.Cause)
			}
		}
	}
	t.Logf("windows %v, faults %v, events %d (distinct %d)", r.Outcomes, inj, r.Events, r.DistinctEvents)
}

func lastCommitted(st *Stack) bool {
	ws := st.Report.Snapshot().Windows
	return len(ws) > 0 && ws[len(ws)-1].Status == "SUCCEEDED"
}

// A restart on the same --state directory carries the data store exactly:
// versions, bytes and lastUpdated survive, the first window after the
// restart starts at the saved checkpoint and publishes nothing for
// unchanged resources, a change after the restart gets the next version,
// and no eventId is ever published again with other content.
func TestStateDirCarriesTheDataStoreAndCheckpointAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := startStack(t, func(o *Options) { o.SampleSize = 6; o.StateDir = dir })
	if w := runWindow(t, first); w.Status != "SUCCEEDED" || first.Delivered.Len() != 6 {
		t.Fatalf("first window %+v delivered %d events, want 6", w, first.Delivered.Len())
	}
	var id string
	for _, d := range first.Delivered.Deliveries() {
		if det := decodeDetail(t, d); det.ResourceType == "Patient" {
			id = det.ResourceID
			break
		}
	}
	if id == "" {
		t.Fatal("the sample has no Patient")
	}
	ds, _ := first.HealthLake.Datastore(first.Res.DatastoreID)
	for i, want := range []string{"2", "3"} {
		cur, ok := ds.Read("Patient", id)
		if !ok {
			t.Fatalf("Patient/%s is not readable", id)
		}
		var m map[string]any
		if err := json.Unmarshal(cur, &m); err != nil {
			t.Fatal(err)
		}
		m["active"] = i%2 == 0
		body, _ := json.Marshal(m)
		if v, err := first.PutResource(ctx, "Patient", id, body); err != nil || v != want {
			t.Fatalf("update %d of Patient/%s: version %q, %v; want %s", i+1, id, v, err, want)
		}
	}
	n := first.Delivered.Len()
	if w := runWindow(t, first); w.Status != "SUCCEEDED" {
		t.Fatalf("second window %+v", w)
	}
	v3 := "Patient/" + id + "/_history/3"
	if got := first.Delivered.Since(n); len(got) != 1 || decodeDetail(t, got[0]).EventID != v3 {
		t.Fatalf("second window delivered %v, want only %s", first.Delivered.EventIDs(), v3)
	}
	cp, err := first.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{} // eventId → resource bytes delivered before the restart
	for _, d := range first.Delivered.Deliveries() {
		det := decodeDetail(t, d)
		before[det.EventID] = string(det.Resource)
	}
	history := func(st *Stack) string {
		t.Helper()
		resp, err := st.FHIR(ctx, http.MethodGet, "Patient/"+id+"/_history", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("history: HTTP %d", resp.StatusCode)
		}
		return string(b)
	}
	historyBefore := history(first)
	// No Persist at exit, as after a crash: the restart finds what was saved
	// after the last window (snapshot first, then checkpoint).
	first.Close()
	if _, err := os.Stat(filepath.Join(dir, stateSnapshot)); err != nil {
		t.Fatalf("no snapshot in the state directory: %v", err)
	}

	second := startStack(t, func(o *Options) { o.StateDir = dir })
	if !second.Restored() || second.Seeded() != 6 {
		t.Errorf("restart restored=%v with %d resources, want the 6 persisted", second.Restored(), second.Seeded())
	}
	if got := second.initialCheckpoint(); !got.Equal(cp) {
		t.Errorf("restart starts from %s, want the saved checkpoint %s", got, cp)
	}
	ds2, _ := second.HealthLake.Datastore(second.Res.DatastoreID)
	if cur, ok := ds2.Read("Patient", id); !ok || string(cur) != before[v3] {
		t.Errorf("Patient/%s after the restart is not version 3 as delivered:\n%s\nwant\n%s", id, cur, before[v3])
	}
	if got := history(second); got != historyBefore {
		t.Errorf("history after the restart differs:\n%s\nwant\n%s", got, historyBefore)
	}
	w := runWindow(t, second)
	if w.Status != "SUCCEEDED" || w.Window == nil || w.Window.Since != envelope.FormatTime(cp) {
		t.Errorf("first window after restart %+v", w)
	}
	// The export window reaches back by the overlap (CDC_OVERLAP, 5 min), so
	// changes just before the checkpoint come again: duplicates of what was
	// delivered before the restart (same eventId), never anything new.
	for id := range second.Delivered.EventIDs() {
		if _, ok := before[id]; !ok {
			t.Errorf("first window after the restart delivered %s, which is new", id)
		}
	}
	afterRestart := second.Delivered.Len()

	m := map[string]any{"resourceType": "Patient", "id": id, "active": true, "gender": "unknown"}
	body, _ := json.Marshal(m)
	if v, err := second.PutResource(ctx, "Patient", id, body); err != nil || v != "4" {
		t.Fatalf("update after the restart: version %q, %v; want 4", v, err)
	}
	if w := runWindow(t, second); w.Status != "SUCCEEDED" {
		t.Fatalf("window after the update %+v", w)
	}
	got := second.Delivered.Since(afterRestart)
	if len(got) != 1 || decodeDetail(t, got[0]).EventID != "Patient/"+id+"/_history/4" {
		t.Errorf("after the update delivered %v, want only Patient/%s/_history/4", second.Delivered.EventIDs(), id)
	}
	for _, d := range second.Delivered.Deliveries() {
		det := decodeDetail(t, d)
		if old, ok := before[det.EventID]; ok && old != string(det.Resource) {
			t.Errorf("%s was delivered again with different content", det.EventID)
		}
	}
}

// A state directory in the older layout (DIR/datastore/{Type}.ndjson) is
// read once as a seed; Persist replaces it with the snapshot, which the
// next start restores. Without any window run, the saved checkpoint is the
// first window's since, so the restart still exports the seeded resource.
func TestStateDirOlderLayoutIsReadOnceAndReplacedByTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	legacy := filepath.Join(dir, "datastore")
	if err := os.MkdirAll(legacy, 0o755); err != nil {
		t.Fatal(err)
	}
	line := `{"resourceType":"Patient","id":"old","meta":{"versionId":"1","lastUpdated":"2026-01-01T00:00:00.000Z"},"active":true}` + "\n"
	if err := os.WriteFile(filepath.Join(legacy, "Patient.ndjson"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	first := startStack(t, func(o *Options) { o.StateDir = dir })
	if first.Restored() || first.Seeded() != 1 {
		t.Fatalf("older layout: restored=%v seeded=%d, want a seed of 1", first.Restored(), first.Seeded())
	}
	since := first.initialCheckpoint()
	if err := first.Persist(ctx); err != nil {
		t.Fatal(err)
	}
	first.Close()
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("the older layout's folder is still there after Persist (%v)", err)
	}
	second := startStack(t, func(o *Options) { o.StateDir = dir })
	if !second.Restored() || second.Seeded() != 1 {
		t.Fatalf("restart: restored=%v seeded=%d, want the snapshot of 1", second.Restored(), second.Seeded())
	}
	if got := second.initialCheckpoint(); !got.Equal(since) {
		t.Errorf("restart starts from %s, want %s", got, since)
	}
	if w := runWindow(t, second); w.Status != "SUCCEEDED" || second.Delivered.Count("Patient/old/_history/1") != 1 {
		t.Errorf("window %+v delivered %v, want Patient/old/_history/1", w, second.Delivered.EventIDs())
	}
}

var (
	cdcctlOnce sync.Once
	cdcctlPath string
	cdcctlErr  error
)

// cdcctl builds cmd/cdcctl once and runs it against st with the variables
// the cdc-local banner prints; it fails the test on a non-zero exit.
func cdcctl(t *testing.T, st *Stack, args ...string) string {
	t.Helper()
	var env []string
	for _, kv := range st.CLIEnv() {
		env = append(env, kv[0]+"="+kv[1])
	}
	return cdcctlWithEnv(t, st, env, args...)
}

// cdcctlWithEnv runs cdcctl against st's endpoint with only PATH, HOME and
// the given variables in its environment.
func cdcctlWithEnv(t *testing.T, st *Stack, env []string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build cdcctl")
	}
	cdcctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cdcctl-*")
		if err != nil {
			cdcctlErr = err
			return
		}
		cdcctlPath = filepath.Join(dir, "cdcctl")
		out, err := exec.Command(gobin, "build", "-o", cdcctlPath, "github.com/healthlake-cdc/healthlake-cdc/cmd/cdcctl").CombinedOutput()
		if err != nil {
			cdcctlErr = fmt.Errorf("build cdcctl: %v: %s", err, out)
		}
	})
	if cdcctlErr != nil {
		t.Fatal(cdcctlErr)
	}
	cmd := exec.Command(cdcctlPath, append(args, "--endpoint", st.Env.URL)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cdcctl %v: %v: %s", args, err, out)
	}
	return string(out)
}

// An execution that stops without its failure handler (abort, execution
// timeout, a failed HandleFailure) leaves its lock and its running export.
// The next execution takes the lock over; it must cancel that export before
// it starts its own, not leave it to the abandoned run's re-check chain
// (which notices only at its next check, up to 15 minutes later in AWS).
func TestTakeOverCancelsTheAbandonedExportBeforeStartingAnother(t *testing.T) {
	// Jobs stay IN_PROGRESS for an hour and the first re-check comes after
	// 200 s, so within the test only the take-over can cancel anything.
	st := startStack(t, func(o *Options) { o.SampleSize = 6; o.ExportDelay = time.Hour; o.RecheckDelay = 200 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first execution's export", func() bool { return len(st.HealthLake.Jobs()) == 1 })
	first := st.HealthLake.Jobs()[0]
	if err := st.SFN.StopExecution(a, "Test.Abort", "stopped without its failure handler"); err != nil {
		t.Fatal(err)
	}
	b, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second execution's export", func() bool { return len(st.HealthLake.Jobs()) == 2 })
	defer func() { _ = st.SFN.StopExecution(b, "Test.Done", "") }()

	// In request order: the abandoned job's DELETE comes before the second POST.
	cancelled := false
	for _, r := range st.HealthLake.Requests() {
		switch {
		case r.Operation == "CancelExport" && strings.HasSuffix(r.Path, "/"+first.JobID):
			cancelled = true
		case r.Operation == "StartExport" && r.Status == http.StatusAccepted && !strings.Contains(string(r.Body), `"`+first.JobName+`"`) && !cancelled:
			t.Fatalf("the second export was started while the abandoned one (%s) still ran", first.JobID)
		}
	}
	if j, _ := st.HealthLake.Job(first.JobID); fhirrest.Running(j.Status) {
		t.Fatalf("abandoned export %s is still %s", first.JobID, j.Status)
	}
}

// TestOverlapDeliversEachVersionOnce: a resource written three times in a
// window gives one event, of its latest version; the next window re-reads
// the minute before its since (the overlap), but a version the previous
// window published is not published again: the run counts it as
// overlapSkipped.
func TestOverlapDeliversEachVersionOnce(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 6 })
	first := runWindow(t, st)
	ctx := context.Background()
	// Three versions in one window: state transfer, the latest one only.
	var v1 string
	for _, family := range []string{"One", "Two", "Once"} {
		v, err := st.PutResource(ctx, "Patient", "once-1", []byte(`{"resourceType":"Patient","id":"once-1","name":[{"family":"`+family+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		v1 = v
	}
	before := st.Delivered.Len()
	second := runWindow(t, st)
	if got := ids(st.Delivered.Since(before)); len(got) != 1 || got[0] != "Patient/once-1/_history/"+v1 {
		t.Fatalf("second window delivered %v", got)
	}
	// The third window starts within a minute of the second's until: its
	// export reads the seeded resources and once-1 again, and skips them.
	before = st.Delivered.Len()
	third := runWindow(t, st)
	if got := ids(st.Delivered.Since(before)); len(got) != 0 {
		t.Errorf("third window delivered %v again; want nothing (each version once)", got)
	}
	if third.Outcome != report.OutcomeCommitted || third.OverlapSkipped < 1 {
		t.Errorf("third window %+v: want committed with its overlap's repeats counted", third)
	}
	distinct, total := st.Delivered.Counts()
	if distinct != total {
		t.Errorf("%d deliveries of %d distinct eventIds over windows %s, %s, %s", total, distinct, first.RunID, second.RunID, third.RunID)
	}
}

// TestExportedLinesAreSplitByCause: every line the windows' exports carried
// is counted once, by why it was exported — here the seeded resources and a
// later write in their windows, and the overlap's re-read of the write.
func TestExportedLinesAreSplitByCause(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = 6 })
	runWindow(t, st)
	if _, err := st.PutResource(context.Background(), "Patient", "cause-1", []byte(`{"resourceType":"Patient","id":"cause-1"}`)); err != nil {
		t.Fatal(err)
	}
	runWindow(t, st)
	runWindow(t, st) // re-reads cause-1 in its overlap
	ex, err := st.Exported(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := ex.ByCause
	if c.Window+c.Overlap+c.BeyondUntil+c.Replay+c.Other != ex.Lines {
		t.Fatalf("causes %+v do not add up to %d lines", c, ex.Lines)
	}
	if c.Other != 0 || c.Replay != 0 || c.Window != 7 || c.Overlap < 1 || ex.Jobs != 3 {
		t.Errorf("causes %+v of %d lines in %d jobs: want the 7 versions in their windows, cause-1 again in the third window's overlap, nothing else", c, ex.Lines, ex.Jobs)
	}
}
