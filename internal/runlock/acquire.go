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

// AcquireRequest asks for the lock on behalf of one execution.
type AcquireRequest struct {
	// Owner is the execution ARN; RunID the execution name.
	Owner, RunID string
	// StartTime is the execution's start time; zero means now.
	StartTime time.Time
}

// Acquisition is the answer to Acquire.
type Acquisition struct {
	// Acquired: the caller holds the lock and must run Window.
	Acquired bool
	// Reason says why the lock was refused or how it was taken.
	Reason string
	RunID  string
	// Window is what the checkpoint covers once the run commits.
	Window envelope.Window
	// ExportWindow is what the run exports and delivers: Window widened
	// back by the overlap (a reused export keeps the one it was started with).
	ExportWindow envelope.Window
	// Reuse, when set, is the next part of an export a previous run
	// started: the run delivers it instead of exporting.
	Reuse *manifest.Export
	// Empty: the window holds no instant; commit at once.
	Empty bool
	// Continues: a run's commit set the checkpoint (not a replay, not the
	// record's creation), so the run before this one delivered its export
	// window up to Window.Since, and this run may skip the versions it
	// already published in the overlap (docs/RUNLOCK.md, "Overlap").
	Continues bool
	// Refusal says, machine-readably, why the lock was refused ("" when
	// acquired): RefusalLockHeld (a live run holds it; it will be free once
	// that run ends).
	Refusal Refusal
	// Holder is the execution ARN that keeps the lock when refused.
	Holder string
	// TookOverFrom is the execution ARN of a stale owner the lock was taken from.
	TookOverFrom string
	// Checkpoint is the checkpoint the decision was taken on (zero on a
	// fresh table), so every run — refused ones too — can report the lag.
	Checkpoint time.Time
	// PreviousRunID names the run before this one when it ended without
	// finishing cleanly (PreviousOutcome FAILED or ABANDONED: taken over,
	// unlocked, or failed): its HealthLake export may still be running and
	// must be stopped before this run starts its own. Empty otherwise.
	PreviousRunID   string
	PreviousOutcome Outcome
}

// Refusal is why Acquire refused the lock.
type Refusal string

// The refusals.
const (
	RefusalLockHeld Refusal = "LOCK_HELD"
)

// uncleanPrevious returns the last finished run of st when it ended FAILED
// or ABANDONED (its export may still run), else "".
func uncleanPrevious(st state) (string, Outcome) {
	if st.lastRunID != "" && (st.lastOutcome == OutcomeFailed || st.lastOutcome == OutcomeAbandoned) {
		return st.lastRunID, st.lastOutcome
	}
	return "", ""
}

// maxAttempts bounds the read-decide-write loop when the RUN record changes
// between the read and the conditional write, or is being written by
// another request (a transaction conflict, waited out between attempts).
const maxAttempts = 5

