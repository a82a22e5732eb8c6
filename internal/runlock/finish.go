package runlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
)

// CommitRequest ends a run that published its whole window.
type CommitRequest struct {
	// Owner is the execution ARN that holds the lock; RunID its name.
	Owner, RunID string
	// ExportJobID is the HealthLake export job, "" for an empty window.
	ExportJobID string
	// Counts are the summed summaries of the run's children.
	Counts Counts
	// Window, when set, must equal the held window: a caller that carried a
	// different window is refused rather than committing one it did not run.
	Window *envelope.Window
	// Export is the manifest part the run delivered (the export wait's
	// output or the reuse it was given), nil or Parts 0 when unknown. When
	// it is not the last part, the rest is kept pending and the checkpoint
	// does not move.
	Export *manifest.Export
}

// FailRequest ends a run that failed.
type FailRequest struct {
	Owner, RunID string
	// StartTime locates the run's history item when the lock is no longer
	// held; zero means unknown.
	StartTime   time.Time
	ExportJobID string
	// Reason says what failed; it is stored truncated, with whatever may be
	// a resource identifier replaced by a keyed hash (Redact).
	Reason string
}

// Result is the end of a run.
type Result struct {
	RunID string
	// Checkpoint is lastRunTime after the call.
	Checkpoint time.Time
	Outcome    Outcome
	Window     envelope.Window
	// Released: this call released the lock (false when it was not held by the caller).
	Released bool
	// Pending is what a PARTIAL commit left for the next runs.
	Pending *Pending
}

// maxReasonBytes bounds a stored failure reason.
const maxReasonBytes = 1000

// Commit moves the checkpoint to the held window's until and releases the
// lock, in one write conditioned on the caller still owning the lock. An
// empty window releases the lock with outcome EMPTY and leaves the
// checkpoint alone. It fails with ErrNotOwner when the caller does not hold
// the lock; a repeated commit of a run that already committed returns the
// first answer.
func (s *Store) Commit(ctx context.Context, req CommitRequest) (Result, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := s.getState(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: %w", req.RunID, err)
		}
		if !st.locked() || st.owner != req.Owner {
			if st.exists && st.lastRunID == req.RunID && (st.lastOutcome == OutcomeSucceeded || st.lastOutcome == OutcomeEmpty || st.lastOutcome == OutcomePartial) {
				return Result{RunID: req.RunID, Checkpoint: st.checkpoint, Outcome: st.lastOutcome}, nil
			}
			s.log.Warn("run commit refused: not the lock owner", "executionId", req.Owner, "runId", req.RunID, "holder", st.owner, "holderRunId", st.runID)
			return Result{RunID: req.RunID, Checkpoint: st.checkpoint}, fmt.Errorf("commit %s: %w (holder: %q)", req.RunID, ErrNotOwner, st.runID)
		}
		if req.Window != nil && (!req.Window.Since.Equal(st.window.Since) || !req.Window.Until.Equal(st.window.Until)) {
			return Result{}, fmt.Errorf("commit %s: %w: the run carried %s, the lock holds %s", req.RunID, ErrWindowMismatch, req.Window, st.window)
		}
		if !st.window.Since.Equal(st.checkpoint) || st.window.Until.Before(st.window.Since) {
			return Result{}, fmt.Errorf("commit %s: held window %s does not start at the checkpoint %s; release the lock with `cdcctl unlock --force`",
				req.RunID, st.window, envelope.FormatTime(st.checkpoint))
		}
		now := s.now()
		pend, err := nextPending(st, req.Export, st.runID, now)
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: %w", req.RunID, err)
		}
		delivered := req.Export
		if (delivered == nil || delivered.Parts == 0) && st.pending != nil {
			e := st.pending.Next
			delivered = &e
		}
		outcome, checkpoint, change := OutcomeSucceeded, st.window.Until, pendingChange{clear: st.pending != nil}
		switch {
		case pend != nil:
			outcome, checkpoint, change = OutcomePartial, st.checkpoint, pendingChange{set: pend}
		case st.window.Empty():
			outcome = OutcomeEmpty
		}
		h := HistoryRecord{RunID: st.runID, ExecutionID: st.owner, StartTime: st.startTime, AcquiredAt: st.lockedAt,
			EndedAt: now, Window: st.window, ExportWindow: s.heldExportWindow(st), Empty: st.window.Empty(), Outcome: outcome,
			ExportJobID: req.ExportJobID, Counts: req.Counts}
		if delivered != nil && delivered.Parts > 0 {
			h.Part, h.Parts = delivered.Part, delivered.Parts
			if h.ExportJobID == "" {
				h.ExportJobID = delivered.JobID
			}
		}
		err = s.transact(ctx, s.releaseWrite(st, now, outcome, "", checkpoint, change), s.historyPut(st, h, now))
		if s.decideAgain(ctx, err, attempt, "commit") {
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("commit %s: write RUN/STATE: %w", req.RunID, err)
		}
		s.log.Info("run committed", "executionId", req.Owner, "runId", req.RunID, "window", st.window.String(),
			"outcome", string(outcome), "files", req.Counts.Files, "events", req.Counts.Events, "deletes", req.Counts.Deletes, "part", h.Part, "parts", h.Parts)
		return Result{RunID: req.RunID, Checkpoint: checkpoint, Outcome: outcome, Window: st.window, Released: true, Pending: pend}, nil
	}
	return Result{}, fmt.Errorf("commit %s: %w after %d attempts", req.RunID, ErrConflict, maxAttempts)
}

