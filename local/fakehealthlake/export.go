package fakehealthlake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Job statuses.
const (
	StatusSubmitted           = "SUBMITTED"
	StatusQueued              = "QUEUED"
	StatusInProgress          = "IN_PROGRESS"
	StatusCompleted           = "COMPLETED"
	StatusCompletedWithErrors = "COMPLETED_WITH_ERRORS"
	StatusFailed              = "FAILED"
	StatusCancelSubmitted     = "CANCEL_SUBMITTED"
	StatusCancelInProgress    = "CANCEL_IN_PROGRESS"
	StatusCancelCompleted     = "CANCEL_COMPLETED"
	StatusCancelFailed        = "CANCEL_FAILED"
)

// submitTimeLayout is how HealthLake's REST status answer writes times.
const submitTimeLayout = "Jan 2, 2006 3:04:05 PM"

type job struct {
	id, name, datastoreID string
	status, message       string
	since                 time.Time
	hasSince              bool
	types                 []string
	s3URI, kmsKeyID, role string
	submitTime, endTime   time.Time
	changedAt             time.Time // when the status last changed
	dueAt                 time.Time // when an IN_PROGRESS job finishes (duration model)
	requestURL            string
	transactionTime       time.Time
	output, errs          []OutputFile
	cancelFails           bool
	seq                   int  // index in Emulator.jobs
	active                bool // listed in Emulator.active
}

// OutputFile is one entry of a job's `output` or `error` list.
type OutputFile struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// JobInfo is a snapshot of an export job for tests and cdc-local.
type JobInfo struct {
	JobID, JobName, DatastoreID, Status, Message string
	// Since is the `_since` of the request (zero when absent); Types its `_type`.
	Since time.Time
	Types []string
	// S3URI, KMSKeyID and DataAccessRoleARN are from the request body.
	S3URI, KMSKeyID, DataAccessRoleARN string
	SubmitTime, EndTime                time.Time
	Output, Errors                     []OutputFile
}

func (j *job) info() JobInfo {
	return JobInfo{
		JobID: j.id, JobName: j.name, DatastoreID: j.datastoreID, Status: j.status, Message: j.message,
		Since: j.since, Types: append([]string(nil), j.types...),
		S3URI: j.s3URI, KMSKeyID: j.kmsKeyID, DataAccessRoleARN: j.role,
		SubmitTime: j.submitTime, EndTime: j.endTime,
		Output: append([]OutputFile(nil), j.output...), Errors: append([]OutputFile(nil), j.errs...),
	}
}

// Jobs returns every export job, oldest first.
func (e *Emulator) Jobs() []JobInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]JobInfo, 0, len(e.jobs))
	for _, j := range e.jobs {
		out = append(out, j.info())
	}
	return out
}

// Job returns one job by id.
func (e *Emulator) Job(id string) (JobInfo, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j, ok := e.jobByID[id]
	if !ok {
		return JobInfo{}, false
	}
	return j.info(), true
}

// SetJobStatus forces a job into a status (and message), for tests of every
// status a poller can see. A job forced into a running status keeps moving on
// unless Options.Manual is set.
func (e *Emulator) SetJobStatus(jobID, status, message string) error {
	defer e.flushEvents()
	e.mu.Lock()
	defer e.mu.Unlock()
	j, ok := e.jobByID[jobID]
	if !ok {
		return fmt.Errorf("set job status: no job %s", jobID)
	}
	j.status, j.message, j.changedAt = status, message, e.opts.Now()
	if status == StatusInProgress {
		j.dueAt = j.changedAt.Add(e.opts.ProcessingDelay)
	}
	if terminal(status) && j.endTime.IsZero() {
		j.endTime = e.opts.Now()
	}
	e.changes++
	if !terminal(status) && !j.active {
		e.activate(j)
	}
	e.prune()
	e.queueEvent(j, j.changedAt)
	return nil
}

// activate lists j among the unfinished jobs, keeping them in the order
// they were submitted. The caller holds e.mu.
func (e *Emulator) activate(j *job) {
	i := sort.Search(len(e.active), func(i int) bool { return e.active[i].seq > j.seq })
	e.active = append(e.active, nil)
	copy(e.active[i+1:], e.active[i:])
	e.active[i] = j
	j.active = true
}

// prune drops finished jobs from the unfinished list, in place. The caller
// holds e.mu.
func (e *Emulator) prune() {
	kept := e.active[:0]
	for _, j := range e.active {
		if terminal(j.status) {
			j.active = false
			continue
		}
		kept = append(kept, j)
	}
	clear(e.active[len(kept):])
	e.active = kept
}

