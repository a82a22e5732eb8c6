package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func init() {
	register("status", command{
		summary: "show the lock holder, checkpoint, lag, current export job and the last runs",
		run:     runStatus,
	})
}

// statusView is the JSON form of `cdcctl status`.
type statusView struct {
	Table      string `json:"table"`
	Exists     bool   `json:"exists"`
	Now        string `json:"now"`
	Checkpoint string `json:"checkpoint,omitempty"`
	// Datastore is the HealthLake data store the checkpoint belongs to;
	// DatastoreChanged says why no run starts when CDC_DATASTORE_ID names
	// another one (the stack's DatastoreId changed).
	Datastore        string    `json:"datastoreId,omitempty"`
	DatastoreChanged string    `json:"datastoreChanged,omitempty"`
	LagSeconds       float64   `json:"lagSeconds"`
	Lock             *lockView `json:"lock"`
	// Pending is the rest of a multi-part export, null when none.
	Pending     *runlock.Pending        `json:"pending"`
	ExportJob   *runlock.ExportJob      `json:"exportJob,omitempty"`
	LastRun     *runlock.LastRun        `json:"lastRun,omitempty"`
	LastReplay  *runlock.ReplayRecord   `json:"lastReplay,omitempty"`
	SkippedRuns int64                   `json:"skippedRuns"`
	Takeovers   int64                   `json:"takeovers"`
	History     []runlock.HistoryRecord `json:"history"`
	// LocalMetrics holds cdc-local's metric totals (only against a local endpoint).
	LocalMetrics *localMetrics `json:"localMetrics,omitempty"`
	// Reconciliation is the last reconciliation: the newest execution of
	// its state machine (when its ARN is known) and the last finished one
	// (RECONCILE/STATE) with its counts.
	Reconciliation *reconcileStatusView `json:"reconciliation,omitempty"`
	// Executions are the recent executions of the pipeline's state machine
	// whose status the run history does not show: failed before taking the
	// lock (no run record), or failed after their run committed (when the
	// state machine's ARN is known). ExecutionsError says why they could
	// not be listed.
	Executions      []executionNote `json:"executions,omitempty"`
	ExecutionsError string          `json:"executionsError,omitempty"`
}

// reconcileStatusView is the reconciliation part of `cdcctl status`.
type reconcileStatusView struct {
	// Outcome is the newest reconciliation's: SUCCEEDED (it finished:
	// RECONCILE/STATE names it), RUNNING, SKIPPED, FAILED, TIMED_OUT,
	// ABORTED, or NONE before the first.
	Outcome string `json:"outcome"`
	// Latest is the newest execution of the reconciliation's state machine.
	Latest *executionNote `json:"latest,omitempty"`
	// Last is the last finished reconciliation and its counts.
	Last *reconcileSummary `json:"last,omitempty"`
}

// executionNote is one execution and what its run record says.
type executionNote struct {
	RunID     string `json:"runId"`
	Status    string `json:"status"`
	StartDate string `json:"startDate,omitempty"`
	StopDate  string `json:"stopDate,omitempty"`
	// Error is the execution's error name (no PHI), when it failed.
	Error string `json:"error,omitempty"`
	// RunOutcome is the outcome its run record shows; "" when it has none.
	RunOutcome string `json:"runOutcome,omitempty"`
	// Note says what happened, in the words of cdc-local's window line.
	Note string `json:"note,omitempty"`
}

type lockView struct {
	Owner        string           `json:"owner"`
	RunID        string           `json:"runId"`
	LockedAt     string           `json:"lockedAt"`
	LeaseUntil   string           `json:"leaseUntil"`
	Window       envelope.Window  `json:"window"`
	ExportWindow envelope.Window  `json:"exportWindow"`
	OwnerStatus  string           `json:"ownerStatus,omitempty"`
	Live         bool             `json:"live"`
	Liveness     runlock.Liveness `json:"liveness"`
}

func runStatus(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("status", stderr)
	limit := fs.Int("last", 10, "number of recent runs to show")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "status", err.Error())
	}
	store, err := f.store(cfg)
	if err != nil {
		return fail(stderr, "status", err.Error())
	}
	st, err := store.Status(ctx, max(*limit, 0))
	if err != nil {
		return fail(stderr, "status", f.explain(err))
	}
	v := statusView{Table: f.table, Exists: st.Exists, Now: envelope.FormatTime(st.Now), LagSeconds: st.Lag.Seconds(),
		ExportJob: st.ExportJob, LastRun: st.LastRun, LastReplay: st.LastReplay, SkippedRuns: st.SkippedRuns,
		Takeovers: st.Takeovers, History: st.History, Pending: st.Pending}
	if st.Exists {
		v.Checkpoint = envelope.FormatTime(st.Checkpoint)
		v.Datastore = st.Datastore
		if st.DatastoreChanged != nil {
			v.DatastoreChanged = st.DatastoreChanged.Error()
		}
	}
	if l := st.Lock; l != nil {
		v.Lock = &lockView{Owner: l.Owner, RunID: l.RunID, LockedAt: envelope.FormatTime(l.LockedAt),
			LeaseUntil: envelope.FormatTime(l.LeaseUntil), Window: l.Window, ExportWindow: l.ExportWindow, OwnerStatus: l.Liveness.Status,
			Live: l.Liveness.Live, Liveness: l.Liveness}
	}
	sfnc := sfn.NewFromConfig(cfg)
	if f.stateMachineARN != "" {
		if v.Executions, err = unrecordedExecutions(ctx, sfnc, f.stateMachineARN, st.History, max(*limit, 0)); err != nil {
			v.ExecutionsError = oneLine(f.explain(err), 300)
		}
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = f.endpoint != "" })
	if v.Reconciliation, err = reconciliationStatus(ctx, db, sfnc, f.table, os.Getenv(envReconcileStateMachineARN)); err != nil {
		return fail(stderr, "status", f.explain(err))
	}
	lm, haveLocal := fetchLocalMetrics(ctx, f.endpoint)
	if haveLocal {
		v.LocalMetrics = lm
	}
	if f.json {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "status", err.Error())
		}
		return exitOK
	}
	printStatus(stdout, st, v)
	if haveLocal {
		printLocalMetrics(stdout, lm)
	}
	return exitOK
}

