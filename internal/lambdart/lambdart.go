// Package lambdart is what each pipeline Lambda is given by its host besides
// its configuration: the AWS configuration, a logger, a metrics recorder and
// a clock. Every Lambda is built by one constructor from the environment
// (prepare.NewFromEnv, exportjob.NewStartFromEnv, exportjob.NewCheckFromEnv,
// runctl.NewFromEnv, reconcile.NewFromEnv) taking a Runtime: a deployed
// Lambda's comes from FromLambda; cdc-local builds one per principal.
package lambdart

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/logging"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

// Runtime is a Lambda's host: AWS clients' configuration, JSON logs, EMF
// metrics and the clock (nil: time.Now).
type Runtime struct {
	AWS     aws.Config
	Logger  *slog.Logger
	Metrics *metrics.Recorder
	Now     func() time.Time
}

// FromLambda is the Runtime of a deployed Lambda: the default AWS
// configuration, JSON logs to stdout tagged with component, EMF metrics to
// stdout with the Pipeline dimension from CDC_PIPELINE_NAME.
func FromLambda(ctx context.Context, component string) (Runtime, error) {
	awsCfg, err := awsclient.Load(ctx)
	if err != nil {
		return Runtime{}, err
	}
	return Runtime{AWS: awsCfg, Logger: logging.New(os.Stdout, component), Metrics: metrics.FromEnv()}, nil
}

// shutdowner is a handler with work to finish when Lambda shuts its
// execution environment down (internal/fastpath: its record and report).
type shutdowner interface {
	Shutdown(ctx context.Context)
}

// shutdownBudget bounds Shutdown: Lambda stops the process about 500 ms
// after SIGTERM.
const shutdownBudget = 400 * time.Millisecond

// Start is a Lambda main: it builds the handler with build from the
// deployed Runtime and the process environment, and serves it (a handler
// with a Shutdown method gets it called on SIGTERM, which Lambda sends
// when it shuts the environment down); a handler
// that cannot be built ends the process with the reason (no PHI: a
// configuration error).
func Start[H any](component string, build func(getenv func(string) string, rt Runtime) (H, error), handle func(H) any) {
	rt, err := FromLambda(context.Background(), component)
	if err == nil {
		var h H
		if h, err = build(os.Getenv, rt); err == nil {
			var opts []lambda.Option
			if sd, ok := any(h).(shutdowner); ok {
				// Lambda sends SIGTERM when it shuts the environment down
				// and stops the process about 500 ms later.
				opts = append(opts, lambda.WithEnableSIGTERM(func() {
					ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
					defer cancel()
					sd.Shutdown(ctx)
				}))
			}
			lambda.StartWithOptions(handle(h), opts...)
			return
		}
	}
	slog.Error(fmt.Sprintf("%s cannot start", component), "error", err.Error())
	os.Exit(1)
}
