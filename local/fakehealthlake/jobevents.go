package fakehealthlake

import (
	"encoding/json"
	"time"
)

// JobEventSource is the source of HealthLake's events on the default bus.
const JobEventSource = "aws.healthlake"

// Export job detail types HealthLake sends to EventBridge (Amazon EventBridge
// events reference, "AWS HealthLake events"; delivery type durable). No
// event is documented for the cancel statuses, so none is sent for them.
const (
	DetailExportSubmitted           = "Export Job Submitted"
	DetailExportQueued              = "Export Job Queued"
	DetailExportInProgress          = "Export Job In Progress"
	DetailExportCompleted           = "Export Job Completed"
	DetailExportCompletedWithErrors = "Export Job Completed With Errors"
	DetailExportFailed              = "Export Job Failed"
)

// exportDetailTypes maps a job status to its event's detail type.
var exportDetailTypes = map[string]string{
	StatusSubmitted:           DetailExportSubmitted,
	StatusQueued:              DetailExportQueued,
	StatusInProgress:          DetailExportInProgress,
	StatusCompleted:           DetailExportCompleted,
	StatusCompletedWithErrors: DetailExportCompletedWithErrors,
	StatusFailed:              DetailExportFailed,
}

// JobEvent is one HealthLake job state event as the default bus receives it.
type JobEvent struct {
	Source     string
	DetailType string
	// Time is when the status changed (the modelled time for a job that
	// finished between two requests).
	Time time.Time
	// Resources holds the data store's ARN.
	Resources []string
	// Detail is the event detail: datastoreId, jobId, submitTime and
	// outputDataConfig.s3Uri, the fields the EventBridge schema of these
	// events carries (see docs/LOCAL.md).
	Detail json.RawMessage
}

type jobEventDetail struct {
	DatastoreID      string `json:"datastoreId"`
	JobID            string `json:"jobId"`
	SubmitTime       string `json:"submitTime"`
	OutputDataConfig struct {
		S3URI string `json:"s3Uri"`
	} `json:"outputDataConfig"`
}

// queueEvent notes the event of j's new status; the caller holds e.mu.
func (e *Emulator) queueEvent(j *job, at time.Time) {
	if e.opts.OnJobEvent == nil {
		return
	}
	dt, ok := exportDetailTypes[j.status]
	if !ok {
		return
	}
	var d jobEventDetail
	d.DatastoreID, d.JobID = j.datastoreID, j.id
	d.SubmitTime = j.submitTime.UTC().Format(time.RFC3339)
	d.OutputDataConfig.S3URI = j.s3URI
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	e.pendingEvents = append(e.pendingEvents, JobEvent{
		Source: JobEventSource, DetailType: dt, Time: at.UTC(),
		Resources: []string{e.datastoreARN(j.datastoreID)},
		Detail:    b,
	})
}

// flushEvents hands the queued events to OnJobEvent, in order, without the lock.
func (e *Emulator) flushEvents() {
	e.mu.Lock()
	evs := e.pendingEvents
	e.pendingEvents = nil
	hook := e.opts.OnJobEvent
	e.mu.Unlock()
	if hook == nil {
		return
	}
	for _, ev := range evs {
		hook(ev)
	}
}
