package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/internal/subscription"
	"github.com/healthlake-cdc/healthlake-cdc/local/esm"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
)

// FnFastPath is the fast-path Lambda's function name (docs/FASTPATH.md).
const FnFastPath = stackconfig.FastPath

// fastPathPollers is the local fast-path mapping's pollers: Lambda starts
// an SQS standard queue's mapping with five concurrent batches ("Configuring
// scaling behavior for SQS event source mappings"), and adds up to 300 a
// minute while messages are waiting, up to the mapping's MaximumConcurrency
// (stackconfig.Config.FastPathMaxConcurrency; esm.Config.MaxPollers).
const fastPathPollers = 5

// NotificationBus is the bus HealthLake's Subscription delivers to.
func (s *Stack) NotificationBus() string { return s.opts.Name + "-notifications" }

// fastPathQueue is the queue the notification rule feeds.
func (s *Stack) fastPathQueue() string { return s.opts.Name + "-fast-path" }

// fastPathTypes are the types the Subscription's topic covers: the
// Options', else the generator's.
func (s *Stack) fastPathTypes() []string {
	if len(s.opts.FastPathTypes) > 0 {
		return s.opts.FastPathTypes
	}
	return gen.Types()
}

// FastPathSpec is the Subscription the stack keeps in the data store.
func (s *Stack) FastPathSpec() subscription.Spec {
	payload := s.opts.FastPathPayload
	if payload == "" {
		payload = stackconfig.Default().FastPathPayload
	}
	return subscription.Spec{
		DatastoreID: s.Res.DatastoreID,
		BaseURL:     strings.TrimSuffix(s.Res.HealthLakeEndpoint, "/") + "/datastore/" + s.Res.DatastoreID + "/r4",
		Types:       s.fastPathTypes(),
		BusARN:      s.EventBridge.BusARN(s.NotificationBus()),
		Payload:     payload,
		Name:        s.opts.Name,
	}
}

// onNotification puts one HealthLake Subscription notification on the bus
// its channel names, as HealthLake does (a service principal the bus's
// policy trusts; the emulator does not model the policy).
func (s *Stack) onNotification(n fakehealthlake.Notification) error {
	return s.EventBridge.PutServiceEvent(n.BusARN, fakeeventbridge.Event{
		Source: n.Source, DetailType: n.DetailType, Time: n.Time.UTC().Format("2006-01-02T15:04:05Z"), Detail: n.Detail,
	})
}

// createFastPath creates what the CDK app deploys for the fast path: the
// notification bus, its queue and dead-letter queue, and the rule between
// them; registerFastPath adds the Lambda and its mapping, ensureSubscription
// the SubscriptionTopic and Subscription.
func (s *Stack) createFastPath(ctx context.Context) error {
	if !s.opts.FastPath {
		return nil
	}
	eb := eventbridge.NewFromConfig(s.Config)
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(s.NotificationBus())}); err != nil {
		return fmt.Errorf("stack: create the notification bus: %w", err)
	}
	for _, q := range []string{s.fastPathQueue(), s.fastPathQueue() + "-dlq"} {
		// Messages up to 1 MiB (SQS's maximum; its default is 256 KiB): a
		// notification whose detail HealthLake keeps within 256 KB grows past
		// 256 KiB with EventBridge's envelope (cdk/pipeline/fastpath.go).
		out, err := s.sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(q),
			Attributes: map[string]string{"VisibilityTimeout": fmt.Sprint(seconds(s.visibility(FnFastPath))), "MaximumMessageSize": "1048576"}})
		if err != nil {
			return fmt.Errorf("stack: create queue %s: %w", q, err)
		}
		if q == s.fastPathQueue() {
			s.Res.FastPathQueueURL = aws.ToString(out.QueueUrl)
		} else {
			s.Res.FastPathDLQURL = aws.ToString(out.QueueUrl)
		}
	}
	pattern, err := json.Marshal(map[string]any{
		"source": []string{fakehealthlake.NotificationSource}, "detail-type": []string{fakehealthlake.NotificationDetailType},
	})
	if err != nil {
		return fmt.Errorf("stack: notification rule pattern: %w", err)
	}
	rule := s.opts.Name + "-FastPathNotifications"
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: aws.String(rule), EventBusName: aws.String(s.NotificationBus()), EventPattern: aws.String(string(pattern)),
		State: ebtypes.RuleStateEnabled, Description: aws.String("HealthLake Subscription notifications to the fast path's queue"),
	}); err != nil {
		return fmt.Errorf("stack: notification rule: %w", err)
	}
	out, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(s.NotificationBus()),
		Targets: []ebtypes.Target{{Id: aws.String("FastPathQueue"), Arn: aws.String(s.PolicyResources().FastPathQueueARN)}}})
	if err != nil {
		return fmt.Errorf("stack: notification rule target: %w", err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("stack: notification rule target: %d failed entries", out.FailedEntryCount)
	}
	return nil
}