// Advance moves every unfinished job one step on, ignoring ProcessingDelay:
// SUBMITTED → IN_PROGRESS (or QUEUED while another job runs), QUEUED →
// IN_PROGRESS when the slot is free, IN_PROGRESS → COMPLETED (files
// written) or the injected outcome, CANCEL_SUBMITTED → CANCEL_IN_PROGRESS →
// CANCEL_COMPLETED (or CANCEL_FAILED); and each $erase or $bulk-delete job
// SUBMITTED → IN_PROGRESS → COMPLETED (deleting as it completes). Like
// Tick, it then runs the FHIR Subscription model (not forced: only what is
// due).
func (e *Emulator) Advance(ctx context.Context) error {
	defer e.runSubscriptions()
	defer e.flushEvents()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.step(ctx, true)
}

// Tick moves on every job whose time has come (what any request does), so
// that jobs finish, and their events are sent, when the model says rather
// than at the next request. cdc-local calls it on a timer. It also runs the
// FHIR Subscription model: due activations (handshakes) and due
// notifications, handed to Options.OnNotification without the lock.
func (e *Emulator) Tick(ctx context.Context) {
	defer e.runSubscriptions()
	defer e.flushEvents()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(ctx)
}

// RunJobs advances jobs (export, $erase, $bulk-delete) until none is
// unfinished (at most 100 steps), then runs the due FHIR Subscription work.
func (e *Emulator) RunJobs(ctx context.Context) error {
	defer e.runSubscriptions()
	defer e.flushEvents()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 0; i < 100; i++ {
		if err := e.step(ctx, true); err != nil {
			return err
		}
		if len(e.active) == 0 && len(e.pendingDeletes) == 0 {
			return nil
		}
	}
	return errors.New("run jobs: jobs still unfinished after 100 steps")
}

func terminal(status string) bool {
	switch status {
	case StatusCompleted, StatusCompletedWithErrors, StatusFailed, StatusCancelCompleted, StatusCancelFailed:
		return true
	}
	return false
}

// tick advances jobs whose delay has passed, repeatedly (until a step
// changes nothing, at most 8 steps), unless Manual. It looks at the
// unfinished jobs only and allocates nothing when none is due. The caller
// holds e.mu.
func (e *Emulator) tick(ctx context.Context) {
	// Delete jobs follow the clock even when Manual holds export jobs.
	e.advanceDeletes(false)
	if e.opts.Manual {
		return
	}
	for i := 0; i < 8 && len(e.active) > 0; i++ {
		before := e.changes
		_ = e.step(ctx, false)
		if e.changes == before {
			return
		}
	}
}

// step moves each unfinished job at most one status on. force ignores
// ProcessingDelay and the duration model. At most MaxRunningExports jobs are
// IN_PROGRESS; waiting jobs start first in, first out: one still SUBMITTED
// blocks those behind it. The caller holds e.mu.
func (e *Emulator) step(ctx context.Context, force bool) error {
	defer e.prune()
	if force {
		e.advanceDeletes(true)
	}
	now := e.opts.Now()
	due := func(j *job) bool { return force || now.Sub(j.changedAt) >= e.opts.ProcessingDelay }
	running := 0
	for _, j := range e.active {
		if j.status == StatusInProgress {
			running++
		}
	}
	var firstErr error
	// Finish before starting, so a queued job can take a freed slot next step.
	for _, j := range e.active {
		switch j.status {
		case StatusInProgress:
			if force || !now.Before(j.dueAt) {
				at := now
				if !force && !j.dueAt.IsZero() {
					at = j.dueAt // the modelled end, also when noticed later
				}
				if err := e.finish(ctx, j, at); err != nil && firstErr == nil {
					firstErr = err
				}
				running--
			}
		case StatusCancelSubmitted:
			if due(j) {
				e.setStatus(j, StatusCancelInProgress, now)
			}
		case StatusCancelInProgress:
			if due(j) {
				if j.cancelFails {
					e.setStatus(j, StatusCancelFailed, now)
					j.message = "The export job could not be cancelled."
				} else {
					e.setStatus(j, StatusCancelCompleted, now)
				}
				j.endTime = now
			}
		}
	}
	blocked := false
	for _, j := range e.active {
		if j.status != StatusSubmitted && j.status != StatusQueued {
			continue
		}
		if j.status == StatusSubmitted && !due(j) {
			blocked = true // first in, first out: nothing behind it starts first
			continue
		}
		if running < e.opts.MaxRunningExports && !blocked {
			e.setStatus(j, StatusInProgress, now)
			j.dueAt = now.Add(e.exportDuration(j))
			running++
			if running > e.maxRunning {
				e.maxRunning = running
			}
			continue
		}
		blocked = true
		if j.status == StatusSubmitted {
			e.setStatus(j, StatusQueued, now)
		}
	}
	return firstErr
}

