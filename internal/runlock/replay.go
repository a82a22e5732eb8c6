package runlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// ReplayRequest moves the checkpoint back.
type ReplayRequest struct {
	// Since is the new checkpoint: the next window starts right after it.
	Since time.Time
	// Snapshot, with Since zero, moves the checkpoint to the beginning
	// (envelope.SnapshotSince): the next window exports the whole store as
	// it is, without _since and without reading deletions (a snapshot
	// window has none to announce: docs/RUNLOCK.md, "First run").
	Snapshot bool
	// Actor names who asks (user or role ARN); Reason says why. Both are
	// stored in the audit item, never logged.
	Actor, Reason string
	// Datastore moves the record to this HealthLake data store when it
	// belongs to another (the pipeline's DatastoreId changed): the new
	// store is delivered from Since, which may then be after the old
	// store's checkpoint, and the time of the move becomes the record's
	// origin: the reconciliation compares only versions written after it,
	// so the old store's versions in the delivered index (all written
	// before) are never taken for deletions of the new store. "" keeps
	// the record's data store.
	Datastore string
}

// ReplayResult is a replay that was applied.
type ReplayResult struct {
	Record ReplayRecord
	// Created: the RUN record did not exist and was created at Since.
	Created bool
	// DroppedPending is the pending export the replay dropped, nil if none.
	DroppedPending *Pending
}

// Replay sets the checkpoint to req.Since (not after the current one) and
// writes a REPLAY audit item, in one transaction conditioned on nobody
// holding the lock. It fails with ErrLockHeld while a live run holds the
// lock, ErrStaleLock while a run that stopped still holds it, and
// ErrNotBackwards for a time after the checkpoint. On a fresh table it
// creates the RUN record at req.Since.
func (s *Store) Replay(ctx context.Context, req ReplayRequest) (ReplayResult, error) {
	if req.Since.IsZero() && !req.Snapshot {
		return ReplayResult{}, errors.New("replay: no time given: pass --since T (RFC 3339) or --since snapshot")
	}
	if !req.Since.IsZero() && req.Snapshot {
		return ReplayResult{}, errors.New("replay: a snapshot has no time: pass either --since T or --since snapshot")
	}
	since := req.Since.UTC().Truncate(time.Millisecond)
	if req.Snapshot {
		since = envelope.SnapshotSince
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := s.getState(ctx)
		if err != nil {
			return ReplayResult{}, fmt.Errorf("replay: %w", err)
		}
		now := s.now()
		if since.After(now) {
			return ReplayResult{}, fmt.Errorf("replay: %s is in the future: %w", envelope.FormatTime(since), ErrNotBackwards)
		}
		if req.Datastore != "" && s.cfg.DatastoreID != "" && req.Datastore != s.cfg.DatastoreID {
			return ReplayResult{}, fmt.Errorf("replay: --datastore %s is not the pipeline's data store %s (%s)", req.Datastore, s.cfg.DatastoreID, stackconfig.EnvDatastoreID)
		}
		moved := st.exists && req.Datastore != "" && req.Datastore != st.datastoreID
		if err := s.boundElsewhere(st); err != nil && !moved {
			return ReplayResult{}, fmt.Errorf("replay: %w", err)
		}
		if st.locked() {
			live := s.liveness(ctx, st, now)
			if live.Live {
				return ReplayResult{}, fmt.Errorf("replay: %w: run %s (%s); wait for it to finish and try again", ErrLockHeld, st.runID, live.Why)
			}
			return ReplayResult{}, fmt.Errorf("replay: %w: run %s (%s); release it with `cdcctl unlock`, then replay", ErrStaleLock, st.runID, live.Why)
		}
		if st.exists && !moved && since.After(st.checkpoint) {
			return ReplayResult{}, fmt.Errorf("replay: %s is after the checkpoint %s: %w (moving it forward would skip changes)",
				envelope.FormatTime(since), envelope.FormatTime(st.checkpoint), ErrNotBackwards)
		}
		rec := ReplayRecord{At: now, By: req.Actor, To: since, Reason: clip.String(req.Reason, maxReasonBytes)}
		if st.exists {
			rec.From = st.checkpoint
		}
		if moved {
			rec.FromDatastore, rec.Datastore = st.datastoreID, req.Datastore
		}
		audit := key(pkRun, skReplayPfx+envelope.FormatTime(now)+"#"+fmt.Sprint(st.version))
		audit[attrAt] = tm(now)
		audit[attrBy] = str(req.Actor)
		audit[attrTo] = tm(since)
		audit[attrTTL] = n(now.Add(s.cfg.ReplayTTL).Unix())
		if st.exists {
			audit[attrFrom] = tm(st.checkpoint)
		}
		if rec.Reason != "" {
			audit[attrReason] = str(rec.Reason)
		}
		if moved {
			audit[attrDatastore] = str(rec.Datastore)
			if rec.FromDatastore != "" {
				audit[attrFromDatastore] = str(rec.FromDatastore)
			}
		}
		auditPut := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: audit,
			ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		var stateWrite types.TransactWriteItem
		if !st.exists {
			it := stateKey()
			it[attrCheckpoint] = tm(since)
			it[attrOrigin] = tm(since)
			it[attrVersion] = n(1)
			it[attrCreatedAt] = tm(now)
			it[attrLastReplayAt] = tm(now)
			it[attrLastReplayBy] = str(req.Actor)
			it[attrLastReplayTo] = tm(since)
			it[attrCheckpointBy] = str(checkpointByReplay)
			key, kerr := newRedactKey()
			if kerr != nil {
				return ReplayResult{}, fmt.Errorf("replay: redaction key: %w", kerr)
			}
			it[attrRedactKey] = &types.AttributeValueMemberB{Value: key}
			if rec.Reason != "" {
				it[attrLastReplayReason] = str(rec.Reason)
			}
			if ds := cmp.Or(req.Datastore, s.cfg.DatastoreID); ds != "" {
				it[attrDatastore] = str(ds)
			}
			stateWrite = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.cfg.Table), Item: it,
				ConditionExpression: aws.String("attribute_not_exists(pk)")}}
		} else {
			// A replay drops any pending export: the next run exports its
			// window afresh.
			update := "SET #cp = :to, #version = #version + :one, #rAt = :now, #rBy = :by, #rFrom = :from, #rTo = :to"
			// ... and the window after it skips nothing as already delivered.
			update += ", #rReason = :reason, #pending = :none, #cpBy = :replay"
			if moved {
				// ... and the new data store is the pipeline's; what the
				// reconciliation compares starts now (the old store's
				// delivered versions are all older).
				update += ", #ds = :ds, #origin = :now"
			}
			cond := "#version = :v AND #cp = :from AND " + lockFree
			names, values := used(map[string]string{"#cp": attrCheckpoint, "#version": attrVersion, "#rAt": attrLastReplayAt,
				"#rBy": attrLastReplayBy, "#rFrom": attrLastReplayFrom, "#rTo": attrLastReplayTo, "#rReason": attrLastReplayReason,
				"#owner": attrOwner, "#pending": attrPending, "#cpBy": attrCheckpointBy, "#ds": attrDatastore, "#origin": attrOrigin},
				map[string]types.AttributeValue{":to": tm(since), ":one": n(1), ":now": tm(now),
					":by": str(req.Actor), ":from": tm(st.checkpoint), ":reason": str(rec.Reason), ":v": n(st.version), ":none": str(""),
					":replay": str(checkpointByReplay), ":ds": str(req.Datastore)}, update, cond)
			stateWrite = types.TransactWriteItem{Update: &types.Update{TableName: aws.String(s.cfg.Table), Key: stateKey(),
				UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: names, ExpressionAttributeValues: values}}
		}
		err = s.transact(ctx, stateWrite, auditPut)
		if s.decideAgain(ctx, err, attempt, "replay") {
			continue
		}
		if err != nil {
			return ReplayResult{}, fmt.Errorf("replay: write RUN/STATE: %w", err)
		}
		s.log.Warn("checkpoint replayed", "from", envelope.FormatTime(rec.From), "to", envelope.FormatTime(since),
			"fromDatastoreId", rec.FromDatastore, "datastoreId", rec.Datastore)
		return ReplayResult{Record: rec, Created: !st.exists, DroppedPending: st.pending}, nil
	}
	return ReplayResult{}, fmt.Errorf("replay: %w after %d attempts", ErrConflict, maxAttempts)
}

