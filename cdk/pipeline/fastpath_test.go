package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// fastPathLambdaDir is fakeLambdaDir with the fast path's two bootstraps.
func fastPathLambdaDir(t *testing.T) string {
	t.Helper()
	dir := fakeLambdaDir(t)
	for _, l := range []string{stackconfig.FastPath, stackconfig.FastPathSetup} {
		if err := os.MkdirAll(filepath.Join(dir, l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, l, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fastPathProps are a user's props with the FastPath setting on.
func fastPathProps(t *testing.T, dir string, settings map[string]string) Props {
	t.Helper()
	set := DefaultSettings()
	if err := set.Apply(map[string]string{"FastPath": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := set.Apply(settings); err != nil {
		t.Fatal(err)
	}
	return Props{Name: "p", LambdaDir: dir, ASLFile: realASL, Settings: &set, DatastoreID: jsii.String("ds-1")}
}

// With FastPath on, New refuses what could not work before building
// anything: no type list (the SubscriptionTopic needs one resourceTrigger
// per type) and the fast path's bootstraps missing.
func TestFastPathRefusedAtSynth(t *testing.T) {
	dir := fastPathLambdaDir(t)
	for name, c := range map[string]struct {
		props func() Props
		want  []string
	}{
		"no types": {func() Props { return fastPathProps(t, dir, nil) },
			[]string{"FastPath", "ResourceTypes", "SubscriptionTopic", "resourceTrigger"}},
		"blank types": {func() Props {
			p := fastPathProps(t, dir, nil)
			p.ResourceTypes = jsii.String("")
			return p
		}, []string{"FastPath", "ResourceTypes"}},
		"no bootstrap": {func() Props {
			p := fastPathProps(t, fakeLambdaDir(t), nil)
			p.ResourceTypes = jsii.String("Patient")
			return p
		}, []string{stackconfig.FastPath, "bootstrap is missing"}},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		stack := awscdk.NewStack(app, jsii.String("S"), nil)
		_, err := New(stack, "Cdc", c.props())
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to name %q", name, err, w)
			}
		}
	}
}

// With ReservedConcurrency the fast path's two Lambdas reserve too: the
// fast-path Lambda its mapping's MaximumConcurrency, the custom resource's
// one; cdk-nag's LambdaConcurrency then finds nothing.
func TestFastPathReservesConcurrencyWithTheSetting(t *testing.T) {
	dir := fastPathLambdaDir(t)
	p := fastPathProps(t, dir, map[string]string{"ReservedConcurrency": "true"})
	p.ResourceTypes = jsii.String("Patient")
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	if _, err := New(stack, "Cdc", p); err != nil {
		t.Fatalf("FastPath with ReservedConcurrency: %v", err)
	}
	for _, f := range errorAnnotations(stack) {
		t.Error(f)
	}
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	got := map[string]float64{}
	for id, f := range resourcesOf(tpl, "AWS::Lambda::Function") {
		if strings.Contains(id, "FastPath") {
			n, _ := f["Properties"].(map[string]any)["ReservedConcurrentExecutions"].(float64)
			got[id[:len(id)-8]] = n
		}
	}
	want := map[string]float64{"CdcFastPath": float64(p.Settings.FastPathMaxConcurrency()), "CdcFastPathSetup": 1}
	if js(got) != js(want) {
		t.Errorf("fast-path reservations = %v, want %v", got, want)
	}
	if n := p.Settings.ReservedConcurrencyTotal(); n != 32+p.Settings.FastPathMaxConcurrency()+1 {
		t.Errorf("ReservedConcurrencyTotal with the fast path = %d", n)
	}
}

// A user's app with the fast path and literal types: the custom resource's
// Types is the list itself, no template Rule is needed, the names derive
// from the pipeline name, and cdk-nag finds nothing.
func TestFastPathWithLiteralTypes(t *testing.T) {
	p := fastPathProps(t, fastPathLambdaDir(t), nil)
	p.ResourceTypes = jsii.String("Patient,Observation")
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	pl, err := New(stack, "Cdc", p)
	if err != nil {
		t.Fatal(err)
	}
	if pl.FastPath == nil || pl.FastPath.Subscription == nil || pl.FastPath.Queue == nil {
		t.Fatalf("Pipeline.FastPath = %+v", pl.FastPath)
	}
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	for _, f := range errorAnnotations(stack) {
		t.Error(f)
	}
	_, props := only(t, tpl, "Custom::HealthLakeSubscription")
	if js(props["Types"]) != js([]any{"Patient", "Observation"}) || props["Name"] != "p" || props["Payload"] != "full-resource" ||
		props["DatastoreId"] != "ds-1" {
		t.Errorf("custom resource properties = %s", js(props))
	}
	if rules, _ := tpl["Rules"].(map[string]any); rules != nil {
		for name := range rules {
			if strings.Contains(name, "FastPath") {
				t.Errorf("template Rule %s for a literal type list", name)
			}
		}
	}
	names := map[string]bool{}
	for _, typ := range []string{"AWS::Events::EventBus", "AWS::SQS::Queue"} {
		for _, r := range resourcesOf(tpl, typ) {
			p := r["Properties"].(map[string]any)
			for _, k := range []string{"Name", "QueueName"} {
				if v, ok := p[k].(string); ok {
					names[v] = true
				}
			}
		}
	}
	for _, n := range []string{NotificationBusName("p"), FastPathQueueName("p"), FastPathDeadLetterName("p")} {
		if !names[n] {
			t.Errorf("no resource named %s (have %v)", n, names)
		}
	}
	// The longest pipeline name fits the fast path's names too.
	longest := strings.Repeat("n", MaxNameLength)
	derived := map[string]bool{}
	for _, d := range DerivedNames(longest) {
		derived[d.Name] = true
	}
	for _, n := range []string{NotificationBusName(longest), FastPathQueueName(longest), FastPathDeadLetterName(longest)} {
		if !derived[n] {
			t.Errorf("%s is not one of DerivedNames", n)
		}
	}
}

// LambdasOf names the fast path's Lambdas only with the FastPath setting.
func TestLambdasOf(t *testing.T) {
	set := DefaultSettings()
	if js(LambdasOf(set)) != js(Lambdas) {
		t.Errorf("LambdasOf(default) = %v, want %v", LambdasOf(set), Lambdas)
	}
	set.FastPath = true
	got := LambdasOf(set)
	if len(got) != len(Lambdas)+2 || got[len(got)-2] != stackconfig.FastPath || got[len(got)-1] != stackconfig.FastPathSetup {
		t.Errorf("LambdasOf(FastPath) = %v", got)
	}
}

// A data store on a customer-managed key (DatastoreKey, or FastPathBusKey
// set alone: HealthLake delivers only to a bus on that same key): the
// notification bus is encrypted with that key; the stack's key policy gets
// no statement for it, the statement the other key's policy needs goes out
// as the output NotificationBusKeyPolicyStatement, synth warns that it must
// be added — and every role that calls HealthLake may use the key through
// HealthLake (TestEveryHealthLakeCallerMayUseTheDataStoresKey).
func TestFastPathBusKeyEncryptsTheNotificationBus(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	for _, setting := range []string{"DatastoreKey", "FastPathBusKey"} {
		t.Run(setting, func(t *testing.T) {
			p := fastPathProps(t, fastPathLambdaDir(t), map[string]string{setting: key})
			p.ResourceTypes = jsii.String("Patient")
			stack, tpl := synthProps(t, p)
			for id, bus := range resourcesOf(tpl, "AWS::Events::EventBus") {
				props := bus["Properties"].(map[string]any)
				if props["Name"] == NotificationBusName("p") {
					if props["KmsKeyIdentifier"] != key {
						t.Errorf("%s KmsKeyIdentifier = %v, want the data store's key", id, props["KmsKeyIdentifier"])
					}
				} else if js(props["KmsKeyIdentifier"]) == js(key) {
					t.Errorf("%s (the change bus) is on the data store's key", id)
				}
			}
			for id, k := range resourcesOf(tpl, "AWS::KMS::Key") {
				if strings.Contains(js(k), "EventBridgeNotificationBusEncryption") {
					t.Errorf("%s: the stack's key policy names the notification bus, which is on another key", id)
				}
			}
			outputs, _ := tpl["Outputs"].(map[string]any)
			var statement string
			for name, o := range outputs {
				if strings.Contains(name, "NotificationBusKeyPolicyStatement") {
					statement = js(o.(map[string]any)["Value"])
				}
			}
			for _, want := range []string{"events.amazonaws.com", "kms:GenerateDataKey", "kms:Decrypt", "kms:EncryptionContext:aws:events:event-bus:arn", "event-bus/p-notifications"} {
				if !strings.Contains(statement, want) {
					t.Errorf("NotificationBusKeyPolicyStatement %s lacks %s", statement, want)
				}
			}
			warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("FastPathBusKey")))
			if warnings == nil || len(*warnings) == 0 {
				t.Error("no synth warning that the key's policy needs the statement")
			}
			if got := keyUsers(tpl, key); len(got) != 7 {
				t.Errorf("roles that may use the data store's key: %v, want the 7 functions'", got)
			}
		})
	}
}

// synthProps builds a pipeline from p in a stack of its own under cdk-nag's
// packs and returns the stack and its template; nag errors fail the test.
func synthProps(t *testing.T, p Props) (awscdk.Stack, map[string]any) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	if _, err := New(stack, "Cdc", p); err != nil {
		t.Fatal(err)
	}
	for _, f := range errorAnnotations(stack) {
		t.Error(f)
	}
	return stack, *assertions.Template_FromStack(stack, nil).ToJSON()
}

// keyUsers returns the roles (the Roles of each customer-managed policy)
// with a UseDatastoreKey statement on key that admits the key's use only
// through HealthLake in the stack's Region.
func keyUsers(tpl map[string]any, key string) []string {
	var out []string
	for _, pol := range resourcesOf(tpl, "AWS::IAM::ManagedPolicy") {
		props := pol["Properties"].(map[string]any)
		for _, st := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Sid"] != "UseDatastoreKey" || st["Resource"] != key {
				continue
			}
			via := js(st["Condition"].(map[string]any)["StringEquals"].(map[string]any)["kms:ViaService"])
			if !strings.Contains(via, `"healthlake.",{"Ref":"AWS::Region"},".amazonaws.com"`) {
				continue
			}
			out = append(out, js(props["Roles"]))
		}
	}
	return out
}

