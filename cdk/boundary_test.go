package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// boundaryName is the permissions boundary the FastPath synth sets
// (fastPathTemplate): a stand-in for the policy an account's guardrails
// require on every role.
const boundaryName = "hospital-boundary"

// roleBoundaries returns each AWS::IAM::Role's PermissionsBoundary (nil
// when it has none) by logical id, in the current template.
func roleBoundaries() map[string]any {
	out := map[string]any{}
	ids, bodies := ofType("AWS::IAM::Role")
	for i, b := range bodies {
		out[ids[i]] = props(b)["PermissionsBoundary"]
	}
	return out
}

// An account whose guardrails refuse iam:CreateRole without a given
// permissions boundary fails the first deploy at the first role. With
// -c permissionsBoundary set, every role of the stack — the fast path's
// included — carries it; without it, none does.
func TestEveryRoleTakesThePermissionsBoundary(t *testing.T) {
	for id, b := range roleBoundaries() {
		if b != nil {
			t.Errorf("default stack: role %s has a permissions boundary %v", id, b)
		}
	}
	want := map[string]any{"Fn::Join": []any{"", []any{"arn:", ref("AWS::Partition"), ":iam::", ref("AWS::AccountId"), ":policy/" + boundaryName}}}
	onFastPath(t, func() {
		for _, r := range pipelineRoles {
			if !hasConstruct("AWS::IAM::Role", r) {
				t.Errorf("FastPath stack: no role %s", r)
			}
		}
		roles := roleBoundaries()
		for id, b := range roles {
			if !jsonEq(b, want) {
				t.Errorf("FastPath stack: role %s: PermissionsBoundary %v, want %v", id, b, want)
			}
		}
		if ids, _ := ofType("AWS::IAM::User"); len(ids) > 0 {
			t.Errorf("the stack creates IAM users %v", ids)
		}
	})
}

// pipelineRoles are the construct ids of the roles the FastPath stack has
// (TestEveryRoleTakesThePermissionsBoundary checks them all, and at least
// these).
var pipelineRoles = []string{"StartExportRole", "CheckExportRole", "PrepareChangeRole", "RunLockRole", "ReconcileRole",
	"StateMachineRole", "ReconcileStateMachineRole", "SchedulerRole", "HealthLakeExportRole", "FastPathRole", "FastPathSetupRole"}

func TestPermissionsBoundarySetting(t *testing.T) {
	cfg, err := ConfigFromContext(func(k string) any {
		if k == ContextPermissionsBoundary {
			return "cdk-hnb659fds-permissions-boundary"
		}
		return nil
	})
	if err != nil || cfg.PermissionsBoundary != "cdk-hnb659fds-permissions-boundary" {
		t.Fatalf("ConfigFromContext: %q, %v", cfg.PermissionsBoundary, err)
	}
	for _, ok := range []string{"", "hospital-boundary", "cdk-${Qualifier}-permissions-boundary", "arn:aws:iam::123456789012:policy/boundaries/app-boundary",
		"arn:aws-us-gov:iam::123456789012:policy/b", "arn:aws:iam::${AWS::AccountId}:policy/b"} {
		if err := ValidatePermissionsBoundary(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"has space", "arn:aws:iam::123:policy/b", "arn:aws:iam::123456789012:role/b", "arn:aws:s3:::bucket", strings.Repeat("p", 129), "a/b"} {
		err := ValidatePermissionsBoundary(bad)
		if err == nil || !strings.Contains(err.Error(), ContextPermissionsBoundary) {
			t.Errorf("%q: %v, want an error naming -c %s", bad, err, ContextPermissionsBoundary)
		}
	}
	cfg = synthesized.cfg
	cfg.PermissionsBoundary = "no spaces allowed"
	if _, err := NewPipelineStack(nil, cfg, nil); err == nil {
		t.Error("NewPipelineStack took a boundary IAM would refuse")
	}
}

// A boundary caps what each role may do: one that leaves out an action the
// pipeline calls lets the stack deploy and fails that call at run time
// (AccessDenied). docs/DEPLOY.md lists every action of every role's
// policies; this test fails when the list and the template differ.
func TestTheBoundaryActionsAreDocumented(t *testing.T) {
	b, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)<!-- boundary-actions:begin -->(.*)<!-- boundary-actions:end -->`).FindSubmatch(b)
	if block == nil {
		t.Fatalf("%s: no boundary-actions block", deployDoc)
	}
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+:[A-Za-z*]+)`").FindAllSubmatch(block[1], -1) {
		documented = append(documented, string(m[1]))
	}
	used := map[string]bool{}
	collect := func() {
		for _, s := range statements() {
			if strings.HasPrefix(s.ResourceType, "AWS::IAM::") && s.Effect == "Allow" {
				for _, a := range s.Actions {
					used[a] = true
				}
			}
		}
	}
	collect()
	onFastPath(t, collect)
	want := sortedKeys(used)
	slices.Sort(documented)
	if !slices.Equal(documented, want) {
		t.Errorf("%s lists the actions\n  %v\nthe roles use\n  %v", deployDoc, documented, want)
	}
}
