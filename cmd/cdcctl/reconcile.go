package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
)

// envReconcileStateMachineARN names the reconciliation's state machine (the
// stack output ReconcileStateMachineArn; cdc-local serves it at /_local/config).
const envReconcileStateMachineARN = "CDC_RECONCILE_STATE_MACHINE_ARN"

func init() {
	register("reconcile", command{
		summary: "start a reconciliation now (--wait for its counts), or show the last one (reconcile status)",
		run:     runReconcile,
	})
}

// reconcileView is the JSON form of `cdcctl reconcile` and `reconcile status`.
type reconcileView struct {
	ExecutionARN string `json:"executionArn,omitempty"`
	StartDate    string `json:"startDate,omitempty"`
	// AlreadyRunning: a reconciliation of this name was running already;
	// none was started (StartDate is that one's, and --wait waits for it).
	AlreadyRunning bool `json:"alreadyRunning,omitempty"`
	// Status is the execution's status once it ended (--wait).
	Status string `json:"status,omitempty"`
	// Skipped: the execution ended without reconciling (no run has
	// committed a checkpoint yet); the schedule or an operator starts the
	// next one.
	Skipped bool `json:"skipped,omitempty"`
	// LockHeldBy names the run holding the lock when this one started.
	LockHeldBy string `json:"lockHeldBy,omitempty"`
	// Last is the last finished reconciliation (RECONCILE/STATE).
	Last *reconcileSummary `json:"last,omitempty"`
}

// reconcileSummary is one finished reconciliation: counts only.
type reconcileSummary struct {
	RunID      string `json:"runId"`
	StartedAt  string `json:"startedAt"`
	FinishedAt string `json:"finishedAt"`
	Checkpoint string `json:"checkpoint"`
	Partitions int    `json:"partitions"`
	// DeliveredLive counts the live versions of the delivered index the
	// reconciliation checked; Queries the HealthLake counts it compared
	// them with; Leaves the ranges whose counts differed, which it listed;
	// Resources the store's resources it listed in them.
	DeliveredLive int64 `json:"deliveredLive"`
	Queries       int64 `json:"queries"`
	Leaves        int64 `json:"leaves"`
	Resources     int64 `json:"resources"`
	Deletes       int64 `json:"deletes"`
	HardDeletes   int64 `json:"hardDeletes"`
	Repairs       int64 `json:"repairs"`
	Unconfirmed   int64 `json:"unconfirmed"`
	Pending       int64 `json:"pending"`
	// summary is the counts' line (reconcile.Result.Summary).
	summary string
}

func summarize(l *reconcile.LastRun) *reconcileSummary {
	if l == nil {
		return nil
	}
	return &reconcileSummary{RunID: l.RunID, StartedAt: l.StartedAt, FinishedAt: l.FinishedAt, Checkpoint: l.Checkpoint,
		Partitions: l.Partitions, DeliveredLive: l.Counts.DeliveredLive, Queries: l.Counts.Queries, Leaves: l.Counts.Leaves, Resources: l.Counts.Store, Deletes: l.Counts.Deletes, HardDeletes: l.Counts.HardDeletes,
		Repairs: l.Counts.Repairs, Unconfirmed: l.Counts.Unconfirmed, Pending: l.Counts.Pending, summary: l.Counts.Summary()}
}