// TestEveryHealthLakeCallerMayUseTheDataStoresKey: with DatastoreKey and
// the fast path off, the five functions' roles (each calls HealthLake) may
// use the data store's key through HealthLake, no other role may, and synth
// warns that the key's policy must let IAM policies grant it.
func TestEveryHealthLakeCallerMayUseTheDataStoresKey(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	set := DefaultSettings()
	if err := set.Apply(map[string]string{"DatastoreKey": key}); err != nil {
		t.Fatal(err)
	}
	stack, tpl := synthProps(t, Props{Name: "p", LambdaDir: fakeLambdaDir(t), ASLFile: realASL, Settings: &set, DatastoreID: jsii.String("ds-1")})
	got := keyUsers(tpl, key)
	if len(got) != 5 {
		t.Errorf("roles that may use the data store's key: %v, want the 5 functions'", got)
	}
	for _, r := range got {
		for _, not := range []string{"StateMachine", "Scheduler", "HealthLakeExport"} {
			if strings.Contains(r, not) {
				t.Errorf("%s may use the data store's key", r)
			}
		}
	}
	warnings := assertions.Annotations_FromStack(stack).FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("DatastoreKey")))
	if warnings == nil || len(*warnings) == 0 {
		t.Error("no synth warning that the key's policy must let IAM policies grant it")
	}
}