func printStatus(w io.Writer, st runlock.Status, v statusView) {
	fmt.Fprintf(w, "table        %s\n", v.Table)
	if !st.Exists {
		fmt.Fprintln(w, "checkpoint   none yet: the first run creates it from CDC_INITIAL_CHECKPOINT,")
		fmt.Fprintln(w, "             or set one now with `cdcctl replay --since T`")
		printExecutions(w, v)
		return
	}
	if envelope.IsSnapshotSince(st.Checkpoint) {
		fmt.Fprintf(w, "checkpoint   %s: the next run exports the whole store\n", checkpointText(st.Checkpoint))
	} else {
		fmt.Fprintf(w, "checkpoint   %s (lag %s)\n", envelope.FormatTime(st.Checkpoint), roundDur(st.Lag))
	}
	if st.Datastore != "" {
		fmt.Fprintf(w, "data store   %s\n", st.Datastore)
	}
	if e := st.DatastoreChanged; e != nil {
		fmt.Fprintf(w, "WARNING      %s\n", e.Error())
	}
	if l := st.Lock; l != nil {
		state := "live"
		if !l.Liveness.Live {
			state = "STALE: the next run takes it over, or run `cdcctl unlock`"
		}
		fmt.Fprintf(w, "lock         held by %s since %s (%s; %s)\n", l.RunID, envelope.FormatTime(l.LockedAt), l.Liveness.Why, state)
		fmt.Fprintf(w, "  owner      %s\n", l.Owner)
		fmt.Fprintf(w, "  window     %s (exports %s)\n", l.Window, l.ExportWindow)
		fmt.Fprintf(w, "  lease      until %s\n", envelope.FormatTime(l.LeaseUntil))
	} else {
		fmt.Fprintln(w, "lock         free")
	}
	if p := st.Pending; p != nil {
		n := p.Next
		fmt.Fprintf(w, "pending      part %d of %d (%d files) of export job %s (run %s) over %s;\n", n.Part+1, n.Parts,
			n.FileCount, orDash(n.JobID), n.ManifestRunID, n.Window)
		fmt.Fprintf(w, "             the next run delivers it; the checkpoint moves to %s after the last part\n", envelope.FormatTime(p.Window.Until))
	}
	if j := st.ExportJob; j != nil {
		fmt.Fprintf(w, "export job   %s %s (run %s, started %s)\n", orDash(j.JobID), orDash(j.Status), j.RunID, orDash(j.StartedAt))
	}
	if r := st.LastRun; r != nil {
		line := fmt.Sprintf("last run     %s %s at %s", r.RunID, r.Outcome, envelope.FormatTime(r.EndedAt))
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		fmt.Fprintln(w, line)
	}
	if r := st.LastReplay; r != nil {
		line := fmt.Sprintf("last replay  %s by %s: %s -> %s", envelope.FormatTime(r.At), orDash(r.By), timeOrDash(r.From), envelope.FormatTime(r.To))
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "skipped runs %d", st.SkippedRuns)
	if !st.LastSkippedAt.IsZero() {
		fmt.Fprintf(w, " (last %s)", envelope.FormatTime(st.LastSkippedAt))
	}
	fmt.Fprintf(w, ", take-overs %d\n", st.Takeovers)
	printReconciliationStatus(w, v.Reconciliation)
	defer printExecutions(w, v)
	if len(st.History) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "last runs (newest first):")
	// The fast path's columns only when a run counted something for it.
	fast := false
	for _, h := range st.History {
		fast = fast || h.Counts.FastPathSkipped > 0 || h.Counts.FastPathMissed > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "STARTED\tRUN\tOUTCOME\tWINDOW\tPART\tFILES\tEVENTS\tDELETES\tQUARANTINED\t"
	if fast {
		head += "FAST PATH SKIPPED\tFAST PATH MISSED\t"
	}
	fmt.Fprintln(tw, head+"JOB\tREASON")
	for _, h := range st.History {
		part := "-"
		if h.Parts > 0 {
			part = fmt.Sprintf("%d/%d", h.Part+1, h.Parts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t", envelope.FormatTime(h.StartTime), h.RunID, h.Outcome, h.Window,
			part, h.Counts.Files, h.Counts.Events, h.Counts.Deletes, h.Counts.Quarantined)
		if fast {
			fmt.Fprintf(tw, "%d\t%d\t", h.Counts.FastPathSkipped, h.Counts.FastPathMissed)
		}
		fmt.Fprintf(tw, "%s\t%s\n", orDash(h.ExportJobID), oneLine(h.Reason, 80))
	}
	_ = tw.Flush()
}

func roundDur(d time.Duration) time.Duration {
	if d > time.Minute || d < -time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func orDash(v string) string {
	if v == "" {
		return "-"
	}
	return v
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return envelope.FormatTime(t)
}

func oneLine(v string, n int) string {
	r := []rune(strings.Join(strings.Fields(v), " "))
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return string(r)
}
