package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// executionsAPI is the part of the Step Functions client `cdcctl status`
// uses to show what the run history cannot.
type executionsAPI interface {
	ListExecutions(ctx context.Context, in *sfn.ListExecutionsInput, opts ...func(*sfn.Options)) (*sfn.ListExecutionsOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

// The notes `cdcctl status` gives an execution whose status its run record
// does not show; cdc-local's window line (local/stack, outcomeNote) says
// the same.
const (
	noteBeforeLock = "failed before taking the lock: no run record, the checkpoint did not move; the next run retries"
	noteStaleLock  = "the run record still says RUNNING: an ended execution holds the lock; the next run takes it over (or `cdcctl unlock`)"
)

func noteAfterCommit(status string, recorded runlock.Outcome) string {
	return "the execution ended " + status + " after the run committed (its run record says " + string(recorded) + ")"
}

// unrecordedExecutions lists the recent executions of the pipeline's
// state machine that ended otherwise than their run record shows: failed
// (or timed out, or aborted) before taking the lock, so without any run
// record, or after their run committed, or leaving their record RUNNING.
// Executions older than the oldest run of history are left out when
// history is not empty; at most limit are returned, newest first.
func unrecordedExecutions(ctx context.Context, c executionsAPI, stateMachineARN string, history []runlock.HistoryRecord, limit int) ([]executionNote, error) {
	if limit <= 0 {
		return nil, nil
	}
	out, err := c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(stateMachineARN),
		MaxResults: int32(min(max(3*limit, 20), 1000))})
	if err != nil {
		return nil, fmt.Errorf("list the executions of %s: %w", stateMachineARN, err)
	}
	recorded := make(map[string]runlock.HistoryRecord, len(history))
	var oldest time.Time
	for _, h := range history {
		recorded[h.RunID] = h
		if oldest.IsZero() || h.StartTime.Before(oldest) {
			oldest = h.StartTime
		}
	}
	var notes []executionNote
	for _, e := range out.Executions {
		switch e.Status {
		case sfntypes.ExecutionStatusRunning, sfntypes.ExecutionStatusPendingRedrive, sfntypes.ExecutionStatusSucceeded:
			continue // running, or ended as its record (or a skipped run) says
		}
		name := aws.ToString(e.Name)
		rec, has := recorded[name]
		if !has && !oldest.IsZero() && aws.ToTime(e.StartDate).Before(oldest) {
			continue // older than the runs shown
		}
		n := executionNote{RunID: name, Status: string(e.Status), StartDate: timeOrDash(aws.ToTime(e.StartDate)), StopDate: timeOrDash(aws.ToTime(e.StopDate))}
		switch {
		case !has:
			n.Note = noteBeforeLock
		case rec.Outcome == runlock.OutcomeSucceeded || rec.Outcome == runlock.OutcomeEmpty || rec.Outcome == runlock.OutcomePartial:
			n.RunOutcome, n.Note = string(rec.Outcome), noteAfterCommit(n.Status, rec.Outcome)
		case rec.Outcome == runlock.OutcomeRunning:
			n.RunOutcome, n.Note = string(rec.Outcome), noteStaleLock
		default:
			continue // FAILED, ABANDONED: the run table shows it
		}
		if d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn}); err == nil {
			n.Error = aws.ToString(d.Error)
		}
		notes = append(notes, n)
		if len(notes) == limit {
			break
		}
	}
	return notes, nil
}

// printExecutions prints the executions the run table does not show as
// they ended.
func printExecutions(w io.Writer, v statusView) {
	if v.ExecutionsError != "" {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "executions   not listed (%s): executions that failed before taking the lock are not shown\n", v.ExecutionsError)
		return
	}
	if len(v.Executions) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "executions the run table does not show as they ended (newest first):")
	for _, e := range v.Executions {
		line := fmt.Sprintf("  %s %s at %s: %s", e.RunID, e.Status, e.StopDate, e.Note)
		if e.Error != "" {
			line += "; error " + e.Error
		}
		fmt.Fprintln(w, line)
	}
}

// reconciliationStatus reads the last finished reconciliation
// (RECONCILE/STATE) and, when the reconciliation's state machine is known,
// its newest execution: the outcome of the last reconciliation, whether it
// finished or not.
func reconciliationStatus(ctx context.Context, db reconcile.DynamoAPI, c executionsAPI, table, stateMachineARN string) (*reconcileStatusView, error) {
	last, err := reconcile.Last(ctx, db, table)
	if err != nil {
		return nil, err
	}
	v := &reconcileStatusView{Outcome: "NONE", Last: summarize(last)}
	if last != nil {
		v.Outcome = string(sfntypes.ExecutionStatusSucceeded)
	}
	if stateMachineARN == "" {
		return v, nil
	}
	out, err := c.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(stateMachineARN), MaxResults: 1})
	if err != nil || len(out.Executions) == 0 {
		return v, nil // RECONCILE/STATE alone
	}
	e := out.Executions[0]
	n := &executionNote{RunID: aws.ToString(e.Name), Status: string(e.Status), StartDate: timeOrDash(aws.ToTime(e.StartDate)), StopDate: timeOrDash(aws.ToTime(e.StopDate))}
	switch {
	case e.Status == sfntypes.ExecutionStatusRunning || e.Status == sfntypes.ExecutionStatusPendingRedrive:
		v.Outcome = string(sfntypes.ExecutionStatusRunning)
	case e.Status == sfntypes.ExecutionStatusSucceeded && last != nil && last.RunID == n.RunID:
		v.Outcome = string(sfntypes.ExecutionStatusSucceeded)
	case e.Status == sfntypes.ExecutionStatusSucceeded:
		v.Outcome = "SKIPPED"
		n.Note = "ended without reconciling (no run had committed a checkpoint yet)"
	default:
		v.Outcome = string(e.Status)
		if d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: e.ExecutionArn}); err == nil {
			n.Error = aws.ToString(d.Error)
		}
		n.Note = "nothing moved RECONCILE/STATE; its deletes and repairs wait for the next one"
	}
	v.Latest = n
	return v, nil
}

// printReconciliationStatus prints the reconciliation line of `cdcctl
// status`: the newest reconciliation's outcome and the last finished one's
// counts.
func printReconciliationStatus(w io.Writer, v *reconcileStatusView) {
	if v == nil {
		return
	}
	l, n := v.Last, v.Latest
	switch {
	case v.Outcome == "NONE":
		fmt.Fprintln(w, "reconciliation none yet (`cdcctl reconcile` starts one)")
		return
	case v.Outcome == string(sfntypes.ExecutionStatusSucceeded):
		fmt.Fprintf(w, "reconciliation %s SUCCEEDED at %s: %s\n", l.RunID, l.FinishedAt, l.summary)
		if l.Repairs > 0 {
			fmt.Fprintln(w, "             a repair is a version the runs never delivered: see docs/OPERATIONS.md (ReconcileRepairs)")
		}
		return
	case v.Outcome == string(sfntypes.ExecutionStatusRunning):
		fmt.Fprintf(w, "reconciliation %s RUNNING since %s", n.RunID, n.StartDate)
	default:
		fmt.Fprintf(w, "reconciliation %s %s at %s", n.RunID, v.Outcome, n.StopDate)
		if n.Error != "" {
			fmt.Fprintf(w, " (%s)", n.Error)
		}
		fmt.Fprintf(w, ": %s", n.Note)
	}
	if l != nil {
		fmt.Fprintf(w, "; the last finished: %s at %s: %s", l.RunID, l.FinishedAt, l.summary)
	}
	fmt.Fprintln(w)
}
