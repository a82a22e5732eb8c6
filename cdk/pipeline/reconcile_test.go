package pipeline

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// synthWith synthesizes a pipeline with the given settings under cdk-nag's
// packs and returns its template and the error-level findings.
func synthWith(t *testing.T, settings map[string]string) (map[string]any, []string) {
	t.Helper()
	set := DefaultSettings()
	if err := set.Apply(settings); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("S"), nil)
	if _, err := New(stack, "Cdc", Props{Name: "p", LambdaDir: fakeLambdaDir(t), ASLFile: realASL, Settings: &set,
		DatastoreID: jsii.String("ds-1")}); err != nil {
		t.Fatal(err)
	}
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	findings := errorAnnotations(stack)
	return tpl, findings
}

// nonDefault are settings the tests below change all at once (one synth).
var nonDefault = map[string]string{
	"ReservedConcurrency": "true",
	"ReconcileEvery":      "12h", "ReconcileHour": "22", "ReconcileTimeZone": "America/Chicago",
	"DeliveredExpiryDays": "60", "ReconcileExpiryDays": "40",
}

// Issue "Deploys on a fresh AWS account": the default stack reserves no
// Lambda concurrency (a new account's quota cannot hold it) and cdk-nag's
// HIPAA LambdaConcurrency finding is suppressed with the reason; with the
// ReservedConcurrency setting every function reserves its share and nothing
// needs suppressing. The reconciliation runs at 03:00 UTC by default, at
// the configured hour and zone otherwise; delivered/ and reconcile/ expire;
// the state machines' retained log groups have no fixed name.
func TestFreshAccountDefaultsAndTheirSettings(t *testing.T) {
	def, findings := synthWith(t, nil)
	for _, f := range findings {
		t.Errorf("defaults: %s", f)
	}
	on, findings := synthWith(t, nonDefault)
	for _, f := range findings {
		t.Errorf("settings on: %s", f)
	}

	t.Run("reserved concurrency", func(t *testing.T) {
		for id, f := range resourcesOf(def, "AWS::Lambda::Function") {
			if v, ok := f["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; ok {
				t.Errorf("default %s reserves %v", id, v)
			}
			if !strings.Contains(js(f["Metadata"]), "HIPAA.Security-LambdaConcurrency") || !strings.Contains(js(f["Metadata"]), "ReservedConcurrency setting") {
				t.Errorf("default %s: no LambdaConcurrency suppression naming the setting: %s", id, js(f["Metadata"]))
			}
		}
		want := map[string]float64{"CdcStartExport": 3, "CdcCheckExport": 3, "CdcPrepareChange": 10, "CdcRunLock": 5, "CdcReconcile": 10, "CdcCheckDatastore": 1}
		got := map[string]float64{}
		for id, f := range resourcesOf(on, "AWS::Lambda::Function") {
			n, _ := f["Properties"].(map[string]any)["ReservedConcurrentExecutions"].(float64)
			got[id[:len(id)-8]] = n
			if strings.Contains(js(f["Metadata"]), "HIPAA.Security-LambdaConcurrency") {
				t.Errorf("%s suppresses LambdaConcurrency although it reserves concurrency", id)
			}
		}
		if js(got) != js(want) {
			t.Errorf("reserved with the setting = %v, want %v", got, want)
		}
	})

	t.Run("reconciliation schedule", func(t *testing.T) {
		for tpl, want := range map[*map[string]any][2]string{
			&def: {"cron(0 3 * * ? *)", "UTC"},
			&on:  {"cron(0 10/12 * * ? *)", "America/Chicago"},
		} {
			found := false
			for id, r := range resourcesOf(*tpl, "AWS::Scheduler::Schedule") {
				if !strings.HasPrefix(id, "CdcReconcileSchedule") {
					continue
				}
				found = true
				p := r["Properties"].(map[string]any)
				if p["ScheduleExpression"] != want[0] || p["ScheduleExpressionTimezone"] != want[1] {
					t.Errorf("reconcile schedule %v in %v, want %s in %s", p["ScheduleExpression"], p["ScheduleExpressionTimezone"], want[0], want[1])
				}
			}
			if !found {
				t.Errorf("no reconcile schedule")
			}
		}
	})

	t.Run("lifecycle of every prefix", func(t *testing.T) {
		for tpl, want := range map[*map[string]any]map[string]float64{
			&def: {PrefixDelivered: 35, PrefixReconcile: 30},
			&on:  {PrefixDelivered: 60, PrefixReconcile: 40},
		} {
			got := map[string]float64{}
			for id, b := range resourcesOf(*tpl, "AWS::S3::Bucket") {
				if !strings.HasPrefix(id, "CdcArtifactBucket") {
					continue
				}
				rules, _ := b["Properties"].(map[string]any)["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
				for _, r := range rules {
					r := r.(map[string]any)
					if days, ok := r["ExpirationInDays"].(float64); ok {
						got[fmt.Sprint(r["Prefix"])] = days
					} else {
						got[fmt.Sprint(r["Prefix"])] = -1 // a parameter or token
					}
				}
			}
			for _, pref := range []string{PrefixExports, PrefixManifests, PrefixMapResults, PrefixClaimCheck, PrefixQuarantine, PrefixDelivered, PrefixReconcile, PrefixOverlap} {
				if _, ok := got[pref]; !ok {
					t.Errorf("no lifecycle rule for %s", pref)
				}
			}
			for pref, days := range want {
				if got[pref] != days {
					t.Errorf("%s expires after %v days, want %v", pref, got[pref], days)
				}
			}
		}
	})

	t.Run("retained log groups have no fixed name", func(t *testing.T) {
		vended := 0
		for id, lg := range resourcesOf(def, "AWS::Logs::LogGroup") {
			if lg["DeletionPolicy"] != "Retain" {
				t.Errorf("log group %s not retained", id)
			}
			name, ok := lg["Properties"].(map[string]any)["LogGroupName"]
			if !ok {
				continue // CloudFormation generates it
			}
			if _, literal := name.(string); literal || !strings.Contains(js(name), "AWS::StackId") || !strings.Contains(js(name), "/aws/vendedlogs/states/p-") {
				t.Errorf("log group %s: retained with the name %s, which a recreated stack would collide with", id, js(name))
			}
			vended++
		}
		if vended != 2 {
			t.Errorf("%d state machine log groups under /aws/vendedlogs/, want 2", vended)
		}
	})
}

// A pipeline name AWS would refuse in a name derived from it fails New,
// naming Name, the resource and the limit; the longest name that fits
// every limit is accepted.
func TestPipelineRefusesNamesAWSRefuses(t *testing.T) {
	longest := strings.Repeat("n", MaxNameLength)
	if err := CheckName(longest); err != nil {
		t.Errorf("%d characters: %v", MaxNameLength, err)
	}
	for _, r := range DerivedNames(longest) {
		if len(r.Name) > r.Max {
			t.Errorf("%s %q over %d", r.What, r.Name, r.Max)
		}
	}
	if got := ArchiveName(longest); len(got) != 48 {
		t.Errorf("archive name of the longest pipeline name is %d characters, want exactly 48", len(got))
	}
	dir := fakeLambdaDir(t)
	for name, want := range map[string]string{
		strings.Repeat("n", MaxNameLength+1): "event archive",
		strings.Repeat("n", 60):              "CreateArchive",
		"has.dot":                            "letters, digits",
		"has space":                          "letters, digits",
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		stack := awscdk.NewStack(app, jsii.String("S"), nil)
		_, err := New(stack, "Cdc", Props{Name: name, LambdaDir: dir, ASLFile: realASL, DatastoreID: jsii.String("ds-1")})
		if err == nil || !strings.Contains(err.Error(), "Name") || !strings.Contains(err.Error(), want) {
			t.Errorf("Name %q: %v, want an error naming Name and %q", name, err, want)
		}
	}
}