// exportDuration is how long j stays IN_PROGRESS: ExportStartup +
// ExportPerMB per MiB it exports, or ProcessingDelay when both are 0. The
// caller holds e.mu.
func (e *Emulator) exportDuration(j *job) time.Duration {
	if e.opts.ExportStartup == 0 && e.opts.ExportPerMB == 0 {
		return e.opts.ProcessingDelay
	}
	var size int64
	if ds, ok := e.datastores[j.datastoreID]; ok && e.opts.ExportPerMB > 0 {
		e.eachSelected(ds, j, e.opts.Now(), func(vi int32) { size += int64(ds.vers[vi].n) + 1 })
	}
	return e.opts.ExportStartup + time.Duration(float64(e.opts.ExportPerMB)*float64(size)/(1<<20))
}

func (e *Emulator) setStatus(j *job, status string, now time.Time) {
	j.status, j.changedAt = status, now
	e.changes++
	e.queueEvent(j, now)
}

// finish writes the job's files and gives it its final status. The caller
// holds e.mu.
func (e *Emulator) finish(ctx context.Context, j *job, now time.Time) error {
	j.endTime, j.transactionTime = now, now
	fault := jobFault{}
	if len(e.nextJobOutcome) > 0 {
		fault, e.nextJobOutcome = e.nextJobOutcome[0], e.nextJobOutcome[1:]
	} else if e.opts.JobFaultRate > 0 && e.rng.Float64() < e.opts.JobFaultRate {
		fault = jobFault{status: StatusFailed, message: "Injected export failure (fault rate)."}
	}
	if fault.status == StatusFailed {
		e.setStatus(j, StatusFailed, now)
		j.message = fault.message
		return nil
	}
	if hook := e.opts.OnExportFinish; hook != nil {
		if ds, ok := e.datastores[j.datastoreID]; ok {
			hook(j.datastoreID, ds.snapshotLocked())
		}
	}
	lost, err := e.writeExport(ctx, j, now, fault.lost)
	if err != nil {
		e.setStatus(j, StatusFailed, now)
		j.message = "Export could not write to S3."
		if errors.Is(err, errStoreRead) {
			j.message = "Export could not read the data store."
		}
		return fmt.Errorf("export job %s: %w", j.id, err)
	}
	if fault.status == StatusCompletedWithErrors {
		if err := e.writeErrorFile(ctx, j, fault.message, lost); err != nil {
			e.setStatus(j, StatusFailed, now)
			j.message = "Export could not write to S3."
			return fmt.Errorf("export job %s: %w", j.id, err)
		}
		e.setStatus(j, StatusCompletedWithErrors, now)
		j.message = fault.message
		return nil
	}
	e.setStatus(j, StatusCompleted, now)
	return nil
}

// jobFolder returns the bucket and the key prefix (ending in "/") of the job's files.
func jobFolder(j *job) (bucket, prefix string, err error) {
	u, err := url.Parse(j.s3URI)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return "", "", fmt.Errorf("S3Uri %q is not s3://bucket/prefix", j.s3URI)
	}
	p := strings.TrimPrefix(u.Path, "/")
	if p != "" && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return u.Host, p + j.datastoreID + "-FHIR_EXPORT-" + j.id + "/", nil
}

func s3URL(bucket, key string) string {
	return (&url.URL{Scheme: "s3", Host: bucket, Path: "/" + key}).String()
}

