package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

func init() {
	register("replay", command{
		summary: "move the checkpoint back so the next runs re-emit changes since T",
		run:     runReplay,
	})
}

// replayView is the JSON form of `cdcctl replay`.
type replayView struct {
	Table   string `json:"table"`
	From    string `json:"from,omitempty"`
	To      string `json:"to"`
	At      string `json:"at"`
	By      string `json:"by"`
	Reason  string `json:"reason,omitempty"`
	Created bool   `json:"created"`
	// Datastore and FromDatastore: the data store the replay moved the
	// RUN record to, and from (--datastore).
	Datastore     string `json:"datastoreId,omitempty"`
	FromDatastore string `json:"fromDatastoreId,omitempty"`
	// DroppedPending is the multi-part export the replay dropped (its
	// remaining parts are exported again by the next runs).
	DroppedPending *runlock.Pending `json:"droppedPending,omitempty"`
}

func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("replay", stderr)
	since := fs.String("since", "", "new checkpoint, RFC 3339, or snapshot (required): changes after it are emitted again; snapshot: the whole store as it is, without deletions")
	reason := fs.String("reason", "", "why, stored in the audit record")
	by := fs.String("by", actor(), "who asks, stored in the audit record (default $CDC_ACTOR or user@host)")
	datastore := fs.String("datastore", "", "after the stack's DatastoreId changed: move the RUN record to this data store (the new DatastoreId), delivered from --since (which may then be after the old store's checkpoint)")
	wait := fs.Bool("wait", false, "while a live run holds the lock, wait for it to end and then replay (instead of failing)")
	waitTimeout := fs.Duration("wait-timeout", defaultReplayWaitTimeout, "with --wait: give up after this long")
	waitPoll := fs.Duration("wait-poll", defaultReplayWaitPoll, "with --wait: how often to look at the lock")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *since == "" {
		fmt.Fprintln(stderr, "cdcctl replay: --since T is required, e.g. --since 2026-11-21T08:00:00Z (or --since snapshot)")
		return exitUsage
	}
	snapshot := *since == "snapshot"
	var t time.Time
	if !snapshot {
		var err error
		if t, err = envelope.ParseTime(*since); err != nil {
			fmt.Fprintf(stderr, "cdcctl replay: --since: %v; use RFC 3339 such as 2026-11-21T08:00:00Z, or snapshot\n", err)
			return exitUsage
		}
		if envelope.IsSnapshotSince(t) {
			fmt.Fprintln(stderr, "cdcctl replay: --since: for the whole store say --since snapshot")
			return exitUsage
		}
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "replay", err.Error())
	}
	store, err := f.store(cfg)
	if err != nil {
		return fail(stderr, "replay", err.Error())
	}
	if *waitTimeout <= 0 || *waitPoll <= 0 {
		fmt.Fprintln(stderr, "cdcctl replay: --wait-timeout and --wait-poll must be positive durations")
		return exitUsage
	}
	req := runlock.ReplayRequest{Since: t, Snapshot: snapshot, Actor: *by, Reason: *reason, Datastore: strings.TrimSpace(*datastore)}
	var res runlock.ReplayResult
	if *wait {
		res, err = replayWhenFree(ctx, store, req, *waitTimeout, *waitPoll, stderr)
	} else {
		res, err = store.Replay(ctx, req)
	}
	switch {
	case errors.Is(err, errWaitTimedOut):
		return fail(stderr, "replay", err.Error()+"\nsee `cdcctl status`; the checkpoint was not moved")
	case errors.Is(err, runlock.ErrLockHeld):
		return fail(stderr, "replay", err.Error()+"\nsee `cdcctl status`; replay once the run has finished, or pass --wait")
	case errors.Is(err, runlock.ErrStaleLock), errors.Is(err, runlock.ErrNotBackwards), errors.As(err, new(*runlock.DatastoreChangedError)):
		return fail(stderr, "replay", err.Error())
	case err != nil:
		return fail(stderr, "replay", f.explain(err))
	}
	r := res.Record
	if f.json {
		v := replayView{Table: f.table, To: envelope.FormatTime(r.To), At: envelope.FormatTime(r.At), By: r.By, Reason: r.Reason, Created: res.Created,
			DroppedPending: res.DroppedPending, Datastore: r.Datastore, FromDatastore: r.FromDatastore}
		if !r.From.IsZero() {
			v.From = envelope.FormatTime(r.From)
		}
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "replay", err.Error())
		}
		return exitOK
	}
	switch {
	case res.Created:
		fmt.Fprintf(stdout, "checkpoint set to %s (new RUN record) by %s\n", checkpointText(r.To), r.By)
	case r.Datastore != "":
		fmt.Fprintf(stdout, "the RUN record moved from data store %s to %s by %s: its checkpoint is %s (was %s), its origin now\n",
			orDash(r.FromDatastore), r.Datastore, r.By, checkpointText(r.To), checkpointText(r.From))
	default:
		fmt.Fprintf(stdout, "checkpoint moved back from %s to %s by %s\n", checkpointText(r.From), checkpointText(r.To), r.By)
	}
	if p := res.DroppedPending; p != nil {
		fmt.Fprintf(stdout, "dropped the pending export (parts %d-%d of %d of job %s): the next run exports afresh\n",
			p.Next.Part+1, p.Next.Parts, p.Next.Parts, orDash(p.Next.JobID))
	}
	if r.Datastore != "" {
		fmt.Fprintln(stdout, "the next runs deliver every change of the new data store after it; nothing before it is the pipeline's to deliver")
		return exitOK
	}
	if envelope.IsSnapshotSince(r.To) {
		fmt.Fprintln(stdout, "the next run exports the whole store and emits the current version of every resource, with the same event ids (no deletes); run `cdcctl run` to start it now")
		return exitOK
	}
	fmt.Fprintln(stdout, "the next runs re-emit every change after it, with the same event ids; run `cdcctl run` to start one now")
	return exitOK
}

// checkpointText is a checkpoint as cdcctl prints it: its time, or "the
// beginning (snapshot)" for envelope.SnapshotSince.
func checkpointText(t time.Time) string {
	if envelope.IsSnapshotSince(t) {
		return "the beginning (snapshot)"
	}
	return envelope.FormatTime(t)
}

// Defaults of replay --wait.
const (
	defaultReplayWaitTimeout = 30 * time.Minute
	defaultReplayWaitPoll    = 5 * time.Second
)

// errWaitTimedOut: replay --wait gave up while a run still held the lock.
var errWaitTimedOut = errors.New("a live run still holds the lock")

// replayWhenFree replays, and while a live run holds the lock (ErrLockHeld)
// waits poll between attempts, for at most timeout. Any other outcome — a
// stale lock, a forward time, success — returns at once. It says once on
// stderr that it is waiting.
func replayWhenFree(ctx context.Context, store *runlock.Store, req runlock.ReplayRequest, timeout, poll time.Duration, stderr io.Writer) (runlock.ReplayResult, error) {
	deadline := time.Now().Add(timeout)
	said := false
	for {
		res, err := store.Replay(ctx, req)
		if !errors.Is(err, runlock.ErrLockHeld) {
			return res, err
		}
		if !said {
			fmt.Fprintf(stderr, "cdcctl replay: a run holds the lock; waiting up to %s for it to end\n", timeout)
			said = true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return res, fmt.Errorf("replay: %w after waiting %s (%w)", errWaitTimedOut, timeout, err)
		}
		if err := backoff.Sleep(ctx, min(poll, left)); err != nil {
			return res, fmt.Errorf("replay: waiting for the lock: %w", err)
		}
	}
}
