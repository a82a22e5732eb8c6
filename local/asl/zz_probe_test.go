package asl

import "testing"

func TestZZProbe(t *testing.T) {
	tp, err := compileJSONataTemplate(map[string]any{"a": "{% $states.input.x + 1 %}", "b": "{% $v %}", "c": "{% $partition([1,2,3],2) %}", "d": "{% $states.input.n %}", "e": "{% $uuid() %}", "f": "{% $parse('{\"q\":[1,null]}') %}", "g": "{% $states.input.arr[1] %}", "h": "{% {'x': null} %}"})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := ParseJSON(`{"x":2,"n":null,"arr":[1,2]}`)
	v, err := tp.eval(map[string]any{"input": in}, &evalEnv{vars: map[string]any{"v": map[string]any{"k": int64(1)}}})
	t.Logf("%s %v", mustJSON(v), err)
	tp, _ = compileJSONataTemplate("{% $states.input.missing %}")
	v, err = tp.eval(map[string]any{"input": in}, nil)
	t.Logf("%s %v", mustJSON(v), err)
}
