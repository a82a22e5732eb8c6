package asl

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// choiceRule is a Choice rule or one of its nested boolean expressions.
type choiceRule struct {
	next      string
	and, or   []*choiceRule
	not       *choiceRule
	variable  *path
	op        string
	value     any
	valuePath *path

	// top-level rules: Assign, and for JSONata Condition and Output
	assign    *assignment
	condition *jtemplate
	output    *jtemplate
}

var comparators = map[string]string{} // operator -> kind

func init() {
	for _, kind := range []string{"String", "Numeric", "Timestamp"} {
		for _, rel := range []string{"Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals"} {
			comparators[kind+rel] = kind
			comparators[kind+rel+"Path"] = kind
		}
	}
	comparators["StringMatches"] = "String"
	comparators["BooleanEquals"] = "Boolean"
	comparators["BooleanEqualsPath"] = "Boolean"
	for _, t := range []string{"IsNull", "IsPresent", "IsNumeric", "IsString", "IsBoolean", "IsTimestamp"} {
		comparators[t] = "Type"
	}
}

func parseChoiceRule(m map[string]any, top, jsonata bool) (*choiceRule, error) {
	r := &choiceRule{}
	if top {
		r.next, _ = m["Next"].(string)
		if r.next == "" {
			return nil, fmt.Errorf("Next is required")
		}
		var err error
		if r.assign, err = parseAssign(m, jsonata); err != nil {
			return nil, err
		}
	} else if _, ok := m["Next"]; ok {
		return nil, fmt.Errorf("Next is only allowed in top-level rules")
	} else if _, ok := m["Assign"]; ok {
		return nil, fmt.Errorf("Assign is only allowed in top-level rules")
	}
	if jsonata {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch k {
			case "Condition", "Next", "Output", "Assign", "Comment":
			default:
				return nil, fmt.Errorf("field %q is not allowed in a JSONata Choice rule", k)
			}
		}
		c, ok := m["Condition"]
		if !ok {
			return nil, fmt.Errorf("Condition is required")
		}
		var err error
		switch cv := c.(type) {
		case bool:
			r.condition = &jtemplate{lit: cv}
		case string:
			if _, isExpr := jsonataSource(cv); !isExpr {
				return nil, fmt.Errorf("Condition must be a JSONata expression {%% ... %%} or a boolean")
			}
			if r.condition, err = compileJSONataTemplate(cv); err != nil {
				return nil, fmt.Errorf("Condition: %w", err)
			}
		default:
			return nil, fmt.Errorf("Condition must be a JSONata expression {%% ... %%} or a boolean")
		}
		if r.output, err = optJSONata(m, "Output"); err != nil {
			return nil, err
		}
		return r, nil
	}
	sub := func(v any) (*choiceRule, error) {
		sm, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("nested rule is not an object")
		}
		return parseChoiceRule(sm, false, false)
	}
	list := func(key string) ([]*choiceRule, error) {
		a, ok := m[key].([]any)
		if !ok || len(a) == 0 {
			return nil, fmt.Errorf("%s must be a non-empty array", key)
		}
		out := make([]*choiceRule, 0, len(a))
		for _, e := range a {
			c, err := sub(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			out = append(out, c)
		}
		return out, nil
	}
	var err error
	switch {
	case m["And"] != nil:
		r.and, err = list("And")
		return r, err
	case m["Or"] != nil:
		r.or, err = list("Or")
		return r, err
	case m["Not"] != nil:
		r.not, err = sub(m["Not"])
		return r, err
	}
	vs, _ := m["Variable"].(string)
	if vs == "" {
		return nil, fmt.Errorf("Variable is required")
	}
	if r.variable, err = compilePath(vs); err != nil {
		return nil, fmt.Errorf("Variable: %w", err)
	}
	for k, v := range m {
		kind, ok := comparators[k]
		if !ok {
			continue
		}
		if r.op != "" {
			return nil, fmt.Errorf("more than one comparison operator (%s, %s)", r.op, k)
		}
		r.op = k
		switch {
		case strings.HasSuffix(k, "Path"):
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s must be a path string", k)
			}
			if r.valuePath, err = compilePath(s); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		case kind == "String":
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("%s needs a string", k)
			}
		case kind == "Numeric":
			if _, ok := toFloat(v); !ok {
				return nil, fmt.Errorf("%s needs a number", k)
			}
		case kind == "Boolean", kind == "Type":
			if _, ok := v.(bool); !ok {
				return nil, fmt.Errorf("%s needs a boolean", k)
			}
		case kind == "Timestamp":
			s, _ := v.(string)
			if _, err := parseTimestamp(s); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		r.value = v
	}
	if r.op == "" {
		return nil, fmt.Errorf("no comparison operator")
	}
	return r, nil
}

