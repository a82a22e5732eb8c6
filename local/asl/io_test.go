package asl

import (
	"context"
	"strings"
	"testing"
)

func TestInputOutputProcessingFollowsSpecOrder(t *testing.T) {
	var got any
	tasks := taskFunc(func(_ context.Context, call TaskCall) (any, error) {
		got = call.Parameters
		return map[string]any{"Payload": map[string]any{"n": int64(7), "noise": "x"}, "StatusCode": int64(200)}, nil
	})
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	  "InputPath":"$.in",
	  "Parameters":{"FunctionName":"f","Payload":{"v.$":"$.v","exec.$":"$$.Execution.Name","state.$":"$$.State.Name",
	     "msg.$":"States.Format('hello {} #{}', $.who, $.v)","static":{"a":[1,2]}}},
	  "ResultSelector":{"n.$":"$.Payload.n"},
	  "ResultPath":"$.res",
	  "OutputPath":"$.res",
	  "End":true}}}`
	info := runDef(t, fastCfg(tasks), def, `{"in":{"v":3,"who":"Ann"},"other":1}`)
	if info.Status != StatusSucceeded {
		t.Fatalf("status %s %s %s", info.Status, info.Error, info.Cause)
	}
	s, _ := MarshalJSON(got)
	jsonEq(t, "task parameters", s, `{"FunctionName":"f","Payload":{"v":3,"exec":"run-1","state":"T","msg":"hello Ann #3","static":{"a":[1,2]}}}`)
	jsonEq(t, "output", info.Output, `{"n":7}`)
}

func TestResultPathNullKeepsInputAndPathMerges(t *testing.T) {
	tasks := taskFunc(func(context.Context, TaskCall) (any, error) { return "r", nil })
	def := `{"StartAt":"A","States":{
	  "A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","ResultPath":null,"Next":"B"},
	  "B":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","ResultPath":"$.deep.x","Next":"C"},
	  "C":{"Type":"Pass","Result":{"p":1},"ResultPath":"$.pass","Next":"D"},
	  "D":{"Type":"Pass","InputPath":null,"End":true,"ResultPath":"$.empty"}}}`
	// D: InputPath null gives {}; with no Parameters the result is {} placed at $.empty of the raw input.
	info := runDef(t, fastCfg(tasks), def, `{"keep":true}`)
	jsonEq(t, "output", info.Output, `{"keep":true,"deep":{"x":"r"},"pass":{"p":1},"empty":{}}`)
}

func TestMissingPathIsRuntimeErrorNotCaughtByStatesAll(t *testing.T) {
	def := `{"StartAt":"T","States":{
	  "T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Parameters":{"x.$":"$.nope"},
	       "Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},
	  "Caught":{"Type":"Succeed"}}}`
	tasks := taskFunc(func(context.Context, TaskCall) (any, error) { return nil, nil })
	info := runDef(t, fastCfg(tasks), def, `{}`)
	if info.Status != StatusFailed || info.Error != ErrorRuntime {
		t.Fatalf("got %s %s, want FAILED States.Runtime", info.Status, info.Error)
	}
}

func TestDataLimitExceededOnLargeResult(t *testing.T) {
	big := strings.Repeat("x", MaxPayloadBytes)
	tasks := taskFunc(func(context.Context, TaskCall) (any, error) { return big, nil })
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	  "Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},"Caught":{"Type":"Succeed"}}}`
	info := runDef(t, fastCfg(tasks), def, `{}`)
	if info.Status != StatusFailed || info.Error != ErrorDataLimitExceeded {
		t.Fatalf("got %s %s, want FAILED States.DataLimitExceeded", info.Status, info.Error)
	}
}

