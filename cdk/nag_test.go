package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cost"
)

// The stack as `make synth` builds it passes cdk-nag's AwsSolutions and
// HIPAA Security packs: no error-level finding is left, and every
// suppression carries a reason (cdk-nag refuses one without).
func TestCdkNagFindsNoErrors(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack, err := NewPipelineStack(app, synthesized.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range errorAnnotations(stack) {
		t.Error(l)
	}
	if os.Getenv("NAG_WARNINGS") != "" {
		for _, l := range warningAnnotations(stack) {
			t.Logf("warning %s", l)
		}
	}
}

// What the HIPAA review asks for is in the template, not only suppressed:
// the artifact bucket (PHI) is versioned and its access is logged to a
// bucket of its own; reserved concurrency is a setting (off by default);
// the state machine is traced; the state machine invokes no function versions (":*").
func TestHIPAAControlsInTheTemplate(t *testing.T) {
	logsID, logs := oneOfType(t, "AWS::S3::Bucket", "AccessLogBucket")
	_, bucket := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	bp := props(bucket)
	if flatten(path(bp, "LoggingConfiguration", "DestinationBucketName")) != flatten(ref(logsID)) {
		t.Errorf("artifact bucket access logs go to %v, want the access-log bucket", path(bp, "LoggingConfiguration"))
	}
	if path(bp, "VersioningConfiguration", "Status") != "Enabled" {
		t.Errorf("artifact bucket versioning = %v", path(bp, "VersioningConfiguration"))
	}
	for _, rule := range asList(path(bp, "LifecycleConfiguration", "Rules")) {
		if path(rule, "NoncurrentVersionExpiration", "NoncurrentDays") == nil {
			t.Errorf("lifecycle rule %v keeps noncurrent versions forever", path(rule, "Id"))
		}
	}
	if algo := path(props(logs), "BucketEncryption", "ServerSideEncryptionConfiguration", 0, "ServerSideEncryptionByDefault", "SSEAlgorithm"); algo != "AES256" {
		t.Errorf("access-log bucket encryption %v: S3 delivers access logs only to SSE-S3 buckets", algo)
	}
	// Reserved concurrency is opt-in (the ReservedConcurrency setting): a new
	// account's concurrency quota is below the 100 units Lambda keeps
	// unreserved, so the default stack reserves none and says why.
	ids, fns := ofType("AWS::Lambda::Function")
	for i, f := range fns {
		if v := path(props(f), "ReservedConcurrentExecutions"); v != nil {
			t.Errorf("%s reserves %v by default: the first deploy into a new account fails", ids[i], v)
		}
		if m := flatten(f["Metadata"]); !strings.Contains(m, "HIPAA.Security-LambdaConcurrency") || !strings.Contains(m, "ReservedConcurrency") {
			t.Errorf("%s: no LambdaConcurrency suppression naming the ReservedConcurrency setting", ids[i])
		}
	}
	_, sm := oneOfType(t, "AWS::StepFunctions::StateMachine", "StateMachine")
	if path(props(sm), "TracingConfiguration", "Enabled") != true {
		t.Errorf("state machine tracing = %v", path(props(sm), "TracingConfiguration"))
	}
	for _, s := range statements() {
		if s.Owner == "StateMachineRole" && containsAll(s.Actions, []string{"lambda:InvokeFunction"}) {
			for _, r := range s.Resources {
				if strings.HasSuffix(flatten(r), ":*") {
					t.Errorf("state machine may invoke function versions: %s", flatten(r))
				}
			}
		}
	}
}

// The cost model's footprint counts the stack's alarms (docs/COST.md).
func TestCostModelCountsTheAlarms(t *testing.T) {
	ids, _ := ofType("AWS::CloudWatch::Alarm")
	if want := cost.ThisFootprint().Alarms; len(ids) != want {
		t.Errorf("the stack has %d alarms, the cost model assumes %d: update internal/cost.ThisFootprint", len(ids), want)
	}
}

// TestSynthWarnsOfAQuotaThatIsNotTheRegions: when synth knows the Region
// (CDK_DEFAULT_REGION), a PutEventsQuota other than the Region's documented
// default is a synth warning, not a refusal (a raised quota is legitimate);
// an unknown Region gives none.
func TestSynthWarnsOfAQuotaThatIsNotTheRegions(t *testing.T) {
	warned := func(region string) string {
		t.Helper()
		cfg := synthesized.cfg
		cfg.Region = region
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		stack, err := NewPipelineStack(app, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range warningAnnotations(stack) {
			if strings.Contains(l, "PutEventsQuota") {
				return l
			}
		}
		return ""
	}
	if w := warned("us-east-1"); !strings.Contains(w, "below us-east-1's default PutEvents quota of 10000") {
		t.Errorf("default quota 400 in us-east-1: warning %q", w)
	}
	if w := warned(""); w != "" {
		t.Errorf("no Region: warning %q", w)
	}
}

// TestSynthRefusesFIPSWhereHealthLakeHasNone: with the FIPSEndpoints
// setting, a Region synth knows (CDK_DEFAULT_REGION) without a HealthLake
// FIPS endpoint is refused, naming the Regions that have one; one of those,
// or an unknown Region (the data store check refuses it at deploy), is not.
func TestSynthRefusesFIPSWhereHealthLakeHasNone(t *testing.T) {
	for region, refused := range map[string]bool{"eu-west-2": true, "us-west-2": false, "": false} {
		cfg := synthesized.cfg
		cfg.Region = region
		cfg.Settings.FIPSEndpoints = true
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
		_, err := NewPipelineStack(app, cfg, nil)
		if refused != (err != nil) || (refused && (!strings.Contains(err.Error(), "HealthLake has no FIPS endpoint in eu-west-2, only in us-east-1, us-east-2, us-west-2") ||
			!strings.Contains(err.Error(), "CDK_DEFAULT_REGION"))) {
			t.Errorf("FIPSEndpoints in %q: %v, want refused %v", region, err, refused)
		}
	}
}
