package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

const realASL = "../../statemachine/cdc.asl.json"

// fakeLambdaDir writes a dummy bootstrap per Lambda.
func fakeLambdaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, l := range Lambdas {
		if err := os.MkdirAll(filepath.Join(dir, l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, l, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A user's app adds the pipeline with literal values: no CloudFormation
// parameter, the literals where the app puts parameters, logical ids under
// the construct's id, a consumer on its bus, and cdk-nag finds nothing.
func TestPipelineWithLiteralPropsInAUsersStack(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("UsersApp"), nil)
	p, err := New(stack, "Cdc", Props{
		Name: "users-cdc", LambdaDir: fakeLambdaDir(t), ASLFile: realASL,
		DatastoreID:     jsii.String("0123456789abcdef0123456789abcdef"),
		ScheduleMinutes: jsii.Number(10),
		ValidateLevel:   jsii.String("r4"),
		AlarmEmail:      jsii.String("oncall@example.org"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddConsumer(stack, "Patients", ConsumerProps{Detail: map[string]any{"resourceType": []any{"Patient"}}}); err != nil {
		t.Fatal(err)
	}
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()

	params, _ := tpl["Parameters"].(map[string]any)
	for name := range params {
		if name != "BootstrapVersion" {
			t.Errorf("parameter %s: a user's literal props need none", name)
		}
	}
	if c, _ := tpl["Conditions"].(map[string]any); len(c) > 0 {
		t.Errorf("conditions %v: literal props need none", c)
	}
	// The runs' schedule (the prop) and the reconciliation's (the
	// ReconcileEvery and ReconcileHour settings, daily at 03:00 by
	// default), in the same state.
	schedules := map[string]string{}
	for id, r := range resourcesOf(tpl, "AWS::Scheduler::Schedule") {
		p := r["Properties"].(map[string]any)
		if p["State"] != "ENABLED" {
			t.Errorf("schedule %s state %v", id, p["State"])
		}
		schedules[id[:len(id)-8]] = fmt.Sprint(p["ScheduleExpression"])
	}
	if len(schedules) != 2 || schedules["CdcSchedule"] != "rate(10 minutes)" || schedules["CdcReconcileSchedule"] != "cron(0 3 * * ? *)" {
		t.Errorf("schedules = %v", schedules)
	}
	envs := map[string]map[string]any{}
	for id, f := range resourcesOf(tpl, "AWS::Lambda::Function") {
		if !strings.HasPrefix(id, "Cdc") {
			t.Errorf("function %s: logical id not under the construct id", id)
		}
		env, _ := f["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		envs[id[:len(id)-8]] = env
	}
	if envs["CdcRunLock"]["CDC_DATASTORE_ID"] != "0123456789abcdef0123456789abcdef" ||
		envs["CdcPrepareChange"]["CDC_VALIDATE"] != "r4" || envs["CdcPrepareChange"]["CDC_MAX_ENTRY_BYTES"] != "262144" ||
		envs["CdcPrepareChange"]["CDC_PIPELINE_NAME"] != "users-cdc" {
		t.Errorf("environment: run-lock %v, prepare-change %v", envs["CdcRunLock"], envs["CdcPrepareChange"])
	}
	_, sub := only(t, tpl, "AWS::SNS::Subscription")
	if sub["Endpoint"] != "oncall@example.org" {
		t.Errorf("alarm subscription = %v", sub["Endpoint"])
	}
	rules := resourcesOf(tpl, "AWS::Events::Rule")
	busID := ""
	for id := range resourcesOf(tpl, "AWS::Events::EventBus") {
		busID = id
	}
	found := false
	for _, r := range rules {
		if js(r["Properties"].(map[string]any)["EventBusName"]) == js(map[string]any{"Ref": busID}) {
			found = true
		}
	}
	if !found {
		t.Errorf("no consumer rule on the pipeline's bus %s", busID)
	}
	// The bus (encrypted with the key) and every rule target have a
	// dead-letter queue: the pipeline's events DLQ, the consumer's own.
	if bus := resourcesOf(tpl, "AWS::Events::EventBus")[busID]; bus["Properties"].(map[string]any)["DeadLetterConfig"] == nil {
		t.Errorf("bus %s has no DeadLetterConfig", busID)
	}
	for id, r := range rules {
		for _, target := range r["Properties"].(map[string]any)["Targets"].([]any) {
			if target.(map[string]any)["DeadLetterConfig"] == nil {
				t.Errorf("rule %s target %v has no DeadLetterConfig", id, target.(map[string]any)["Id"])
			}
		}
	}
	findings := errorAnnotations(stack)
	for _, f := range findings {
		t.Error(f)
	}
	b, _ := json.Marshal(tpl)
	if strings.Contains(string(b), "Token[") {
		t.Errorf("unresolved token in the template")
	}
}

// Literals are held to what the app's parameters allow; required props and
// a readable state machine definition are checked before anything is built.
func TestPipelineRefusesBadProps(t *testing.T) {
	dir := fakeLambdaDir(t)
	good := func() Props {
		return Props{Name: "p", LambdaDir: dir, ASLFile: realASL, DatastoreID: jsii.String("ds-1")}
	}
	for name, mutate := range map[string]func(*Props){
		"no name":          func(p *Props) { p.Name = "" },
		"no datastore":     func(p *Props) { p.DatastoreID = nil },
		"bad datastore":    func(p *Props) { p.DatastoreID = jsii.String("a/b") },
		"no lambdas":       func(p *Props) { p.LambdaDir = t.TempDir() },
		"no definition":    func(p *Props) { p.ASLFile = filepath.Join(dir, "none.json") },
		"schedule 0":       func(p *Props) { p.ScheduleMinutes = jsii.Number(0) },
		"schedule 2.5":     func(p *Props) { p.ScheduleMinutes = jsii.Number(2.5) },
		"state":            func(p *Props) { p.ScheduleState = jsii.String("PAUSED") },
		"validate":         func(p *Props) { p.ValidateLevel = jsii.String("strict") },
		"log retention":    func(p *Props) { p.LogRetentionDays = jsii.Number(2) },
		"archive forever":  func(p *Props) { p.ArchiveRetentionDays = jsii.Number(0) },
		"types":            func(p *Props) { p.ResourceTypes = jsii.String("patient") },
		"email":            func(p *Props) { p.AlarmEmail = jsii.String("nobody") },
		"source":           func(p *Props) { p.EventSource = "has space" },
		"initial":          func(p *Props) { p.InitialCheckpoint = jsii.String("yesterday") },
		"bad settings":     func(p *Props) { s := DefaultSettings(); s.MapMaxConcurrency = 0; p.Settings = &s },
		"entry bytes high": func(p *Props) { p.MaxEntryBytes = jsii.Number(2 << 20) },
	} {
		p := good()
		mutate(&p)
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		stack := awscdk.NewStack(app, jsii.String("S"), nil)
		if _, err := New(stack, "Cdc", p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
