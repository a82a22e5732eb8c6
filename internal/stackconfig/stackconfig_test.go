package stackconfig

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultsTheIssueAsks(t *testing.T) {
	c := Default()
	if c.PrepareChange.Timeout != 240*time.Second {
		t.Errorf("prepare-change timeout %s, want 240s", c.PrepareChange.Timeout)
	}
	if c.RecheckCap > 60*time.Second {
		t.Errorf("re-check cap %s, want at most 60s", c.RecheckCap)
	}
	if c.Overlap != time.Minute || c.MaxWindow != 0 {
		t.Errorf("overlap %s, max window %s; want 1m and 0", c.Overlap, c.MaxWindow)
	}
	if c.ArchiveRetentionDays < 1 {
		t.Errorf("archive retention %d: must be finite", c.ArchiveRetentionDays)
	}
}

// mutate returns the default configuration changed by f.
func mutate(f func(*Config)) Config {
	c := Default()
	f(&c)
	return c
}

func TestValidateRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"prepare-change at the EXPRESS limit": {mutate(func(c *Config) { c.PrepareChange.Timeout = 300 * time.Second }), "EXPRESS"},
		"deadline margin past the timeout":    {mutate(func(c *Config) { c.DeadlineMargin = c.PrepareChange.Timeout }), "deadline margin"},
		"heartbeat a retried check misses": {mutate(func(c *Config) {
			c.Heartbeat = c.RecheckCap + c.RecheckVisibility() // no room for the check's own run time
		}), "retried check"},
		"heartbeat at the wait's timeout": {mutate(func(c *Config) {
			c.ExportTimeout = c.HeartbeatSeconds()
		}), "below the export wait"},
		"export wait as long as the run": {mutate(func(c *Config) { c.ExportTimeout = c.RunTimeout }), "below the run timeout"},
		"re-check cap above SQS's delay": {mutate(func(c *Config) { c.RecheckCap = 901 * time.Second }), "re-check cap"},
		"Lambda timeout above 15 min":    {mutate(func(c *Config) { c.CheckExport.Timeout = 16 * time.Minute }), "check-export timeout"},
		"fractional timeout":             {mutate(func(c *Config) { c.RunLock.Timeout = 1500 * time.Millisecond }), "whole seconds"},
		"too few receives":               {mutate(func(c *Config) { c.MaxReceiveCount = 1 }), "maxReceiveCount"},
		"share above 1":                  {mutate(func(c *Config) { c.PutEventsShare = 1.5 }), "share"},
		"no quota":                       {mutate(func(c *Config) { c.PutEventsQuota = 0 }), "quota"},
		"map concurrency 0":              {mutate(func(c *Config) { c.MapMaxConcurrency = 0 }), "MaxConcurrency"},
		"archive forever":                {mutate(func(c *Config) { c.ArchiveRetentionDays = 0 }), "archive"},
		"memory too small":               {mutate(func(c *Config) { c.StartExport.MemoryMB = 64 }), "memory"},
		"run longer than a year":         {mutate(func(c *Config) { c.RunTimeout = 366 * 24 * time.Hour }), "STANDARD"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error about %q", name, err, c.want)
		}
	}
}

// The derived heartbeat covers a check that fails and is retried after the
// re-check queue's visibility timeout, for any timeouts.
func TestHeartbeatCoversARetriedCheck(t *testing.T) {
	for _, check := range []time.Duration{30 * time.Second, 120 * time.Second, 900 * time.Second} {
		for _, cap := range []time.Duration{time.Second, 60 * time.Second, 900 * time.Second} {
			c := mutate(func(c *Config) { c.CheckExport.Timeout, c.RecheckCap = check, cap })
			gap := check + cap + VisibilityFactor*check
			if hb := c.HeartbeatSeconds(); hb <= gap {
				t.Errorf("check %s, cap %s: heartbeat %s <= gap %s", check, cap, hb, gap)
			}
		}
	}
	c := Default()
	if got, want := c.HeartbeatSeconds(), c.CheckExport.Timeout+c.RecheckCap+c.RecheckVisibility()+c.HeartbeatMargin; got != want {
		t.Errorf("default heartbeat %s, want cap + visibility + check timeout + margin = %s", got, want)
	}
}

func TestLeaseAndRunTimeoutFromOneSetting(t *testing.T) {
	c := Default()
	if err := c.Set("RunTimeout", "10h"); err != nil {
		t.Fatal(err)
	}
	if c.RunTimeout != 10*time.Hour || c.Lease() != 11*time.Hour {
		t.Errorf("run timeout %s, lease %s; want 10h and 11h", c.RunTimeout, c.Lease())
	}
	if c.Lease() <= c.RunTimeout {
		t.Errorf("lease %s not above the run timeout %s", c.Lease(), c.RunTimeout)
	}
	if got := c.Env(RunLock)[EnvLockLease]; got != (11 * time.Hour).String() {
		t.Errorf("CDC_LOCK_LEASE = %q", got)
	}
}

func TestPutEventsRateSharesTheQuota(t *testing.T) {
	c := mutate(func(c *Config) { c.PutEventsQuota, c.PutEventsShare, c.MapMaxConcurrency = 2400, 0.5, 40 })
	if r := c.PutEventsRate(); r != 30 {
		t.Errorf("rate %v, want 2400 × 0.5 ÷ 40 = 30", r)
	}
	if all := c.PutEventsRate() * float64(c.MapMaxConcurrency); all > c.PutEventsQuota*c.PutEventsShare {
		t.Errorf("all invocations together send %v/s, above the share %v/s", all, c.PutEventsQuota*c.PutEventsShare)
	}
	got, err := strconv.ParseFloat(c.Env(PrepareChange)[EnvPutEventsRate], 64)
	if err != nil || got != 30 {
		t.Errorf("CDC_PUTEVENTS_RATE = %v (%v), want 30", got, err)
	}
}

