package asl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ohler55/ojg/jp"

	"github.com/healthlake-cdc/healthlake-cdc/internal/clip"
)

// JSON values inside the interpreter are nil, bool, int64, float64, string,
// []any and map[string]any.

// ParseJSON decodes JSON text into an interpreter value. Escaped UTF-16
// surrogate pairs ("\ud83c\udf89") decode to the one character they encode,
// as in Step Functions.
func ParseJSON(s string) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parse JSON: %v", r)
		}
	}()
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("parse JSON: empty input")
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("parse JSON: unexpected data after the JSON value")
	}
	return normalize(v), nil
}

// normalize converts what the parser may produce into the value types above.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	case int:
		return int64(t)
	case float32:
		return float64(t)
	case json.Number:
		if i, err := t.Int64(); err == nil && !strings.ContainsAny(string(t), ".eE") {
			return i
		}
		f, _ := t.Float64()
		return numberValue(f)
	}
	return v
}

// MarshalJSON encodes an interpreter value as compact JSON, without HTML
// escaping, as Step Functions does.
func MarshalJSON(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encode JSON: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func mustJSON(v any) string {
	s, err := MarshalJSON(v)
	if err != nil {
		return "null"
	}
	return s
}

// deepCopy returns a copy of v sharing nothing mutable.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(t))
		for i, e := range t {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// checkSize fails with States.DataLimitExceeded when v encodes to more than
// MaxPayloadBytes.
func checkSize(v any, what string) error {
	s, err := MarshalJSON(v)
	if err != nil {
		return runtimeErr("%s cannot be encoded: %v", what, err)
	}
	if len(s) > MaxPayloadBytes {
		return Errorf(ErrorDataLimitExceeded, "The %s has a size of %d bytes, which exceeds the maximum of %d bytes", what, len(s), MaxPayloadBytes)
	}
	return nil
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

func isInteger(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	case int:
		return int64(n), true
	}
	return 0, false
}

// numberValue returns an int64 when f is integral, else f.
func numberValue(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// path is a compiled JSONPath; ctx reports a "$$." context-object path and
// varName a "$name..." workflow-variable path.
type path struct {
	src     string
	expr    jp.Expr
	ctx     bool
	varName string
	def     bool // definite: only child names and indexes
}

func compilePath(src string) (p *path, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("invalid JSONPath %q: %v", src, r)
		}
	}()
	s := strings.TrimSpace(src)
	p = &path{src: src}
	if strings.HasPrefix(s, "$$") {
		p.ctx = true
		s = s[1:]
	} else if len(s) > 1 && s[0] == '$' && isNameByte(s[1]) {
		i := 1
		for i < len(s) && isNameByte(s[i]) {
			i++
		}
		p.varName = s[1:i]
		s = "$" + s[i:]
	}
	if !strings.HasPrefix(s, "$") {
		return nil, fmt.Errorf("invalid JSONPath %q: must begin with $", src)
	}
	x, err := jp.ParseString(bracketNames(s))
	if err != nil {
		return nil, fmt.Errorf("invalid JSONPath %q: %w", src, err)
	}
	p.expr = x
	p.def = true
	for _, f := range x {
		switch f.(type) {
		case jp.Root, jp.Bracket, jp.Child, jp.Nth:
		default:
			p.def = false
		}
	}
	return p, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// bracketNames rewrites dot-notation names holding characters the JSONPath
// parser does not take after a dot (as in "$.delivery-partner", which Step
// Functions accepts) into bracket notation: $['delivery-partner'].
func bracketNames(s string) string {
	var b strings.Builder
	depth := 0
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				b.WriteByte(c)
				i++
				c = s[i]
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			if depth > 0 {
				quote = c
			}
		case c == '[' || c == '(':
			depth++
		case c == ']' || c == ')':
			depth--
		case c == '.' && depth == 0 && i+1 < len(s) && s[i+1] != '.' && s[i+1] != '*' && s[i+1] != '[':
			j := i + 1
			plain := true
			for j < len(s) && s[j] != '.' && s[j] != '[' {
				if !isNameByte(s[j]) {
					plain = false
				}
				j++
			}
			if !plain {
				name := strings.NewReplacer("\\", "\\\\", "'", "\\'").Replace(s[i+1 : j])
				b.WriteString("['" + name + "']")
				i = j - 1
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// get evaluates the path against data (or ctxObj for $$ paths). A definite
// path that selects nothing is an error; an indefinite one yields a list.
func (p *path) get(data, ctxObj any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = runtimeErr("cannot evaluate JSONPath %q: %v", p.src, r)
		}
	}()
	ctx, vars := envParts(ctxObj)
	switch {
	case p.ctx:
		data = ctx
	case p.varName != "":
		v, ok := vars[p.varName]
		if !ok {
			return nil, runtimeErr("The JSONPath '%s' refers to the variable $%s, which is not defined", p.src, p.varName)
		}
		data = v
	}
	if !p.def {
		got := p.expr.Get(data)
		if got == nil {
			got = []any{}
		}
		return got, nil
	}
	cur := data
	for _, f := range p.expr {
		switch t := f.(type) {
		case jp.Child:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, runtimeErr("The JSONPath '%s' could not be found in the input '%s'", p.src, clip.String(mustJSON(data), 512))
			}
			cur, ok = m[string(t)]
			if !ok {
				return nil, runtimeErr("The JSONPath '%s' could not be found in the input '%s'", p.src, clip.String(mustJSON(data), 512))
			}
		case jp.Nth:
			a, ok := cur.([]any)
			i := int(t)
			if ok && i < 0 {
				i += len(a)
			}
			if !ok || i < 0 || i >= len(a) {
				return nil, runtimeErr("The JSONPath '%s' could not be found in the input '%s'", p.src, clip.String(mustJSON(data), 512))
			}
			cur = a[i]
		}
	}
	return cur, nil
}

// exists reports whether the path selects anything.
func (p *path) exists(data, ctxObj any) bool {
	v, err := p.get(data, ctxObj)
	if err != nil {
		return false
	}
	if !p.def {
		a, _ := v.([]any)
		return len(a) > 0
	}
	return true
}

// set returns a copy of data with value placed at the (reference) path,
// creating missing objects on the way, as ResultPath does.
func (p *path) set(data, value any) (any, error) {
	if p.ctx || p.varName != "" || !p.def {
		return nil, runtimeErr("ResultPath %q is not a reference path", p.src)
	}
	frags := []jp.Frag{}
	for _, f := range p.expr {
		switch f.(type) {
		case jp.Child, jp.Nth:
			frags = append(frags, f)
		}
	}
	if len(frags) == 0 {
		return value, nil
	}
	return setIn(deepCopy(data), frags, value, p.src)
}

func setIn(cur any, frags []jp.Frag, value any, src string) (any, error) {
	if len(frags) == 0 {
		return value, nil
	}
	switch t := frags[0].(type) {
	case jp.Child:
		if cur == nil {
			cur = map[string]any{}
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, Errorf(ErrorResultPathMatchFailure, "Unable to apply ResultPath %q: the input at %q is not an object", src, string(t))
		}
		v, err := setIn(m[string(t)], frags[1:], value, src)
		if err != nil {
			return nil, err
		}
		m[string(t)] = v
		return m, nil
	case jp.Nth:
		a, ok := cur.([]any)
		i := int(t)
		if !ok || i < 0 || i >= len(a) {
			return nil, Errorf(ErrorResultPathMatchFailure, "Unable to apply ResultPath %q: index %d does not exist in the input", src, i)
		}
		v, err := setIn(a[i], frags[1:], value, src)
		if err != nil {
			return nil, err
		}
		a[i] = v
		return a, nil
	}
	return nil, runtimeErr("ResultPath %q is not a reference path", src)
}
