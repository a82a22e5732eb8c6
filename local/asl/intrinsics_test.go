package asl

import (
	"regexp"
	"testing"
)

func evalIntrinsic(t *testing.T, expr string, input string) (any, error) {
	t.Helper()
	c, err := parseIntrinsic(expr)
	if err != nil {
		return nil, err
	}
	in, err := ParseJSON(input)
	if err != nil {
		t.Fatal(err)
	}
	return c.eval(in, map[string]any{"Execution": map[string]any{"Name": "run-1"}})
}

func TestIntrinsicFunctions(t *testing.T) {
	input := `{"name":"Ann","n":3,"arr":[1,2,2,3],"obj":{"a":1},"json":"{\"x\":[1,2]}","s":"a,b;c","k":"a,b"}`
	cases := []struct{ expr, want string }{
		{`States.Format('Hello {}, you are {}', $.name, $.n)`, `"Hello Ann, you are 3"`},
		{`States.Format('esc \{\} and \' quote {}', $$.Execution.Name)`, `"esc {} and ' quote run-1"`},
		{`States.Format('{}', $.obj.a)`, `"1"`},
		{`States.StringToJson($.json)`, `{"x":[1,2]}`},
		{`States.JsonToString($.obj)`, `"{\"a\":1}"`},
		{`States.Array($.name, 1, 'x', null, true)`, `["Ann",1,"x",null,true]`},
		{`States.ArrayLength($.arr)`, `4`},
		{`States.ArrayContains($.arr, 3)`, `true`},
		{`States.ArrayContains($.arr, 9)`, `false`},
		{`States.ArrayPartition($.arr, 3)`, `[[1,2,2],[3]]`},
		{`States.ArrayRange(1, 9, 3)`, `[1,4,7]`},
		{`States.ArrayGetItem($.arr, 3)`, `3`},
		{`States.ArrayUnique($.arr)`, `[1,2,3]`},
		{`States.Base64Encode('hi')`, `"aGk="`},
		{`States.Base64Decode('aGk=')`, `"hi"`},
		{`States.Hash('abc', 'SHA-256')`, `"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`},
		{`States.Hash($.name, 'MD5')`, `"82e335f7ac0e0e412b2ae15abe662110"`},
		{`States.JsonMerge($.obj, States.StringToJson('{"b":2}'), false)`, `{"a":1,"b":2}`},
		{`States.MathAdd($.n, -1)`, `2`},
		{`States.MathAdd(1.5, 1)`, `3`}, // non-integers round first (Java Math.round)
		{`States.MathAdd(-1.5, 0)`, `-1`},
		{`States.StringSplit($.s, ',;')`, `["a","b","c"]`},
		{`States.ArrayLength(States.StringSplit($.k, ','))`, `2`},
		{`States.Format('{}', $['name'])`, `"Ann"`},
	}
	for _, c := range cases {
		v, err := evalIntrinsic(t, c.expr, input)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		got, _ := MarshalJSON(v)
		if got != c.want {
			t.Errorf("%s = %s, want %s", c.expr, got, c.want)
		}
	}
	v, err := evalIntrinsic(t, `States.UUID()`, `{}`)
	if ok, _ := regexp.MatchString(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, v.(string)); err != nil || !ok {
		t.Errorf("States.UUID() = %v, %v", v, err)
	}
	r, err := evalIntrinsic(t, `States.MathRandom(1, 10)`, `{}`)
	if n, ok := r.(int64); err != nil || !ok || n < 1 || n >= 10 {
		t.Errorf("States.MathRandom(1, 10) = %v, %v", r, err)
	}
}

func TestIntrinsicErrors(t *testing.T) {
	for _, expr := range []string{
		`States.Format('{} {}', 'one')`,
		`States.StringToJson('{')`,
		`States.ArrayGetItem($.arr, 10)`,
		`States.ArrayLength('x')`,
		`States.Hash('a', 'SHA-3')`,
		`States.MathAdd('a', 1)`,
		`States.Base64Decode('!!')`,
		`States.Nope()`,
		`States.Format('unterminated`,
		`States.Array(`,
		`States.Format('x', $.missing)`,
	} {
		if _, err := evalIntrinsic(t, expr, `{"arr":[1]}`); err == nil {
			t.Errorf("%s: no error", expr)
		}
	}
}