// eachSelected calls fn, in lastUpdated order, with the version (its vers
// index) of every matching resource an export reading the data store at
// readAt sees: the newest version written at or before readAt −
// VisibilityLag, unless it is a deletion or older than `_since`. A `_since`
// export visits only the versions written since (a binary search of the
// log). The caller holds e.mu.
func (e *Emulator) eachSelected(ds *Datastore, j *job, readAt time.Time, fn func(vi int32)) {
	vers := ds.vers
	start := 0
	if j.hasSince {
		start = sort.Search(len(vers), func(i int) bool { return !vers[i].lastUpdated().Before(j.since) })
	}
	lag := e.opts.VisibilityLag != 0
	cutoff := readAt.Add(-e.opts.VisibilityLag)
	visible := func(v *version) bool { return !lag || !v.lastUpdated().After(cutoff) }
	for i := start; i < len(vers); i++ {
		v := &vers[i]
		if !visible(v) {
			break // the log is in lastUpdated order: nothing later is visible
		}
		r := &ds.res[v.res]
		if r.gone || v.deleted() || (len(j.types) > 0 && !slices.Contains(j.types, typeOf(r.key))) {
			continue
		}
		newest := r.last
		for newest >= 0 && !visible(&vers[newest]) {
			newest = vers[newest].prev
		}
		if newest == int32(i) {
			fn(int32(i))
		}
	}
}

// failedResource names a resource an export left out (COMPLETED_WITH_ERRORS).
type failedResource struct{ typ, id string }

// errStoreRead marks an export that could not read the data store.
var errStoreRead = errors.New("read the data store")

// writeExport writes the version of every matching resource the export sees
// at readAt, leaving out the lose newest ones, which it returns.
func (e *Emulator) writeExport(ctx context.Context, j *job, readAt time.Time, lose int) ([]failedResource, error) {
	ds := e.datastores[j.datastoreID]
	bucket, prefix, err := jobFolder(j)
	if err != nil {
		return nil, err
	}
	var sel []int32
	e.eachSelected(ds, j, readAt, func(vi int32) { sel = append(sel, vi) })
	// sel is in lastUpdated order: the newest are last.
	var lost []failedResource
	if lose > 0 {
		for _, vi := range slices.Backward(sel[len(sel)-min(lose, len(sel)):]) {
			key := ds.res[ds.vers[vi].res].key
			lost = append(lost, failedResource{typ: typeOf(key), id: idOf(key)})
		}
		sel = sel[:len(sel)-min(lose, len(sel))]
	}
	byType := map[string][]int32{}
	for _, vi := range sel {
		t := typeOf(ds.res[ds.vers[vi].res].key)
		byType[t] = append(byType[t], vi)
	}
	if len(byType) == 0 {
		return lost, nil
	}
	if e.opts.S3 == nil {
		return nil, errors.New("no S3 client configured")
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	var buf bytes.Buffer
	for _, t := range types {
		vs := byType[t]
		h := fnv.New64a()
		_, _ = h.Write([]byte(j.id + "/" + t))
		n := h.Sum64() >> 1
		for m, start := 1, 0; start < len(vs); m, start = m+1, start+e.opts.ResourcesPerFile {
			end := min(start+e.opts.ResourcesPerFile, len(vs))
			buf.Reset()
			for _, vi := range vs[start:end] {
				body, err := ds.body(&ds.vers[vi])
				if err != nil {
					return nil, fmt.Errorf("%w: %w", errStoreRead, err)
				}
				buf.Write(body)
				buf.WriteByte('\n')
			}
			key := prefix + t + "/" + t + "-" + strconv.FormatUint(n, 10) + "-" + strconv.Itoa(m) + "-0.ndjson"
			if err := e.put(ctx, bucket, key, buf.Bytes()); err != nil {
				return nil, err
			}
			j.output = append(j.output, OutputFile{Type: t, URL: s3URL(bucket, key)})
		}
	}
	return lost, nil
}

// errorIssue is one issue of an error file's OperationOutcome.
type errorIssue struct {
	Severity    string   `json:"severity"`
	Code        string   `json:"code"`
	Diagnostics string   `json:"diagnostics,omitempty"`
	Expression  []string `json:"expression,omitempty"`
}

// writeErrorFile writes the job's error file, listed in its `error` list:
// NDJSON OperationOutcome resources (the FHIR bulk data error format), one
// per lost resource, or one carrying message when none was lost.
func (e *Emulator) writeErrorFile(ctx context.Context, j *job, message string, lost []failedResource) error {
	bucket, prefix, err := jobFolder(j)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	line := func(is errorIssue) {
		b, _ := json.Marshal(struct {
			ResourceType string       `json:"resourceType"`
			Issue        []errorIssue `json:"issue"`
		}{"OperationOutcome", []errorIssue{is}})
		buf.Write(b)
		buf.WriteByte('\n')
	}
	for _, r := range lost {
		line(errorIssue{Severity: "error", Code: "exception", Diagnostics: "Failed to export resource " + r.typ + "/" + r.id,
			Expression: []string{r.typ + "/" + r.id}})
	}
	if len(lost) == 0 {
		line(errorIssue{Severity: "error", Code: "processing", Diagnostics: message})
	}
	key := prefix + "OperationOutcome/OperationOutcome-errors-1-0.ndjson"
	if err := e.put(ctx, bucket, key, buf.Bytes()); err != nil {
		return err
	}
	j.errs = append(j.errs, OutputFile{Type: "OperationOutcome", URL: s3URL(bucket, key)})
	return nil
}

func (e *Emulator) put(ctx context.Context, bucket, key string, body []byte) error {
	if e.opts.S3 == nil {
		return errors.New("no S3 client configured")
	}
	_, err := e.opts.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/fhir+ndjson"),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", bucket, key, err)
	}
	return nil
}

func newJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

type startBody struct {
	JobName          string `json:"JobName"`
	OutputDataConfig struct {
		S3Configuration struct {
			S3Uri    string `json:"S3Uri"`
			KmsKeyId string `json:"KmsKeyId"`
		} `json:"S3Configuration"`
	} `json:"OutputDataConfig"`
	DataAccessRoleArn string `json:"DataAccessRoleArn"`
}

// startExport serves POST/GET …/r4/$export.
func (e *Emulator) startExport(w http.ResponseWriter, r *http.Request, ds *Datastore, body []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fail := func(status int, code, msg string) {
		e.record(r, body, status)
		writeOutcome(w, status, code, msg)
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		fail(http.StatusMethodNotAllowed, "not-supported", "unsupported method")
		return
	}
	if r.Header.Get("Prefer") != "respond-async" {
		fail(http.StatusBadRequest, "invalid", "Prefer: respond-async is required")
		return
	}
	var scripted *startFault
	if len(e.startFaults) > 0 {
		scripted = &e.startFaults[0]
		e.startFaults = e.startFaults[1:]
		if !scripted.accept {
			fail(scripted.status, "invalid", scripted.message)
			return
		}
	}
	var sb startBody
	if len(bytes.TrimSpace(body)) == 0 && r.Method == http.MethodGet && e.opts.DefaultExportS3URI != "" {
		sb.JobName = "export-" + strconv.Itoa(len(e.jobs)+1)
		sb.OutputDataConfig.S3Configuration.S3Uri = e.opts.DefaultExportS3URI
		sb.DataAccessRoleArn = e.opts.DefaultExportRoleARN
		if sb.DataAccessRoleArn == "" {
			sb.DataAccessRoleArn = "arn:aws:iam::" + e.opts.AccountID + ":role/healthlake-export"
		}
	} else if err := json.Unmarshal(body, &sb); err != nil {
		fail(http.StatusBadRequest, "invalid", "request body is not valid JSON")
		return
	}
	if sb.JobName == "" || len(sb.JobName) > 64 {
		fail(http.StatusBadRequest, "invalid", "JobName must be 1 to 64 characters")
		return
	}
	if sb.DataAccessRoleArn == "" {
		fail(http.StatusBadRequest, "invalid", "DataAccessRoleArn is required")
		return
	}
	j := &job{
		id: newJobID(), name: sb.JobName, datastoreID: ds.id, status: StatusSubmitted,
		s3URI: sb.OutputDataConfig.S3Configuration.S3Uri, kmsKeyID: sb.OutputDataConfig.S3Configuration.KmsKeyId,
		role: sb.DataAccessRoleArn, submitTime: e.opts.Now(), changedAt: e.opts.Now(),
		requestURL: "https://healthlake." + e.opts.Region + ".amazonaws.com" + r.URL.RequestURI(),
	}
	if _, _, err := jobFolder(j); err != nil {
		fail(http.StatusBadRequest, "invalid", "OutputDataConfig.S3Configuration.S3Uri must be s3://bucket/prefix")
		return
	}
	q := r.URL.Query()
	if s := q.Get("_since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			fail(http.StatusBadRequest, "invalid", "_since is not a FHIR instant")
			return
		}
		j.since, j.hasSince = t, true
	}
	if s := q.Get("_type"); s != "" {
		for _, t := range strings.Split(s, ",") {
			if _, ok := validators[t]; !ok {
				fail(http.StatusBadRequest, "invalid", "_type names an unsupported resource type")
				return
			}
			j.types = append(j.types, t)
		}
	}
	j.seq = len(e.jobs)
	e.jobs = append(e.jobs, j)
	e.jobByID[j.id] = j
	e.activate(j)
	e.queueEvent(j, j.submitTime)
	if scripted != nil {
		fail(scripted.status, "exception", scripted.message)
		return
	}
	e.record(r, body, http.StatusAccepted)
	writeJSON(w, http.StatusAccepted, "application/json", map[string]string{
		"datastoreId": ds.id, "jobStatus": StatusSubmitted, "jobId": j.id,
	})
}

