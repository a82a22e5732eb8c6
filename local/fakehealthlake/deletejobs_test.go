package fakehealthlake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// startDeleteJob POSTs a $erase or $bulk-delete and returns the job id.
func startDeleteJob(t *testing.T, f *fx, path string) string {
	t.Helper()
	var out map[string]string
	if err := json.Unmarshal([]byte(mustStatus(t, f, http.StatusAccepted, http.MethodPost, path, "")), &out); err != nil {
		t.Fatal(err)
	}
	if out["jobStatus"] != "SUBMITTED" || len(out["jobId"]) != 32 || len(out) != 2 {
		t.Fatalf("POST %s answered %v", path, out)
	}
	return out["jobId"]
}

// deleteJobStatus is GET $erase/{id} or $bulk-delete/{id}.
type deleteJobStatus struct {
	DatastoreID           string `json:"datastoreId"`
	JobID                 string `json:"jobId"`
	Status                string `json:"status"`
	SubmittedTime         string `json:"submittedTime"`
	TotalResourcesDeleted *int   `json:"totalResourcesDeleted"`
}

func deleteStatus(t *testing.T, f *fx, kind, jobID string) deleteJobStatus {
	t.Helper()
	var s deleteJobStatus
	if err := json.Unmarshal([]byte(mustStatus(t, f, http.StatusOK, http.MethodGet, kind+"/"+jobID, "")), &s); err != nil {
		t.Fatal(err)
	}
	if s.DatastoreID != "ds1" || s.JobID != jobID {
		t.Fatalf("status of %s: %+v", jobID, s)
	}
	return s
}

// $erase: SUBMITTED, IN_PROGRESS, then COMPLETED after the modelled delay,
// and the resource and every version of it gone: reads and history 404,
// type history and exports leave it out.
func TestErase(t *testing.T) { eachStore(t, testErase) }

func testErase(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.EraseDelay = time.Minute })
	t0 := f.clk.Now()
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	mustStatus(t, f, http.StatusOK, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1","active":true}`)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p2", `{"resourceType":"Patient","id":"p2"}`)
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p3", `{"resourceType":"Patient","id":"p3"}`)
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Patient/p3", "")

	job := startDeleteJob(t, f, "Patient/p1/$erase?deleteAuditEvent=true")
	if s := deleteStatus(t, f, "$erase", job); s.Status != "SUBMITTED" || s.SubmittedTime != "2026-11-21T10:00:00.000Z" || s.TotalResourcesDeleted != nil {
		t.Errorf("just submitted: %+v", s)
	}
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p1", "")
	f.clk.Set(t0.Add(time.Minute))
	if s := deleteStatus(t, f, "$erase", job); s.Status != "IN_PROGRESS" {
		t.Errorf("after one delay: %+v", s)
	}
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p1/_history", "")
	// A deleted resource can be erased too (its history goes).
	job3 := startDeleteJob(t, f, "Patient/p3/$erase")
	f.clk.Set(t0.Add(3 * time.Minute))
	// The next request of any kind runs what is due.
	mustStatus(t, f, http.StatusNotFound, http.MethodGet, "Patient/p1", "")
	if s := deleteStatus(t, f, "$erase", job); s.Status != "COMPLETED" {
		t.Errorf("after two delays: %+v", s)
	}
	if s := deleteStatus(t, f, "$erase", job3); s.Status != "COMPLETED" {
		t.Errorf("erase of a deleted resource: %+v", s)
	}
	for _, path := range []string{"Patient/p1", "Patient/p1/_history", "Patient/p1/_history/1", "Patient/p3", "Patient/p3/_history"} {
		mustStatus(t, f, http.StatusNotFound, http.MethodGet, path, "")
	}
	if got, _ := allPages(t, f, "Patient/_history", nil); got != "POST Patient/p2/_history/1" {
		t.Errorf("type history after erase: %s", got)
	}
	if got := exportAll(t, f); len(got["Patient"]) != 1 || !strings.Contains(got["Patient"][0], `"id":"p2"`) {
		t.Errorf("export after erase: %v", got)
	}
	if jobs := f.emu.DeleteJobs(); len(jobs) != 2 || jobs[0].Kind != fakehealthlake.JobKindErase || jobs[0].Deleted != 1 || jobs[0].ResourceID != "p1" {
		t.Errorf("DeleteJobs = %+v", jobs)
	}
	// The id starts again.
	st, res := f.fhir(t, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	if v, _ := meta(res); st != http.StatusCreated || v != "1" {
		t.Errorf("re-create after erase = %d version %s", st, v)
	}

	mustStatus(t, f, http.StatusNotFound, http.MethodPost, "Patient/nobody/$erase", "")
	mustStatus(t, f, http.StatusBadRequest, http.MethodPost, "Patient/p2/$erase?deleteAuditEvent=maybe", "")
	mustStatus(t, f, http.StatusBadRequest, http.MethodPost, "Patient/p2/_history/1/$erase", "")
	mustStatus(t, f, http.StatusMethodNotAllowed, http.MethodGet, "Patient/p2/$erase", "")
	mustStatus(t, f, http.StatusNotFound, http.MethodGet, "$erase/0123456789abcdef0123456789abcdef", "")
	mustStatus(t, f, http.StatusNotFound, http.MethodGet, "$bulk-delete/"+job, "")
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p2", "")
}

