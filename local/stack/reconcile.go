package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
	"github.com/healthlake-cdc/healthlake-cdc/statemachine"
)

// FnReconcile is the reconcile Lambda's function name.
const FnReconcile = stackconfig.Reconcile

// reconcileMachineName is the reconciliation state machine's name: the
// stack's name + "-reconcile" (statemachine.ReconcileName by default).
func (s *Stack) reconcileMachineName() string { return s.opts.Name + "-reconcile" }

// reconcileEvery is the reconciliation schedule of Run: the option, else
// the deployed one (stackconfig ReconcileEvery, daily); none when < 0.
func (s *Stack) reconcileEvery() time.Duration {
	switch d := s.opts.ReconcileEvery; {
	case d < 0:
		return 0
	case d > 0:
		return d
	}
	return stackconfig.Default().ReconcileEvery
}

// registerReconcile builds the reconcile Lambda from its package's
// constructor with the deployed configuration's environment
// (CDC_RECONCILE_PARTITIONS, the publish rate), signing as its own role.
func (s *Stack) registerReconcile() error {
	h, err := reconcile.NewFromEnv(s.getenv(stackconfig.Reconcile), s.runtime(iampolicy.Reconcile))
	if err != nil {
		return fmt.Errorf("stack: reconcile: %w", err)
	}
	if err := s.Lambdas.Register(FnReconcile, h.Handle, lambdas.WithDeadlineMargin(h.DeadlineMargin())); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// ReconcileSubstitutions are the reconciliation definition's values: the
// pipeline's and the reconcile Lambda.
func (s *Stack) ReconcileSubstitutions() map[string]string {
	sub := s.Substitutions()
	sub[statemachine.ReconcileFunctionArn] = s.Lambdas.ARN(FnReconcile)
	return sub
}

// createReconcileMachine creates the reconciliation's state machine from
// statemachine/reconcile.asl.json, with its own role.
func (s *Stack) createReconcileMachine(ctx context.Context) error {
	def, err := statemachine.Substitute(statemachine.ReconcileDefinition(), s.ReconcileSubstitutions())
	if err != nil {
		return fmt.Errorf("stack: reconcile definition: %w", err)
	}
	out, err := s.sfnc.CreateStateMachine(ctx, &sfnapi.CreateStateMachineInput{
		Name:       aws.String(s.reconcileMachineName()),
		Definition: aws.String(string(def)),
		RoleArn:    aws.String(s.roleARN(iampolicy.ReconcileStateMachine)),
		Type:       sfntypes.StateMachineTypeStandard,
	})
	if err != nil {
		return fmt.Errorf("stack: create reconcile state machine: %w", err)
	}
	s.Res.ReconcileStateMachineARN = aws.ToString(out.StateMachineArn)
	return nil
}

// StartReconciliation starts one reconciliation now, as its schedule (and
// cdcctl reconcile) does, and returns the execution's ARN.
func (s *Stack) StartReconciliation(ctx context.Context) (string, error) {
	return s.startScheduled(ctx, s.Res.ReconcileStateMachineARN, "reconcile")
}

// Reconciliation is how one reconciliation ended.
type Reconciliation struct {
	ExecutionARN, RunID string
	// Status is the execution's (SUCCEEDED, FAILED, …); Error and Cause
	// its failure, clipped.
	Status, Error, Cause string
	// Skipped: the execution found the lock held (or no checkpoint yet)
	// and ended without reconciling.
	Skipped bool
	// Last is RECONCILE/STATE after it (nil before the first finished one).
	Last *reconcile.LastRun
	// StartedAt and StoppedAt are the execution's (the stack's clock):
	// waiting for the lock included.
	StartedAt, StoppedAt time.Time
}

// Duration is how long the execution ran, waiting for the lock included.
func (r Reconciliation) Duration() time.Duration {
	if r.StartedAt.IsZero() || r.StoppedAt.IsZero() {
		return 0
	}
	return r.StoppedAt.Sub(r.StartedAt)
}

// Finished reports whether this execution finished a reconciliation
// (RECONCILE/STATE names it).
func (r Reconciliation) Finished() bool {
	return r.Status == string(sfntypes.ExecutionStatusSucceeded) && r.Last != nil && r.Last.RunID == r.RunID
}

// Reconcile runs one reconciliation now and waits for it.
func (s *Stack) Reconcile(ctx context.Context) (Reconciliation, error) {
	arn, err := s.StartReconciliation(ctx)
	if err != nil {
		return Reconciliation{}, err
	}
	return s.WaitReconciliation(ctx, arn)
}

// WaitReconciliation polls a reconciliation until it ends (with the
// back-off of Wait).
func (s *Stack) WaitReconciliation(ctx context.Context, arn string) (Reconciliation, error) {
	out, err := s.awaitExecution(ctx, arn)
	if err != nil {
		return Reconciliation{}, err
	}
	r := Reconciliation{ExecutionARN: arn, RunID: aws.ToString(out.Name), Status: string(out.Status),
		Error: aws.ToString(out.Error), Cause: clip.String(aws.ToString(out.Cause), 512),
		StartedAt: aws.ToTime(out.StartDate), StoppedAt: aws.ToTime(out.StopDate)}
	last, err := reconcile.Last(ctx, s.ddb, s.Res.Table)
	if err != nil {
		return r, fmt.Errorf("stack: %w", err)
	}
	r.Last = last
	r.Skipped = out.Status == sfntypes.ExecutionStatusSucceeded && !r.Finished()
	if s.log != nil {
		s.log.Info("reconciliation ended", "runId", r.RunID, "status", r.Status, "skipped", r.Skipped)
	}
	return r, nil
}

// --- the state machines act as their own roles ---------------------------

// machinePrincipal is the role a state machine's call is made as: the
// reconciliation's for its executions, the pipeline's otherwise.
func (s *Stack) machinePrincipal(ctx context.Context) iampolicy.Principal {
	if fakesfn.RoleARN(ctx) == s.roleARN(iampolicy.ReconcileStateMachine) {
		return iampolicy.ReconcileStateMachine
	}
	return iampolicy.StateMachine
}

// machineInvoker checks and runs the state machines' Lambda tasks as the
// calling machine's role.
type machineInvoker struct{ s *Stack }

func (m machineInvoker) Invoke(ctx context.Context, function string, payload []byte) ([]byte, bool, error) {
	s := m.s
	return iam.CheckedInvoker{Next: s.Lambdas, Auth: s.IAM, Principal: s.machinePrincipal(ctx), FunctionARN: s.Lambdas.ARN}.
		Invoke(ctx, function, payload)
}

// machineSQS sends the machines' SQS tasks as the calling machine's role.
type machineSQS struct {
	s       *Stack
	clients map[iampolicy.Principal]*sqs.Client
}

func (m machineSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return m.clients[m.s.machinePrincipal(ctx)].SendMessage(ctx, in, optFns...)
}

// machineS3 serves the machines' ItemReader and ResultWriter as the
// calling machine's role.
type machineS3 struct {
	s       *Stack
	clients map[iampolicy.Principal]*s3.Client
}

func (m machineS3) GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	return m.clients[m.s.machinePrincipal(ctx)].GetObject(ctx, in, optFns...)
}

func (m machineS3) PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	return m.clients[m.s.machinePrincipal(ctx)].PutObject(ctx, in, optFns...)
}

// machineClients returns the state machines' Lambda, SQS and S3 clients.
func (s *Stack) machineClients() (machineInvoker, machineSQS, machineS3) {
	q := machineSQS{s: s, clients: map[iampolicy.Principal]*sqs.Client{}}
	o := machineS3{s: s, clients: map[iampolicy.Principal]*s3.Client{}}
	for _, p := range []iampolicy.Principal{iampolicy.StateMachine, iampolicy.ReconcileStateMachine} {
		q.clients[p] = sqs.NewFromConfig(s.principalConfig(p))
		o.clients[p] = awsclient.NewS3(s.principalConfig(p))
	}
	return machineInvoker{s: s}, q, o
}