// Acquire takes the lock for req.Owner with one conditional write that also
// records the window. It creates the RUN record from the initial checkpoint
// on a fresh table, takes over a lock whose owner no longer runs, and
// refuses (Acquired=false, no error) while a live run holds it. Calling it
// again for the owner that holds the lock returns the same window.
func (s *Store) Acquire(ctx context.Context, req AcquireRequest) (Acquisition, error) {
	if req.Owner == "" || req.RunID == "" {
		return Acquisition{}, errors.New("acquire: owner (execution ARN) and run id (execution name) are required")
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		st, err := s.getState(ctx)
		if err != nil {
			return Acquisition{}, fmt.Errorf("acquire: %w", err)
		}
		now := s.now()
		start := req.StartTime.UTC().Truncate(time.Millisecond)
		if start.IsZero() {
			start = now
		}
		if st.locked() && st.owner == req.Owner {
			// A retried acquire: report the unclean previous run again, so a
			// first attempt that died before stopping its export is made good.
			prev, prevOutcome := uncleanPrevious(st)
			a := Acquisition{Acquired: true, Reason: "already held by this run", RunID: st.runID,
				Window: st.window, ExportWindow: s.heldExportWindow(st), Empty: st.window.Empty(), Checkpoint: st.checkpoint,
				PreviousRunID: prev, PreviousOutcome: prevOutcome, Continues: st.committed}
			if st.pending != nil {
				e := st.pending.Next
				a.Reuse = &e
			}
			return a, nil
		}
		if err := s.boundElsewhere(st); err != nil {
			s.log.Error("run lock refused: the data store changed", "executionId", req.Owner, "runId", req.RunID,
				"boundDatastoreId", st.datastoreID, "datastoreId", s.cfg.DatastoreID)
			return Acquisition{}, fmt.Errorf("acquire %s: %w", req.RunID, err)
		}
		var tookOver string
		var live Liveness
		if st.locked() {
			live = s.liveness(ctx, st, now)
			if live.Live {
				return s.refuse(ctx, req, st, live, now), nil
			}
			tookOver = st.owner
		}
		checkpoint := st.checkpoint
		if !st.exists {
			checkpoint = s.initialCheckpoint(now)
		}
		lw := lockArgs{key: st.redactKey}
		if len(lw.key) == 0 {
			if lw.key, err = newRedactKey(); err != nil {
				return Acquisition{}, fmt.Errorf("acquire: redaction key: %w", err)
			}
			lw.newKey = true
		}
		pending := st.pending
		if pending != nil && (!pending.Window.Since.Equal(checkpoint) || pending.Window.Until.Before(pending.Window.Since)) {
			// Cannot happen through this package (replay clears it); never
			// deliver a part of a window the checkpoint is not at.
			s.log.Warn("pending export dropped: its window does not start at the checkpoint",
				"runId", req.RunID, "pendingWindow", pending.Window.String(), "checkpoint", envelope.FormatTime(checkpoint))
			pending, lw.clearPending = nil, true
		}
		var w, ew envelope.Window
		var reuse *manifest.Export
		if pending != nil {
			e := pending.Next
			w, ew, reuse = pending.Window, e.Window, &e
		} else {
			w = WindowAt(checkpoint, now, s.cfg.SafetyLag, s.cfg.MaxWindow)
			ew = ExportWindowOf(w, s.cfg.Overlap)
		}
		h := HistoryRecord{RunID: req.RunID, ExecutionID: req.Owner, StartTime: start, AcquiredAt: now,
			Window: w, ExportWindow: ew, Empty: w.Empty(), Outcome: OutcomeRunning, TookOverFrom: tookOver}
		if reuse != nil {
			h.ExportJobID, h.Part, h.Parts = reuse.JobID, reuse.Part, reuse.Parts
		}
		lw.why = "taken over by " + req.RunID + ": " + live.Why
		err = s.transact(ctx, s.lockWrite(st, req, h, now, lw), types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.cfg.Table), Item: historyItem(h, now.Add(s.cfg.HistoryTTL)),
		}})
		if s.decideAgain(ctx, err, attempt, "acquire") {
			continue // the record changed, or was being written: decide again
		}
		if err != nil {
			return Acquisition{}, fmt.Errorf("acquire: write RUN/STATE: %w", err)
		}
		a := Acquisition{Acquired: true, RunID: req.RunID, Window: w, ExportWindow: ew, Reuse: reuse, Empty: w.Empty(),
			Reason: "acquired", Checkpoint: checkpoint, Continues: st.exists && st.committed}
		if reuse != nil {
			a.Reason = fmt.Sprintf("acquired; delivers part %d of %d of the export of run %s", reuse.Part+1, reuse.Parts, reuse.ManifestRunID)
		}
		a.PreviousRunID, a.PreviousOutcome = uncleanPrevious(st)
		switch {
		case !st.exists:
			a.Reason = "acquired; RUN record created from the initial checkpoint"
			s.log.Info("run lock created", "executionId", req.Owner, "runId", req.RunID, "window", w.String())
		case tookOver != "":
			a.TookOverFrom = tookOver
			a.PreviousRunID, a.PreviousOutcome = st.runID, OutcomeAbandoned
			a.Reason = "acquired; took over from " + st.runID + " (" + Redact(lw.key, live.Why) + ")"
			s.log.Warn("run lock taken over", "executionId", req.Owner, "runId", req.RunID,
				"previousOwner", st.owner, "previousRunId", st.runID, "why", live.Why, "window", w.String())
			s.markAbandoned(ctx, st, now, Redact(lw.key, lw.why))
		default:
			s.log.Info("run lock acquired", "executionId", req.Owner, "runId", req.RunID, "window", w.String())
		}
		return a, nil
	}
	return Acquisition{}, fmt.Errorf("acquire: %w after %d attempts", ErrConflict, maxAttempts)
}