// Fail marks the run FAILED with req.Reason and, if the caller holds the
// lock, releases it; the checkpoint never moves. When the caller no longer
// holds the lock, only its history item is marked and Released is false.
func (s *Store) Fail(ctx context.Context, req FailRequest) (Result, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := s.getState(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("fail %s: %w", req.RunID, err)
		}
		now := s.now()
		change := pendingChange{clear: st.pending != nil}
		if change.key = st.redactKey; len(change.key) == 0 {
			if change.key, err = newRedactKey(); err != nil {
				return Result{}, fmt.Errorf("fail %s: redaction key: %w", req.RunID, err)
			}
			change.newKey = true
		}
		reason := clip.String(Redact(change.key, req.Reason), maxReasonBytes)
		if !st.locked() || st.owner != req.Owner {
			if !req.StartTime.IsZero() {
				s.markFailed(ctx, historySK(req.StartTime.UTC().Truncate(time.Millisecond), req.RunID), now, req, reason)
			}
			s.log.Warn("run failed without holding the lock", "executionId", req.Owner, "runId", req.RunID, "holderRunId", st.runID)
			return Result{RunID: req.RunID, Checkpoint: st.checkpoint, Outcome: OutcomeFailed}, nil
		}
		h := HistoryRecord{RunID: st.runID, ExecutionID: st.owner, StartTime: st.startTime, AcquiredAt: st.lockedAt,
			EndedAt: now, Window: st.window, ExportWindow: s.heldExportWindow(st), Empty: st.window.Empty(), Outcome: OutcomeFailed,
			Reason: reason, ExportJobID: req.ExportJobID}
		if st.pending != nil {
			h.Part, h.Parts = st.pending.Next.Part, st.pending.Next.Parts
		}
		err = s.transact(ctx, s.releaseWrite(st, now, OutcomeFailed, reason, st.checkpoint, change), s.historyPut(st, h, now))
		if s.decideAgain(ctx, err, attempt, "fail") {
			continue
		}
		if err != nil {
			return Result{}, fmt.Errorf("fail %s: write RUN/STATE: %w", req.RunID, err)
		}
		s.log.Warn("run failed", "executionId", req.Owner, "runId", req.RunID, "window", st.window.String())
		return Result{RunID: req.RunID, Checkpoint: st.checkpoint, Outcome: OutcomeFailed, Window: st.window, Released: true}, nil
	}
	return Result{}, fmt.Errorf("fail %s: %w after %d attempts", req.RunID, ErrConflict, maxAttempts)
}

