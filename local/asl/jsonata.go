package asl

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"sync"

	jsonata "github.com/blues/jsonata-go"
	"github.com/blues/jsonata-go/jtypes"
)

// JSONata support (QueryLanguage "JSONata"). Expressions are strings that
// are wholly "{% expression %}"; they see $states ({input, result,
// errorOutput, context}) and the workflow variables. The evaluator is
// github.com/blues/jsonata-go v1.5.4 (the JSONata 1.5 language and most
// later functions), not the JSONata 2.0.6 of Step Functions: see
// docs/LOCAL.md.

// ErrorQueryEvaluation is the error of a JSONata expression that fails or
// yields a value a field cannot take.
const ErrorQueryEvaluation = "States.QueryEvaluationError"

// jtemplate is a JSONata-state field value: a literal, an expression, or an
// object/array whose members may be expressions.
type jtemplate struct {
	lit    any
	src    string
	expr   *jsonata.Expr
	fields []jfield
	items  []*jtemplate
	isObj  bool
	isArr  bool
}

type jfield struct {
	key string
	val *jtemplate
}

// jsonataSource returns the expression inside "{% ... %}".
func jsonataSource(s string) (string, bool) {
	if strings.HasPrefix(s, "{%") && strings.HasSuffix(s, "%}") && len(s) >= 4 {
		return strings.TrimSpace(s[2 : len(s)-2]), true
	}
	return "", false
}

func compileJSONataExpr(src string) (e *jsonata.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("invalid JSONata expression %q: %v", src, r)
		}
	}()
	if src == "" {
		return nil, fmt.Errorf("empty JSONata expression")
	}
	e, err = jsonata.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("invalid JSONata expression %q: %v", src, err)
	}
	return e, nil
}

func compileJSONataTemplate(v any) (*jtemplate, error) {
	switch t := v.(type) {
	case string:
		src, ok := jsonataSource(t)
		if !ok {
			return &jtemplate{lit: t}, nil
		}
		e, err := compileJSONataExpr(src)
		if err != nil {
			return nil, err
		}
		return &jtemplate{src: src, expr: e}, nil
	case map[string]any:
		out := &jtemplate{isObj: true}
		for k, e := range t {
			sub, err := compileJSONataTemplate(e)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			out.fields = append(out.fields, jfield{key: k, val: sub})
		}
		return out, nil
	case []any:
		out := &jtemplate{isArr: true}
		for i, e := range t {
			sub, err := compileJSONataTemplate(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out.items = append(out.items, sub)
		}
		return out, nil
	}
	return &jtemplate{lit: v}, nil
}

// optJSONata compiles an optional JSONata field.
func optJSONata(m map[string]any, key string) (*jtemplate, error) {
	v, ok := m[key]
	if !ok {
		return nil, nil
	}
	t, err := compileJSONataTemplate(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return t, nil
}

// isExpr reports whether the template is a single expression.
func (t *jtemplate) isExpr() bool { return t != nil && t.expr != nil }

func (t *jtemplate) eval(states map[string]any, env *evalEnv) (any, error) {
	switch {
	case t.expr != nil:
		return evalJSONata(t.expr, t.src, states, env)
	case t.isObj:
		m := make(map[string]any, len(t.fields))
		for _, f := range t.fields {
			v, err := f.val.eval(states, env)
			if err != nil {
				return nil, err
			}
			m[f.key] = v
		}
		return m, nil
	case t.isArr:
		a := make([]any, len(t.items))
		for i, it := range t.items {
			v, err := it.eval(states, env)
			if err != nil {
				return nil, err
			}
			a[i] = v
		}
		return a, nil
	}
	return deepCopy(t.lit), nil
}

// evalJSONata runs an expression with $states and the variables bound. The
// definition's compiled expression only vouches for the syntax: binding
// variables changes an expression, and concurrent Map iterations evaluate the
// same one, so each evaluation compiles its own.
// jsonataMu serialises JSONata evaluation: jsonata-go 1.5.4 names its
// built-in callables while evaluating, a write shared by every expression
// (the race detector finds it under parallel Map iterations).
var jsonataMu sync.Mutex

func evalJSONata(_ *jsonata.Expr, src string, states map[string]any, env *evalEnv) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' could not be evaluated: %v", src, r)
		}
	}()
	e, err := compileJSONataExpr(src)
	if err != nil {
		return nil, Errorf(ErrorQueryEvaluation, "%v", err)
	}
	vars := map[string]any{}
	if env != nil {
		for k, val := range env.vars {
			vars[k] = toJSONataValue(val)
		}
	}
	vars["states"] = toJSONataValue(states)
	if err := e.RegisterVars(vars); err != nil {
		return nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' could not be evaluated: %v", src, err)
	}
	if err := e.RegisterExts(sfnFunctions); err != nil {
		return nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' could not be evaluated: %v", src, err)
	}
	// No context value: as in Step Functions, expressions reach the input
	// through $states.input, and a bare field name or top-level $ is
	// undefined.
	jsonataMu.Lock()
	res, err := e.Eval(nil)
	jsonataMu.Unlock()
	if errors.Is(err, jsonata.ErrUndefined) {
		return nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' returned nothing (undefined)", src)
	}
	if err != nil {
		return nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' failed: %v", src, err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, Errorf(ErrorQueryEvaluation, "The JSONata expression '%s' returned a value that is not JSON: %v", src, err)
	}
	return ParseJSON(string(b))
}

