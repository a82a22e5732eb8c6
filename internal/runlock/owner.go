package runlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
)

// Execution statuses an OwnerChecker returns: the Step Functions ones, plus
// StatusGone for an execution that does not exist (any more).
const (
	StatusRunning        = "RUNNING"
	StatusPendingRedrive = "PENDING_REDRIVE"
	StatusGone           = "GONE"
)

// OwnerChecker tells the status of the execution that owns a lock.
type OwnerChecker interface {
	// ExecutionStatus returns RUNNING, SUCCEEDED, FAILED, TIMED_OUT,
	// ABORTED, PENDING_REDRIVE or GONE.
	ExecutionStatus(ctx context.Context, executionArn string) (status string, err error)
}

// ownerLive reports whether an execution in status may still act on the
// lock. A PENDING_REDRIVE execution is about to run again, so it counts as live.
func ownerLive(status string) bool {
	return status == StatusRunning || status == StatusPendingRedrive
}

// DescribeExecutionAPI is the part of the Step Functions client SFNOwnerChecker uses.
type DescribeExecutionAPI interface {
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
}

// SFNOwnerChecker asks Step Functions for a lock owner's status.
type SFNOwnerChecker struct {
	Client DescribeExecutionAPI
}

// ExecutionStatus implements OwnerChecker; an execution Step Functions does
// not know is StatusGone.
func (c SFNOwnerChecker) ExecutionStatus(ctx context.Context, executionArn string) (string, error) {
	if c.Client == nil {
		return "", errors.New("describe execution: no Step Functions client")
	}
	out, err := c.Client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(executionArn)})
	if err != nil {
		var dne *sfntypes.ExecutionDoesNotExist
		if errors.As(err, &dne) {
			return StatusGone, nil
		}
		return "", fmt.Errorf("describe execution %s: %w", executionArn, err)
	}
	return string(out.Status), nil
}

// Liveness is what the store concluded about a lock's owner.
type Liveness struct {
	// Live: the owner may still act on the lock; nobody may take it.
	Live bool `json:"live"`
	// Status is the owner's execution status, "" when unknown or not asked.
	Status string `json:"status,omitempty"`
	// LeaseExpired: the lease ran out, so the owner cannot still run.
	LeaseExpired bool `json:"leaseExpired"`
	// Why says how the verdict was reached (no PHI: statuses and times only).
	Why string `json:"why"`
}

// liveness decides whether the lock holder of st is live at now. An expired
// lease is final; otherwise the OwnerChecker decides, and an owner whose
// status cannot be read counts as live (never take over on doubt).
func (s *Store) liveness(ctx context.Context, st state, now time.Time) Liveness {
	if !st.locked() {
		return Liveness{Why: "not locked"}
	}
	if !st.leaseUntil.IsZero() && !now.Before(st.leaseUntil) {
		return Liveness{LeaseExpired: true, Why: "lease expired"}
	}
	if s.cfg.Owners == nil {
		return Liveness{Live: true, Why: "lease valid; owner status not checked"}
	}
	status, err := s.cfg.Owners.ExecutionStatus(ctx, st.owner)
	if err != nil {
		s.log.Warn("run lock owner status unknown", "owner", st.owner, "runId", st.runID, "error", err.Error())
		return Liveness{Live: true, Why: "owner status unknown: " + clip.String(err.Error(), 200)}
	}
	if ownerLive(status) {
		return Liveness{Live: true, Status: status, Why: "owner is " + status}
	}
	return Liveness{Status: status, Why: "owner is " + status}
}