func TestContextObjectFields(t *testing.T) {
	def := `{"StartAt":"P","States":{"P":{"Type":"Pass","Parameters":{
	  "id.$":"$$.Execution.Id","name.$":"$$.Execution.Name","input.$":"$$.Execution.Input","role.$":"$$.Execution.RoleArn",
	  "start.$":"$$.Execution.StartTime","state.$":"$$.State.Name","retry.$":"$$.State.RetryCount",
	  "sm.$":"$$.StateMachine.Id","smName.$":"$$.StateMachine.Name","entered.$":"$$.State.EnteredTime"},"End":true}}}`
	info := runDef(t, fastCfg(nil), def, `{"a":1}`)
	v, _ := ParseJSON(info.Output)
	m := v.(map[string]any)
	if m["id"] != "arn:aws:states:us-east-1:000000000000:execution:test:run-1" || m["name"] != "run-1" ||
		m["role"] != "arn:aws:iam::000000000000:role/sfn" || m["state"] != "P" || m["retry"] != int64(0) ||
		m["sm"] != "arn:aws:states:us-east-1:000000000000:stateMachine:test" || m["smName"] != "test" {
		t.Fatalf("context object = %s", info.Output)
	}
	if s, _ := MarshalJSON(m["input"]); s != `{"a":1}` {
		t.Fatalf("Execution.Input = %s", s)
	}
	for _, k := range []string{"start", "entered"} {
		if _, err := parseTimestamp(m[k].(string)); err != nil || !strings.HasSuffix(m[k].(string), "Z") {
			t.Fatalf("%s = %v, want an RFC 3339 UTC timestamp", k, m[k])
		}
	}
}

func TestFailStateWithErrorPathAndCausePath(t *testing.T) {
	def := `{"StartAt":"F","States":{"F":{"Type":"Fail","ErrorPath":"$.error.Error","CausePath":"States.Format('because {}', $.error.Cause)"}}}`
	info := runDef(t, fastCfg(nil), def, `{"error":{"Error":"Boom","Cause":"bad"}}`)
	if info.Status != StatusFailed || info.Error != "Boom" || info.Cause != "because bad" {
		t.Fatalf("got %+v", info)
	}
}

func TestBadDefinitionsAreErrors(t *testing.T) {
	for name, def := range map[string]string{
		"not json":              `{`,
		"missing start":         `{"States":{"A":{"Type":"Succeed"}}}`,
		"unknown next":          `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"}}}`,
		"no end":                `{"StartAt":"A","States":{"A":{"Type":"Pass"}}}`,
		"bad type":              `{"StartAt":"A","States":{"A":{"Type":"Nope","End":true}}}`,
		"bad path":              `{"StartAt":"A","States":{"A":{"Type":"Pass","InputPath":"$[","End":true}}}`,
		"bad intrinsic":         `{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"x.$":"States.Nope(1)"},"End":true}}}`,
		"all not last":          `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","Retry":[{"ErrorEquals":["States.ALL"]},{"ErrorEquals":["X"]}],"End":true}}}`,
		"choice no rules":       `{"StartAt":"A","States":{"A":{"Type":"Choice","Choices":[]}}}`,
		"unknown language":      `{"QueryLanguage":"XPath","StartAt":"A","States":{"A":{"Type":"Succeed"}}}`,
		"jsonata path field":    `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Succeed","OutputPath":"$.a"}}}`,
		"result path ctx":       `{"StartAt":"A","States":{"A":{"Type":"Pass","ResultPath":"$.a[*]","End":true}}}`,
		"unknown field":         `{"StartAt":"A","States":{"A":{"Type":"Pass","Resource":"x","End":true}}}`,
		"unreachable":           `{"StartAt":"A","States":{"A":{"Type":"Succeed"},"B":{"Type":"Succeed"}}}`,
		"assign not object":     `{"StartAt":"A","States":{"A":{"Type":"Pass","Assign":[1],"End":true}}}`,
		"assign bad name":       `{"StartAt":"A","States":{"A":{"Type":"Pass","Assign":{"a-b":1},"End":true}}}`,
		"condition number":      `{"QueryLanguage":"JSONata","StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Condition":1,"Next":"P"}]},"P":{"Type":"Succeed"}}}`,
		"arguments string":      `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","Arguments":"x","End":true}}}`,
		"items not array":       `{"QueryLanguage":"JSONata","StartAt":"M","States":{"M":{"Type":"Map","Items":"x","ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Succeed"}}},"End":true}}}`,
		"bad state language":    `{"StartAt":"A","States":{"A":{"Type":"Succeed","QueryLanguage":"jsonata"}}}`,
		"catch output jsonpath": `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","Catch":[{"ErrorEquals":["States.ALL"],"Output":"x","Next":"B"}],"End":true},"B":{"Type":"Succeed"}}}`,
		"result path variable":  `{"StartAt":"A","States":{"A":{"Type":"Pass","ResultPath":"$v.a","End":true}}}`,
		"heartbeat >= time":     `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"r","TimeoutSeconds":5,"HeartbeatSeconds":5,"End":true}}}`,
	} {
		if _, err := ParseDefinition([]byte(def)); err == nil {
			t.Errorf("%s: ParseDefinition accepted %s", name, def)
		}
	}
}
