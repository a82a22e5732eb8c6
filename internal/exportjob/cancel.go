package exportjob

import (
	"context"
	"errors"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Canceller cancels a run's export; the run-lock Lambda calls it when a run fails.
type Canceller struct{ *core }

// NewCanceller checks the configuration (CDC_TABLE, CDC_DATASTORE_ID) and
// dependencies (Export, Jobs, DB) and returns a Canceller.
func NewCanceller(cfg Config, d Deps) (*Canceller, error) {
	if err := cfg.require(stackconfig.EnvTable, stackconfig.EnvDatastoreID); err != nil {
		return nil, fmt.Errorf("export canceller: %w", err)
	}
	if d.Export == nil || d.Jobs == nil || d.DB == nil {
		return nil, errors.New("export canceller: Export, Jobs and DB clients are required")
	}
	return &Canceller{newCore(cfg, d)}, nil
}

// CancelRunExport cancels every export of the run that is SUBMITTED, QUEUED
// or IN_PROGRESS: the job the ledger records and any other job with the
// run's deterministic name (an ambiguous POST attempt may have started one
// the ledger never saw, also for a run HealthLake refused at start). A run
// without a ledger item never posted an export and needs nothing; a run
// whose exports have finished is not an error.
func (c *Canceller) CancelRunExport(ctx context.Context, runID string) error {
	entry, found, err := c.ledger.Get(ctx, runID)
	if err != nil {
		return fmt.Errorf("cancel export of run %s: %w", runID, err)
	}
	if !found {
		return nil
	}
	var firstErr error
	if entry.JobID != "" {
		status, err := c.cancelJob(ctx, runID, entry.JobID)
		if err != nil {
			firstErr = err
		} else if status != "" {
			if err := c.ledger.SetStatus(ctx, runID, status); err != nil {
				c.log.WarnContext(ctx, "ledger status not recorded", "runId", runID, "error", err.Error())
			}
		}
	}
	jobs, err := listJobs(ctx, c.d.Jobs, c.cfg.DatastoreID, JobName(runID))
	if err != nil {
		if firstErr != nil {
			return firstErr
		}
		return fmt.Errorf("cancel export of run %s: %w", runID, err)
	}
	for _, j := range jobs {
		if j.id == entry.JobID || !fhirrest.Running(j.status) {
			continue
		}
		if _, err := c.cancelJob(ctx, runID, j.id); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// cancelJob DELETEs one job when it may still run and returns the status to
// record ("" when the job is unknown).
func (c *Canceller) cancelJob(ctx context.Context, runID, jobID string) (string, error) {
	job, err := c.d.Export.DescribeExport(ctx, c.cfg.DatastoreID, jobID)
	if fhirrest.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cancel export of run %s: %w", runID, err)
	}
	if !fhirrest.Running(job.JobStatus) {
		return job.JobStatus, nil
	}
	if err := c.d.Export.CancelExport(ctx, c.cfg.DatastoreID, jobID); err != nil {
		return "", fmt.Errorf("cancel export job %s of run %s: %w", jobID, runID, err)
	}
	c.log.InfoContext(ctx, "export cancelled", "runId", runID, "jobId", jobID)
	return fhirrest.StatusCancelSubmitted, nil
}
