package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stackOutputIDs reads the ids of the CloudFormation outputs the CDK app
// declares (cdk/pipeline/pipeline.go, `out("Id", …)`: a top-level
// CfnOutput's id is its output key).
func stackOutputIDs(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "cdk", "pipeline", "pipeline.go"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bout\("([A-Za-z0-9]+)",`).FindAllStringSubmatch(string(b), -1) {
		ids[m[1]] = true
	}
	if len(ids) < 5 || !ids["TableName"] {
		t.Fatalf("found the outputs %v in cdk/pipeline/pipeline.go: the parser is probably wrong", ids)
	}
	return ids
}

// Everywhere cdcctl's sources mention a stack output, they name one the
// stack really has.
func TestCdcctlNamesRealStackOutputs(t *testing.T) {
	ids := stackOutputIDs(t)
	for env, out := range stackOutputs {
		if !ids[out] {
			t.Errorf("stackOutputs[%s] = %q: the stack has no such output (it has %v)", env, out, ids)
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`stack outputs? ?([A-Za-z0-9]*)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
			if m[1] < len(text) && text[m[1]] == '"' && m[2] == m[3] {
				continue // a message built from stackOutputs (setHint)
			}
			if name := text[m[2]:m[3]]; !ids[name] {
				t.Errorf("%s: %q names no output of the stack (outputs: %v)", f, text[m[0]:m[1]], ids)
			}
		}
	}
}

// What cdcctl says when a resource is missing names the output to take
// it from.
func TestMissingResourceErrorsNameTheStackOutput(t *testing.T) {
	s := newCtlStack(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--endpoint", s.env.URL}, "the stack output TableName"},
		{[]string{"replay", "--endpoint", s.env.URL, "--since", "2026-01-01T00:00:00Z"}, "the stack output TableName"},
		{[]string{"run", "--endpoint", s.env.URL}, "the stack output StateMachineArn"},
		{[]string{"reconcile", "--endpoint", s.env.URL}, "the stack output ReconcileStateMachineArn"},
		{[]string{"reconcile", "status", "--endpoint", s.env.URL}, "the stack output TableName"},
		{[]string{"quarantine", "--endpoint", s.env.URL}, "the stack output BucketName"},
		{[]string{"dlq", "--endpoint", s.env.URL, "--queue", "start"}, "the stack output StartDeadLetterQueueUrl"},
		{[]string{"dlq", "--endpoint", s.env.URL, "--queue", "recheck"}, "the stack output RecheckDeadLetterQueueUrl"},
	} {
		var out, errb strings.Builder
		code := run(context.Background(), c.args, strings.NewReader(""), &out, &errb)
		if code == exitOK || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want it to say %q", c.args, code, errb.String(), c.want)
		}
	}
}