// lockWrite is the one conditional write that takes the lock: it creates
// the record (fresh table) or updates it only if nobody changed it since st
// was read (the version) and, on take-over, only from the stale owner.
func (s *Store) lockWrite(st state, req AcquireRequest, h HistoryRecord, now time.Time, lw lockArgs) types.TransactWriteItem {
	hsk := historySK(h.StartTime, h.RunID)
	if !st.exists {
		it := stateKey()
		it[attrCheckpoint] = tm(h.Window.Since)
		it[attrOrigin] = tm(h.Window.Since)
		it[attrVersion] = n(1)
		it[attrCreatedAt] = tm(now)
		it[attrOwner] = str(req.Owner)
		it[attrRunID] = str(req.RunID)
		it[attrStartTime] = tm(h.StartTime)
		it[attrLockedAt] = tm(now)
		it[attrLeaseUntil] = tm(now.Add(s.cfg.Lease))
		it[attrWindowSince] = tm(h.Window.Since)
		it[attrWindowUntil] = tm(h.Window.Until)
		it[attrExportSince] = tm(h.ExportWindow.Since)
		it[attrHistorySK] = str(hsk)
		it[attrRedactKey] = &types.AttributeValueMemberB{Value: lw.key}
		if s.cfg.DatastoreID != "" {
			it[attrDatastore] = str(s.cfg.DatastoreID)
		}
		return types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(s.cfg.Table), Item: it,
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}}
	}
	values := map[string]types.AttributeValue{
		":v": n(st.version), ":one": n(1), ":owner": str(req.Owner), ":runId": str(req.RunID),
		":start": tm(h.StartTime), ":now": tm(now), ":lease": tm(now.Add(s.cfg.Lease)),
		":ws": tm(h.Window.Since), ":wu": tm(h.Window.Until), ":es": tm(h.ExportWindow.Since), ":hsk": str(hsk),
		":cp": tm(st.checkpoint), ":none": str(""), ":rk": &types.AttributeValueMemberB{Value: lw.key},
	}
	cond := "#version = :v AND #cp = :cp AND " + lockFree
	update := "SET #owner = :owner, #runId = :runId, #startTime = :start, #lockedAt = :now, #leaseUntil = :lease, " +
		"#ws = :ws, #wu = :wu, #es = :es, #hsk = :hsk, #version = #version + :one"
	if lw.newKey {
		update += ", #rk = :rk"
	}
	if lw.clearPending {
		update += ", #pending = :none"
	}
	if st.datastoreID == "" && s.cfg.DatastoreID != "" {
		// A record from before the binding adopts the configured store.
		update += ", #ds = :ds"
		values[":ds"] = str(s.cfg.DatastoreID)
	}
	if st.locked() {
		cond = "#version = :v AND #cp = :cp AND #owner = :old"
		values[":old"] = str(st.owner)
		update += " ADD #takeovers :one"
		// A take-over also closes the stale run's record on STATE.
		update = "SET #lastRunId = :oldRun, #lastOutcome = :abandoned, #lastReason = :why, #lastEndedAt = :now, " + update[len("SET "):]
		values[":oldRun"] = str(st.runID)
		values[":abandoned"] = str(string(OutcomeAbandoned))
		values[":why"] = str(clip.String(Redact(lw.key, lw.why), 500))
	}
	names := lockNames(map[string]string{
		"#cp": attrCheckpoint, "#takeovers": attrTakeovers, "#lastRunId": attrLastRunID,
		"#lastOutcome": attrLastOutcome, "#lastReason": attrLastReason, "#lastEndedAt": attrLastEndedAt, "#ds": attrDatastore,
	})
	u := &types.Update{TableName: aws.String(s.cfg.Table), Key: stateKey(),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond)}
	u.ExpressionAttributeNames, u.ExpressionAttributeValues = used(names, values, update, cond)
	return types.TransactWriteItem{Update: u}
}