// UnlockRequest releases a lock an operator judges stuck.
type UnlockRequest struct {
	// Force releases the lock even when its owner looks alive.
	Force bool
	// Actor names who asks; stored in the run's history.
	Actor string
}

// UnlockResult says what Unlock found and did.
type UnlockResult struct {
	// Released: the lock was held and this call released it.
	Released bool
	// Owner and RunID name the holder that was found ("" when not locked).
	Owner, RunID string
	Window       envelope.Window
	Liveness     Liveness
	// Pending is the multi-part export the unlock kept: the next run
	// delivers its next part again. Nil when none.
	Pending *Pending
}

// Unlock releases the lock when its owner no longer runs (or, with Force,
// whatever its state), closing the owner's run as ABANDONED. The checkpoint
// does not move. It fails with ErrLockHeld when the owner is live and Force
// is not set; a lock that is not held is not an error (Released=false).
func (s *Store) Unlock(ctx context.Context, req UnlockRequest) (UnlockResult, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := s.getState(ctx)
		if err != nil {
			return UnlockResult{}, fmt.Errorf("unlock: %w", err)
		}
		if !st.locked() {
			return UnlockResult{}, nil
		}
		now := s.now()
		live := s.liveness(ctx, st, now)
		res := UnlockResult{Owner: st.owner, RunID: st.runID, Window: st.window, Liveness: live, Pending: st.pending}
		if live.Live && !req.Force {
			return res, fmt.Errorf("unlock: %w: run %s (%s); wait for it, stop the execution, or pass --force", ErrLockHeld, st.runID, live.Why)
		}
		// The actor is who asked; the liveness verdict may quote an AWS error.
		pc := pendingChange{key: st.redactKey}
		if len(pc.key) == 0 {
			if pc.key, err = newRedactKey(); err != nil {
				return UnlockResult{}, fmt.Errorf("unlock: redaction key: %w", err)
			}
			pc.newKey = true
		}
		why := "unlocked by " + orUnknown(req.Actor) + " (" + Redact(pc.key, live.Why) + ")"
		if req.Force {
			why = "force-" + why
		}
		// The pending export stays, as on a take-over: the next run delivers
		// the part the unlocked run was given again.
		err = s.transact(ctx, s.releaseWrite(st, now, OutcomeAbandoned, clip.String(why, 500), st.checkpoint, pc))
		if s.decideAgain(ctx, err, attempt, "unlock") {
			continue
		}
		if err != nil {
			return UnlockResult{}, fmt.Errorf("unlock: write RUN/STATE: %w", err)
		}
		s.markAbandoned(ctx, st, now, why)
		s.log.Warn("run lock released by operator", "holder", st.owner, "holderRunId", st.runID, "force", req.Force, "why", live.Why)
		res.Released = true
		return res, nil
	}
	return UnlockResult{}, fmt.Errorf("unlock: %w after %d attempts", ErrConflict, maxAttempts)
}

func orUnknown(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}
