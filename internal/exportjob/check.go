package exportjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// CheckHandler is the check-export Lambda: it describes the job of each
// re-check message and heartbeats and re-queues, or writes the manifest and
// answers SendTaskSuccess, or answers SendTaskFailure.
type CheckHandler struct{ *core }

// NewCheckHandler checks the configuration (CDC_TABLE, CDC_BUCKET,
// CDC_RECHECK_QUEUE_URL) and dependencies (Export, DB, S3, SQS, SFN).
func NewCheckHandler(cfg Config, d Deps) (*CheckHandler, error) {
	if err := cfg.require(stackconfig.EnvTable, stackconfig.EnvBucket, stackconfig.EnvRecheckQueueURL); err != nil {
		return nil, fmt.Errorf("check-export: %w", err)
	}
	if d.Export == nil || d.DB == nil || d.S3 == nil || d.SQS == nil || d.SFN == nil {
		return nil, errors.New("check-export: Export, DB, S3, SQS and SFN clients are required")
	}
	return &CheckHandler{newCore(cfg, d)}, nil
}

// Handle processes an SQS batch of re-check messages.
func (h *CheckHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, rec := range ev.Records {
		if err := h.handleRecord(ctx, rec); err != nil {
			h.log.WarnContext(ctx, "re-check message will be retried", "messageId", rec.MessageId, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

func (h *CheckHandler) handleRecord(ctx context.Context, rec events.SQSMessage) error {
	if messageKind([]byte(rec.Body)) == KindJobEvent {
		return h.handleJobEvent(ctx, rec)
	}
	msg, err := ParseRecheckMessage([]byte(rec.Body))
	if err != nil {
		return h.rejectMessage(ctx, rec.MessageId, err)
	}
	return h.check(ctx, msg, true)
}

// check performs one check of the run's job: heartbeat, maximum wait,
// describe, then act on the status. requeue is false for a check driven by a
// job event: the polling chain of the run goes on by itself, so a running
// job needs nothing more.
func (h *CheckHandler) check(ctx context.Context, msg RecheckMessage, requeue bool) error {
	log := logging.Run(h.log, msg.ExecutionID, msg.RunID, msg.JobID, msg.Window.String()).With("attempt", msg.Attempt)
	startedAt, _ := envelope.ParseTime(msg.StartedAt)
	waited := h.d.Now().Sub(startedAt)

	// Heartbeat first, whatever follows: a check that fails and is retried
	// after the queue's visibility timeout must not outlive HeartbeatSeconds.
	stale, err := h.heartbeat(ctx, msg.TaskToken)
	if stale && h.superseded(ctx, msg.RunID, msg.TaskToken) {
		log.InfoContext(ctx, "task token is stale but a newer one of the run polls the export; this chain stops")
		return nil
	}
	if stale {
		h.stopStaleChain(ctx, log, msg.RunID, msg.DatastoreID, msg.JobID)
		return nil
	}
	if err != nil {
		log.WarnContext(ctx, "heartbeat failed", "error", err.Error())
	}

	if h.cfg.MaxWait > 0 && waited >= h.cfg.MaxWait {
		log.WarnContext(ctx, "export exceeded the maximum wait; cancelling", "waitedSeconds", int(waited.Seconds()))
		h.cancelIfRunning(ctx, msg.RunID, msg.DatastoreID, msg.JobID)
		_, err := h.failTask(ctx, msg.TaskToken, ErrExportTimedOut,
			fmt.Sprintf("export job %s did not finish within %s (waited %s); it was cancelled", msg.JobID, h.cfg.MaxWait, waited.Round(time.Second)))
		return err
	}

	job, err := h.d.Export.DescribeExport(ctx, msg.DatastoreID, msg.JobID)
	if err != nil {
		if fhirrest.IsRetryable(err) {
			return fmt.Errorf("describe export job %s: %w", msg.JobID, err)
		}
		log.ErrorContext(ctx, "export job cannot be described", "error", err.Error())
		return h.failRun(ctx, msg, "", ErrExportFailed, fmt.Sprintf("export job %s cannot be described: %v", msg.JobID, err))
	}
	log = log.With("status", job.JobStatus)

	switch job.JobStatus {
	case fhirrest.StatusCompleted:
		return h.complete(ctx, msg, job)
	case fhirrest.StatusCompletedWithErrors:
		if h.cfg.ErrorsPolicy == ErrorsStrict {
			return h.failRun(ctx, msg, job.JobStatus, ErrExportCompletedWithErrors, completedWithErrorsCause(job))
		}
		log.WarnContext(ctx, "export completed with errors; publishing the good files and quarantining the errors", "errorFiles", len(job.Errors))
		return h.complete(ctx, msg, job)
	case fhirrest.StatusFailed:
		return h.failRun(ctx, msg, job.JobStatus, ErrExportFailed, jobCause(job))
	case fhirrest.StatusCancelSubmitted, fhirrest.StatusCancelInProgress, fhirrest.StatusCancelCompleted:
		return h.failRun(ctx, msg, job.JobStatus, ErrExportCancelled, jobCause(job))
	case fhirrest.StatusCancelFailed:
		return h.failRun(ctx, msg, job.JobStatus, ErrExportCancelFailed, jobCause(job))
	}

	// SUBMITTED, QUEUED, IN_PROGRESS (and any status AWS may add): wait more.
	if job.JobStatus == fhirrest.StatusQueued {
		// Behind another job of the account in HealthLake's one export slot.
		log.InfoContext(ctx, "export queued behind another job of the account", "waitedSeconds", int(waited.Seconds()))
		_ = h.d.Metrics.Emit([]metrics.Value{metrics.Seconds(metrics.ExportQueuedSeconds, waited)}, nil,
			map[string]any{"executionId": msg.ExecutionID, "runId": msg.RunID, "jobId": msg.JobID})
	}
	if !requeue {
		log.InfoContext(ctx, "job event: export still running; polling goes on")
		return nil
	}
	next := msg
	next.Attempt = msg.Attempt + 1
	delay := h.checkDelay(next.Attempt)
	if h.cfg.MaxWait > 0 {
		if left := h.cfg.MaxWait - waited; left < delay {
			delay = max(left, 0)
		}
	}
	if err := h.sendRecheck(ctx, next, delay); err != nil {
		return err
	}
	log.InfoContext(ctx, "export still running; re-check queued", "delaySeconds", int(delay.Seconds()), "waitedSeconds", int(waited.Seconds()))
	return nil
}

// handleJobEvent checks the run of the job a HealthLake job event names at
// once: the ledger's job pointer gives the run, its entry the task token the
// run waits on. An event for a job of no run (another export of the account,
// or a run whose ledger has expired) or of another data store is dropped.
func (h *CheckHandler) handleJobEvent(ctx context.Context, rec events.SQSMessage) error {
	ev, err := ParseJobEventMessage([]byte(rec.Body))
	if err != nil {
		h.log.WarnContext(ctx, "job event dropped", "messageId", rec.MessageId, "problem", err.Error())
		return nil
	}
	if h.cfg.DatastoreID != "" && ev.DatastoreID != h.cfg.DatastoreID {
		h.log.InfoContext(ctx, "job event of another data store dropped", "messageId", rec.MessageId)
		return nil
	}
	runID, found, err := h.ledger.RunOfJob(ctx, ev.JobID)
	if err != nil {
		return err
	}
	if !found {
		h.log.InfoContext(ctx, "job event for a job of no run dropped", "jobId", ev.JobID, "event", ev.JobStatus)
		return nil
	}
	entry, found, err := h.ledger.Get(ctx, runID)
	if err != nil {
		return err
	}
	if !found || entry.TaskToken == "" || entry.JobID != ev.JobID {
		h.log.InfoContext(ctx, "job event for a run that is not waiting on this job dropped", "runId", runID, "jobId", ev.JobID, "event", ev.JobStatus)
		return nil
	}
	logging.Run(h.log, entry.ExecutionID, runID, ev.JobID, entry.Window.String()).InfoContext(ctx, "job event: checking the run's export now", "event", ev.JobStatus)
	return h.check(ctx, RecheckMessage{
		TaskToken: entry.TaskToken, ExecutionID: entry.ExecutionID, RunID: runID, Window: entry.Window,
		DatastoreID: ev.DatastoreID, JobID: ev.JobID, StartedAt: fmtTime(entry.StartedAt), Attempt: 0,
	}, false)
}

// failRun answers SendTaskFailure, cancels the job when the token is stale
// and the job may still run, and records the status in the ledger.
func (h *CheckHandler) failRun(ctx context.Context, msg RecheckMessage, status, name, cause string) error {
	stale, err := h.failTask(ctx, msg.TaskToken, name, cause)
	if err != nil {
		return err
	}
	if stale && (status == "" || fhirrest.Running(status)) && !h.superseded(ctx, msg.RunID, msg.TaskToken) {
		h.cancelIfRunning(ctx, msg.RunID, msg.DatastoreID, msg.JobID)
	}
	logging.Run(h.log, msg.ExecutionID, msg.RunID, msg.JobID, msg.Window.String()).InfoContext(ctx, "run failed", "error", name, "staleToken", stale)
	if status != "" {
		if err := h.ledger.SetStatus(ctx, msg.RunID, status); err != nil {
			h.log.WarnContext(ctx, "ledger status not recorded", "runId", msg.RunID, "error", err.Error())
		}
	}
	return nil
}

func jobCause(job *fhirrest.ExportJob) string {
	msg := job.Message
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("export job %s is %s: %s", job.JobID, job.JobStatus, msg)
}

func completedWithErrorsCause(job *fhirrest.ExportJob) string {
	var b strings.Builder
	fmt.Fprintf(&b, "export job %s is COMPLETED_WITH_ERRORS", job.JobID)
	if job.Message != "" {
		b.WriteString(": ")
		b.WriteString(job.Message)
	}
	fmt.Fprintf(&b, "; %d error file(s):", len(job.Errors))
	for _, f := range job.Errors {
		b.WriteString(" ")
		b.WriteString(f.URL)
		if b.Len() > 32000 {
			b.WriteString(" …")
			break
		}
	}
	return b.String()
}

// complete quarantines the entries of the job's error files (a job that
// completed with errors), plans the manifest, writes its parts and answers
// SendTaskSuccess with the first part (contract C2).
func (h *CheckHandler) complete(ctx context.Context, msg RecheckMessage, job *fhirrest.ExportJob) error {
	withErrors := job.JobStatus == fhirrest.StatusCompletedWithErrors
	var errorEntries int64
	if withErrors {
		n, err := h.quarantineExportErrors(ctx, msg.RunID, job)
		if err != nil {
			var me *ManifestError
			if errors.As(err, &me) {
				return h.failRun(ctx, msg, job.JobStatus, ErrManifestFailed, fmt.Sprintf("export job %s: %v", job.JobID, err))
			}
			return err
		}
		errorEntries = n
	}
	files, err := BuildManifest(ctx, h.d.S3, job, 0)
	if err != nil {
		var me *ManifestError
		if errors.As(err, &me) {
			return h.failRun(ctx, msg, job.JobStatus, ErrManifestFailed, fmt.Sprintf("export job %s: %v", job.JobID, err))
		}
		return err
	}
	parts := manifest.Split(manifest.Plan(files, h.cfg.BatchLimits), h.cfg.PartBatches)
	for i, part := range parts {
		body, err := json.Marshal(part)
		if err != nil {
			return fmt.Errorf("encode manifest part %d: %w", i, err)
		}
		key := manifest.PartKey(msg.RunID, i)
		if _, err := h.d.S3.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key),
			Body: bytes.NewReader(body), ContentType: aws.String("application/json"),
		}); err != nil {
			return fmt.Errorf("write manifest s3://%s/%s: %w", h.cfg.Bucket, key, err)
		}
	}
	partBatches := make([]int, len(parts))
	for i, p := range parts {
		partBatches[i] = len(p)
	}
	// The task output (contract C2): the first part, and what the state
	// machine and run-lock need to find the others.
	out := manifest.Export{
		Bucket: h.cfg.Bucket, ManifestKey: manifest.PartKey(msg.RunID, 0), ManifestRunID: msg.RunID,
		Part: 0, Parts: len(parts), PartFiles: manifest.PartFiles(parts), PartBatches: partBatches,
		FileCount: manifest.FileCount(parts[0]), BatchCount: len(parts[0]),
		JobID: job.JobID, DatastoreID: msg.DatastoreID, Window: msg.Window, CompletedWithErrors: withErrors,
	}
	body, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode task output: %w", err)
	}
	_, err = h.d.SFN.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(msg.TaskToken), Output: aws.String(string(body))})
	stale := IsStaleToken(err)
	if err != nil && !stale {
		return fmt.Errorf("send task success for job %s: %w", job.JobID, err)
	}
	now := h.d.Now()
	waited := now.Sub(mustTime(msg.StartedAt))
	values := []metrics.Value{metrics.Seconds(metrics.ExportWaitSeconds, waited)}
	noticed := time.Duration(-1)
	if !job.EndTime.IsZero() {
		noticed = max(now.Sub(job.EndTime), 0)
		values = append(values, metrics.Seconds(metrics.ExportNoticeSeconds, noticed))
	}
	if withErrors {
		values = append(values, metrics.Count(metrics.ExportErrors, max(errorEntries, 1)))
	}
	logging.Run(h.log, msg.ExecutionID, msg.RunID, job.JobID, msg.Window.String()).InfoContext(ctx, "export done; manifest written",
		"files", len(files), "parts", len(parts), "staleToken", stale, "waitedSeconds", int(waited.Seconds()),
		"noticedAfterSeconds", noticed.Seconds(), "completedWithErrors", withErrors, "errorEntries", errorEntries)
	if err := h.d.Metrics.Emit(values, nil,
		map[string]any{"runId": msg.RunID, "jobId": job.JobID, "files": len(files)}); err != nil {
		h.log.WarnContext(ctx, "metrics not written", "error", err.Error())
	}
	if err := h.ledger.setManifested(ctx, msg.RunID, job.JobStatus, noticed); err != nil {
		h.log.WarnContext(ctx, "ledger status not recorded", "runId", msg.RunID, "error", err.Error())
	}
	return nil
}

func mustTime(s string) time.Time {
	t, _ := envelope.ParseTime(s)
	return t
}