// pendingChange says what a release does to the pending export and the
// redaction key: set a new pending, clear it, or (zero value) keep it.
type pendingChange struct {
	set   *Pending
	clear bool
	// key is stored when newKey (a record from before keys existed).
	key    []byte
	newKey bool
}

// releaseWrite removes the lock held by st.owner, records the run's outcome
// on STATE and sets the checkpoint (unchanged unless committing) and the
// pending export. It only applies while st.owner still holds the lock at
// the version read.
func (s *Store) releaseWrite(st state, now time.Time, outcome Outcome, reason string, checkpoint time.Time, pc pendingChange) types.TransactWriteItem {
	update := "SET #cp = :cp, #version = #version + :one, #lastRunId = :run, #lastOutcome = :outcome, #lastEndedAt = :now, " +
		"#lastReason = :reason, " + lockClear
	switch {
	case pc.set != nil:
		update += ", #pending = :pending"
	case pc.clear:
		update += ", #pending = :none"
	}
	if pc.newKey {
		update += ", #rk = :rk"
	}
	if checkpoint.After(st.checkpoint) {
		// Delivered up to the new checkpoint: the next window may skip what
		// this run published in its overlap (docs/RUNLOCK.md, "Overlap").
		update += ", #cpBy = :commit"
	}
	cond := "#owner = :owner AND #version = :v AND #cp = :oldcp"
	names := lockNames(map[string]string{"#cp": attrCheckpoint, "#lastRunId": attrLastRunID, "#lastOutcome": attrLastOutcome,
		"#lastEndedAt": attrLastEndedAt, "#lastReason": attrLastReason, "#cpBy": attrCheckpointBy})
	values := map[string]types.AttributeValue{
		":cp": tm(checkpoint), ":oldcp": tm(st.checkpoint), ":one": n(1), ":run": str(st.runID), ":outcome": str(string(outcome)),
		":now": tm(now), ":reason": str(reason), ":owner": str(st.owner), ":v": n(st.version), ":none": str(""),
		":commit": str(checkpointByCommit),
	}
	if pc.set != nil {
		values[":pending"] = pendingAV(*pc.set)
	}
	if pc.newKey {
		values[":rk"] = &types.AttributeValueMemberB{Value: pc.key}
	}
	u := &types.Update{TableName: aws.String(s.cfg.Table), Key: stateKey(),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond)}
	u.ExpressionAttributeNames, u.ExpressionAttributeValues = used(names, values, update, cond)
	return types.TransactWriteItem{Update: u}
}

func (s *Store) historyPut(st state, h HistoryRecord, now time.Time) types.TransactWriteItem {
	it := historyItem(h, now.Add(s.cfg.HistoryTTL))
	if st.historySK != "" {
		it[attrSK] = str(st.historySK)
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: it}}
}

// markFailed marks an existing history item FAILED unless it already ended
// as SUCCEEDED or EMPTY. Best effort.
func (s *Store) markFailed(ctx context.Context, sk string, now time.Time, req FailRequest, reason string) {
	update := "SET #outcome = :failed, #reason = :reason, #endedAt = :now"
	values := map[string]types.AttributeValue{
		":failed": str(string(OutcomeFailed)), ":reason": str(reason), ":now": tm(now),
		":ok": str(string(OutcomeSucceeded)), ":empty": str(string(OutcomeEmpty)),
	}
	if req.ExportJobID != "" {
		update += ", #job = :job"
		values[":job"] = str(req.ExportJobID)
	}
	cond := "attribute_exists(pk) AND #outcome <> :ok AND #outcome <> :empty"
	names, vals := used(map[string]string{"#outcome": attrOutcome, "#reason": attrReason, "#endedAt": attrEndedAt, "#job": attrExportJobID}, values, update, cond)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: key(pkRun, sk),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if err != nil && !errors.Is(err, context.Canceled) && !conditionFailed(err) {
		s.log.Warn("history of failed run not updated", "runId", req.RunID, "error", err.Error())
	}
}
