package sqsconsumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/healthlake-cdc/healthlake-cdc/examples/consumer/replica"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent/s3getter"
)

// Environment variables NewFromEnv reads (besides the SDK's own: AWS_REGION,
// credentials, AWS_ENDPOINT_URL for cdc-local).
const (
	EnvQueueURL    = "CONSUMER_QUEUE_URL"
	EnvReplicaDir  = "CONSUMER_REPLICA_DIR"
	EnvWaitSeconds = "CONSUMER_WAIT_SECONDS"
	// EnvS3PathStyle = "true" forces path-style S3 addressing; it is on
	// anyway when AWS_ENDPOINT_URL points the SDK at another endpoint.
	EnvS3PathStyle = "CONSUMER_S3_PATH_STYLE"
)

// NewFromEnv builds a consumer from the environment (getenv is os.Getenv in
// main): the queue, the replica directory, the long-poll wait, and SQS and
// S3 clients from the SDK's default configuration.
func NewFromEnv(ctx context.Context, getenv func(string) string, logger *slog.Logger) (*Consumer, error) {
	queueURL, dir := getenv(EnvQueueURL), getenv(EnvReplicaDir)
	if queueURL == "" || dir == "" {
		return nil, errors.New("sqsconsumer: set " + EnvQueueURL + " and " + EnvReplicaDir)
	}
	wait := DefaultWaitSeconds
	if s := getenv(EnvWaitSeconds); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 20 {
			return nil, fmt.Errorf("sqsconsumer: %s=%q: want 0 to 20", EnvWaitSeconds, s)
		}
		wait = n
		if n == 0 {
			wait = -1 // a short poll
		}
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqsconsumer: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("sqsconsumer: no region: set AWS_REGION")
	}
	rep, err := replica.Open(dir)
	if err != nil {
		return nil, err
	}
	pathStyle := cfg.BaseEndpoint != nil || getenv(EnvS3PathStyle) == "true"
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle })
	return &Consumer{
		Queue: sqs.NewFromConfig(cfg), QueueURL: queueURL, Replica: rep,
		Objects: s3getter.New(s3c), WaitSeconds: wait, Logger: logger,
	}, nil
}
