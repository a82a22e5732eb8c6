package stack

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas"
)

// lambdaEnv is the environment the CDK app gives the named Lambda
// (stackconfig.Config.LambdaEnv of the deployed configuration), with the
// local resources' values, then what only cdc-local sets: the Region, the
// one endpoint of the emulators and the local re-check timing. Handlers
// read it through their packages' ConfigFromEnv, so the configuration path
// is the deployed one without touching the process environment.
func (s *Stack) lambdaEnv(name string) map[string]string {
	lag := s.opts.SafetyLag // 0 locally: CDC_SAFETY_LAG=0s means no lag
	env := s.deployedConfig().LambdaEnv(name, stackconfig.Resources{
		Pipeline:           s.opts.Name,
		Bucket:             s.Res.Bucket,
		Table:              s.Res.Table,
		DatastoreID:        s.Res.DatastoreID,
		HealthLakeEndpoint: s.Res.HealthLakeEndpoint,
		ExportRoleARN:      s.roleARN(iampolicy.HealthLakeExport),
		KMSKeyID:           s.keyARN(),
		RecheckQueueURL:    s.Res.RecheckQueueURL,
		EventBus:           s.Res.Bus,
		Validate:           "json",
		ResourceTypes:      s.resourceTypes(),
		SafetyLag:          lag.String(),
		InitialCheckpoint:  s.initialCheckpoint().Format("2006-01-02T15:04:05.000Z07:00"),
	})
	env["AWS_REGION"] = s.Env.Region
	env["AWS_ENDPOINT_URL"] = s.Env.URL
	env[stackconfig.EnvRecheckDelay] = s.opts.RecheckDelay.String()
	env[stackconfig.EnvRecheckMaxDelay] = (4 * s.opts.RecheckDelay).String()
	if name == stackconfig.PrepareChange {
		env[stackconfig.EnvFastPath] = strconv.FormatBool(s.opts.FastPath)
	}
	return env
}

// resourceTypes is the pipeline's type filter (CDC_RESOURCE_TYPES): none,
// or with the fast path its Subscription's types — the CDK app refuses a
// fast path without ResourceTypes, and the Subscription covers exactly them.
func (s *Stack) resourceTypes() string {
	if !s.opts.FastPath {
		return ""
	}
	return strings.Join(s.fastPathTypes(), ",")
}

// deployedConfig is the deployed configuration with this stack's PutEvents
// quota (Options.PutEventsQuota when set) and fast-path batching window
// (Options.FastPathBatchingWindow when set; negative: none).
func (s *Stack) deployedConfig() stackconfig.Config {
	cfg := stackconfig.Default()
	cfg.DatastoreKey = s.opts.DatastoreKey
	if q := s.opts.PutEventsQuota; q > 0 {
		cfg.PutEventsQuota = q
	}
	switch w := s.opts.FastPathBatchingWindow; {
	case w > 0:
		cfg.FastPathBatchingWindow = w
	case w < 0:
		cfg.FastPathBatchingWindow = 0
	}
	return cfg
}

// getenv is the named Lambda's environment: what the CDK app gives it, with
// the local values (lambdaEnv), then Options.LambdaEnv.
func (s *Stack) getenv(name string) func(string) string {
	env := s.lambdaEnv(name)
	for k, v := range s.opts.LambdaEnv {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// initialCheckpoint is where the first window starts on a fresh table: just
// before the seeded resources' lastUpdated, so that the seeded data store is
// the first window's content. With a state directory it is the saved
// checkpoint.
func (s *Stack) initialCheckpoint() time.Time {
	if !s.startCheckpoint.IsZero() {
		return s.startCheckpoint
	}
	return s.seedBase().Add(-time.Millisecond)
}

// registerHandlers builds the four Lambdas from their packages'
// constructors, with SDK clients from the stack's configuration.
func (s *Stack) registerHandlers(_ context.Context) error {

	// prepare-change
	ph, err := prepare.NewFromEnv(s.getenv(stackconfig.PrepareChange), s.runtime(iampolicy.PrepareChange))
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if err := s.Lambdas.Register(FnPrepareChange, ph.Invoke, lambdas.WithDeadlineMargin(ph.DeadlineMargin())); err != nil {
		return fmt.Errorf("stack: %w", err)
	}

	// start-export and check-export, each signing with its own role's key
	sh, err := exportjob.NewStartFromEnv(s.getenv(stackconfig.StartExport), s.runtime(iampolicy.StartExport))
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if err := s.Lambdas.Register(FnStartExport, sh.Handle); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	ch, err := exportjob.NewCheckFromEnv(s.getenv(stackconfig.CheckExport), s.runtime(iampolicy.CheckExport))
	if err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	if err := s.Lambdas.Register(FnCheckExport, ch.Handle); err != nil {
		return fmt.Errorf("stack: %w", err)
	}

	// run-lock
	rl, err := runctl.NewFromEnv(s.getenv(stackconfig.RunLock), s.runtime(iampolicy.RunLock))
	if err != nil {
		return fmt.Errorf("stack: run-lock: %w", err)
	}
	if err := s.Lambdas.Register(FnRunLock, rl.Handle); err != nil {
		return fmt.Errorf("stack: %w", err)
	}
	return s.registerReconcile()
}

// runtime is the host a Lambda of the principal p gets in cdc-local: AWS
// clients signing with p's credentials, the stack's logger, metrics and clock.
func (s *Stack) runtime(p iampolicy.Principal) lambdart.Runtime {
	return lambdart.Runtime{AWS: s.principalConfig(p), Logger: s.log, Metrics: s.Metrics, Now: s.opts.Now}
}
