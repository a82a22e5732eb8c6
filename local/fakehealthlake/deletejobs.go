package fakehealthlake

import (
	"net/http"
	"net/url"
	"sort"
	"time"
)

// Kinds of delete job.
const (
	JobKindErase      = "$erase"
	JobKindBulkDelete = "$bulk-delete"
)

// deleteJob is one `$erase` or `$bulk-delete` job. It is SUBMITTED for the
// kind's delay, then IN_PROGRESS for as long, then runs and is COMPLETED.
type deleteJob struct {
	id, kind, datastoreID string
	status                string
	submitTime, endTime   time.Time
	changedAt             time.Time
	// $erase: the resource.
	typ, resID string
	// $bulk-delete: hard, and lastUpdated bounds (Unix ms, inclusive); to
	// is the submission time unless `end` was given.
	hard     bool
	from, to int64
	// deleted counts the resources the job deleted or erased.
	deleted int
}

// DeleteJobInfo is a snapshot of a `$erase` or `$bulk-delete` job.
type DeleteJobInfo struct {
	// Kind is JobKindErase or JobKindBulkDelete.
	JobID, Kind, DatastoreID, Status string
	// ResourceType is the type erased or bulk-deleted; ResourceID the
	// resource erased.
	ResourceType, ResourceID string
	// Hard is a hard $bulk-delete (every $erase is).
	Hard                bool
	SubmitTime, EndTime time.Time
	// Deleted counts the resources deleted (once COMPLETED).
	Deleted int
}

func (j *deleteJob) info() DeleteJobInfo {
	return DeleteJobInfo{
		JobID: j.id, Kind: j.kind, DatastoreID: j.datastoreID, Status: j.status,
		ResourceType: j.typ, ResourceID: j.resID, Hard: j.hard || j.kind == JobKindErase,
		SubmitTime: j.submitTime, EndTime: j.endTime, Deleted: j.deleted,
	}
}

// DeleteJobs returns every $erase and $bulk-delete job, oldest first.
func (e *Emulator) DeleteJobs() []DeleteJobInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]DeleteJobInfo, 0, len(e.deleteOrder))
	for _, j := range e.deleteOrder {
		out = append(out, j.info())
	}
	return out
}

// SetDeleteDelays changes Options.EraseDelay and Options.BulkDeleteDelay
// for jobs that move on from now on.
func (e *Emulator) SetDeleteDelays(erase, bulkDelete time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.opts.EraseDelay, e.opts.BulkDeleteDelay = erase, bulkDelete
}

// delay is how long j stays in each status before COMPLETED.
func (e *Emulator) delay(j *deleteJob) time.Duration {
	if j.kind == JobKindErase {
		return e.opts.EraseDelay
	}
	return e.opts.BulkDeleteDelay
}

// advanceDeletes moves on the delete jobs whose delay has passed (force:
// one status on, whatever the clock), running a job as it completes. The
// caller holds e.mu.
func (e *Emulator) advanceDeletes(force bool) {
	if len(e.pendingDeletes) == 0 {
		return
	}
	now := e.opts.Now()
	kept := e.pendingDeletes[:0]
	for _, j := range e.pendingDeletes {
		d := e.delay(j)
		if j.status == StatusSubmitted && (force || !now.Before(j.changedAt.Add(d))) {
			at := now
			if !force {
				at = j.changedAt.Add(d) // the modelled time, also when noticed later
			}
			j.status, j.changedAt = StatusInProgress, at
			if force {
				kept = append(kept, j)
				continue
			}
		}
		if j.status == StatusInProgress && (force || !now.Before(j.changedAt.Add(d))) {
			e.runDelete(j)
			j.status, j.changedAt, j.endTime = StatusCompleted, now, now
			continue
		}
		kept = append(kept, j)
	}
	clear(e.pendingDeletes[len(kept):])
	e.pendingDeletes = kept
}

// runDelete does a job's deletion. The caller holds e.mu.
func (e *Emulator) runDelete(j *deleteJob) {
	ds, ok := e.datastores[j.datastoreID]
	if !ok {
		return
	}
	if j.kind == JobKindErase {
		if ri, ok := ds.lookup(j.typ, j.resID); ok {
			ds.eraseLocked(ri)
			j.deleted = 1
		}
		return
	}
	tl, ok := ds.byType[j.typ]
	if !ok {
		return
	}
	vers := tl.vers
	lo := sort.Search(len(vers), func(i int) bool { return ds.vers[vers[i]].ms >= j.from })
	hi := sort.Search(len(vers), func(i int) bool { return ds.vers[vers[i]].ms > j.to })
	// The live resources whose current version was written in the range;
	// chosen before any is deleted (a soft deletion adds to the type's log).
	var sel []int32
	for _, vi := range vers[lo:max(lo, hi)] {
		v := &ds.vers[vi]
		if r := &ds.res[v.res]; !r.gone && r.last == vi && !v.deleted() {
			sel = append(sel, v.res)
		}
	}
	for _, ri := range sel {
		if j.hard {
			ds.eraseLocked(ri)
			continue
		}
		cur := ds.current(ri)
		v := ds.appendVersion(ri, version{ms: e.stamp(cur.ms), vid: cur.vid + 1, prev: ds.res[ri].last, res: ri})
		e.subsWritten(ds, ri, v, nil, false)
	}
	j.deleted = len(sel)
}

