package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// realASL is the state machine definition the stack deploys; fixtureASL
// stands in, with the same placeholders, only while the real file is absent
// (TestDeploysTheRealDefinition then fails).
const (
	realASL    = "../statemachine/cdc.asl.json"
	fixtureASL = "testdata/fixture.asl.json"
)

// synthesized is the one stack all tests look at; synthesizing once keeps
// `go test` at a few seconds after the first compile.
var synthesized struct {
	template assertions.Template
	json     map[string]any
	cfg      Config
	asl      string
	fixture  bool
}

func TestMain(m *testing.M) {
	silenceNodeWarning()
	code := func() int {
		defer jsii.Close()
		dir, err := os.MkdirTemp("", "cdk-lambdas-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := fakeLambdaDir(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cfg := Config{StackName: "CdcTest", LambdaDir: dir, ASLFile: realASL, Settings: stackconfig.Default()}
		if _, err := os.Stat(realASL); err != nil {
			cfg.ASLFile = fixtureASL
			synthesized.fixture = true
		}
		if err := cfg.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
		stack, err := NewPipelineStack(app, cfg, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		tpl := assertions.Template_FromStack(stack, nil)
		synthesized.template = tpl
		synthesized.json = *tpl.ToJSON()
		synthesized.cfg = cfg
		asl, err := os.ReadFile(cfg.ASLFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		synthesized.asl = string(asl)
		return m.Run()
	}()
	os.Exit(code)
}

// fakeLambdaDir writes a dummy bootstrap per Lambda, so that the tests need
// no cross-compiled binaries.
func fakeLambdaDir(dir string) error {
	for _, l := range Lambdas {
		if err := os.MkdirAll(filepath.Join(dir, l), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, l, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// check runs a jsii assertion and turns its panic into a test error, so
// one mismatch does not abort the whole test binary.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// --- template helpers -------------------------------------------------------

func resources() map[string]any { return synthesized.json["Resources"].(map[string]any) }

func parameters() map[string]any { return synthesized.json["Parameters"].(map[string]any) }

// ofType returns the logical ids and bodies of the resources of one type,
// sorted by logical id.
func ofType(typ string) ([]string, []map[string]any) {
	var ids []string
	for id, r := range resources() {
		if r.(map[string]any)["Type"] == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	bodies := make([]map[string]any, len(ids))
	for i, id := range ids {
		bodies[i] = resources()[id].(map[string]any)
	}
	return ids, bodies
}

// oneOfType returns the single resource of a type whose logical id starts
// with the construct id prefix.
func oneOfType(t *testing.T, typ, prefix string) (string, map[string]any) {
	t.Helper()
	ids, bodies := ofType(typ)
	var gotID string
	var got map[string]any
	for i, id := range ids {
		if constructID(id) == prefix {
			if got != nil {
				t.Fatalf("two %s with construct id %s", typ, prefix)
			}
			gotID, got = id, bodies[i]
		}
	}
	if got == nil {
		t.Fatalf("no %s with construct id %s (have %v)", typ, prefix, ids)
	}
	return gotID, got
}

var logicalHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// constructID strips the 8-hex-digit hash CDK appends to logical ids.
func constructID(logicalID string) string { return logicalHash.ReplaceAllString(logicalID, "") }

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// path walks nested maps and slices: path(v, "A", "B", 0, "C").
func path(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func ref(id string) map[string]any { return map[string]any{"Ref": id} }

func getAtt(id, attr string) map[string]any {
	return map[string]any{"Fn::GetAtt": []any{id, attr}}
}

func jsonEq(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func strs(v any) []string {
	var out []string
	for _, x := range asList(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// flatten renders a CloudFormation value as one string: Ref X as ${X},
// GetAtt X.A as ${X.A}, Join and Sub as their text.
func flatten(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			return "${" + r + "}"
		}
		if g, ok := v["Fn::GetAtt"].([]any); ok && len(g) == 2 {
			return fmt.Sprintf("${%v.%v}", g[0], g[1])
		}
		if j, ok := v["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range asList(j[1]) {
				parts = append(parts, flatten(p))
			}
			return strings.Join(parts, j[0].(string))
		}
		if s, ok := v["Fn::Sub"]; ok {
			if l, ok := s.([]any); ok {
				return flatten(l[0])
			}
			return flatten(s)
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// statement is one policy statement found in the template, with its owner.
type statement struct {
	ResourceType string // AWS::IAM::Policy, AWS::KMS::Key, ...
	Owner        string // construct id of the role (policies) or of the resource
	Effect       string
	Actions      []string
	Resources    []any
	Raw          map[string]any
}

// statements returns every statement of every permission policy in the
// template: IAM policies and inline role policies, key policies, bucket,
// queue and topic policies. Trust policies (AssumeRolePolicyDocument) grant
// sts:AssumeRole to a principal and are checked separately.
func statements() []statement {
	var out []statement
	add := func(typ, owner string, doc any) {
		for _, s := range asList(path(doc, "Statement")) {
			m := s.(map[string]any)
			var actions []string
			actions = append(actions, strs(m["Action"])...)
			out = append(out, statement{typ, owner, fmt.Sprint(m["Effect"]), actions, asList(m["Resource"]), m})
		}
	}
	for id, r := range resources() {
		r := r.(map[string]any)
		typ := r["Type"].(string)
		p := props(r)
		switch typ {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			owners := []string{}
			for _, role := range asList(p["Roles"]) {
				owners = append(owners, constructID(path(role, "Ref").(string)))
			}
			if len(owners) == 0 {
				owners = []string{constructID(id)}
			}
			for _, o := range owners {
				add(typ, o, p["PolicyDocument"])
			}
		case "AWS::IAM::Role":
			for _, pol := range asList(p["Policies"]) {
				add(typ, constructID(id), path(pol, "PolicyDocument"))
			}
		case "AWS::KMS::Key":
			add(typ, constructID(id), p["KeyPolicy"])
		case "AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy", "AWS::Events::EventBusPolicy":
			add(typ, constructID(id), p["PolicyDocument"])
		}
	}
	return out
}

// allows reports whether some Allow statement owned by owner grants every
// action in actions on a resource whose flattened form equals resource.
func allows(owner string, resource string, actions ...string) bool {
	for _, s := range statements() {
		if s.Owner != owner || s.Effect != "Allow" {
			continue
		}
		hit := false
		for _, r := range s.Resources {
			if flatten(r) == resource {
				hit = true
			}
		}
		if hit && containsAll(s.Actions, actions) {
			return true
		}
	}
	return false
}

func containsAll(have, want []string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// actionsOf returns every action some Allow statement of owner grants.
func actionsOf(owner string) map[string]bool {
	out := map[string]bool{}
	for _, s := range statements() {
		if s.Owner == owner && s.Effect == "Allow" {
			for _, a := range s.Actions {
				out[a] = true
			}
		}
	}
	return out
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
