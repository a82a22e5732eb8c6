package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

func init() {
	register("run", command{
		summary: "start a state machine execution now",
		run:     runRun,
	})
}

// StartExecutionAPI is the part of the Step Functions client `run` uses.
type StartExecutionAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
}

// runView is the JSON form of `cdcctl run`.
type runView struct {
	ExecutionARN string `json:"executionArn"`
	StartDate    string `json:"startDate"`
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
	out, err := startExecution(ctx, sfn.NewFromConfig(cfg), f.stateMachineARN, *name)
	if err != nil {
		return fail(stderr, "run", f.explain(err))
	}
	v.ExecutionARN = aws.ToString(out.ExecutionArn)
	if out.StartDate != nil {
		v.StartDate = events.FormatTime(*out.StartDate)
	}
	if f.json {
		if err := writeJSON(stdout, v); err != nil {
			return fail(stderr, "run", err.Error())
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "started %s at %s\n", v.ExecutionARN, orDash(v.StartDate))
	if v.LockHeldBy != "" {
		fmt.Fprintf(stdout, "note: run %s holds the lock, so this execution will be skipped; see `cdcctl status`\n", v.LockHeldBy)
	}
	return exitOK
}

func startExecution(ctx context.Context, c StartExecutionAPI, stateMachineARN, name string) (*sfn.StartExecutionOutput, error) {
	out, err := c.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(stateMachineARN),
		Name:            aws.String(name),
		Input:           aws.String("{}"),
	})
	if err != nil {
		return nil, fmt.Errorf("start execution %s of %s: %w", name, stateMachineARN, err)
	}
	if out.ExecutionArn == nil {
		return nil, errors.New("start execution: no execution ARN in the answer")
	}
	return out, nil
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
