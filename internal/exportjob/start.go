package exportjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// StartHandler is the start-export Lambda: one start message per run starts
// exactly one HealthLake export and queues the first re-check.
type StartHandler struct{ *core }

// NewStartHandler checks the configuration (CDC_TABLE, CDC_BUCKET,
// CDC_DATASTORE_ID, CDC_EXPORT_ROLE_ARN, CDC_RECHECK_QUEUE_URL) and the
// dependencies (Export, Jobs, DB, SQS, SFN) and returns the handler.
func NewStartHandler(cfg Config, d Deps) (*StartHandler, error) {
	if err := cfg.require(stackconfig.EnvTable, stackconfig.EnvBucket, stackconfig.EnvDatastoreID, stackconfig.EnvExportRoleARN, stackconfig.EnvRecheckQueueURL); err != nil {
		return nil, fmt.Errorf("start-export: %w", err)
	}
	if d.Export == nil || d.Jobs == nil || d.DB == nil || d.SQS == nil || d.SFN == nil {
		return nil, errors.New("start-export: Export, Jobs, DB, SQS and SFN clients are required")
	}
	return &StartHandler{newCore(cfg, d)}, nil
}

// Handle processes an SQS batch. Records that failed transiently are listed
// in BatchItemFailures so SQS delivers them again; bad bodies are not.
func (h *StartHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, rec := range ev.Records {
		if err := h.handleRecord(ctx, rec); err != nil {
			h.log.WarnContext(ctx, "start message will be retried", "messageId", rec.MessageId, "error", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return resp, nil
}

// exportS3URI is where HealthLake writes: s3://{bucket}/{ExportPrefix}.
func (h *StartHandler) exportS3URI() string {
	return "s3://" + h.cfg.Bucket + "/" + h.cfg.ExportPrefix
}

// handleRecord returns an error only when the record should be delivered again.
func (h *StartHandler) handleRecord(ctx context.Context, rec events.SQSMessage) error {
	msg, err := ParseStartMessage([]byte(rec.Body))
	if err != nil {
		return h.rejectMessage(ctx, rec.MessageId, err)
	}
	log := logging.Run(h.log, msg.ExecutionID, msg.RunID, "", msg.Window.String()).With("messageId", rec.MessageId)

	entry, found, err := h.ledger.Get(ctx, msg.RunID)
	if err != nil {
		return err
	}
	if found && entry.JobID != "" {
		return h.resumeRecorded(ctx, log, msg, entry)
	}
	if found && entry.Status == LedgerStartFailed {
		log.InfoContext(ctx, "duplicate start message: HealthLake already refused this run's export")
		return nil
	}
	if waiting, err := h.runWaiting(ctx, log, msg); !waiting {
		return err
	}
	if err := h.claim(ctx, msg.RunID, rec.MessageId); err != nil {
		return err
	}
	job, ok, err := h.exportJob(ctx, log, msg, found)
	if !ok {
		return err
	}
	if recorded, err := h.recordJob(ctx, log, msg, rec.MessageId, job); !recorded {
		return err
	}
	h.pointJob(ctx, log, msg.RunID, job.id)
	if job.retried {
		h.cancelSiblings(ctx, log, job.name, job.id)
	}
	return h.beginPolling(ctx, log, msg, job)
}

// startedJob is the export job a start message leads to: adopted from an
// earlier invocation or started by this one.
type startedJob struct {
	id, name  string
	status    string
	startedAt time.Time
	retried   bool // the POST was retried after an answer that does not prove a refusal
}

// resumeRecorded handles a start message for a run whose export the ledger
// already records: a duplicate is dropped, a live new task token takes the
// polling over, and otherwise the job's first re-check is queued.
func (h *StartHandler) resumeRecorded(ctx context.Context, log *slog.Logger, msg StartMessage, entry LedgerEntry) error {
	sameToken := entry.TokenHash == "" || entry.TokenHash == TokenHash(msg.TaskToken)
	if entry.RecheckSent && sameToken {
		log.InfoContext(ctx, "duplicate start message: export already started", "jobId", entry.JobID)
		return nil
	}
	if !sameToken {
		return h.moveToNewToken(ctx, log, msg, entry)
	}
	log.InfoContext(ctx, "export already started; queueing its first re-check", "jobId", entry.JobID)
	return h.firstRecheck(ctx, msg, entry.JobID, entry.StartedAt)
}

// moveToNewToken hands the polling of the recorded export to msg's task
// token when that token is still live, and drops the message when it is not.
func (h *StartHandler) moveToNewToken(ctx context.Context, log *slog.Logger, msg StartMessage, entry LedgerEntry) error {
	// Another task token than the one polling: Step Functions retried
	// WaitForExport (a retry gets a new token, the old one dies), or
	// SQS delivers the first attempt's message late. Only a live
	// token may take the polling over.
	stale, err := h.heartbeat(ctx, msg.TaskToken)
	if stale {
		log.InfoContext(ctx, "start message with a dead task token: the export is polled for a newer one", "jobId", entry.JobID)
		return nil
	}
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "start message with a new task token (the wait was retried); polling moves to it", "jobId", entry.JobID)
	return h.recheckFor(ctx, msg, entry.JobID, entry.StartedAt, true)
}

// runWaiting sends the liveness heartbeat for msg's task token and reports
// whether the run still waits for its export. When it does not, err is nil if
// the token is stale (the message is dropped) and the heartbeat's error
// otherwise.
func (h *StartHandler) runWaiting(ctx context.Context, log *slog.Logger, msg StartMessage) (bool, error) {
	// Only a waiting run may start an export: a start message delivered late
	// (after the run's heartbeat timeout) or redriven from the dead-letter
	// queue would otherwise start a job that overlaps the next run's.
	if stale, err := h.heartbeat(ctx, msg.TaskToken); stale {
		log.InfoContext(ctx, "start message for a run that is gone (task token no longer valid): no export started")
		return false, nil
	} else if err != nil {
		return false, err
	}
	return true, nil
}

// claim takes the run's claim in the ledger for this message; it fails while
// another start-export invocation holds the claim.
func (h *StartHandler) claim(ctx context.Context, runID, messageID string) error {
	claimed, err := h.ledger.Claim(ctx, runID, messageID, h.cfg.ClaimLease)
	if err != nil {
		return err
	}
	if !claimed {
		return fmt.Errorf("run %s is claimed by another start-export invocation", runID)
	}
	return nil
}

// exportJob returns the run's export job: the one an earlier invocation
// started, when the ledger knew the run (found), or else a new one started
// with HealthLake. ok is false when the record is done with; err is then what
// handleRecord returns.
func (h *StartHandler) exportJob(ctx context.Context, log *slog.Logger, msg StartMessage, found bool) (job startedJob, ok bool, err error) {
	job = startedJob{name: JobName(msg.RunID), status: fhirrest.StatusSubmitted, startedAt: h.d.Now().UTC()}
	if found {
		if err = h.adoptJob(ctx, log, &job); err != nil {
			return job, false, err
		}
	}
	if job.id != "" {
		return job, true, nil
	}
	ok, err = h.startExport(ctx, log, msg, &job)
	return job, ok, err
}

// adoptJob looks for a live export job named job.name and, when there is
// one, takes its id and submit time into job.
func (h *StartHandler) adoptJob(ctx context.Context, log *slog.Logger, job *startedJob) error {
	// An earlier claimant may have started the export and crashed
	// before recording it.
	id, submitted, err := findLiveJob(ctx, h.d.Jobs, h.cfg.DatastoreID, job.name)
	if err != nil {
		return err
	}
	if id == "" {
		return nil
	}
	job.id = id
	if !submitted.IsZero() {
		job.startedAt = submitted.UTC()
	}
	log.InfoContext(ctx, "recovered export started by an earlier invocation", "jobId", job.id)
	return nil
}

// startExport asks HealthLake to start the run's export named job.name and
// fills in job's id, status and retried. ok is false when the export did not
// start: err is then the retryable error, or the outcome of the refusal path.
func (h *StartHandler) startExport(ctx context.Context, log *slog.Logger, msg StartMessage, job *startedJob) (ok bool, err error) {
	out, err := h.d.Export.StartExport(ctx, fhirrest.StartExportInput{
		DatastoreID:       h.cfg.DatastoreID,
		JobName:           job.name,
		Since:             exportSince(msg.Window),
		Types:             h.cfg.ResourceTypes,
		S3URI:             h.exportS3URI(),
		KMSKeyID:          h.cfg.KMSKeyID,
		DataAccessRoleARN: h.cfg.ExportRoleARN,
	})
	if err != nil {
		if fhirrest.IsRetryable(err) {
			// The record goes back to SQS; its next delivery finds a job
			// an ambiguous attempt started by name and adopts it, and the
			// run's failure path cancels it by name.
			return false, fmt.Errorf("start export for run %s: %w", msg.RunID, err)
		}
		return false, h.exportRefused(ctx, log, msg, job.name, err)
	}
	job.id, job.status, job.retried = out.JobID, out.JobStatus, out.Retried
	if job.status == "" {
		job.status = fhirrest.StatusSubmitted
	}
	log.InfoContext(ctx, "export started", "jobId", job.id)
	return true, nil
}

// exportRefused handles HealthLake's refusal (err) to start the run's export:
// it marks the run's start as failed in the ledger, cancels any job an earlier
// attempt of a retried POST may have started, and fails the run's task.
func (h *StartHandler) exportRefused(ctx context.Context, log *slog.Logger, msg StartMessage, jobName string, err error) error {
	log.ErrorContext(ctx, "export refused", "error", err.Error())
	if serr := h.ledger.SetStatus(ctx, msg.RunID, LedgerStartFailed); serr != nil {
		log.WarnContext(ctx, "ledger status not recorded", "error", serr.Error())
	}
	if fhirrest.MayHaveActed(err) {
		// A retried POST ended in a refusal, but an earlier attempt
		// may have started a job nobody will poll: cancel it.
		h.cancelSiblings(ctx, log, jobName, "")
	}
	// The hint comes before HealthLake's answer: run records keep the
	// start of a reason.
	cause := fmt.Sprintf("run %s: HealthLake refused the export: %v", msg.RunID, err)
	if hint := h.datastoreHint(ctx, log, err); hint != "" {
		cause = fmt.Sprintf("run %s: HealthLake refused the export (%s): %v", msg.RunID, hint, err)
	}
	_, ferr := h.failTask(ctx, msg.TaskToken, ErrExportStartFailed, cause)
	return ferr
}

// recordJob records job in the ledger under this message's claim and reports
// whether it did. When it did not, err is what handleRecord returns: the
// ledger's error, or the outcome of the lost-claim path.
func (h *StartHandler) recordJob(ctx context.Context, log *slog.Logger, msg StartMessage, messageID string, job startedJob) (bool, error) {
	err := h.ledger.recordJob(ctx, msg.RunID, messageID, job.id, job.name, job.status, TokenHash(msg.TaskToken), job.startedAt)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, ErrClaimLost) {
		return false, err
	}
	// The condition (this claim, no job yet) failed: another invocation
	// took the run over — or this write took effect, its answer was lost,
	// and the SDK's second attempt met the first. The ledger tells which.
	entry, _, err := h.ledger.Get(ctx, msg.RunID)
	if err != nil {
		return false, err
	}
	if entry.JobID == job.id && entry.Claimant == messageID {
		log.InfoContext(ctx, "the job record's answer was lost; the ledger holds it", "jobId", job.id)
		return true, nil
	}
	return false, h.claimLost(ctx, log, entry, job.id)
}

// claimLost handles a run another invocation took over while this one held
// export jobID (other is the run's ledger entry as the other invocation left
// it): it cancels jobID unless the ledger records it as the run's job.
func (h *StartHandler) claimLost(ctx context.Context, log *slog.Logger, other LedgerEntry, jobID string) error {
	// Another invocation took the run over; keep only its export.
	if other.JobID != jobID {
		log.WarnContext(ctx, "claim lost; cancelling this invocation's export", "jobId", jobID, "keptJobId", other.JobID)
		if cerr := h.d.Export.CancelExport(ctx, h.cfg.DatastoreID, jobID); cerr != nil {
			log.WarnContext(ctx, "cancel of the duplicate export failed", "jobId", jobID, "error", cerr.Error())
		}
	}
	return nil
}

// pointJob records the pointer from jobID to its run in the ledger. Best
// effort: a failure is logged.
func (h *StartHandler) pointJob(ctx context.Context, log *slog.Logger, runID, jobID string) {
	if err := h.ledger.PointJob(ctx, jobID, runID); err != nil {
		// Without the pointer, job events find no run; polling still does.
		log.WarnContext(ctx, "job pointer not recorded", "jobId", jobID, "error", err.Error())
	}
}

// beginPolling sends the final heartbeat for msg's task token and queues the
// job's first re-check. A stale token queues nothing: the job is left to a
// newer token of the run that polls it, or else the stale chain is stopped.
func (h *StartHandler) beginPolling(ctx context.Context, log *slog.Logger, msg StartMessage, job startedJob) error {
	stale, err := h.heartbeat(ctx, msg.TaskToken)
	if stale {
		if h.superseded(ctx, msg.RunID, msg.TaskToken) {
			log.InfoContext(ctx, "task token is stale but a newer one of the run polls the export; leaving it", "jobId", job.id)
			return nil
		}
		h.stopStaleChain(ctx, log, msg.RunID, h.cfg.DatastoreID, job.id)
		return nil
	}
	if err != nil {
		log.WarnContext(ctx, "heartbeat failed", "jobId", job.id, "error", err.Error())
	}
	return h.firstRecheck(ctx, msg, job.id, job.startedAt)
}

// cancelSiblings cancels every still-running export job with this run's job
// name except keep ("" cancels them all). A POST $export that HealthLake
// accepted but answered with a 5xx (or a lost connection) is retried by the
// client and starts a second job; the name finds it. It runs only after such
// an ambiguous attempt. Best effort: a failure is logged, and the run's
// failure path cancels by name anyway.
func (h *StartHandler) cancelSiblings(ctx context.Context, log *slog.Logger, jobName, keep string) {
	jobs, err := listJobs(ctx, h.d.Jobs, h.cfg.DatastoreID, jobName)
	if err != nil {
		log.WarnContext(ctx, "could not look for duplicate export jobs", "jobId", keep, "error", err.Error())
		return
	}
	for _, j := range jobs {
		if j.id == keep || !fhirrest.Running(j.status) {
			continue
		}
		if err := h.d.Export.CancelExport(ctx, h.cfg.DatastoreID, j.id); err != nil {
			log.WarnContext(ctx, "duplicate export job not cancelled", "jobId", keep, "duplicateJobId", j.id, "error", err.Error())
			continue
		}
		log.WarnContext(ctx, "cancelled a duplicate export job of this run", "jobId", keep, "duplicateJobId", j.id)
	}
}

// firstRecheck queues check number 1 and notes it in the ledger.
func (h *StartHandler) firstRecheck(ctx context.Context, msg StartMessage, jobID string, startedAt time.Time) error {
	return h.recheckFor(ctx, msg, jobID, startedAt, false)
}

// recheckFor queues check number 1 for msg's task token and notes in the
// ledger that this token's chain polls the job; adopted marks a take-over
// from another token's chain.
func (h *StartHandler) recheckFor(ctx context.Context, msg StartMessage, jobID string, startedAt time.Time, adopted bool) error {
	if startedAt.IsZero() {
		startedAt = h.d.Now().UTC()
	}
	m := RecheckMessage{
		TaskToken: msg.TaskToken, ExecutionID: msg.ExecutionID, RunID: msg.RunID, Window: msg.Window,
		DatastoreID: h.cfg.DatastoreID, JobID: jobID, StartedAt: fmtTime(startedAt), Attempt: 1,
	}
	if err := h.sendRecheck(ctx, m, h.checkDelay(1)); err != nil {
		return err
	}
	if err := h.ledger.markRecheckSentFor(ctx, msg, adopted); err != nil {
		// The re-check is queued; a redelivery would only queue another.
		h.log.WarnContext(ctx, "re-check not noted in the ledger", "runId", msg.RunID, "error", err.Error())
	}
	return nil
}

// rejectMessage handles a body that cannot be acted on: it fails the run
// when the token is readable, and never asks SQS to retry the body itself.
func (c *core) rejectMessage(ctx context.Context, messageID string, err error) error {
	var me *MessageError
	if !errors.As(err, &me) {
		me = &MessageError{Problem: err.Error()}
	}
	c.log.ErrorContext(ctx, "invalid message", "messageId", messageID, "problem", me.Problem, "tokenReadable", me.Token != "")
	if me.Token == "" {
		return nil
	}
	_, ferr := c.failTask(ctx, me.Token, ErrInvalidMessage, "message "+messageID+": "+me.Problem)
	return ferr
}
