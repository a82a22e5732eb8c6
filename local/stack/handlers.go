package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// lambdaEnv is the environment the CDK app gives the four Lambdas, with the
// local values. Handlers read it through their packages' ConfigFromEnv, so
// the configuration path is the deployed one without touching the process
// environment.
func (s *Stack) lambdaEnv() map[string]string {
	lag := s.opts.SafetyLag // 0 locally: CDC_SAFETY_LAG=0s means no lag
	return map[string]string{
		"AWS_REGION":              s.Env.Region,
		"AWS_ENDPOINT_URL":        s.Env.URL,
		"CDC_TABLE":               s.Res.Table,
		"CDC_BUCKET":              s.Res.Bucket,
		"CDC_DATASTORE_ID":        s.Res.DatastoreID,
		"CDC_HEALTHLAKE_ENDPOINT": s.Res.HealthLakeEndpoint,
		"CDC_EXPORT_ROLE_ARN":     s.roleARN(iampolicy.HealthLakeExport),
		"CDC_KMS_KEY_ID":          s.keyARN(),
		"CDC_RECHECK_QUEUE_URL":   s.Res.RecheckQueueURL,
		"CDC_RECHECK_DELAY":       s.opts.RecheckDelay.String(),
		"CDC_RECHECK_MAX_DELAY":   (4 * s.opts.RecheckDelay).String(),
		"CDC_EVENT_BUS":           s.Res.Bus,
		"CDC_SAFETY_LAG":          lag.String(),
		"CDC_INITIAL_CHECKPOINT":  s.initialCheckpoint().Format("2006-01-02T15:04:05.000Z07:00"),
		"CDC_VALIDATE":            "json",
	}
}

// deployedConfig is the deployed configuration with this stack's PutEvents
// quota (Options.PutEventsQuota when set).
func (s *Stack) deployedConfig() stackconfig.Config {
	cfg := stackconfig.Default()
	if q := s.opts.PutEventsQuota; q > 0 {
		cfg.PutEventsQuota = q
	}
	return cfg
}

// getenv is the named Lambda's environment: what the CDK app derives from
// the deployed configuration for it (stackconfig Env: prepare-change's
// PutEvents rate and deadline margin, check-export's batch bounds, …), then
// the local resources and settings (lambdaEnv), then Options.LambdaEnv.
func (s *Stack) getenv(name string) func(string) string {
	env := s.deployedConfig().Env(name)
	for k, v := range s.lambdaEnv() {
		env[k] = v
	}
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
	if err := s.Lambdas.Register(FnPrepareChange, ph.Handle); err != nil {
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
