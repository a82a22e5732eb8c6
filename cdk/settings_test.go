package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// definition returns the deployed definition with CloudFormation's
// substitutions applied, parsed.
func definition(t *testing.T) map[string]any {
	t.Helper()
	var def map[string]any
	if err := json.Unmarshal([]byte(substitutedDefinition(t)), &def); err != nil {
		t.Fatalf("substituted definition: %v", err)
	}
	return def
}

func num(t *testing.T, v any, what string) float64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%s = %v (%T), want a number", what, v, v)
	}
	return f
}

func envDuration(t *testing.T, fnID, name string) time.Duration {
	t.Helper()
	_, fn := oneOfType(t, "AWS::Lambda::Function", fnID)
	v, _ := path(props(fn), "Environment", "Variables", name).(string)
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s %s = %q: %v", fnID, name, v, err)
	}
	return d
}

// Each Lambda's timeout and memory are the settings cdc-local enforces.
func TestLambdaTimeoutsAndMemoryFromSettings(t *testing.T) {
	set := synthesized.cfg.Settings
	for id, name := range map[string]string{"StartExport": stackconfig.StartExport, "CheckExport": stackconfig.CheckExport,
		"PrepareChange": stackconfig.PrepareChange, "RunLock": stackconfig.RunLock} {
		_, fn := oneOfType(t, "AWS::Lambda::Function", id)
		want, _ := set.Function(name)
		if got := num(t, props(fn)["Timeout"], id+" Timeout"); got != want.Timeout.Seconds() {
			t.Errorf("%s Timeout = %v, want %v", id, got, want.Timeout.Seconds())
		}
		if got := num(t, props(fn)["MemorySize"], id+" MemorySize"); got != float64(want.MemoryMB) {
			t.Errorf("%s MemorySize = %v, want %d", id, got, want.MemoryMB)
		}
	}
	// Issue 11.2: prepare-change ends inside the Map children's EXPRESS limit,
	// and stops taking work a margin before that.
	_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	to := time.Duration(num(t, props(pc)["Timeout"], "PrepareChange Timeout")) * time.Second
	if to >= stackconfig.ExpressLimit {
		t.Errorf("prepare-change timeout %s, want below the EXPRESS limit %s", to, stackconfig.ExpressLimit)
	}
	if m := envDuration(t, "PrepareChange", stackconfig.EnvDeadlineMargin); m <= 0 || m >= to {
		t.Errorf("CDC_DEADLINE_MARGIN %s, want within the timeout %s", m, to)
	}
	if c := envDuration(t, "CheckExport", stackconfig.EnvRecheckMaxDelay); c > 60*time.Second {
		t.Errorf("re-check cap %s, want at most 60 s", c)
	}
}

// Issue 11.3 and 11.7, read from the template: a retried check heartbeats in
// time, the heartbeat is below the wait's timeout, the wait below the
// execution's timeout, and the execution's timeout below the lock lease.
func TestWaitHeartbeatAndRunTimeoutHoldInTheTemplate(t *testing.T) {
	def := definition(t)
	wait, _ := path(def, "States", "WaitForExport").(map[string]any)
	if wait == nil {
		t.Fatalf("no WaitForExport state")
	}
	hb := time.Duration(num(t, wait["HeartbeatSeconds"], "HeartbeatSeconds")) * time.Second
	waitTO := time.Duration(num(t, wait["TimeoutSeconds"], "WaitForExport TimeoutSeconds")) * time.Second
	runTO := time.Duration(num(t, def["TimeoutSeconds"], "top-level TimeoutSeconds")) * time.Second

	recheckQ, q := oneOfType(t, "AWS::SQS::Queue", "RecheckQueue")
	vis := time.Duration(num(t, props(q)["VisibilityTimeout"], recheckQ+" VisibilityTimeout")) * time.Second
	_, ce := oneOfType(t, "AWS::Lambda::Function", "CheckExport")
	checkTO := time.Duration(num(t, props(ce)["Timeout"], "CheckExport Timeout")) * time.Second
	recheckCap := envDuration(t, "CheckExport", stackconfig.EnvRecheckMaxDelay)

	// After a heartbeat the check runs up to its timeout, the next message
	// waits up to the cap, and a check that fails before heartbeating comes
	// back only after the visibility timeout.
	if gap := checkTO + recheckCap + vis; hb <= gap {
		t.Errorf("HeartbeatSeconds %s: a retried check heartbeats only after %s", hb, gap)
	}
	if hb >= waitTO {
		t.Errorf("HeartbeatSeconds %s >= the wait's TimeoutSeconds %s", hb, waitTO)
	}
	if waitTO >= runTO {
		t.Errorf("export wait %s >= execution TimeoutSeconds %s", waitTO, runTO)
	}
	if mw := envDuration(t, "CheckExport", stackconfig.EnvExportMaxWait); mw != waitTO {
		t.Errorf("CDC_EXPORT_MAX_WAIT %s, want the wait's TimeoutSeconds %s", mw, waitTO)
	}
	if lease := envDuration(t, "RunLock", stackconfig.EnvLockLease); lease <= runTO {
		t.Errorf("CDC_LOCK_LEASE %s, want above the execution TimeoutSeconds %s", lease, runTO)
	}
}