// registerFastPath builds the fast-path Lambda from its package's
// constructor, as its own principal, in execution environments as Lambda
// runs it: each keeps its own record and counts, and its shutdown phase
// (lambdart.Start's SIGTERM hook) writes them (docs/FASTPATH.md, "The
// record"). The configuration is checked once here, so that a bad one
// fails the stack's start rather than its first notification.
func (s *Stack) registerFastPath() error {
	if !s.opts.FastPath {
		return nil
	}
	build := func() (*fastpath.Handler, error) {
		h, err := fastpath.NewFromEnv(s.getenv(stackconfig.FastPath), s.runtime(iampolicy.FastPath))
		if err != nil {
			return nil, fmt.Errorf("stack: fast path: %w", err)
		}
		return h, nil
	}
	init := func() (lambdas.Environment, error) {
		h, err := build()
		if err != nil {
			return lambdas.Environment{}, err
		}
		return lambdas.Environment{Handler: h.Handle, Shutdown: h.Shutdown}, nil
	}
	checked, err := build()
	if err != nil {
		return err
	}
	if err := s.Lambdas.RegisterEnvironments(FnFastPath, init, lambdas.WithDeadlineMargin(checked.DeadlineMargin())); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return nil
}

// setupClient is the HealthLake client of the fast-path-setup role (the
// custom resource's and the scheduled check's).
func (s *Stack) setupClient() (*fhirrest.Client, error) {
	hc, err := fhirrest.NewFromConfig(s.principalConfig(iampolicy.FastPathSetup), s.Res.HealthLakeEndpoint)
	if err != nil {
		return nil, fmt.Errorf("stack: fast path setup: %w", err)
	}
	return hc, nil
}

// ensureSubscription creates the SubscriptionTopic and the Subscription as
// the deployed custom resource does (internal/subscription), signing as
// the fast-path-setup role. HealthLake activates it after its activation
// delay (5 minutes unless Options.Subscriptions says otherwise).
func (s *Stack) ensureSubscription(ctx context.Context) error {
	if !s.opts.FastPath {
		return nil
	}
	hc, err := s.setupClient()
	if err != nil {
		return err
	}
	if _, err := subscription.Ensure(ctx, hc, s.FastPathSpec()); err != nil {
		return fmt.Errorf("stack: fast path setup: %w", err)
	}
	return nil
}

// CheckSubscription runs the fast path's scheduled check as the deployed
// schedule does: the setup Lambda's handler (subscription.CustomResource
// Serve) with the rule's constant input, the custom resource's properties
// under "check", signing as the fast-path-setup role. RunWith calls it
// every Options.FastPathCheckEvery.
func (s *Stack) CheckSubscription(ctx context.Context) error {
	if !s.opts.FastPath {
		return nil
	}
	hc, err := s.setupClient()
	if err != nil {
		return err
	}
	h, err := subscription.NewCustomResource(hc, s.Res.HealthLakeEndpoint, subscription.CustomResourceOptions{Logger: s.log, Metrics: s.Metrics})
	if err != nil {
		return fmt.Errorf("stack: fast path check: %w", err)
	}
	spec := s.FastPathSpec()
	input, err := json.Marshal(subscription.CheckEvent{Check: map[string]any{
		subscription.PropDatastoreID: spec.DatastoreID, subscription.PropTypes: strings.Join(spec.Types, ","),
		subscription.PropBusARN: spec.BusARN, subscription.PropPayload: spec.Payload, subscription.PropName: spec.Name,
	}})
	if err != nil {
		return fmt.Errorf("stack: fast path check: %w", err)
	}
	return h.Serve(ctx, input)
}

