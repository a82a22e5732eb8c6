package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// placeholders of docs/ARCHITECTURE.md ("The state machine"); numeric ones
// stand unquoted in the file.
var (
	contractPlaceholders = []string{"RunLockFunctionArn", "PrepareChangeFunctionArn", "StartQueueUrl", "ArtifactBucket",
		"ExportHeartbeatSeconds", "ExportTimeoutSeconds", "RunTimeoutSeconds", "MapMaxConcurrency"}
	numericPlaceholders = map[string]bool{"ExportHeartbeatSeconds": true, "ExportTimeoutSeconds": true, "RunTimeoutSeconds": true, "MapMaxConcurrency": true}
	placeholderRE       = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)
)

// Values standing in for what CloudFormation resolves at deploy time.
const (
	fakeAccount = "123456789012"
	fakeRegion  = "us-east-1"
)

func substitutions(t *testing.T) map[string]any {
	t.Helper()
	_, sm := stateMachine(t)
	subs, _ := props(sm)["DefinitionSubstitutions"].(map[string]any)
	if subs == nil {
		t.Fatalf("state machine has no DefinitionSubstitutions")
	}
	return subs
}

// resolve turns one substitution value into what CloudFormation would put
// in its place: a parameter's default for Ref of a parameter, an ARN, URL or
// name for references to the stack's resources.
func resolve(t *testing.T, name string, v any) string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case map[string]any:
		if r, ok := v["Ref"].(string); ok {
			if p, ok := parameters()[r].(map[string]any); ok {
				d, ok := p["Default"]
				if !ok {
					t.Fatalf("%s: parameter %s has no default", name, r)
				}
				return fmt.Sprint(d)
			}
			switch path(resources(), r, "Type") {
			case "AWS::SQS::Queue":
				return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", fakeRegion, fakeAccount, r)
			case "AWS::S3::Bucket":
				return strings.ToLower(r)
			case "AWS::Lambda::Function":
				return fmt.Sprintf("%s-%s", stackName, r)
			}
		}
		if g, ok := v["Fn::GetAtt"].([]any); ok && len(g) == 2 && g[1] == "Arn" {
			id := g[0].(string)
			switch path(resources(), id, "Type") {
			case "AWS::Lambda::Function":
				return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s-%s", fakeRegion, fakeAccount, stackName, id)
			case "AWS::SQS::Queue":
				return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", fakeRegion, fakeAccount, id)
			}
		}
	}
	t.Fatalf("substitution %s = %v: no stand-in value for it", name, v)
	return ""
}

// substitutedDefinition applies DefinitionSubstitutions the way
// CloudFormation does, with stand-in values.
func substitutedDefinition(t *testing.T) string {
	t.Helper()
	_, sm := stateMachine(t)
	def, _ := props(sm)["DefinitionString"].(string)
	subs := substitutions(t)
	return placeholderRE.ReplaceAllStringFunc(def, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		v, ok := subs[name]
		if !ok {
			return m
		}
		return resolve(t, name, v)
	})
}

func TestDefinitionSubstitutionsCoverEveryPlaceholder(t *testing.T) {
	inFile := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(synthesized.asl, -1) {
		inFile[m[1]] = true
	}
	subs := substitutions(t)
	for name := range inFile {
		if _, ok := subs[name]; !ok {
			t.Errorf("placeholder ${%s} in %s has no substitution", name, synthesized.cfg.ASLFile)
		}
	}
	for name := range subs {
		if !inFile[name] {
			t.Errorf("substitution %s matches no placeholder of %s", name, synthesized.cfg.ASLFile)
		}
	}
	var got []string
	for name := range subs {
		got = append(got, name)
	}
	sort.Strings(got)
	want := append([]string{}, contractPlaceholders...)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("substitutions %v, want the ARCHITECTURE.md set %v", got, want)
	}

	// Each value is what the placeholder names.
	set := synthesized.cfg.Settings
	runLock, _ := oneOfType(t, "AWS::Lambda::Function", "RunLock")
	prepare, _ := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	startQ, _ := oneOfType(t, "AWS::SQS::Queue", "StartQueue")
	bucket, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	want2 := map[string]any{
		"RunLockFunctionArn":       getAtt(runLock, "Arn"),
		"PrepareChangeFunctionArn": getAtt(prepare, "Arn"),
		"StartQueueUrl":            ref(startQ),
		"ArtifactBucket":           ref(bucket),
		// The numbers are the settings cdc-local runs with (stackconfig).
		"ExportHeartbeatSeconds": fmt.Sprint(stackconfig.Seconds(set.HeartbeatSeconds())),
		"ExportTimeoutSeconds":   fmt.Sprint(stackconfig.Seconds(set.ExportTimeout)),
		"RunTimeoutSeconds":      fmt.Sprint(stackconfig.Seconds(set.RunTimeout)),
		"MapMaxConcurrency":      fmt.Sprint(set.MapMaxConcurrency),
	}
	for name, w := range want2 {
		if !jsonEq(subs[name], w) {
			t.Errorf("%s = %v, want %v", name, subs[name], w)
		}
	}
}

func TestSubstitutedDefinitionIsCompleteJSON(t *testing.T) {
	def := substitutedDefinition(t)
	if i := strings.Index(def, "${"); i >= 0 {
		t.Fatalf("a placeholder is left after substitution: %q", def[i:min(len(def), i+40)])
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(def), &v); err != nil {
		t.Fatalf("substituted definition is not JSON: %v", err)
	}
	if v["StartAt"] == nil || v["States"] == nil {
		t.Fatalf("not a state machine: %v", v)
	}
	// Numeric placeholders became JSON numbers; the others appear as strings.
	var nums []float64
	var texts []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		case float64:
			nums = append(nums, x)
		case string:
			texts = append(texts, x)
		}
	}
	walk(v)
	subs := substitutions(t)
	for name := range subs {
		if !strings.Contains(synthesized.asl, "${"+name+"}") {
			continue
		}
		val := resolve(t, name, subs[name])
		found := false
		if numericPlaceholders[name] {
			for _, n := range nums {
				if fmt.Sprint(n) == val {
					found = true
				}
			}
		} else {
			for _, s := range texts {
				if strings.Contains(s, val) {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("%s (%s) does not appear in the substituted definition as a %s", name, val,
				map[bool]string{true: "number", false: "string"}[numericPlaceholders[name]])
		}
	}
}

// aslValidator returns the asl-validator binary: $ASL_VALIDATOR, or the one
// the Makefile installs under .tools/.
func aslValidator() string {
	if v := os.Getenv("ASL_VALIDATOR"); v != "" {
		return v
	}
	p, _ := filepath.Abs("../.tools/node_modules/.bin/asl-validator")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

func TestSubstitutedDefinitionPassesASLValidator(t *testing.T) {
	bin := aslValidator()
	if bin == "" {
		t.Skip("asl-validator not installed: set ASL_VALIDATOR or run `make validate-asl` once")
	}
	f := filepath.Join(t.TempDir(), "substituted.asl.json")
	if err := os.WriteFile(f, []byte(substitutedDefinition(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--json-path", f).CombinedOutput()
	if err != nil {
		t.Fatalf("asl-validator rejects the substituted definition: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "is valid") {
		t.Errorf("unexpected asl-validator output: %s", out)
	}
	// The validator itself must reject a broken machine, or this test proves nothing.
	bad := filepath.Join(t.TempDir(), "bad.asl.json")
	if err := os.WriteFile(bad, []byte(`{"StartAt":"Missing","States":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--json-path", bad).CombinedOutput(); err == nil {
		t.Errorf("asl-validator accepted an invalid definition: %s", out)
	}
}
