package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// HealthLake's job state events go to the account's default bus, where the
// stack creates the rule the CDK app deploys (exportjob's source, detail
// types, the stack's data store; target the re-check queue through
// exportjob's InputTransformer, retry policy 20 attempts / 1 hour) with the
// EventBridge API, and the EventBridge emulator routes them. The pipeline's
// bus gets the CDK app's archive.

// JobEventRuleName is the name of the rule on the default bus.
func (s *Stack) JobEventRuleName() string { return s.opts.Name + "-HealthLakeJobEvents" }

// ArchiveName is the name of the pipeline bus's archive (the CDK app's
// pipeline name + "-events", at most 48 characters).
func (s *Stack) ArchiveName() string {
	name := s.opts.Name + "-events"
	if len(name) > 48 {
		name = name[:48]
	}
	return name
}

// createEventRules creates the job-event rule (unless Options.NoJobEventRule)
// and the archive with the EventBridge API, as CloudFormation would.
func (s *Stack) createEventRules(ctx context.Context) error {
	eb := eventbridge.NewFromConfig(s.Config)
	if _, err := eb.CreateArchive(ctx, &eventbridge.CreateArchiveInput{
		ArchiveName: aws.String(s.ArchiveName()), EventSourceArn: aws.String(s.EventBridge.BusARN(s.Res.Bus)),
		Description: aws.String("Every event of the healthlake-cdc bus, for replay"),
	}); err != nil {
		return fmt.Errorf("stack: create archive: %w", err)
	}
	if s.opts.NoJobEventRule {
		return nil
	}
	pattern, err := json.Marshal(map[string]any{
		"source":      []string{exportjob.JobEventSource},
		"detail-type": exportjob.JobEventDetailTypes,
		"detail":      map[string]any{"datastoreId": []string{s.Res.DatastoreID}},
	})
	if err != nil {
		return fmt.Errorf("stack: job-event rule pattern: %w", err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: aws.String(s.JobEventRuleName()), EventPattern: aws.String(string(pattern)), State: ebtypes.RuleStateEnabled,
		Description: aws.String("HealthLake export job ends of the data store to the re-check queue"),
	}); err != nil {
		return fmt.Errorf("stack: job-event rule: %w", err)
	}
	out, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(s.JobEventRuleName()), Targets: []ebtypes.Target{{
		Id: aws.String("RecheckQueue"), Arn: aws.String(s.PolicyResources().RecheckQueueARN),
		InputTransformer: &ebtypes.InputTransformer{
			InputPathsMap: exportjob.JobEventInputPathsMap, InputTemplate: aws.String(exportjob.JobEventInputTemplate),
		},
		RetryPolicy: &ebtypes.RetryPolicy{MaximumEventAgeInSeconds: aws.Int32(3600), MaximumRetryAttempts: aws.Int32(20)},
	}}})
	if err != nil {
		return fmt.Errorf("stack: job-event rule target: %w", err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("stack: job-event rule target: %d failed entries", out.FailedEntryCount)
	}
	return nil
}

// onJobEvent puts one HealthLake event on the default bus, as HealthLake does.
func (s *Stack) onJobEvent(ev fakehealthlake.JobEvent) {
	err := s.EventBridge.PutServiceEvent(fakeeventbridge.DefaultBus, fakeeventbridge.Event{
		DetailType: ev.DetailType, Source: ev.Source, Time: ev.Time.UTC().Format("2006-01-02T15:04:05Z"),
		Resources: ev.Resources, Detail: ev.Detail,
	})
	if err != nil {
		s.log.Warn("HealthLake job event not put on the default bus", "error", err.Error())
	}
}

// healthLakeTick is how often the stack moves HealthLake's jobs on, so that
// a job finishes (and its event is sent) when the duration model says,
// not at the next request.
const healthLakeTick = 50 * time.Millisecond

// startHealthLakeTicker moves HealthLake's jobs on every healthLakeTick
// until the stack closes.
func (s *Stack) startHealthLakeTicker() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(healthLakeTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.HealthLake.Tick(ctx)
			}
		}
	}()
	s.closers = append(s.closers, func() { cancel(); <-done })
}

// recordExportNotice adds the run's delay from export end to manifest (kept
// by check-export in the run's export ledger) to the report.
func (s *Stack) recordExportNotice(ctx context.Context, runID string) {
	entry, found, err := exportjob.NewLedger(s.ddb, s.Res.Table, time.Hour, nil).Get(ctx, runID)
	if err != nil || !found || entry.NoticeSeconds < 0 {
		return
	}
	s.Report.AddExportNotice(entry.NoticeSeconds)
}