// submitDelete lists a new job and answers 202 with its id. The caller
// holds e.mu.
func (e *Emulator) submitDelete(w http.ResponseWriter, j *deleteJob) {
	j.id, j.status = newJobID(), StatusSubmitted
	j.submitTime = e.opts.Now()
	j.changedAt = j.submitTime
	e.deleteJobs[j.id] = j
	e.deleteOrder = append(e.deleteOrder, j)
	e.pendingDeletes = append(e.pendingDeletes, j)
	writeJSON(w, http.StatusAccepted, "application/json", map[string]string{"jobId": j.id, "jobStatus": StatusSubmitted})
}

// boolParam reads an optional boolean query parameter ("true" or "false").
func boolParam(q url.Values, name string, def bool) (bool, bool) {
	switch q.Get(name) {
	case "":
		return def, true
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// instantParam reads an optional FHIR instant query parameter as Unix ms
// rounded up (lower bounds) or down (upper bounds).
func instantParam(q url.Values, name string, up bool) (int64, bool, bool) {
	s := q.Get(name)
	if s == "" {
		return 0, false, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false, false
	}
	ms := t.UnixMilli()
	if up && t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms, true, true
}

// startErase serves POST {Type}/{id}/$erase (HealthLake "Permanently
// Removing Resources with $erase"): a job that, once COMPLETED, has removed
// the resource and all its versions. 404 for a resource never stored or
// already erased. The caller holds e.mu.
func (e *Emulator) startErase(w http.ResponseWriter, r *http.Request, ds *Datastore, typ, id string) {
	if _, ok := boolParam(r.URL.Query(), "deleteAuditEvent", false); !ok {
		writeOutcome(w, http.StatusBadRequest, "invalid", "deleteAuditEvent must be true or false")
		return
	}
	if _, ok := ds.lookup(typ, id); !ok {
		writeOutcome(w, http.StatusNotFound, "not-found", "the resource to erase was not found")
		return
	}
	e.submitDelete(w, &deleteJob{kind: JobKindErase, datastoreID: ds.id, typ: typ, resID: id})
}

// startBulkDelete serves POST {Type}/$bulk-delete (HealthLake "Deleting
// Resource Types with $bulk-delete"): a job that deletes the live resources
// of the type last updated in the range (`_since`, or `start` and `end`;
// `end` defaults to the submission time). The caller holds e.mu.
func (e *Emulator) startBulkDelete(w http.ResponseWriter, r *http.Request, ds *Datastore, typ string) {
	q := r.URL.Query()
	hard, ok1 := boolParam(q, "isHardDelete", false)
	history, ok2 := boolParam(q, "deleteVersionHistory", hard)
	_, ok3 := boolParam(q, "deleteAuditEvent", true)
	if !ok1 || !ok2 || !ok3 {
		writeOutcome(w, http.StatusBadRequest, "invalid", "isHardDelete, deleteVersionHistory and deleteAuditEvent must be true or false")
		return
	}
	if hard && !history {
		writeOutcome(w, http.StatusBadRequest, "not-supported", "a hard delete that keeps the version history is not emulated")
		return
	}
	since, hasSince, ok1 := instantParam(q, "_since", true)
	start, hasStart, ok2 := instantParam(q, "start", true)
	end, hasEnd, ok3 := instantParam(q, "end", false)
	switch {
	case !ok1 || !ok2 || !ok3:
		writeOutcome(w, http.StatusBadRequest, "invalid", "_since, start and end must be FHIR instants")
		return
	case hasSince && (hasStart || hasEnd):
		writeOutcome(w, http.StatusBadRequest, "invalid", "_since cannot be used with start or end")
		return
	}
	j := &deleteJob{kind: JobKindBulkDelete, datastoreID: ds.id, typ: typ, hard: hard, from: minMs, to: e.opts.Now().UnixMilli()}
	switch {
	case hasSince:
		j.from = since
	case hasStart:
		j.from = start
	}
	if hasEnd {
		j.to = end
	}
	e.submitDelete(w, j)
}

// describeDeleteJob serves GET $erase/{jobId} and GET $bulk-delete/{jobId}.
// The caller must not hold e.mu.
func (e *Emulator) describeDeleteJob(w http.ResponseWriter, ds *Datastore, kind, jobID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advanceDeletes(false)
	j, ok := e.deleteJobs[jobID]
	if !ok || j.kind != kind || j.datastoreID != ds.id {
		writeOutcome(w, http.StatusNotFound, "not-found", kind+" job "+jobID+" not found")
		return
	}
	out := struct {
		DatastoreID   string `json:"datastoreId"`
		JobID         string `json:"jobId"`
		Status        string `json:"status"`
		SubmittedTime string `json:"submittedTime"`
		// TotalResourcesDeleted is modelled: the $bulk-delete page says the
		// status tracks deletion counts without naming the field.
		TotalResourcesDeleted *int `json:"totalResourcesDeleted,omitempty"`
	}{DatastoreID: j.datastoreID, JobID: j.id, Status: j.status, SubmittedTime: j.submitTime.UTC().Format(InstantLayout)}
	if j.kind == JobKindBulkDelete && j.status == StatusCompleted {
		out.TotalResourcesDeleted = &j.deleted
	}
	writeJSON(w, http.StatusOK, "application/json", out)
}
