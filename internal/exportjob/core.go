package exportjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// IsStaleToken reports whether a Step Functions answer says the task is gone:
// TaskTimedOut, TaskDoesNotExist or InvalidToken.
func IsStaleToken(err error) bool {
	var (
		timedOut *sfntypes.TaskTimedOut
		notExist *sfntypes.TaskDoesNotExist
		invalid  *sfntypes.InvalidToken
	)
	return errors.As(err, &timedOut) || errors.As(err, &notExist) || errors.As(err, &invalid)
}

// core holds what both handlers share.
type core struct {
	cfg    Config
	d      Deps
	ledger *Ledger
	log    *slog.Logger
}

func newCore(cfg Config, d Deps) *core {
	cfg = cfg.withDefaults()
	d = d.withDefaults()
	return &core{cfg: cfg, d: d, ledger: NewLedger(d.DB, cfg.Table, cfg.LedgerTTL, d.Now), log: d.Logger}
}

// failTask answers the token with SendTaskFailure. A stale token is not an
// error (the run is gone already); other failures are returned.
func (c *core) failTask(ctx context.Context, token, name, cause string) (stale bool, err error) {
	_, err = c.d.SFN.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{
		TaskToken: aws.String(token),
		Error:     aws.String(clip.String(name, 256)),
		Cause:     aws.String(clip.String(cause, 32768)),
	})
	if err == nil {
		return false, nil
	}
	if IsStaleToken(err) {
		return true, nil
	}
	return false, fmt.Errorf("send task failure %s: %w", name, err)
}

// heartbeat sends SendTaskHeartbeat and reports a stale token.
func (c *core) heartbeat(ctx context.Context, token string) (stale bool, err error) {
	_, err = c.d.SFN.SendTaskHeartbeat(ctx, &sfn.SendTaskHeartbeatInput{TaskToken: aws.String(token)})
	if err == nil {
		return false, nil
	}
	if IsStaleToken(err) {
		return true, nil
	}
	return false, fmt.Errorf("send task heartbeat: %w", err)
}

// checkDelay is the delay before check number attempt: FirstCheckDelay
// doubled per earlier check, capped by MaxCheckDelay (≤ 900 s).
func (c *core) checkDelay(attempt int) time.Duration {
	d := c.cfg.FirstCheckDelay
	for i := 1; i < attempt && d < c.cfg.MaxCheckDelay; i++ {
		d *= 2
	}
	return min(d, c.cfg.MaxCheckDelay, MaxSQSDelay)
}

// sendRecheck queues a re-check message delayed by delay (whole seconds).
func (c *core) sendRecheck(ctx context.Context, m RecheckMessage, delay time.Duration) error {
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode re-check message: %w", err)
	}
	secs := int32(delay.Round(time.Second) / time.Second)
	secs = max(0, min(secs, int32(MaxSQSDelay/time.Second)))
	_, err = c.d.SQS.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(c.cfg.RecheckQueueURL),
		MessageBody:  aws.String(string(body)),
		DelaySeconds: secs,
	})
	if err != nil {
		return fmt.Errorf("send re-check %d of job %s: %w", m.Attempt, m.JobID, err)
	}
	return nil
}

// superseded reports whether the ledger says another task token of the run
// took the polling over from token, so that token's staleness does not mean
// the run is gone. A ledger that cannot be read says no (the caller then
// acts as before: the run is gone).
func (c *core) superseded(ctx context.Context, runID, token string) bool {
	entry, found, err := c.ledger.Get(ctx, runID)
	if err != nil {
		c.log.WarnContext(ctx, "export ledger not read", "runId", runID, "error", err.Error())
		return false
	}
	return found && entry.Superseded(token)
}

// cancelIfRunning cancels a job that may still be running; errors are logged,
// not returned (the caller is already giving up on the run). It returns the
// job's status when the job had already ended (nothing to cancel), else "".
func (c *core) cancelIfRunning(ctx context.Context, runID, datastoreID, jobID string) (ended string) {
	job, err := c.d.Export.DescribeExport(ctx, datastoreID, jobID)
	if err == nil && !fhirrest.Running(job.JobStatus) {
		_ = c.ledger.SetStatus(ctx, runID, job.JobStatus)
		return job.JobStatus
	}
	if err := c.d.Export.CancelExport(ctx, datastoreID, jobID); err != nil {
		c.log.WarnContext(ctx, "cancel export failed", "runId", runID, "jobId", jobID, "error", err.Error())
		return ""
	}
	c.log.InfoContext(ctx, "export cancelled", "runId", runID, "jobId", jobID)
	if err := c.ledger.SetStatus(ctx, runID, fhirrest.StatusCancelSubmitted); err != nil {
		c.log.WarnContext(ctx, "ledger status not recorded", "runId", runID, "error", err.Error())
	}
	return ""
}

// stopStaleChain ends a chain whose task token is stale and not superseded:
// the run has moved on. When the job had already ended this is the normal
// race of two checks noticing the same end (a job event and the polling
// chain; the first one completed the task), logged at INFO; a job still
// running belonged to a run that is gone, and is cancelled (WARN).
func (c *core) stopStaleChain(ctx context.Context, log *slog.Logger, runID, datastoreID, jobID string) {
	if ended := c.cancelIfRunning(ctx, runID, datastoreID, jobID); ended != "" {
		log.InfoContext(ctx, "task token is stale: the run has moved on and the export had ended; this chain stops", "jobId", jobID, "jobStatus", ended)
		return
	}
	log.WarnContext(ctx, "task token is stale: the run is gone; the export was cancelled", "jobId", jobID)
}

// findLiveJob looks the run's job up by its deterministic name through the
// SDK's ListFHIRExportJobs, newest first, ignoring jobs that were cancelled
// (a job an ambiguous attempt started and the pipeline cancelled is not the
// run's); it returns "" when there is none.
func findLiveJob(ctx context.Context, lister JobLister, datastoreID, jobName string) (string, time.Time, error) {
	jobs, err := listJobs(ctx, lister, datastoreID, jobName)
	if err != nil {
		return "", time.Time{}, err
	}
	var best hlsdkJob
	for _, j := range jobs {
		if strings.HasPrefix(j.status, "CANCEL_") {
			continue
		}
		if best.id == "" || j.submit.After(best.submit) {
			best = j
		}
	}
	return best.id, best.submit, nil
}

// listJobs lists the export jobs named jobName (exact match).
func listJobs(ctx context.Context, lister JobLister, datastoreID, jobName string) ([]hlsdkJob, error) {
	var jobs []hlsdkJob
	var next *string
	for page := 0; page < 100; page++ {
		out, err := lister.ListFHIRExportJobs(ctx, &hlsdk.ListFHIRExportJobsInput{
			DatastoreId: aws.String(datastoreID), JobName: aws.String(jobName), NextToken: next,
		})
		if err != nil {
			return nil, fmt.Errorf("list export jobs named %s: %w", jobName, err)
		}
		for _, p := range out.ExportJobPropertiesList {
			if aws.ToString(p.JobName) != jobName || p.JobId == nil {
				continue
			}
			jobs = append(jobs, hlsdkJob{id: *p.JobId, submit: aws.ToTime(p.SubmitTime), status: string(p.JobStatus)})
		}
		if out.NextToken == nil || *out.NextToken == "" {
			break
		}
		next = out.NextToken
	}
	return jobs, nil
}

type hlsdkJob struct {
	id     string
	submit time.Time
	status string
}