// Issue 11.2: all concurrent prepare-change invocations together stay within
// the pipeline's share of the PutEvents quota.
func TestPutEventsRateSharedByTheMap(t *testing.T) {
	set := synthesized.cfg.Settings
	_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	rate, err := strconv.ParseFloat(path(props(pc), "Environment", "Variables", stackconfig.EnvPutEventsRate).(string), 64)
	if err != nil || rate <= 0 {
		t.Fatalf("CDC_PUTEVENTS_RATE: %v %v", rate, err)
	}
	def := definition(t)
	// The Map sits in a branch of PublishWindow (a Parallel state).
	var conc float64
	var walk func(states any)
	walk = func(states any) {
		m, _ := states.(map[string]any)
		for _, st := range m {
			if c, ok := path(st, "MaxConcurrency").(float64); ok {
				conc = c
			}
			branches, _ := path(st, "Branches").([]any)
			for _, b := range branches {
				walk(path(b, "States"))
			}
		}
	}
	walk(path(def, "States"))
	if conc == 0 {
		t.Fatalf("no Map MaxConcurrency in the definition")
	}
	if total, budget := rate*conc, set.PutEventsQuota*set.PutEventsShare; total > budget+1e-9 {
		t.Errorf("%v invocations × %v requests/s = %v, above the share %v of the quota", conc, rate, total, budget)
	}
	if set.PutEventsQuota != stackconfig.DefaultPutEventsQuota {
		t.Errorf("default quota %v, want the lowest documented regional default %v", set.PutEventsQuota, stackconfig.DefaultPutEventsQuota)
	}
}

// The stack refuses, at synth, a configuration whose timeouts would fail a
// healthy run.
func TestSynthRefusesInconsistentSettings(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(*stackconfig.Config)
		want   string
	}{
		"heartbeat a retried check cannot meet":  {func(c *stackconfig.Config) { c.Heartbeat = c.RecheckCap + c.RecheckVisibility() }, "retried check"},
		"heartbeat not below the wait's timeout": {func(c *stackconfig.Config) { c.ExportTimeout = c.HeartbeatSeconds() }, "below the export wait"},
		"export wait not below the run timeout":  {func(c *stackconfig.Config) { c.RunTimeout = c.ExportTimeout }, "below the run timeout"},
		"prepare-change past the EXPRESS limit":  {func(c *stackconfig.Config) { c.PrepareChange.Timeout = 5 * time.Minute }, "EXPRESS"},
		"reconciliation at hour 24":              {func(c *stackconfig.Config) { c.ReconcileHour = 24 }, "ReconcileHour"},
		"reconciliation in no time zone":         {func(c *stackconfig.Config) { c.ReconcileTimeZone = "Europe/Atlantis" }, "ReconcileTimeZone"},
		"reconciliation every 5 hours":           {func(c *stackconfig.Config) { c.ReconcileEvery = 5 * time.Hour }, "ReconcileEvery"},
		"delivered/ gone before it is read":      {func(c *stackconfig.Config) { c.DeliveredExpiryDays = 2 }, "DeliveredExpiryDays"},
		"reconcile/ outliving delivered/":        {func(c *stackconfig.Config) { c.ReconcileExpiryDays = c.DeliveredExpiryDays }, "ReconcileExpiryDays"},
	} {
		cfg := synthesized.cfg
		c.mutate(&cfg.Settings)
		// Validation comes before any construct is made, so no scope is needed.
		if _, err := NewPipelineStack(nil, cfg, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: NewPipelineStack = %v, want an error about %q", name, err, c.want)
		}
	}
}