// $bulk-delete: the live resources of the type last updated in the range;
// soft by default (a DELETE version each, history kept), hard removes them
// with their history; `_since` with start/end is 400.
func TestBulkDelete(t *testing.T) { eachStore(t, testBulkDelete) }

func testBulkDelete(t *testing.T) {
	f := setup(t, func(o *fakehealthlake.Options) { o.BulkDeleteDelay = time.Second })
	t0 := f.clk.Now()
	obs := func(id string) string {
		return `{"resourceType":"Observation","id":"` + id + `","status":"final","code":{}}`
	}
	for i := 1; i <= 5; i++ { // o1 at 10:00:00 … o5 at 10:00:04
		f.clk.Set(t0.Add(time.Duration(i-1) * time.Second))
		mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o"+strconv.Itoa(i), obs("o"+strconv.Itoa(i)))
	}
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Patient/p1", `{"resourceType":"Patient","id":"p1"}`)
	mustStatus(t, f, http.StatusNoContent, http.MethodDelete, "Observation/o3", "")

	for _, q := range []string{
		"_since=2026-11-21T10:00:00Z&start=2026-11-21T10:00:00Z", "_since=2026-11-21T10:00:00Z&end=2026-11-21T10:00:00Z",
		"start=soon", "isHardDelete=yes", "isHardDelete=true&deleteVersionHistory=false",
	} {
		mustStatus(t, f, http.StatusBadRequest, http.MethodPost, "Observation/$bulk-delete?"+q, "")
	}
	mustStatus(t, f, http.StatusMethodNotAllowed, http.MethodGet, "Observation/$bulk-delete", "")

	f.clk.Set(t0.Add(10 * time.Second))
	job := startDeleteJob(t, f, "Observation/$bulk-delete?start=2026-11-21T10:00:01Z&end=2026-11-21T10:00:03.000Z&deleteAuditEvent=false")
	if s := deleteStatus(t, f, "$bulk-delete", job); s.Status != "SUBMITTED" {
		t.Errorf("submitted: %+v", s)
	}
	f.clk.Set(t0.Add(12 * time.Second))
	if s := deleteStatus(t, f, "$bulk-delete", job); s.Status != "COMPLETED" || s.TotalResourcesDeleted == nil || *s.TotalResourcesDeleted != 2 {
		t.Errorf("completed: %+v", s)
	}
	for id, want := range map[string]int{"o1": 200, "o2": 410, "o3": 410, "o4": 410, "o5": 200} {
		mustStatus(t, f, want, http.MethodGet, "Observation/"+id, "")
	}
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Patient/p1", "")
	h := hist(t, f, "Observation/o2/_history", nil)
	if summary(h) != "DELETE Observation/o2/_history/2, POST Observation/o2/_history/1" || h.Entry[0].Response.LastModified != "2026-11-21T10:00:12.000Z" {
		t.Errorf("soft-deleted history: %s %+v", summary(h), h.Entry[0].Response)
	}
	if got := summary(hist(t, f, "Observation/_history?_count=2", nil)); got != "DELETE Observation/o4/_history/2, DELETE Observation/o2/_history/2" {
		t.Errorf("type history after the soft bulk delete: %s", got)
	}

	// Hard, everything (no range): the live o1 and o5 go with their history;
	// a resource written after the submission is left.
	job = startDeleteJob(t, f, "Observation/$bulk-delete?isHardDelete=true")
	f.clk.Set(t0.Add(12*time.Second + 500*time.Millisecond))
	mustStatus(t, f, http.StatusCreated, http.MethodPut, "Observation/o6", obs("o6"))
	if err := f.emu.RunJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := deleteStatus(t, f, "$bulk-delete", job); s.Status != "COMPLETED" || *s.TotalResourcesDeleted != 2 {
		t.Errorf("hard: %+v", s)
	}
	for _, path := range []string{"Observation/o1", "Observation/o1/_history", "Observation/o5/_history"} {
		mustStatus(t, f, http.StatusNotFound, http.MethodGet, path, "")
	}
	mustStatus(t, f, http.StatusGone, http.MethodGet, "Observation/o2", "")
	mustStatus(t, f, http.StatusOK, http.MethodGet, "Observation/o6", "")
	if got := exportAll(t, f); len(got["Observation"]) != 1 || len(got["Patient"]) != 1 {
		t.Errorf("export after the hard bulk delete: %v", got)
	}
	if jobs := f.emu.DeleteJobs(); len(jobs) != 2 || !jobs[1].Hard || jobs[0].Hard || jobs[1].ResourceType != "Observation" {
		t.Errorf("DeleteJobs = %+v", jobs)
	}
}

