package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
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
	// DroppedPending is the multi-part export the replay dropped (its
	// remaining parts are exported again by the next runs).
	DroppedPending *runlock.Pending `json:"droppedPending,omitempty"`
}

func runReplay(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("replay", stderr)
	since := fs.String("since", "", "new checkpoint, RFC 3339 (required): changes after it are emitted again")
	reason := fs.String("reason", "", "why, stored in the audit record")
	by := fs.String("by", actor(), "who asks, stored in the audit record (default $CDC_ACTOR or user@host)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *since == "" {
		fmt.Fprintln(stderr, "cdcctl replay: --since T is required, e.g. --since 2026-11-21T08:00:00Z")
		return exitUsage
	}
	t, err := events.ParseTime(*since)
	if err != nil {
		fmt.Fprintf(stderr, "cdcctl replay: --since: %v; use RFC 3339 such as 2026-11-21T08:00:00Z\n", err)
		return exitUsage
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "replay", err.Error())
	}
	store, err := f.store(cfg)
	if err != nil {
		return fail(stderr, "replay", err.Error())
	}
	res, err := store.Replay(ctx, runlock.ReplayRequest{Since: t, Actor: *by, Reason: *reason})
	switch {
	case errors.Is(err, runlock.ErrLockHeld):
		return fail(stderr, "replay", err.Error()+"\nsee `cdcctl status`; replay once the run has finished")
	case errors.Is(err, runlock.ErrStaleLock), errors.Is(err, runlock.ErrNotBackwards):
		return fail(stderr, "replay", err.Error())
	case err != nil:
		return fail(stderr, "replay", f.explain(err))
	}
	r := res.Record
	if f.json {
		v := replayView{Table: f.table, To: events.FormatTime(r.To), At: events.FormatTime(r.At), By: r.By, Reason: r.Reason, Created: res.Created,
			DroppedPending: res.DroppedPending}
		if !r.From.IsZero() {
			v.From = events.FormatTime(r.From)
		}
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "replay", err.Error())
		}
		return exitOK
	}
	if res.Created {
		fmt.Fprintf(stdout, "checkpoint set to %s (new RUN record) by %s\n", events.FormatTime(r.To), r.By)
	} else {
		fmt.Fprintf(stdout, "checkpoint moved back from %s to %s by %s\n", events.FormatTime(r.From), events.FormatTime(r.To), r.By)
	}
	if p := res.DroppedPending; p != nil {
		fmt.Fprintf(stdout, "dropped the pending export (parts %d-%d of %d of job %s): the next run exports afresh\n",
			p.Next.Part+1, p.Next.Parts, p.Next.Parts, orDash(p.Next.JobID))
	}
	fmt.Fprintln(stdout, "the next runs re-emit every change after it, with the same event ids; run `cdcctl run` to start one now")
	return exitOK
}