// eval evaluates the rule against the Choice state's effective input.
func (r *choiceRule) eval(input, ctxObj any) (bool, error) {
	switch {
	case r.and != nil:
		for _, c := range r.and {
			ok, err := c.eval(input, ctxObj)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case r.or != nil:
		for _, c := range r.or {
			ok, err := c.eval(input, ctxObj)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case r.not != nil:
		ok, err := r.not.eval(input, ctxObj)
		return !ok, err
	}
	if r.op == "IsPresent" {
		return r.variable.exists(input, ctxObj) == r.value.(bool), nil
	}
	v, err := r.variable.get(input, ctxObj)
	if err != nil {
		return false, runtimeErr("Invalid path '%s': The choice state's condition path references an invalid value.", r.variable.src)
	}
	want := r.value
	if r.valuePath != nil {
		if want, err = r.valuePath.get(input, ctxObj); err != nil {
			return false, err
		}
	}
	kind := comparators[r.op]
	rel := strings.TrimSuffix(strings.TrimPrefix(r.op, kind), "Path")
	switch kind {
	case "Type":
		var is bool
		switch r.op {
		case "IsNull":
			is = v == nil
		case "IsNumeric":
			_, is = toFloat(v)
		case "IsString":
			_, is = v.(string)
		case "IsBoolean":
			_, is = v.(bool)
		case "IsTimestamp":
			s, ok := v.(string)
			if ok {
				_, err := parseTimestamp(s)
				is = err == nil
			}
		}
		return is == r.value.(bool), nil
	case "Boolean":
		a, ok1 := v.(bool)
		b, ok2 := want.(bool)
		return ok1 && ok2 && a == b, nil
	case "String":
		a, ok1 := v.(string)
		b, ok2 := want.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		if r.op == "StringMatches" {
			return wildcardMatch(b, a), nil
		}
		return relate(rel, strings.Compare(a, b)), nil
	case "Numeric":
		a, ok1 := toFloat(v)
		b, ok2 := toFloat(want)
		if !ok1 || !ok2 {
			return false, nil
		}
		c := 0
		if a < b {
			c = -1
		} else if a > b {
			c = 1
		}
		return relate(rel, c), nil
	case "Timestamp":
		as, ok1 := v.(string)
		bs, ok2 := want.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		a, err1 := parseTimestamp(as)
		b, err2 := parseTimestamp(bs)
		if err1 != nil || err2 != nil {
			return false, nil
		}
		return relate(rel, compareTime(a, b)), nil
	}
	return false, runtimeErr("unknown comparison %s", r.op)
}

func compareTime(a, b time.Time) int {
	switch {
	case a.Before(b):
		return -1
	case a.After(b):
		return 1
	}
	return 0
}

func relate(rel string, c int) bool {
	switch rel {
	case "Equals":
		return c == 0
	case "LessThan":
		return c < 0
	case "GreaterThan":
		return c > 0
	case "LessThanEquals":
		return c <= 0
	case "GreaterThanEquals":
		return c >= 0
	}
	return false
}

// wildcardMatch implements StringMatches: '*' matches any run of
// characters, "\*" a literal star and "\\" a literal backslash.
func wildcardMatch(pattern, s string) bool {
	type tok struct {
		star bool
		ch   rune
	}
	var toks []tok
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		if rs[i] == '\\' && i+1 < len(rs) {
			toks = append(toks, tok{ch: rs[i+1]})
			i++
			continue
		}
		toks = append(toks, tok{star: rs[i] == '*', ch: rs[i]})
	}
	str := []rune(s)
	// dp over pattern tokens and string runes
	prev := make([]bool, len(str)+1)
	prev[0] = true
	for _, t := range toks {
		cur := make([]bool, len(str)+1)
		if t.star {
			cur[0] = prev[0]
			for j := 1; j <= len(str); j++ {
				cur[j] = prev[j] || cur[j-1]
			}
		} else {
			for j := 1; j <= len(str); j++ {
				cur[j] = prev[j-1] && str[j-1] == t.ch
			}
		}
		prev = cur
	}
	return prev[len(str)]
}