// A stackName CloudFormation or a name derived from it would refuse at
// deploy time fails the synth, naming the stackName context key.
func TestSynthRefusesStackNamesAWSRefuses(t *testing.T) {
	for name, want := range map[string]string{
		"":                       "stackName",
		strings.Repeat("S", 42):  "event archive",
		"Has_Underscore":         "letters, digits and '-'",
		"9Starts-With-A-Digit":   "letters, digits and '-'",
		strings.Repeat("S", 129): "stackName",
	} {
		cfg := synthesized.cfg
		cfg.StackName = name
		if _, err := NewPipelineStack(nil, cfg, nil); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ContextStackName) {
			t.Errorf("stackName %q: %v, want an error about %q naming %s", name, err, want, ContextStackName)
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("stackName %q: Config.Validate accepted it", name)
		}
	}
	if err := ValidateStackName(strings.Repeat("S", 41)); err != nil {
		t.Errorf("41 characters: %v", err)
	}
}

// Issue 11.12: HealthLake's export job events of this data store reach the
// re-check queue as jobEvent messages, from this rule only.
func TestHealthLakeJobEventRule(t *testing.T) {
	recheckQ, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckQueue")
	ruleID, rule := oneOfType(t, "AWS::Events::Rule", "HealthLakeJobEventRule")
	p := props(rule)
	if p["EventBusName"] != nil && p["EventBusName"] != "default" {
		t.Errorf("rule on bus %v, want the default bus (HealthLake sends its events there)", p["EventBusName"])
	}
	pat := p["EventPattern"]
	if !jsonEq(path(pat, "source"), []any{"aws.healthlake"}) {
		t.Errorf("pattern source = %v", path(pat, "source"))
	}
	if !containsAll(strs(path(pat, "detail-type")), []string{"Export Job Completed", "Export Job Completed With Errors", "Export Job Failed"}) {
		t.Errorf("pattern detail-type = %v", path(pat, "detail-type"))
	}
	if !jsonEq(path(pat, "detail", "datastoreId"), []any{ref(ParamDatastoreID)}) {
		t.Errorf("pattern datastoreId = %v, want the %s parameter", path(pat, "detail", "datastoreId"), ParamDatastoreID)
	}
	targets := asList(p["Targets"])
	if len(targets) != 1 || !jsonEq(path(targets[0], "Arn"), getAtt(recheckQ, "Arn")) {
		t.Fatalf("targets = %v, want the re-check queue", targets)
	}
	it := path(targets[0], "InputTransformer")
	tmpl, _ := path(it, "InputTemplate").(string)
	// Fill the template the way EventBridge does (string values quoted).
	vals := map[string]string{"$.detail.datastoreId": `"ds"`, "$.detail.jobId": `"job"`, "$.detail-type": `"Export Job Completed"`}
	for k, v := range path(it, "InputPathsMap").(map[string]any) {
		tmpl = strings.ReplaceAll(tmpl, "<"+k+">", vals[v.(string)])
	}
	var msg map[string]any
	if err := json.Unmarshal([]byte(tmpl), &msg); err != nil {
		t.Fatalf("transformed message %q: %v", tmpl, err)
	}
	if !jsonEq(msg, map[string]any{"kind": "jobEvent", "datastoreId": "ds", "jobId": "job", "jobStatus": "Export Job Completed"}) {
		t.Errorf("transformed message = %v", msg)
	}
	// The queue admits EventBridge for this rule only, and the queue's key lets it encrypt.
	ruleArn := "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/" + flatten(p["Name"])
	var sends, kms bool
	for _, s := range statements() {
		if flatten(path(s.Raw, "Principal", "Service")) != "events.amazonaws.com" {
			continue
		}
		if s.ResourceType == "AWS::SQS::QueuePolicy" && containsAll(s.Actions, []string{"sqs:SendMessage"}) &&
			flatten(path(s.Raw, "Condition", "ArnEquals", "aws:SourceArn")) == ruleArn {
			sends = true
		}
		if s.ResourceType == "AWS::KMS::Key" && containsAll(s.Actions, []string{"kms:GenerateDataKey", "kms:Decrypt"}) {
			kms = true
		}
	}
	if !sends {
		t.Errorf("no queue policy lets events.amazonaws.com send for %s (aws:SourceArn %s)", ruleID, ruleArn)
	}
	if !kms {
		t.Errorf("the key does not let EventBridge encrypt messages for the re-check queue")
	}
}
