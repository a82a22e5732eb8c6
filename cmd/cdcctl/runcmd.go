package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

func init() {
	register("run", command{
		summary: "start a state machine execution now",
		run:     runRun,
	})
}

// StartExecutionAPI is the part of the Step Functions client `run` and
// `reconcile` use: DescribeExecution tells an execution of the same name
// that is still running from a new one.
type StartExecutionAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

// runView is the JSON form of `cdcctl run`.
type runView struct {
	ExecutionARN string `json:"executionArn"`
	StartDate    string `json:"startDate"`
	// AlreadyRunning: an execution of this name was running already, and
	// no new one was started (StartDate is that execution's).
	AlreadyRunning bool `json:"alreadyRunning,omitempty"`
	// LockHeldBy names the run holding the lock when this one started: the
	// new execution will then be skipped.
	LockHeldBy string `json:"lockHeldBy,omitempty"`
	// With --wait: Status is the execution's status once it ended, Error
	// its error name when it did not succeed (no PHI: the cause is left
	// out), Run its run record, and Skipped says it ended without one
	// because another run held the lock.
	Status  string                 `json:"status,omitempty"`
	Error   string                 `json:"error,omitempty"`
	Run     *runlock.HistoryRecord `json:"run,omitempty"`
	Skipped bool                   `json:"skipped,omitempty"`
}

func runRun(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("run", stderr)
	name := fs.String("name", "", "execution name (default: manual-{time}); it becomes the run id")
	wait := fs.Bool("wait", false, "wait until the execution ends and print its run's outcome and counts")
	timeout := fs.Duration("timeout", stackconfig.Default().RunTimeout,
		"with --wait: give up waiting after this long (the execution goes on); default the deployed run timeout")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if f.stateMachineARN == "" {
		fmt.Fprintln(stderr, "cdcctl run: no state machine: pass --state-machine-arn ARN or "+setHint(envStateMachineARN))
		return exitUsage
	}
	if *wait && f.table == "" {
		fmt.Fprintln(stderr, "cdcctl run --wait: no table to read the run's record from: pass --table NAME or "+setHint(envTable))
		return exitUsage
	}
	cfg, err := f.awsConfig(ctx)
	if err != nil {
		return fail(stderr, "run", err.Error())
	}
	if *name == "" {
		*name = "manual-" + time.Now().UTC().Format("20060102T150405.000Z")
		*name = replaceDots(*name)
	}
	v := runView{}
	if f.table != "" { // a hint only: the lock decides
		if store, err := f.store(cfg); err == nil {
			if st, err := store.Status(ctx, 0); err == nil && st.Lock != nil && st.Lock.Liveness.Live {
				v.LockHeldBy = st.Lock.RunID
			}
		}
	}
	sfnc := sfn.NewFromConfig(cfg)
	st, err := startExecution(ctx, sfnc, f.stateMachineARN, *name)
	if err != nil {
		return fail(stderr, "run", f.explain(err))
	}
	v.ExecutionARN, v.StartDate, v.AlreadyRunning = st.ARN, st.StartDate, st.AlreadyRunning
	if st.AlreadyRunning {
		v.LockHeldBy = "" // the hint was about this very execution, or about one it waits for
	}
	if !f.json {
		printStarted(stdout, v)
	}
	if *wait {
		store, err := f.store(cfg)
		if err != nil {
			return fail(stderr, "run", err.Error())
		}
		if err := waitRun(ctx, sfnc, store, *timeout, &v); err != nil {
			return fail(stderr, "run", f.explain(err)+"\nthe execution goes on: see `cdcctl status`")
		}
	}
	if f.json {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "run", err.Error())
		}
	} else if *wait {
		printRunEnd(stdout, v)
	}
	if *wait && (v.Status != string(sfntypes.ExecutionStatusSucceeded) || v.Skipped) {
		return exitFailure
	}
	return exitOK
}

// printStarted says what `cdcctl run` started, or that it found the
// execution running.
func printStarted(w io.Writer, v runView) {
	if v.AlreadyRunning {
		fmt.Fprintf(w, "already running: %s (started %s); no new execution started\n", v.ExecutionARN, orDash(v.StartDate))
		return
	}
	fmt.Fprintf(w, "started %s at %s\n", v.ExecutionARN, orDash(v.StartDate))
	if v.LockHeldBy != "" {
		fmt.Fprintf(w, "note: run %s holds the lock, so this execution will be skipped; see `cdcctl status`\n", v.LockHeldBy)
	}
}

// runHistoryAPI is the part of the run-lock store `run --wait` reads.
type runHistoryAPI interface {
	RunHistory(ctx context.Context, runID string, started time.Time) (*runlock.HistoryRecord, error)
}

