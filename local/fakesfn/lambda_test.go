package fakesfn

import (
	"context"
	"errors"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
)

func TestLambdaInvokeResultAndErrors(t *testing.T) {
	lambda := &fakeLambda{handlers: map[string]func([]byte) ([]byte, bool, error){
		"ok": func(p []byte) ([]byte, bool, error) { return []byte(`{"got":` + string(p) + `}`), false, nil },
		"fails": func([]byte) ([]byte, bool, error) {
			return []byte(`{"errorType":"ValidationError","errorMessage":"bad window"}`), true, nil
		},
		"broken": func([]byte) ([]byte, bool, error) { return nil, false, errors.New("connection reset") },
		"text":   func([]byte) ([]byte, bool, error) { return []byte(`not json`), false, nil },
	}}
	em := New(Options{Lambda: lambda})
	t.Cleanup(em.Close)
	def := `{"StartAt":"Call","States":{"Call":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	  "Parameters":{"FunctionName.$":"$.fn","Payload":{"a":1}},
	  "Catch":[{"ErrorEquals":["States.ALL"],"Next":"Caught"}],"End":true},
	  "Caught":{"Type":"Pass","End":true}}}`
	arn, err := em.RegisterStateMachine("lambda-shapes", []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	run := func(fn string) map[string]any {
		t.Helper()
		ex, err := em.StartExecution(context.Background(), arn, "run-"+fn, `{"fn":"`+fn+`"}`)
		if err != nil {
			t.Fatal(err)
		}
		info := waitDone(t, em, ex)
		v, err := asl.ParseJSON(info.Output)
		if err != nil {
			t.Fatalf("%s: output %q: %v", fn, info.Output, err)
		}
		return v.(map[string]any)
	}

	ok := run("ok")
	if ok["StatusCode"] != int64(200) || ok["ExecutedVersion"] != "$LATEST" || ok["SdkHttpMetadata"] == nil {
		t.Fatalf("lambda:invoke result = %v", ok)
	}
	if s, _ := asl.MarshalJSON(ok["Payload"]); s != `{"got":{"a":1}}` {
		t.Fatalf("Payload = %s", s)
	}
	if f := run("fails"); f["Error"] != "ValidationError" || f["Cause"] != `{"errorType":"ValidationError","errorMessage":"bad window"}` {
		t.Fatalf("function error = %v", f)
	}
	if b := run("broken"); b["Error"] != asl.ErrorLambdaServiceException || b["Cause"] != "connection reset" {
		t.Fatalf("invocation failure = %v", b)
	}
	if tx := run("text"); tx["Payload"] != "not json" {
		t.Fatalf("non-JSON payload = %v", tx)
	}
}
