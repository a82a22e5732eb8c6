package asl

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// conformanceCase is one entry of testdata/conformance.json: an example
// from AWS's Step Functions documentation (or recorded AWS behaviour) with
// its documented result. A case gives a whole definition, or "parameters"
// (a JSONPath Pass state's Parameters) or "jsonata" (a JSONata Pass state's
// Output) for one-state machines. It expects output, an execution error
// (error, optionally cause), or an invalid definition (invalid: a text the
// error must name).
type conformanceCase struct {
	Name       string                     `json:"name"`
	Doc        string                     `json:"doc"`
	Definition json.RawMessage            `json:"definition"`
	Parameters json.RawMessage            `json:"parameters"`
	JSONata    json.RawMessage            `json:"jsonata"`
	Input      json.RawMessage            `json:"input"`
	Tasks      map[string]json.RawMessage `json:"tasks"`
	Output     json.RawMessage            `json:"output"`
	Error      string                     `json:"error"`
	Cause      string                     `json:"cause"`
	Invalid    string                     `json:"invalid"`
}

// ConformanceCases loads the suite; exported to the package's tests only.
func loadConformance(t *testing.T) []conformanceCase {
	t.Helper()
	b, err := os.ReadFile("testdata/conformance.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []conformanceCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("testdata/conformance.json: %v", err)
	}
	return cases
}

func (c conformanceCase) definition() string {
	switch {
	case c.Parameters != nil:
		return `{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":` + string(c.Parameters) + `,"End":true}}}`
	case c.JSONata != nil:
		return `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Output":` + string(c.JSONata) + `,"End":true}}}`
	}
	return string(c.Definition)
}

// conformanceTasks answers Task states: a resource listed in the case's
// tasks returns that value ({"$error", "$cause"}: fails), others echo their
// input.
func (c conformanceCase) tasks() TaskRunner {
	return taskFunc(func(_ context.Context, call TaskCall) (any, error) {
		raw, ok := c.Tasks[call.Resource]
		if !ok {
			return call.Parameters, nil
		}
		v, err := ParseJSON(string(raw))
		if err != nil {
			return nil, err
		}
		if m, ok := v.(map[string]any); ok {
			if name, ok := m["$error"].(string); ok {
				cause, _ := m["$cause"].(string)
				return nil, &Error{Name: name, Cause: cause}
			}
		}
		return v, nil
	})
}

func TestConformance(t *testing.T) {
	cases := loadConformance(t)
	passed := 0
	for _, c := range cases {
		ok := t.Run(c.Name, func(t *testing.T) {
			m, err := ParseDefinition([]byte(c.definition()))
			if c.Invalid != "" {
				if err == nil {
					t.Fatalf("definition accepted; want it refused naming %q", c.Invalid)
				}
				if !strings.Contains(err.Error(), c.Invalid) {
					t.Fatalf("error %q does not name %q", err, c.Invalid)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			x, err := NewRunner(fastCfg(c.tasks())).Start(context.Background(), m, StartInput{
				ExecutionARN: "arn:aws:states:us-east-1:000000000000:execution:conf:1", Name: "1",
				StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:conf", StateMachineName: "conf",
				Input: string(c.Input),
			})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			info := finish(t, x)
			checkConformance(t, c, info.Status, info.Output, info.Error, info.Cause)
		})
		if ok {
			passed++
		}
	}
	t.Logf("conformance: %d of %d cases pass", passed, len(cases))
}

// checkConformance compares an execution's end with the case's expectation.
func checkConformance(t *testing.T, c conformanceCase, status, output, errName, cause string) {
	t.Helper()
	if c.Error != "" {
		if status != StatusFailed || errName != c.Error {
			t.Fatalf("status %s error %q (cause %q), output %s; want FAILED with %s", status, errName, cause, output, c.Error)
		}
		if c.Cause != "" && cause != c.Cause {
			t.Fatalf("cause %q; want %q", cause, c.Cause)
		}
		return
	}
	if status != StatusSucceeded {
		t.Fatalf("status %s: %s: %s", status, errName, cause)
	}
	var got, want any
	if err := json.Unmarshal([]byte(output), &got); err != nil {
		t.Fatalf("output %q: %v", output, err)
	}
	if err := json.Unmarshal(c.Output, &want); err != nil {
		t.Fatalf("case output: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("output\n  %s\nwant\n  %s", output, c.Output)
	}
}