// lockArgs are the parts of the lock write beyond the history record.
type lockArgs struct {
	// key is the redaction key; newKey: it is new and must be stored.
	key    []byte
	newKey bool
	// clearPending drops a pending export that does not fit the checkpoint.
	clearPending bool
	// why is the take-over reason (used only on take-over).
	why string
}

// heldExportWindow is the export window of the lock holder of st.
func (s *Store) heldExportWindow(st state) envelope.Window {
	if st.pending != nil {
		return st.pending.Next.Window
	}
	if !st.exportSince.IsZero() {
		return envelope.Window{Since: st.exportSince, Until: st.window.Until}
	}
	return ExportWindowOf(st.window, s.cfg.Overlap)
}

// refuse answers a refused acquire: logged, counted on RUN/STATE, harmless.
func (s *Store) refuse(ctx context.Context, req AcquireRequest, st state, live Liveness, now time.Time) Acquisition {
	reason := "lock held by run " + st.runID + " since " + envelope.FormatTime(st.lockedAt) + " (" + live.Why + ")"
	s.log.Warn("run lock refused", "executionId", req.Owner, "runId", req.RunID,
		"holder", st.owner, "holderRunId", st.runID, "holderWindow", st.window.String(), "why", live.Why)
	// A run is counted once: the same refusal sent again (its answer lost)
	// or asked again finds itself the last one counted. A write of the
	// record at the same moment (a transaction conflict) is waited out.
	for attempt := 0; ; attempt++ {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.cfg.Table), Key: stateKey(),
			UpdateExpression:          aws.String("ADD #skipped :one SET #lastSkippedAt = :now, #lastSkippedRunId = :runId"),
			ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(#lastSkippedRunId) OR #lastSkippedRunId <> :runId)"),
			ExpressionAttributeNames:  map[string]string{"#skipped": attrSkippedRuns, "#lastSkippedAt": attrLastSkippedAt, "#lastSkippedRunId": attrLastSkippedRunID},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1), ":now": tm(now), ":runId": str(req.RunID)},
		})
		if transactionConflict(err) && attempt+1 < maxAttempts && s.waitOutConflict(ctx, attempt) {
			continue
		}
		if err != nil && !conditionFailed(err) {
			s.log.Warn("run lock refusal not counted", "runId", req.RunID, "error", err.Error())
		}
		break
	}
	return Acquisition{Acquired: false, Reason: reason, Refusal: RefusalLockHeld, RunID: req.RunID, Holder: st.owner, Checkpoint: st.checkpoint}
}

// markAbandoned closes the history item of a run whose lock was taken from
// it, if that item still says RUNNING. Best effort: the lock is already moved.
func (s *Store) markAbandoned(ctx context.Context, st state, now time.Time, why string) {
	if st.historySK == "" {
		return
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table), Key: key(pkRun, st.historySK),
		UpdateExpression:         aws.String("SET #outcome = :abandoned, #reason = :why, #endedAt = :now"),
		ConditionExpression:      aws.String("#outcome = :running"),
		ExpressionAttributeNames: map[string]string{"#outcome": attrOutcome, "#reason": attrReason, "#endedAt": attrEndedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":abandoned": str(string(OutcomeAbandoned)), ":why": str(clip.String(why, 500)), ":now": tm(now),
			":running": str(string(OutcomeRunning)),
		},
	})
	if err != nil && !conditionFailed(err) {
		s.log.Warn("history of abandoned run not updated", "runId", st.runID, "error", err.Error())
	}
}