// waitRun waits up to timeout for the execution v names to end, then reads
// its run record: the outcome, window and counts `cdcctl status` shows for
// it.
func waitRun(ctx context.Context, c describeExecutionAPI, runs runHistoryAPI, timeout time.Duration, v *runView) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := waitExecution(wctx, c, v.ExecutionARN, time.Second)
	if err != nil {
		return err
	}
	v.Status = string(d.Status)
	if d.Status != sfntypes.ExecutionStatusSucceeded {
		v.Error = aws.ToString(d.Error)
	}
	runID := aws.ToString(d.Name)
	if runID == "" {
		runID = executionName(v.ExecutionARN)
	}
	if v.Run, err = runs.RunHistory(ctx, runID, aws.ToTime(d.StartDate)); err != nil {
		return err
	}
	v.Skipped = v.Run == nil && d.Status == sfntypes.ExecutionStatusSucceeded
	return nil
}

// printRunEnd says how the execution `cdcctl run --wait` waited for ended.
func printRunEnd(w io.Writer, v runView) {
	name := executionName(v.ExecutionARN)
	switch {
	case v.Skipped:
		fmt.Fprintf(w, "skipped: %s took no lock (another run held it) and delivered nothing; see `cdcctl status`\n", name)
	case v.Run != nil:
		r := v.Run
		fmt.Fprintf(w, "run %s %s: window %s", name, r.Outcome, r.Window)
		if r.Parts > 1 {
			fmt.Fprintf(w, ", part %d of %d", r.Part+1, r.Parts)
		}
		fmt.Fprintf(w, ", %d files, %d events, %d deletes, %d quarantined", r.Counts.Files, r.Counts.Events, r.Counts.Deletes, r.Counts.Quarantined)
		if r.Reason != "" {
			fmt.Fprintf(w, "; %s", oneLine(r.Reason, 200))
		}
		fmt.Fprintln(w)
	default:
		fmt.Fprintf(w, "run %s: no run record (%s)\n", name, noteBeforeLock)
	}
	if v.Status != string(sfntypes.ExecutionStatusSucceeded) {
		fmt.Fprintf(w, "execution %s %s", name, v.Status)
		if v.Error != "" {
			fmt.Fprintf(w, ": error %s", v.Error)
		}
		fmt.Fprintln(w, " (see its history in the Step Functions console)")
	}
}

// executionName is the name in an execution's ARN (its last field): the
// run id.
func executionName(arn string) string {
	return arn[strings.LastIndexByte(arn, ':')+1:]
}

// started is what startExecution did.
type started struct {
	ARN       string
	StartDate string
	// AlreadyRunning: an execution of that name was running, so none was
	// started. (Step Functions answers StartExecution for a running
	// STANDARD execution of the same name and input with that execution,
	// which would otherwise read as a new start.)
	AlreadyRunning bool
}

// startExecution starts an execution named name with the input {}, unless
// one of that name is running; one of that name that has ended makes Step
// Functions refuse the start (ExecutionAlreadyExists), which is returned.
// The look for a running one is a hint: when DescribeExecution fails (a role
// without it, say), the start goes ahead.
func startExecution(ctx context.Context, c StartExecutionAPI, stateMachineARN, name string) (started, error) {
	if arn, ok := executionARN(stateMachineARN, name); ok {
		d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err == nil && (d.Status == sfntypes.ExecutionStatusRunning || d.Status == sfntypes.ExecutionStatusPendingRedrive) {
			st := started{ARN: aws.ToString(d.ExecutionArn), AlreadyRunning: true}
			if st.ARN == "" {
				st.ARN = arn
			}
			if d.StartDate != nil {
				st.StartDate = envelope.FormatTime(*d.StartDate)
			}
			return st, nil
		}
	}
	out, err := c.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(stateMachineARN),
		Name:            aws.String(name),
		Input:           aws.String("{}"),
	})
	if err != nil {
		return started{}, fmt.Errorf("start execution %s of %s: %w", name, stateMachineARN, err)
	}
	if out.ExecutionArn == nil {
		return started{}, errors.New("start execution: no execution ARN in the answer")
	}
	st := started{ARN: aws.ToString(out.ExecutionArn)}
	if out.StartDate != nil {
		st.StartDate = envelope.FormatTime(*out.StartDate)
	}
	return st, nil
}

// executionARN is the ARN Step Functions gives the execution name of a
// state machine: arn:PARTITION:states:REGION:ACCOUNT:execution:MACHINE:NAME,
// whether stateMachineARN names the machine or one of its versions or
// aliases (…:stateMachine:MACHINE:QUALIFIER).
func executionARN(stateMachineARN, name string) (string, bool) {
	const marker = ":stateMachine:"
	i := strings.Index(stateMachineARN, marker)
	if i < 0 || !strings.HasPrefix(stateMachineARN, "arn:") {
		return "", false
	}
	machine, _, _ := strings.Cut(stateMachineARN[i+len(marker):], ":")
	return stateMachineARN[:i] + ":execution:" + machine + ":" + name, true
}

// replaceDots makes a name valid for Step Functions (letters, digits, - and _).
func replaceDots(v string) string {
	b := []byte(v)
	for i, c := range b {
		if c == '.' || c == ':' {
			b[i] = '-'
		}
	}
	return string(b)
}
