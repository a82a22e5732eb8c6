package stack

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/esm"
)

// createResources creates the bucket, the queues and the table with the real
// SDK clients, as CDK would in AWS.
func (s *Stack) createResources(ctx context.Context) error {
	if _, err := s.s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Res.Bucket)}); err != nil {
		return fmt.Errorf("stack: create bucket: %w", err)
	}
	mk := func(name string, consumer string) (string, error) {
		vis := strconv.Itoa(int(seconds(s.visibility(consumer))))
		out, err := s.sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{
			QueueName:  aws.String(name),
			Attributes: map[string]string{"VisibilityTimeout": vis},
		})
		if err != nil {
			return "", fmt.Errorf("stack: create queue %s: %w", name, err)
		}
		return aws.ToString(out.QueueUrl), nil
	}
	var err error
	if s.Res.StartQueueURL, err = mk(s.opts.Name+"-start", FnStartExport); err != nil {
		return err
	}
	if s.Res.StartDLQURL, err = mk(s.opts.Name+"-start-dlq", FnStartExport); err != nil {
		return err
	}
	if s.Res.RecheckQueueURL, err = mk(s.opts.Name+"-recheck", FnCheckExport); err != nil {
		return err
	}
	if s.Res.RecheckDLQURL, err = mk(s.opts.Name+"-recheck-dlq", FnCheckExport); err != nil {
		return err
	}
	if err := runlock.CreateTable(ctx, s.ddb, s.Res.Table); err != nil {
		return fmt.Errorf("stack: create table: %w", err)
	}
	// Time to live on "ttl", as the CDK app's table has it.
	if _, err := s.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(s.Res.Table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(stackconfig.TableTTLAttribute), Enabled: aws.Bool(true)}}); err != nil {
		return fmt.Errorf("stack: table time to live: %w", err)
	}
	return nil
}

// visibility is the visibility timeout of the queue consumed by fn: the
// Options override, else the deployed one (internal/stackconfig).
func (s *Stack) visibility(fn string) time.Duration {
	if s.opts.VisibilityTimeout > 0 {
		return s.opts.VisibilityTimeout
	}
	if fn == FnFastPath {
		return s.deployedConfig().FastPathVisibility()
	}
	f, _ := stackconfig.Default().Function(fn)
	return stackconfig.VisibilityTimeout(f)
}

// functionTimeout is the timeout fn's event-source mapping holds its
// queue's visibility timeout to, as Lambda does when it creates a mapping:
// the function's. With the VisibilityTimeout option (tests that want
// redeliveries within seconds and keep the deployed function timeouts) there
// is nothing to hold it to, and 0 leaves the check out.
func (s *Stack) functionTimeout(fn string) (time.Duration, error) {
	if s.opts.VisibilityTimeout > 0 {
		return 0, nil
	}
	return s.Lambdas.Timeout(fn)
}

func seconds(d time.Duration) int32 {
	f := d.Seconds()
	n := int32(f)
	if float64(n) < f {
		n++
	}
	if n < 1 {
		n = 1
	}
	return n
}

// startMappings connects the queues to their functions, the way the CDK app
// declares the event-source mappings (batch size, partial batch responses,
// redrive to the DLQ after MaxReceiveCount).
func (s *Stack) startMappings(ctx context.Context) error {
	var dup esm.Faults
	if s.opts.FaultRate > 0 {
		dup = s.Faults
	}
	for _, m := range []struct {
		fn, queue, dlq string
	}{
		{FnStartExport, s.Res.StartQueueURL, s.Res.StartDLQURL},
		{FnCheckExport, s.Res.RecheckQueueURL, s.Res.RecheckDLQURL},
	} {
		// Lambda polls the queue with the function's role; SQS's own
		// redrive moves a message to the DLQ.
		poller := sqs.NewFromConfig(s.principalConfig(iampolicy.Principal(m.fn)))
		timeout, err := s.functionTimeout(m.fn)
		if err != nil {
			return fmt.Errorf("stack: event-source mapping: %w", err)
		}
		mp, err := esm.New(poller, s.Lambdas, esm.Config{
			Function: m.fn, QueueURL: m.queue, QueueARN: s.Env.ARN("sqs", lastSegment(m.queue)), Region: s.Env.Region,
			DLQURL: m.dlq, Redrive: s.sqsc, MaxReceiveCount: s.opts.MaxReceiveCount, BatchSize: 1,
			// The deployed mappings' MaximumConcurrency: two batches at once.
			Pollers:           stackconfig.ExportQueueMaxConcurrency,
			WaitTime:          esm.LambdaLongPoll,
			VisibilityTimeout: s.visibility(m.fn), FunctionTimeout: timeout, ReportBatchItemFailures: true,
			Faults: dup, Logger: s.log,
		})
		if err != nil {
			return fmt.Errorf("stack: event-source mapping: %w", err)
		}
		mp.Start(context.WithoutCancel(ctx))
		s.esms = append(s.esms, mp)
		s.esmNames = append(s.esmNames, m.fn)
	}
	return s.startFastPathMapping(ctx, dup)
}

func lastSegment(u string) string {
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] == '/' {
			return u[i+1:]
		}
	}
	return u
}

// MappingStats returns each event-source mapping's counters by function.
func (s *Stack) MappingStats() map[string]esm.Stats {
	out := map[string]esm.Stats{}
	for i, m := range s.esms {
		out[s.esmNames[i]] = m.Stats()
	}
	return out
}