// loadBulk loads n Observations and n Patients (ids x0…) into ds.
func loadBulk(tb testing.TB, ds *fakehealthlake.Datastore, n int) {
	tb.Helper()
	for i := 0; i < n; i++ {
		id := "x" + strconv.Itoa(i)
		if _, err := ds.Load("Observation", id, []byte(`{"resourceType":"Observation","id":"`+id+`","status":"final","code":{}}`)); err != nil {
			tb.Fatal(err)
		}
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
			tb.Fatal(err)
		}
	}
}

// serveFHIR answers one FHIR request of data store ds1 through e.
func serveFHIR(e *fakehealthlake.Emulator, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(method, "/datastore/ds1/r4/"+path, nil))
	return rec
}

// bulkDeleteBoth runs a soft $bulk-delete of every Observation and a hard
// one of every Patient, a second apart, and reads a type-history page
// after each.
func bulkDeleteBoth(tb testing.TB, e *fakehealthlake.Emulator, clk *clock) {
	tb.Helper()
	for _, c := range []struct{ typ, query string }{{"Observation", ""}, {"Patient", "?isHardDelete=true"}} {
		clk.Set(clk.Now().Add(time.Second))
		if rec := serveFHIR(e, http.MethodPost, c.typ+"/$bulk-delete"+c.query); rec.Code != http.StatusAccepted {
			tb.Fatalf("bulk delete = %d %s", rec.Code, rec.Body)
		}
		if err := e.RunJobs(context.Background()); err != nil {
			tb.Fatal(err)
		}
		if rec := serveFHIR(e, http.MethodGet, c.typ+"/_history?_count=10"); rec.Code != http.StatusOK {
			tb.Fatalf("type history page after %s: %d", c.typ, rec.Code)
		}
	}
}

// A $bulk-delete of 100,000 resources, soft (Observation) or hard
// (Patient), deletes every one of them, and the type's history still
// answers a page afterwards. How long it takes is BenchmarkBulkDelete's.
func TestBulkDeleteOfManyResources(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 200,000 resources")
	}
	const n = 100_000
	e, ds, clk := benchEmulator(t, nil)
	loadBulk(t, ds, n)
	bulkDeleteBoth(t, e, clk)
	jobs := e.DeleteJobs()
	if len(jobs) != 2 || jobs[0].Deleted != n || jobs[1].Deleted != n || ds.Count() != 0 {
		t.Errorf("jobs %+v, %d left", jobs, ds.Count())
	}
}

// BenchmarkBulkDelete times a soft $bulk-delete of 100,000 Observations
// and a hard one of 100,000 Patients (the load is not timed), and the
// type-history page read after each.
func BenchmarkBulkDelete(b *testing.B) {
	const n = 100_000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e, ds, clk := benchEmulator(b, nil)
		loadBulk(b, ds, n)
		b.StartTimer()
		bulkDeleteBoth(b, e, clk)
	}
	b.ReportMetric(float64(2*n), "resources/op")
}
