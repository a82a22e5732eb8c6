package asl

import "testing"

func TestZZProbe(t *testing.T) {
	for _, s := range []string{`$.delivery-partner`, `$$.Execution.Input.input-value`, `$['a\'b']`, `$["a\"b"]`, `$.a['b-c']`} {
		p, err := compilePath(s)
		if err != nil {
			t.Logf("%s: %v", s, err)
			continue
		}
		t.Logf("%s: %#v def=%v", s, p.expr, p.def)
	}
	v, err := ParseJSON(`{"a":"\ud83c\udf89 x"}`)
	t.Logf("%#v %v", v, err)
}
