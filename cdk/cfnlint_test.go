package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
)

// cfnLintVersion is the cfn-lint these checks were written against
// (docs/DEPLOY.md, "Build").
const cfnLintVersion = "1.51.0"

// cfnLint returns the cfn-lint command: $CFN_LINT, or cfn-lint on the PATH;
// "" when neither is there (PyPI is not among the registries a fresh
// machine reaches, so the Makefile cannot install it).
func cfnLint() string {
	if v := os.Getenv("CFN_LINT"); v != "" {
		return v
	}
	p, _ := exec.LookPath("cfn-lint")
	return p
}

// cfnLintFinding is one entry of cfn-lint's JSON output.
type cfnLintFinding struct {
	Rule struct {
		ID string `json:"Id"`
	} `json:"Rule"`
	Level   string `json:"Level"`
	Message string `json:"Message"`
}

// lintTemplate runs cfn-lint on tpl in the Regions HealthLake and the
// stack are deployed to, and returns its findings.
func lintTemplate(t *testing.T, bin, name string, tpl map[string]any) []cfnLintFinding {
	t.Helper()
	b, err := json.Marshal(tpl)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), name+".template.json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--format", "json", "--regions", "us-east-1", "us-west-2", "eu-west-2", "--", f).Output()
	// Its exit status is a bit mask of the levels found: findings are read
	// from the output, not the status.
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("cfn-lint: %v", err)
	}
	var findings []cfnLintFinding
	if err := json.Unmarshal(out, &findings); err != nil {
		t.Fatalf("cfn-lint output is not its JSON: %v\n%s", err, out)
	}
	return findings
}

// TestTemplatesPassCfnLint: a deployment pipeline that lints templates with
// cfn-lint finds nothing in the stack's template — the default one; with
// the fast path, a permissions boundary, a VPC and claim-check readers; and
// with a data store key and reserved concurrency — nor in a consumer's
// (pipeline.NewConsumer: one with its queue here, one delivering to a queue
// in another account), but W3005 (the DependsOn the CDK writes beside a reference that implies
// it), in us-east-1, us-west-2 and eu-west-2; cfn-lint does find the error
// in a template with one, so this test can fail. Skipped where cfn-lint is
// not installed (docs/DEPLOY.md, "Build").
func TestTemplatesPassCfnLint(t *testing.T) {
	bin := cfnLint()
	if bin == "" {
		t.Skip("cfn-lint not installed: set CFN_LINT or put cfn-lint " + cfnLintVersion + " on the PATH")
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil || string(out) != "cfn-lint "+cfnLintVersion+"\n" {
		t.Logf("cfn-lint %q, the checks were written against %s", out, cfnLintVersion)
	}
	for name, tpl := range map[string]map[string]any{"default": synthesized.json, "fastpath": fastPathTemplate(t), "key": keyedTemplate(t),
		"consumers": consumersTemplate(t)} {
		seen := map[string]int{}
		for _, f := range lintTemplate(t, bin, name, tpl) {
			if f.Rule.ID == "W3005" {
				seen[f.Rule.ID]++
				continue
			}
			t.Errorf("%s template: cfn-lint %s %s: %s", name, f.Level, f.Rule.ID, f.Message)
		}
		t.Logf("%s template: %v", name, seen)
	}
	// A parameter default outside its allowed values: an error cfn-lint
	// must find.
	bad := map[string]any{
		"Parameters": map[string]any{"Days": map[string]any{"Type": "String", "Default": "31", "AllowedValues": []any{"30"}}},
		"Resources":  map[string]any{"Topic": map[string]any{"Type": "AWS::SNS::Topic"}},
	}
	var ids []string
	for _, f := range lintTemplate(t, bin, "bad", bad) {
		ids = append(ids, f.Rule.ID)
	}
	sort.Strings(ids)
	if len(ids) == 0 || ids[0][0] != 'E' {
		t.Errorf("cfn-lint found %v in a template with an error", ids)
	}
}

// keyedTemplate is the app's stack for a data store on a customer-managed
// key, with reserved concurrency.
func keyedTemplate(t *testing.T) map[string]any {
	t.Helper()
	cfg := synthesized.cfg
	if err := cfg.Settings.Apply(map[string]string{"ReservedConcurrency": "true",
		"DatastoreKey": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"}); err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack, err := NewPipelineStack(app, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return *assertions.Template_FromStack(stack, nil).ToJSON()
}

// consumersTemplate is a consumer team's stack: two pipeline.NewConsumer,
// one with its own queue, one delivering to a queue in another account.
func consumersTemplate(t *testing.T) map[string]any {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack := awscdk.NewStack(app, jsii.String("Consumers"), nil)
	bus := awsevents.EventBus_FromEventBusName(stack, jsii.String("Bus"), jsii.String("healthlake-cdc"))
	for id, p := range map[string]pipeline.ConsumerProps{
		"PatientSync": {Bus: bus, Detail: map[string]any{"resourceType": []any{"Patient"}, "operation": []any{"upsert"}}},
		"RemoteSync": {Bus: bus, Detail: map[string]any{"resourceType": []any{"Observation"}},
			RemoteQueueARN:    "arn:aws:sqs:us-east-1:111122223333:observation-sync",
			RemoteQueueKeyARN: "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"},
	} {
		if _, err := pipeline.NewConsumer(stack, id, p); err != nil {
			t.Fatal(err)
		}
	}
	return *assertions.Template_FromStack(stack, nil).ToJSON()
}