// describeExecutionAPI is the part of the Step Functions client --wait uses.
type describeExecutionAPI interface {
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

func runReconcile(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("reconcile", stderr)
	smARN := fs.String("reconcile-state-machine-arn", os.Getenv(envReconcileStateMachineARN),
		"the reconciliation's state machine ARN (default $"+envReconcileStateMachineARN+", the stack output ReconcileStateMachineArn)")
	execName := fs.String("name", "", "execution name (default: reconcile-{time}); it becomes the reconciliation's run id")
	wait := fs.Bool("wait", false, "wait until it ends and print its counts")
	timeout := fs.Duration("timeout", 26*time.Hour, "with --wait: give up waiting after this long (the reconciliation goes on)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cdcctl reconcile [--wait] [flags]    start a reconciliation now")
		fmt.Fprintln(fs.Output(), "       cdcctl reconcile status [flags]    the last finished reconciliation")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	statusOnly := fs.NArg() > 0 && fs.Arg(0) == "status"
	rest := fs.Args()
	if statusOnly {
		rest = rest[1:]
	}
	if code, ok := parseFlags(fs, rest, stderr); !ok {
		return code
	}
	name := "reconcile"
	if statusOnly {
		name = "reconcile status"
	}
	if f.table == "" && (statusOnly || *wait) {
		fmt.Fprintln(stderr, "cdcctl "+name+": no table: pass --table NAME or "+setHint(envTable))
		return exitUsage
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, name, err.Error())
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = f.endpoint != "" })
	v := reconcileView{}
	if statusOnly {
		last, err := reconcile.Last(ctx, db, f.table)
		if err != nil {
			return fail(stderr, name, f.explain(err))
		}
		v.Last = summarize(last)
		return printReconcile(stdout, stderr, f.json, name, v)
	}

	if *smARN == "" {
		fmt.Fprintln(stderr, "cdcctl reconcile: no state machine: pass --reconcile-state-machine-arn ARN or "+setHint(envReconcileStateMachineARN))
		return exitUsage
	}
	if *execName == "" {
		*execName = replaceDots("reconcile-" + time.Now().UTC().Format("20060102T150405.000Z"))
	}
	if f.table != "" { // a hint only: the lock decides
		if store, err := f.store(cfg); err == nil {
			if st, err := store.Status(ctx, 0); err == nil && st.Lock != nil && st.Lock.Liveness.Live {
				v.LockHeldBy = st.Lock.RunID
			}
		}
	}
	sfnc := sfn.NewFromConfig(cfg)
	out, err := startExecution(ctx, sfnc, *smARN, *execName)
	if err != nil {
		return fail(stderr, name, f.explain(err))
	}
	v.ExecutionARN, v.StartDate, v.AlreadyRunning = out.ARN, out.StartDate, out.AlreadyRunning
	if !*wait {
		return printReconcile(stdout, stderr, f.json, name, v)
	}
	wctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := waitExecution(wctx, sfnc, v.ExecutionARN, time.Second)
	if err != nil {
		return fail(stderr, name, f.explain(err)+"\nthe reconciliation goes on: see `cdcctl reconcile status`")
	}
	v.Status = string(d.Status)
	last, err := reconcile.Last(ctx, db, f.table)
	if err != nil {
		return fail(stderr, name, f.explain(err))
	}
	v.Last = summarize(last)
	v.Skipped = d.Status == sfntypes.ExecutionStatusSucceeded && (last == nil || last.RunID != *execName)
	code := printReconcile(stdout, stderr, f.json, name, v)
	if code == exitOK && (d.Status != sfntypes.ExecutionStatusSucceeded || v.Skipped) {
		if d.Status != sfntypes.ExecutionStatusSucceeded {
			fmt.Fprintf(stderr, "cdcctl reconcile: %s ended %s: %s (see the execution's history; nothing moved RECONCILE/STATE)\n",
				*execName, d.Status, aws.ToString(d.Error))
		}
		return exitFailure
	}
	return code
}

// waitExecution polls an execution until it is no longer running.
func waitExecution(ctx context.Context, c describeExecutionAPI, arn string, every time.Duration) (*sfn.DescribeExecutionOutput, error) {
	for {
		out, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil {
			return nil, fmt.Errorf("describe %s: %w", arn, err)
		}
		if out.Status != sfntypes.ExecutionStatusRunning && out.Status != sfntypes.ExecutionStatusPendingRedrive {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for %s: %w", arn, errors.Join(ctx.Err(), errors.New("still running")))
		case <-time.After(every):
		}
	}
}

func printReconcile(stdout, stderr io.Writer, asJSON bool, name string, v reconcileView) int {
	if asJSON {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, name, err.Error())
		}
		return exitOK
	}
	switch {
	case v.AlreadyRunning:
		fmt.Fprintf(stdout, "already running: %s (started %s); no new execution started\n", v.ExecutionARN, orDash(v.StartDate))
	case v.ExecutionARN != "":
		fmt.Fprintf(stdout, "started %s at %s\n", v.ExecutionARN, orDash(v.StartDate))
		if v.LockHeldBy != "" {
			fmt.Fprintf(stdout, "note: run %s holds the lock; the reconciliation takes none and runs beside it; see `cdcctl status`\n", v.LockHeldBy)
		}
	}
	if v.Status != "" {
		switch {
		case v.Skipped:
			fmt.Fprintln(stdout, "skipped: no run has committed a checkpoint yet; nothing was compared. Start it again after the first run (`cdcctl status`)")
		default:
			fmt.Fprintf(stdout, "ended %s\n", v.Status)
		}
	}
	if v.ExecutionARN != "" && v.Status == "" {
		return exitOK
	}
	l := v.Last
	if l == nil {
		fmt.Fprintln(stdout, "last reconciliation  none yet")
		return exitOK
	}
	fmt.Fprintf(stdout, "last reconciliation  %s (started %s, finished %s)\n", l.RunID, l.StartedAt, l.FinishedAt)
	fmt.Fprintf(stdout, "checkpoint           %s, %d partitions\n", orDash(l.Checkpoint), l.Partitions)
	fmt.Fprintf(stdout, "checked              %d live versions delivered, against %d HealthLake counts\n", l.DeliveredLive, l.Queries)
	fmt.Fprintf(stdout, "listed               %d resources, in %d ranges whose counts differed\n", l.Resources, l.Leaves)
	fmt.Fprintf(stdout, "deletes              %d (hard deletes %d)\n", l.Deletes, l.HardDeletes)
	fmt.Fprintf(stdout, "repairs              %d\n", l.Repairs)
	fmt.Fprintf(stdout, "unconfirmed          %d\n", l.Unconfirmed)
	fmt.Fprintf(stdout, "pending              %d (after the checkpoint: the runs deliver them)\n", l.Pending)
	if l.Repairs > 0 {
		fmt.Fprintln(stdout, "note: a repair means a version was never delivered by the runs: see docs/OPERATIONS.md (ReconcileRepairs)")
	}
	return exitOK
}