func TestEnvOfEachLambda(t *testing.T) {
	c := Default()
	want := map[string][]string{
		PrepareChange: {EnvPutEventsRate, EnvDeadlineMargin},
		CheckExport:   {EnvBatchMaxFiles, EnvBatchMaxBytes, EnvManifestPartBatches, EnvRecheckMaxDelay, EnvExportMaxWait},
		RunLock:       {EnvLockLease, EnvOverlap, EnvMaxWindow},
	}
	for fn, vars := range want {
		env := c.Env(fn)
		for _, v := range vars {
			if env[v] == "" {
				t.Errorf("%s: %s not set", fn, v)
			}
		}
	}
	for v, d := range map[string]time.Duration{
		c.Env(CheckExport)[EnvRecheckMaxDelay]: c.RecheckCap,
		c.Env(CheckExport)[EnvExportMaxWait]:   c.ExportTimeout,
		c.Env(RunLock)[EnvMaxWindow]:           0,
		c.Env(RunLock)[EnvOverlap]:             time.Minute,
	} {
		if got, err := time.ParseDuration(v); err != nil || got != d {
			t.Errorf("env value %q, want %s", v, d)
		}
	}
}

func TestSetAndSettings(t *testing.T) {
	c := Default()
	if err := c.Apply(map[string]string{"PrepareChangeTimeout": "200", "PutEventsQuota": "2400", "MapMaxConcurrency": "8"}); err != nil {
		t.Fatal(err)
	}
	if c.PrepareChange.Timeout != 200*time.Second || c.PutEventsQuota != 2400 || c.MapMaxConcurrency != 8 {
		t.Errorf("Apply did not set the values: %+v", c)
	}
	if err := c.Set("NoSuchSetting", "1"); err == nil {
		t.Errorf("unknown setting accepted")
	}
	if err := c.Set("RunTimeout", "soon"); err == nil {
		t.Errorf("bad duration accepted")
	}
	c = Default()
	if err := c.Apply(map[string]string{"PrepareChangeTimeout": "5m"}); err == nil {
		t.Errorf("Apply accepted an invalid configuration")
	}
	// Every setting round-trips its default.
	for _, s := range Settings() {
		c := Default()
		if err := c.Set(s.Name, s.Default); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if s.Doc == "" {
			t.Errorf("%s has no description", s.Name)
		}
	}
}

// TestReconcileSettings: the reconciliation runs daily by default, its
// Lambda gets CDC_RECONCILE_PARTITIONS and the publish rate, and Validate
// refuses a schedule below an hour, a timeout an EXPRESS child cannot meet
// and a partition count outside [1, 10000].
func TestReconcileSettings(t *testing.T) {
	c := Default()
	if c.ReconcileEvery != 24*time.Hour || c.ReconcilePartitions != 16 {
		t.Errorf("defaults: every %s, %d partitions", c.ReconcileEvery, c.ReconcilePartitions)
	}
	if err := c.Apply(map[string]string{"ReconcileEvery": "6h", "ReconcilePartitions": "128"}); err != nil {
		t.Fatal(err)
	}
	env := c.Env(Reconcile)
	if env[EnvReconcilePartitions] != "128" || env[EnvPutEventsRate] != c.Env(PrepareChange)[EnvPutEventsRate] {
		t.Errorf("reconcile env = %v", env)
	}
	if f, ok := c.Function(Reconcile); !ok || f != c.Reconcile {
		t.Errorf("Function(reconcile) = %v, %v", f, ok)
	}
	for name, v := range map[string]string{"ReconcileEvery": "30m", "ReconcileTimeout": "5m", "ReconcilePartitions": "0", "ReconcileMemoryMB": "64"} {
		c := Default()
		if err := c.Apply(map[string]string{name: v}); err == nil {
			t.Errorf("%s=%s accepted", name, v)
		}
	}
}

// A batch must be one that an invocation can publish before its deadline at
// its share of the PutEvents quota; otherwise every retry fails the same way
// and the run never commits (found by the simulator: 10 files of 5,000
// resources against 42,000 events an invocation can send at 20 requests/s).
func TestBatchesFitWhatOneInvocationCanPublish(t *testing.T) {
	c := Default()
	budget := c.BatchBudgetBytes()
	// 20 requests/s × 10 entries × 210 s ÷ 2 × 512 B.
	if want := int64(20 * 10 * 210 / 2 * MinAvgLineBytes); budget != want {
		t.Fatalf("budget %d bytes, want %d", budget, want)
	}
	if got := c.Env(CheckExport)[EnvBatchMaxBytes]; got != fmt.Sprint(budget) {
		t.Errorf("CDC_BATCH_MAX_BYTES = %s, want the derived %d", got, budget)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	c.BatchMaxBytes = budget + 1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "fail on every retry") {
		t.Errorf("a batch over the budget was accepted: %v", err)
	}
	// A larger quota (us-east-1) allows larger batches.
	c.BatchMaxBytes, c.PutEventsQuota = 0, 10000
	if c.BatchBudgetBytes() <= budget {
		t.Errorf("budget at 10,000 requests/s %d, not above %d", c.BatchBudgetBytes(), budget)
	}
}
