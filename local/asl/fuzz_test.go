package asl

import (
	"context"
	"testing"
	"time"
)

// FuzzParseDefinition checks that no definition makes the parser or a
// short run panic: bad input is an error or a failed execution.
func FuzzParseDefinition(f *testing.F) {
	for _, s := range []string{
		`{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"x.$":"States.Format('{}', $.a)"},"ResultPath":"$.r","End":true}}}`,
		`{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.n","NumericEquals":1,"Next":"S"}],"Default":"S"},"S":{"Type":"Succeed"}}}`,
		`{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},"End":true}}}`,
		`{"StartAt":"F","States":{"F":{"Type":"Fail","ErrorPath":"$.e","CausePath":"$.c"}}}`,
		`{"StartAt":"W","States":{"W":{"Type":"Wait","SecondsPath":"$.s","End":true}}}`,
		`{"StartAt":"A","States":{"A":{"Type":"Pass","Assign":{"v.$":"$.a"},"Next":"B"},"B":{"Type":"Pass","Parameters":{"x.$":"$v","y.$":"$.delivery-partner"},"End":true}}}`,
		`{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Assign":{"v":"{% $states.input.a %}"},"Output":{"o":"{% $v %}"},"Next":"C"},"C":{"Type":"Choice","Choices":[{"Condition":"{% $v = 1 %}","Next":"M"}],"Default":"M"},"M":{"Type":"Map","Items":"{% $states.input.items %}","ItemProcessor":{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}},"End":true}}}`,
	} {
		f.Add(s, `{"a":1,"n":1,"items":[1,2],"e":"E","c":"C","s":0}`)
	}
	f.Fuzz(func(t *testing.T, def, input string) {
		m, err := ParseDefinition([]byte(def))
		if err != nil {
			return
		}
		r := NewRunner(Config{TimeScale: 1e-9, Tasks: taskFunc(func(_ context.Context, c TaskCall) (any, error) { return c.Parameters, nil })})
		x, err := r.Start(context.Background(), m, StartInput{ExecutionARN: "arn", Name: "n", Input: input})
		if err != nil {
			return
		}
		select {
		case <-x.Done():
		case <-time.After(2 * time.Second):
			x.Stop("Fuzz", "too long")
			<-x.Done()
		}
	})
}

// FuzzIntrinsic checks that intrinsic parsing and evaluation never panic.
func FuzzIntrinsic(f *testing.F) {
	for _, s := range []string{
		`States.Format('a {} b', $.x)`, `States.Array(1, 'a', $.y, States.UUID())`, `States.MathAdd($.x, 2)`,
		`States.StringSplit('a,b', ',')`, `States.Hash($.x, 'SHA-1')`, `States.ArrayRange(1, 5, 2)`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		c, err := parseIntrinsic(expr)
		if err != nil {
			return
		}
		_, _ = c.eval(map[string]any{"x": int64(1), "y": []any{"a"}}, map[string]any{})
	})
}