// restStatus is the REST status answer.
type restStatus struct {
	ExportJobProperties restJobProperties `json:"exportJobProperties"`
	TransactionTime     string            `json:"transactionTime,omitempty"`
	Request             string            `json:"request"`
	RequiresAccessToken bool              `json:"requiresAccessToken"`
	Output              []OutputFile      `json:"output,omitempty"`
	Error               []OutputFile      `json:"error,omitempty"`
}

type restJobProperties struct {
	JobID            string `json:"jobId"`
	JobName          string `json:"jobName"`
	JobStatus        string `json:"jobStatus"`
	SubmitTime       string `json:"submitTime"`
	EndTime          string `json:"endTime,omitempty"`
	DatastoreID      string `json:"datastoreId"`
	Message          string `json:"message,omitempty"`
	OutputDataConfig struct {
		S3Configuration struct {
			S3Uri    string `json:"s3Uri"`
			KmsKeyId string `json:"kmsKeyId,omitempty"`
		} `json:"s3Configuration"`
	} `json:"outputDataConfig"`
	DataAccessRoleArn string `json:"dataAccessRoleArn"`
}

// jobOr404 finds a job of the data store, or answers 404 as HealthLake does.
// The caller holds e.mu.
func (e *Emulator) jobOr404(w http.ResponseWriter, r *http.Request, ds *Datastore, jobID string) (*job, bool) {
	j, ok := e.jobByID[jobID]
	if !ok || j.datastoreID != ds.id {
		e.record(r, nil, http.StatusNotFound)
		writeOutcome(w, http.StatusNotFound, "not-found", "export job "+jobID+" not found")
		return nil, false
	}
	return j, true
}

func (e *Emulator) describeExport(w http.ResponseWriter, r *http.Request, ds *Datastore, jobID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(r.Context())
	j, ok := e.jobOr404(w, r, ds, jobID)
	if !ok {
		return
	}
	var p restJobProperties
	p.JobID, p.JobName, p.JobStatus, p.DatastoreID, p.Message = j.id, j.name, j.status, j.datastoreID, j.message
	p.SubmitTime = j.submitTime.UTC().Format(submitTimeLayout)
	if !j.endTime.IsZero() {
		p.EndTime = j.endTime.UTC().Format(submitTimeLayout)
	}
	if bucket, prefix, err := jobFolder(j); err == nil {
		p.OutputDataConfig.S3Configuration.S3Uri = s3URL(bucket, prefix)
	}
	p.OutputDataConfig.S3Configuration.KmsKeyId = j.kmsKeyID
	p.DataAccessRoleArn = j.role
	st := restStatus{ExportJobProperties: p, Request: j.requestURL, Output: j.output, Error: j.errs}
	if !j.transactionTime.IsZero() {
		st.TransactionTime = j.transactionTime.UTC().Format(InstantLayout)
	}
	if j.status == StatusCompletedWithErrors && st.Error == nil {
		st.Error = []OutputFile{}
	}
	e.record(r, nil, http.StatusOK)
	writeJSON(w, http.StatusOK, "application/json", st)
}

func (e *Emulator) cancelExport(w http.ResponseWriter, r *http.Request, ds *Datastore, jobID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(r.Context())
	j, ok := e.jobOr404(w, r, ds, jobID)
	if !ok {
		return
	}
	switch j.status {
	case StatusSubmitted, StatusQueued, StatusInProgress:
	default:
		e.record(r, nil, http.StatusBadRequest)
		writeOutcome(w, http.StatusBadRequest, "invalid", "export job "+jobID+" is "+j.status+" and cannot be cancelled")
		return
	}
	if e.failNextCancel > 0 {
		e.failNextCancel--
		j.cancelFails = true
	}
	e.setStatus(j, StatusCancelSubmitted, e.opts.Now())
	e.record(r, nil, http.StatusAccepted)
	writeJSON(w, http.StatusAccepted, "application/json", map[string]string{
		"datastoreId": ds.id, "jobStatus": StatusCancelSubmitted, "jobId": j.id,
	})
}
