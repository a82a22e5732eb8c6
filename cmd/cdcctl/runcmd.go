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

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
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
}

func runRun(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, f := newAWSFlagSet("run", stderr)
	name := fs.String("name", "", "execution name (default: manual-{time}); it becomes the run id")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if f.stateMachineARN == "" {
		fmt.Fprintln(stderr, "cdcctl run: no state machine: pass --state-machine-arn ARN or "+setHint(envStateMachineARN))
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
	st, err := startExecution(ctx, sfn.NewFromConfig(cfg), f.stateMachineARN, *name)
	if err != nil {
		return fail(stderr, "run", f.explain(err))
	}
	v.ExecutionARN, v.StartDate, v.AlreadyRunning = st.ARN, st.StartDate, st.AlreadyRunning
	if st.AlreadyRunning {
		v.LockHeldBy = "" // the hint was about this very execution, or about one it waits for
	}
	if f.json {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "run", err.Error())
		}
		return exitOK
	}
	if st.AlreadyRunning {
		fmt.Fprintf(stdout, "already running: %s (started %s); no new execution started\n", v.ExecutionARN, orDash(v.StartDate))
		return exitOK
	}
	fmt.Fprintf(stdout, "started %s at %s\n", v.ExecutionARN, orDash(v.StartDate))
	if v.LockHeldBy != "" {
		fmt.Fprintf(stdout, "note: run %s holds the lock, so this execution will be skipped; see `cdcctl status`\n", v.LockHeldBy)
	}
	return exitOK
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
				st.StartDate = events.FormatTime(*d.StartDate)
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
		st.StartDate = events.FormatTime(*out.StartDate)
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
