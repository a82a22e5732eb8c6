package stackconfig

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zone names resolve without the machine's database
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
	// A setting an earlier version took is refused with what replaced it.
	if err := c.Set("FastPathFlushAfter", "10s"); err == nil || !strings.Contains(err.Error(), "removed") {
		t.Errorf("FastPathFlushAfter: %v, want an error saying it was removed", err)
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
	if c.ReconcileReadRate != 0 || c.Env(Reconcile)[EnvHealthLakeReadRate] != "0" {
		t.Errorf("default read rate %v (env %q), want 0: unpaced", c.ReconcileReadRate, c.Env(Reconcile)[EnvHealthLakeReadRate])
	}
	if err := c.Apply(map[string]string{"ReconcileEvery": "6h", "ReconcilePartitions": "128", "ReconcileReadRate": "50"}); err != nil {
		t.Fatal(err)
	}
	env := c.Env(Reconcile)
	// Each compare child publishes at one prepare-change invocation's share,
	// and reads at its share of ReconcileReadRate: 50 among the Map's 10.
	want := strconv.FormatFloat(c.PutEventsRate(), 'f', -1, 64)
	if env[EnvReconcilePartitions] != "128" || env[EnvPutEventsRate] != want ||
		env[EnvHealthLakeReadRate] != "50" || env[EnvMapMaxConcurrency] != "10" {
		t.Errorf("reconcile env = %v, want rate %s, read rate 50 among 10", env, want)
	}
	if f, ok := c.Function(Reconcile); !ok || f != c.Reconcile {
		t.Errorf("Function(reconcile) = %v, %v", f, ok)
	}
	for name, v := range map[string]string{"ReconcileEvery": "30m", "ReconcileTimeout": "5m", "ReconcilePartitions": "0", "ReconcileMemoryMB": "64", "ReconcileReadRate": "5"} {
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

// The reconciliation runs at a fixed hour of a time zone (03:00 UTC by
// default), every ReconcileEvery hours through it; Validate refuses an hour
// outside 0–23, a zone the IANA database lacks and an interval a cron
// cannot keep, each naming the setting.
func TestReconcileCronAtAnHour(t *testing.T) {
	c := Default()
	if c.ReconcileHour != 3 || c.ReconcileTimeZone != "UTC" || c.ReconcileCron() != "cron(0 3 * * ? *)" {
		t.Errorf("default schedule %s in %s (hour %d)", c.ReconcileCron(), c.ReconcileTimeZone, c.ReconcileHour)
	}
	for _, tc := range []struct {
		every time.Duration
		hour  int
		want  string
	}{
		{24 * time.Hour, 0, "cron(0 0 * * ? *)"},
		{24 * time.Hour, 23, "cron(0 23 * * ? *)"},
		{6 * time.Hour, 15, "cron(0 3/6 * * ? *)"}, // 3, 9, 15, 21: every 6 h, through 15:00
		{12 * time.Hour, 3, "cron(0 3/12 * * ? *)"},
		{time.Hour, 3, "cron(0 * * * ? *)"},
	} {
		c := mutate(func(c *Config) { c.ReconcileEvery, c.ReconcileHour = tc.every, tc.hour })
		if err := c.Validate(); err != nil {
			t.Errorf("every %s at %d: %v", tc.every, tc.hour, err)
		}
		if got := c.ReconcileCron(); got != tc.want {
			t.Errorf("every %s at %d: %s, want %s", tc.every, tc.hour, got, tc.want)
		}
	}
	c = Default()
	if err := c.Apply(map[string]string{"ReconcileHour": "7", "ReconcileTimeZone": "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if c.ReconcileCron() != "cron(0 7 * * ? *)" || c.ReconcileTimeZone != "Europe/Berlin" {
		t.Errorf("Apply: %s in %s", c.ReconcileCron(), c.ReconcileTimeZone)
	}
	for name, v := range map[string][2]string{
		"hour 24":      {"ReconcileHour", "24"},
		"hour -1":      {"ReconcileHour", "-1"},
		"no zone":      {"ReconcileTimeZone", ""},
		"local zone":   {"ReconcileTimeZone", "Local"},
		"unknown zone": {"ReconcileTimeZone", "Mars/Olympus_Mons"},
		"offset zone":  {"ReconcileTimeZone", "+02:00"},
		"every 5h":     {"ReconcileEvery", "5h"},
		"every 48h":    {"ReconcileEvery", "48h"},
		"every 90m":    {"ReconcileEvery", "90m"},
		"every 30m":    {"ReconcileEvery", "30m"},
	} {
		c := Default()
		err := c.Apply(map[string]string{v[0]: v[1]})
		if err == nil || !strings.Contains(err.Error(), v[0]) {
			t.Errorf("%s: %s=%q: %v, want an error naming %s", name, v[0], v[1], err, v[0])
		}
	}
}

// delivered/ and reconcile/ expire, but not before a reconciliation that
// follows a failed one has read them; reconcile/ expires first, so a
// reconciliation after a longer gap fails instead of missing deletes.
func TestReconcileRetention(t *testing.T) {
	c := Default()
	if c.DeliveredExpiryDays != 35 || c.ReconcileExpiryDays != 30 {
		t.Errorf("defaults: delivered/ %d d, reconcile/ %d d", c.DeliveredExpiryDays, c.ReconcileExpiryDays)
	}
	// 2 × 24 h + 25 h + 1 h = 74 h.
	if got := c.MinReconcileRetentionDays(); got != 4 {
		t.Errorf("MinReconcileRetentionDays = %d, want 4", got)
	}
	if got := c.ReconcileRetentionSlackDays(); got != 2 {
		t.Errorf("ReconcileRetentionSlackDays = %d, want 2", got)
	}
	if err := c.Apply(map[string]string{"DeliveredExpiryDays": "6", "ReconcileExpiryDays": "4"}); err != nil {
		t.Errorf("the shortest retention refused: %v", err)
	}
	for name, tc := range map[string]struct {
		values map[string]string
		want   string
	}{
		"delivered/ below two intervals":  {map[string]string{"DeliveredExpiryDays": "3", "ReconcileExpiryDays": "1"}, "DeliveredExpiryDays 3"},
		"reconcile/ below two intervals":  {map[string]string{"ReconcileExpiryDays": "3"}, "ReconcileExpiryDays 3"},
		"reconcile/ outliving delivered/": {map[string]string{"ReconcileExpiryDays": "35"}, "ReconcileExpiryDays 35"},
		"a longer run timeout":            {map[string]string{"RunTimeout": "200h", "DeliveredExpiryDays": "10", "ReconcileExpiryDays": "5"}, "DeliveredExpiryDays 10"},
		"delivered/ beyond the maximum":   {map[string]string{"DeliveredExpiryDays": "36501"}, "DeliveredExpiryDays"},
	} {
		c := Default()
		err := c.Apply(tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, tc.want)
		}
	}
}

// No Lambda reserves concurrency unless ReservedConcurrency is set: a new
// account's quota is below the 100 units Lambda keeps unreserved.
func TestReservedConcurrencyIsOptIn(t *testing.T) {
	c := Default()
	all := append(Lambdas(), CheckDatastore, Reconcile)
	for _, name := range all {
		if n := c.ReservedConcurrencyOf(name); n != 0 {
			t.Errorf("%s reserves %d by default", name, n)
		}
	}
	if got := c.ReservedConcurrencyTotal(); got != 32 {
		t.Errorf("ReservedConcurrencyTotal = %d, want 32 (3 + 3 + 10 + 5 + 1 + 10)", got)
	}
	if err := c.Apply(map[string]string{"ReservedConcurrency": "true", "MapMaxConcurrency": "20"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{StartExport: 3, CheckExport: 3, PrepareChange: 20, RunLock: 5, CheckDatastore: 1, Reconcile: 20}
	for _, name := range all {
		if got := c.ReservedConcurrencyOf(name); got != want[name] {
			t.Errorf("%s reserves %d, want %d", name, got, want[name])
		}
	}
	if err := c.Set("ReservedConcurrency", "sometimes"); err == nil {
		t.Errorf("ReservedConcurrency=sometimes accepted")
	}
}

// TestQuotaAdviceComparesWithTheRegionsDefault: synth warns when
// PutEventsQuota is above the Region's documented default (throttled unless
// raised) or below it (share left unused), and says nothing for a Region
// whose default the table does not know.
func TestQuotaAdviceComparesWithTheRegionsDefault(t *testing.T) {
	c := Default() // quota 400, share 0.5
	if q, ok := PutEventsRegionalDefault(" US-EAST-2 "); !ok || q != 2400 {
		t.Fatalf("us-east-2 default = %v, %v", q, ok)
	}
	if a := c.QuotaAdvice("us-east-1"); !strings.Contains(a, "below us-east-1's default PutEvents quota of 10000") || !strings.Contains(a, "set PutEventsQuota to 10000") {
		t.Errorf("400 in us-east-1: %q", a)
	}
	c.PutEventsQuota = 10000
	if a := c.QuotaAdvice("us-east-2"); !strings.Contains(a, "above us-east-2's default PutEvents quota of 2400") || !strings.Contains(a, "throttled") {
		t.Errorf("10,000 in us-east-2: %q", a)
	}
	for _, region := range []string{"us-west-2", "eu-west-1", "", "us-gov-west-1", "cn-north-1"} {
		if a := c.QuotaAdvice(region); a != "" {
			t.Errorf("10,000 in %q: %q, want nothing", region, a)
		}
	}
	// Every Region the quotas page names, and one of "the other supported
	// Regions" (400).
	for region, want := range map[string]float64{"eu-central-1": 2400, "eu-south-2": 2400, "us-west-1": 1200, "ap-northeast-1": 1200,
		"ap-southeast-2": 1200, "eu-west-2": 1200, "ap-south-1": 600, "ca-central-1": 600, "sa-east-1": 600, "ap-southeast-3": 400, "me-central-1": 400} {
		if q, ok := PutEventsRegionalDefault(region); !ok || q != want {
			t.Errorf("%s default = %v, %v; want %v", region, q, ok, want)
		}
		if a := c.QuotaAdvice(region); !strings.Contains(a, fmt.Sprintf("above %s's default PutEvents quota of %.0f", region, want)) {
			t.Errorf("10,000 in %s: %q", region, a)
		}
	}
	for _, region := range []string{"", "us-gov-west-1", "cn-northwest-1", "local"} {
		if q, ok := PutEventsRegionalDefault(region); ok {
			t.Errorf("%q default = %v, want unknown", region, q)
		}
	}
}

// TestFastPathBusKeyIsAKeyARNWithTheFastPath: the notification bus's key
// must be a KMS key's ARN (HealthLake wants the data store's key itself,
// not an alias) and is refused without the fast path, which alone uses it.
func TestFastPathBusKeyIsAKeyARNWithTheFastPath(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	c := Default()
	c.FastPath = true
	c.FastPathBusKey = key
	if err := c.Validate(); err != nil {
		t.Fatalf("a key ARN with the fast path: %v", err)
	}
	for _, bad := range []string{"alias/healthlake", "arn:aws:kms:us-east-1:123456789012:alias/healthlake", "1234abcd-12ab-34cd-56ef-1234567890ab"} {
		c.FastPathBusKey = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "FastPathBusKey") {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
	c.FastPath, c.FastPathBusKey = false, key
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "FastPath is off") {
		t.Errorf("without the fast path: %v, want refused", err)
	}
}

// TestDatastoreKeyIsTheDataStoresKey: DatastoreKey is a KMS key's ARN; the
// data store's key is DatastoreKey or, set alone, FastPathBusKey (HealthLake
// requires the bus on the data store's key), and the two may not differ.
func TestDatastoreKeyIsTheDataStoresKey(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	const other = "arn:aws:kms:us-east-1:123456789012:key/00000000-12ab-34cd-56ef-1234567890ab"
	c := Default()
	if c.DatastoreKeyARN() != "" {
		t.Errorf("default: data store key %q, want none (AWS owned)", c.DatastoreKeyARN())
	}
	c.DatastoreKey = key
	if err := c.Validate(); err != nil || c.DatastoreKeyARN() != key {
		t.Fatalf("DatastoreKey %q: %v, key %q", key, err, c.DatastoreKeyARN())
	}
	for _, bad := range []string{"alias/healthlake", "1234abcd-12ab-34cd-56ef-1234567890ab", "arn:aws:kms:us-east-1:123456789012:alias/x"} {
		c.DatastoreKey = bad
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "DatastoreKey") {
			t.Errorf("DatastoreKey %q: %v, want refused", bad, err)
		}
	}
	c.DatastoreKey, c.FastPath, c.FastPathBusKey = "", true, key
	if err := c.Validate(); err != nil || c.DatastoreKeyARN() != key {
		t.Errorf("FastPathBusKey alone: %v, data store key %q, want %q", err, c.DatastoreKeyARN(), key)
	}
	c.DatastoreKey = other
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "differs from DatastoreKey") {
		t.Errorf("two different keys: %v, want refused", err)
	}
}

// TestFastPathMappingIsOneLambdaAccepts: the fast-path mapping's batch size
// and window are within what CreateEventSourceMapping accepts for a
// standard queue (BatchSize up to 10,000, above 10 only with a window of a
// second or more; the window whole seconds up to 300), at the default and
// at every window the FastPathBatchingWindow setting accepts (0–30 s: none
// takes batches of 10); the queue's visibility timeout follows the window;
// other windows are refused.
func TestFastPathMappingIsOneLambdaAccepts(t *testing.T) {
	for _, w := range []time.Duration{Default().FastPathBatchingWindow, 0, time.Second, 3 * time.Second, 30 * time.Second} {
		c := Default()
		if err := c.Set("FastPathBatchingWindow", w.String()); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("window %s refused: %v", w, err)
		}
		if n := c.FastPathBatch(); n < 1 || n > 10000 || (n > 10 && w < time.Second) {
			t.Errorf("batch size %d with window %s: Lambda refuses it", n, w)
		}
		if w < 0 || w > 300*time.Second || w%time.Second != 0 {
			t.Errorf("window %s: want whole seconds 0–300", w)
		}
		fn := c.FastPathFunction
		if v := c.FastPathVisibility(); v != VisibilityFactor*fn.Timeout+w {
			t.Errorf("the queue's visibility timeout %s is not six times the function's timeout (%s) plus the window %s", v, fn.Timeout, w)
		}
	}
	for _, w := range []string{"-1s", "500ms", "1500ms", "31s", "5m"} {
		c := Default()
		if err := c.Set("FastPathBatchingWindow", w); err != nil {
			continue // not a duration the setting parses
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "FastPathBatchingWindow") {
			t.Errorf("window %s: %v, want refused", w, err)
		}
	}
}
