package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func init() {
	register("unlock", command{
		summary: "release the run lock when its owner is no longer running (--force: whatever its state)",
		run:     runUnlock,
	})
}

// unlockView is the JSON form of `cdcctl unlock`.
type unlockView struct {
	Table    string           `json:"table"`
	Released bool             `json:"released"`
	Locked   bool             `json:"locked"`
	Owner    string           `json:"owner,omitempty"`
	RunID    string           `json:"runId,omitempty"`
	Liveness runlock.Liveness `json:"liveness"`
	Forced   bool             `json:"forced"`
}

func runUnlock(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("unlock", stderr)
	force := fs.Bool("force", false, "release even if the owner looks alive; its commit will then be refused")
	by := fs.String("by", actor(), "who asks, stored in the run's history (default $CDC_ACTOR or user@host)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "unlock", err.Error())
	}
	store, err := f.store(cfg)
	if err != nil {
		return fail(stderr, "unlock", err.Error())
	}
	res, err := store.Unlock(ctx, runlock.UnlockRequest{Force: *force, Actor: *by})
	if err != nil && !errors.Is(err, runlock.ErrLockHeld) {
		return fail(stderr, "unlock", f.explain(err))
	}
	v := unlockView{Table: f.table, Released: res.Released, Locked: res.Owner != "", Owner: res.Owner, RunID: res.RunID,
		Liveness: res.Liveness, Forced: *force}
	if f.json {
		if werr := writeJSON(stdout, v); werr != nil {
			return fail(stderr, "unlock", werr.Error())
		}
	} else if res.Owner != "" {
		fmt.Fprintf(stdout, "lock held by run %s\n  owner  %s\n  window %s\n  state  %s\n", res.RunID, res.Owner, res.Window, res.Liveness.Why)
	}
	switch {
	case err != nil:
		return fail(stderr, "unlock", "not released: the owner may still be running ("+res.Liveness.Why+").\n"+
			"wait for it, stop it (aws stepfunctions stop-execution --execution-arn "+res.Owner+"), or pass --force")
	case res.Released && !f.json && res.Pending != nil:
		n := res.Pending.Next
		fmt.Fprintf(stdout, "released; the checkpoint did not move, the next run delivers part %d of %d of export job %s again\n",
			n.Part+1, n.Parts, orDash(n.JobID))
	case res.Released && !f.json:
		fmt.Fprintln(stdout, "released; the checkpoint did not move, the next run retries the same window")
	case !res.Released && !f.json:
		fmt.Fprintln(stdout, "the lock is free; nothing to do")
	}
	return exitOK
}