var jsonataNull *any

// toJSONataValue converts an interpreter value for the evaluator: null
// becomes the evaluator's null, integers become float64.
func toJSONataValue(v any) any {
	switch t := v.(type) {
	case nil:
		return jsonataNull
	case int64:
		return float64(t)
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = toJSONataValue(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = toJSONataValue(e)
		}
		return a
	}
	return v
}

// sfnFunctions are the JSONata functions Step Functions adds.
var sfnFunctions = map[string]jsonata.Extension{
	"partition": {Func: func(arr []any, size float64) ([]any, error) {
		n := int(size)
		if n <= 0 || float64(n) != size {
			return nil, fmt.Errorf("$partition: the chunk size must be a positive integer")
		}
		out := []any{}
		for i := 0; i < len(arr); i += n {
			out = append(out, append([]any{}, arr[i:min(i+n, len(arr))]...))
		}
		return out, nil
	}},
	"range": {Func: func(start, end, step float64) ([]any, error) {
		if step == 0 || math.Trunc(start) != start || math.Trunc(end) != end || math.Trunc(step) != step {
			return nil, fmt.Errorf("$range: start, end and step must be integers, step not 0")
		}
		out := []any{}
		for x := start; (step > 0 && x <= end) || (step < 0 && x >= end); x += step {
			out = append(out, x)
			if len(out) > 1000 {
				return nil, fmt.Errorf("$range: more than 1000 items")
			}
		}
		return out, nil
	}},
	"hash": {Func: func(data, alg string) (string, error) {
		sum, ok := hashHex(alg, data)
		if !ok {
			return "", fmt.Errorf("$hash: unsupported algorithm %q", alg)
		}
		return sum, nil
	}},
	"uuid": {Func: func() string { return newUUID() }},
	// $random([seed]): 0 <= n < 1; the same seed gives the same number.
	"random": {Func: func(seed jtypes.OptionalFloat64) float64 {
		if seed.IsSet() {
			return mrand.New(mrand.NewPCG(math.Float64bits(seed.Float64), 0)).Float64()
		}
		return mrand.Float64()
	}},
	// Step Functions leaves out $eval; $parse takes its place.
	"eval": {Func: func(any) (any, error) {
		return nil, fmt.Errorf("$eval is not available in Step Functions; use $parse")
	}},
	"parse": {Func: func(s string) (any, error) {
		v, err := ParseJSON(s)
		if err != nil {
			return nil, err
		}
		return toJSONataValue(v), nil
	}},
}