// fastPathCheckEvery is the check's schedule: the option, else the
// deployed stackconfig.FastPathCheckEvery; 0 without the fast path.
func (s *Stack) fastPathCheckEvery() time.Duration {
	switch {
	case !s.opts.FastPath || s.opts.FastPathCheckEvery < 0:
		return 0
	case s.opts.FastPathCheckEvery > 0:
		return s.opts.FastPathCheckEvery
	}
	return stackconfig.FastPathCheckEvery
}

// fastPathNotifier is the HealthLake emulator's notification hook: nil
// (subscriptions stored, never activated) without the fast path.
func (s *Stack) fastPathNotifier() func(fakehealthlake.Notification) error {
	if !s.opts.FastPath {
		return nil
	}
	return s.onNotification
}

// fastPathMapping is the fast-path mapping's settings, the deployed ones
// and the options' (the queue, its dead-letter queue, the Region and the
// faults are the caller's to add).
func (s *Stack) fastPathMapping(timeout time.Duration) esm.Config {
	d := s.deployedConfig()
	return esm.Config{
		Function: FnFastPath, MaxReceiveCount: s.opts.MaxReceiveCount,
		BatchSize: d.FastPathBatch(), MaximumBatchingWindow: d.FastPathBatchingWindow, LowTrafficWait: s.fastPathLowTrafficWait(),
		Pollers: min(fastPathPollers, d.FastPathMaxConcurrency()), MaxPollers: d.FastPathMaxConcurrency(),
		VisibilityTimeout: s.visibility(FnFastPath), FunctionTimeout: timeout, WaitTime: esm.LambdaLongPoll, ReportBatchItemFailures: true,
	}
}

// fastPathLowTrafficWait is Options.FastPathLowTrafficWait: 0 is Lambda's
// longest wait at very low traffic, a negative one none.
func (s *Stack) fastPathLowTrafficWait() time.Duration {
	switch w := s.opts.FastPathLowTrafficWait; {
	case w == 0:
		return esm.VeryLowTrafficWait
	case w < 0:
		return 0
	default:
		return w
	}
}

// startFastPathMapping connects the fast path's queue to its Lambda as the
// deployed mapping does (its batch size and batching window, Lambda's wait
// at very low traffic as modelled, partial batch
// responses, redrive to the DLQ).
func (s *Stack) startFastPathMapping(ctx context.Context, dup esm.Faults) error {
	if !s.opts.FastPath {
		return nil
	}
	poller := sqs.NewFromConfig(s.principalConfig(iampolicy.FastPath))
	timeout, err := s.functionTimeout(FnFastPath)
	if err != nil {
		return fmt.Errorf("stack: fast path: event-source mapping: %w", err)
	}
	cfg := s.fastPathMapping(timeout)
	cfg.QueueURL, cfg.QueueARN, cfg.Region = s.Res.FastPathQueueURL, s.Env.ARN("sqs", s.fastPathQueue()), s.Env.Region
	cfg.DLQURL, cfg.Redrive = s.Res.FastPathDLQURL, s.sqsc
	cfg.Faults, cfg.Logger = dup, s.log
	mp, err := esm.New(poller, s.Lambdas, cfg)
	if err != nil {
		// A VisibilityTimeout option not longer than the batching window.
		return fmt.Errorf("stack: fast path: event-source mapping: %w", err)
	}
	mp.Start(context.WithoutCancel(ctx))
	s.esms = append(s.esms, mp)
	s.esmNames = append(s.esmNames, FnFastPath)
	return nil
}
