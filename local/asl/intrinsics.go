package asl

import (
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// An intrinsic-function expression: States.Name(arg, ...).
type call struct {
	name string
	args []arg
}

// arg is one argument: a literal, a path or a nested call.
type arg struct {
	lit    any
	rawLit string // a string literal as written, for States.Format
	isStr  bool
	path   *path
	call   *call
}

type intrinsicParser struct {
	s   string
	pos int
}

func parseIntrinsic(s string) (c *call, err error) {
	p := &intrinsicParser{s: strings.TrimSpace(s)}
	c, err = p.call()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.s) {
		return nil, fmt.Errorf("intrinsic function %q: unexpected text after position %d", s, p.pos)
	}
	return c, nil
}

func (p *intrinsicParser) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n') {
		p.pos++
	}
}

func (p *intrinsicParser) call() (*call, error) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] != '(' {
		p.pos++
	}
	if p.pos >= len(p.s) {
		return nil, fmt.Errorf("intrinsic function %q: missing '('", p.s)
	}
	name := strings.TrimSpace(p.s[start:p.pos])
	if _, ok := intrinsicFuncs[name]; !ok {
		return nil, fmt.Errorf("unknown intrinsic function %q", name)
	}
	p.pos++ // (
	c := &call{name: name}
	p.skipSpace()
	if p.pos < len(p.s) && p.s[p.pos] == ')' {
		p.pos++
		return c, nil
	}
	for {
		a, err := p.arg()
		if err != nil {
			return nil, err
		}
		c.args = append(c.args, a)
		p.skipSpace()
		if p.pos >= len(p.s) {
			return nil, fmt.Errorf("intrinsic function %s: missing ')'", name)
		}
		switch p.s[p.pos] {
		case ',':
			p.pos++
		case ')':
			p.pos++
			return c, nil
		default:
			return nil, fmt.Errorf("intrinsic function %s: unexpected %q at %d", name, p.s[p.pos], p.pos)
		}
	}
}

func (p *intrinsicParser) arg() (arg, error) {
	p.skipSpace()
	if p.pos >= len(p.s) {
		return arg{}, fmt.Errorf("intrinsic function: missing argument")
	}
	rest := p.s[p.pos:]
	switch {
	case rest[0] == '\'':
		p.pos++
		var raw, val strings.Builder
		for p.pos < len(p.s) {
			ch := p.s[p.pos]
			if ch == '\\' && p.pos+1 < len(p.s) {
				raw.WriteByte(ch)
				raw.WriteByte(p.s[p.pos+1])
				val.WriteByte(p.s[p.pos+1])
				p.pos += 2
				continue
			}
			if ch == '\'' {
				p.pos++
				return arg{lit: val.String(), rawLit: raw.String(), isStr: true}, nil
			}
			raw.WriteByte(ch)
			val.WriteByte(ch)
			p.pos++
		}
		return arg{}, fmt.Errorf("intrinsic function: unterminated string literal")
	case rest[0] == '$':
		start := p.pos
		depth := 0
		quote := byte(0)
		for p.pos < len(p.s) {
			ch := p.s[p.pos]
			if quote != 0 {
				if ch == '\\' && p.pos+1 < len(p.s) {
					p.pos++ // an escaped character inside a quoted name
				} else if ch == quote {
					quote = 0
				}
			} else if ch == '\'' || ch == '"' {
				quote = ch
			} else if ch == '[' || ch == '(' {
				depth++
			} else if ch == ']' || ch == ')' {
				if depth == 0 {
					break
				}
				depth--
			} else if ch == ',' && depth == 0 {
				break
			}
			p.pos++
		}
		pa, err := compilePath(strings.TrimSpace(p.s[start:p.pos]))
		if err != nil {
			return arg{}, err
		}
		return arg{path: pa}, nil
	case strings.HasPrefix(rest, "States."):
		c, err := p.call()
		if err != nil {
			return arg{}, err
		}
		return arg{call: c}, nil
	default:
		start := p.pos
		for p.pos < len(p.s) && p.s[p.pos] != ',' && p.s[p.pos] != ')' {
			p.pos++
		}
		tok := strings.TrimSpace(p.s[start:p.pos])
		switch tok {
		case "null":
			return arg{lit: nil}, nil
		case "true":
			return arg{lit: true}, nil
		case "false":
			return arg{lit: false}, nil
		}
		if i, err := strconv.ParseInt(tok, 10, 64); err == nil {
			return arg{lit: i}, nil
		}
		if f, err := strconv.ParseFloat(tok, 64); err == nil {
			return arg{lit: f}, nil
		}
		return arg{}, fmt.Errorf("intrinsic function: invalid argument %q", tok)
	}
}

type intrinsicFunc func(args []any, raw []arg) (any, error)

var intrinsicFuncs map[string]intrinsicFunc

func init() {
	intrinsicFuncs = map[string]intrinsicFunc{
		"States.Format":         fnFormat,
		"States.StringToJson":   fnStringToJSON,
		"States.JsonToString":   fnJSONToString,
		"States.Array":          func(a []any, _ []arg) (any, error) { return append([]any{}, a...), nil },
		"States.ArrayPartition": fnArrayPartition,
		"States.ArrayContains":  fnArrayContains,
		"States.ArrayRange":     fnArrayRange,
		"States.ArrayGetItem":   fnArrayGetItem,
		"States.ArrayLength":    fnArrayLength,
		"States.ArrayUnique":    fnArrayUnique,
		"States.Base64Encode":   fnBase64Encode,
		"States.Base64Decode":   fnBase64Decode,
		"States.Hash":           fnHash,
		"States.JsonMerge":      fnJSONMerge,
		"States.MathRandom":     fnMathRandom,
		"States.MathAdd":        fnMathAdd,
		"States.StringSplit":    fnStringSplit,
		"States.UUID":           fnUUID,
	}
}

func intrinsicErr(name, format string, args ...any) error {
	return Errorf(ErrorIntrinsicFailure, "Invalid arguments in %s: %s", name, fmt.Sprintf(format, args...))
}

// eval runs the call against the state's input and the context object.
func (c *call) eval(input, ctxObj any) (any, error) {
	vals := make([]any, len(c.args))
	for i, a := range c.args {
		switch {
		case a.path != nil:
			v, err := a.path.get(input, ctxObj)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		case a.call != nil:
			v, err := a.call.eval(input, ctxObj)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		default:
			vals[i] = a.lit
		}
	}
	v, err := intrinsicFuncs[c.name](vals, c.args)
	if err != nil {
		if _, ok := err.(*Error); ok {
			return nil, err
		}
		return nil, intrinsicErr(c.name, "%v", err)
	}
	return v, nil
}

func wantN(name string, args []any, n int) error {
	if len(args) != n {
		return intrinsicErr(name, "expected %d arguments, got %d", n, len(args))
	}
	return nil
}

func fnFormat(args []any, raw []arg) (any, error) {
	if len(args) == 0 {
		return nil, intrinsicErr("States.Format", "the first argument must be a string")
	}
	tmpl, ok := args[0].(string)
	if raw[0].isStr {
		tmpl = raw[0].rawLit
	} else if !ok || raw[0].lit != nil {
		// a path or variable may give the template; a literal must be a string
		return nil, intrinsicErr("States.Format", "the first argument must be a string")
	}
	var out strings.Builder
	next := 1
	for i := 0; i < len(tmpl); i++ {
		ch := tmpl[i]
		if ch == '\\' && i+1 < len(tmpl) {
			out.WriteByte(tmpl[i+1])
			i++
			continue
		}
		if ch == '{' && i+1 < len(tmpl) && tmpl[i+1] == '}' {
			if next >= len(args) {
				return nil, intrinsicErr("States.Format", "more placeholders than arguments")
			}
			if v, ok := args[next].(string); ok {
				out.WriteString(v)
			} else {
				out.WriteString(formatLiteral(args[next]))
			}
			next++
			i++
			continue
		}
		out.WriteByte(ch)
	}
	if next != len(args) {
		return nil, intrinsicErr("States.Format", "%d arguments for %d placeholders", len(args)-1, next-1)
	}
	return out.String(), nil
}

// formatLiteral renders a non-string States.Format argument as Step
// Functions does: numbers, booleans and null as JSON, objects as
// {key=value, ...} and arrays as [a, b] (Java's Map/List rendering), strings
// inside them as they are. Object keys come in sorted order (the interpreter
// does not keep the input's order).
func formatLiteral(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + "=" + formatLiteral(t[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = formatLiteral(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return mustJSON(v)
}

func fnStringToJSON(args []any, _ []arg) (any, error) {
	if err := wantN("States.StringToJson", args, 1); err != nil {
		return nil, err
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, intrinsicErr("States.StringToJson", "argument is not a string")
	}
	if strings.TrimSpace(s) == "" {
		return nil, nil // an empty or blank string gives null
	}
	v, err := ParseJSON(s)
	if err != nil {
		return nil, intrinsicErr("States.StringToJson", "%v", err)
	}
	return v, nil
}

func fnJSONToString(args []any, _ []arg) (any, error) {
	if err := wantN("States.JsonToString", args, 1); err != nil {
		return nil, err
	}
	return MarshalJSON(args[0])
}

func fnArrayPartition(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayPartition", args, 2); err != nil {
		return nil, err
	}
	a, ok := args[0].([]any)
	n, ok2 := isInteger(args[1])
	if !ok || !ok2 || n <= 0 {
		return nil, intrinsicErr("States.ArrayPartition", "need an array and a positive chunk size")
	}
	out := []any{}
	for i := 0; i < len(a); i += int(n) {
		end := min(i+int(n), len(a))
		out = append(out, append([]any{}, a[i:end]...))
	}
	return out, nil
}

func fnArrayContains(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayContains", args, 2); err != nil {
		return nil, err
	}
	a, ok := args[0].([]any)
	if !ok {
		return nil, intrinsicErr("States.ArrayContains", "first argument is not an array")
	}
	for _, e := range a {
		if jsonEqual(e, args[1]) {
			return true, nil
		}
	}
	return false, nil
}

func fnArrayRange(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayRange", args, 3); err != nil {
		return nil, err
	}
	s, ok1 := isInteger(args[0])
	e, ok2 := isInteger(args[1])
	st, ok3 := isInteger(args[2])
	if !ok1 || !ok2 || !ok3 || st == 0 {
		return nil, intrinsicErr("States.ArrayRange", "need integer start, end and a non-zero step")
	}
	out := []any{}
	for i := s; (st > 0 && i <= e) || (st < 0 && i >= e); i += st {
		out = append(out, i)
		if len(out) > 1000 {
			return nil, intrinsicErr("States.ArrayRange", "more than 1000 items")
		}
	}
	return out, nil
}

func fnArrayGetItem(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayGetItem", args, 2); err != nil {
		return nil, err
	}
	a, ok := args[0].([]any)
	i, ok2 := isInteger(args[1])
	if !ok || !ok2 || i < 0 || int(i) >= len(a) {
		return nil, intrinsicErr("States.ArrayGetItem", "index out of range")
	}
	return a[i], nil
}

func fnArrayLength(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayLength", args, 1); err != nil {
		return nil, err
	}
	a, ok := args[0].([]any)
	if !ok {
		return nil, intrinsicErr("States.ArrayLength", "argument is not an array")
	}
	return int64(len(a)), nil
}

func fnArrayUnique(args []any, _ []arg) (any, error) {
	if err := wantN("States.ArrayUnique", args, 1); err != nil {
		return nil, err
	}
	a, ok := args[0].([]any)
	if !ok {
		return nil, intrinsicErr("States.ArrayUnique", "argument is not an array")
	}
	out := []any{}
	for _, e := range a {
		dup := false
		for _, o := range out {
			if jsonEqual(o, e) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, e)
		}
	}
	return out, nil
}

func fnBase64Encode(args []any, _ []arg) (any, error) {
	if err := wantN("States.Base64Encode", args, 1); err != nil {
		return nil, err
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, intrinsicErr("States.Base64Encode", "argument is not a string")
	}
	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func fnBase64Decode(args []any, _ []arg) (any, error) {
	if err := wantN("States.Base64Decode", args, 1); err != nil {
		return nil, err
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, intrinsicErr("States.Base64Decode", "argument is not a string")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, intrinsicErr("States.Base64Decode", "%v", err)
	}
	return string(b), nil
}

func fnHash(args []any, _ []arg) (any, error) {
	if err := wantN("States.Hash", args, 2); err != nil {
		return nil, err
	}
	alg, ok := args[1].(string)
	if !ok {
		return nil, intrinsicErr("States.Hash", "algorithm is not a string")
	}
	data, ok := args[0].(string)
	if !ok {
		data = mustJSON(args[0])
	}
	sum, ok := hashHex(alg, data)
	if !ok {
		return nil, intrinsicErr("States.Hash", "unsupported algorithm %q", alg)
	}
	return sum, nil
}

// hashHex is the hex digest of data by one of the algorithms States.Hash
// and JSONata's $hash accept (MD5, SHA-1, SHA-256, SHA-384, SHA-512).
func hashHex(alg, data string) (string, bool) {
	var h hash.Hash
	switch alg {
	case "MD5":
		h = md5.New()
	case "SHA-1":
		h = sha1.New()
	case "SHA-256":
		h = sha256.New()
	case "SHA-384":
		h = sha512.New384()
	case "SHA-512":
		h = sha512.New()
	default:
		return "", false
	}
	h.Write([]byte(data))
	return hex.EncodeToString(h.Sum(nil)), true
}

func fnJSONMerge(args []any, _ []arg) (any, error) {
	if err := wantN("States.JsonMerge", args, 3); err != nil {
		return nil, err
	}
	a, ok1 := args[0].(map[string]any)
	b, ok2 := args[1].(map[string]any)
	deep, _ := args[2].(bool)
	if !ok1 || !ok2 || deep {
		return nil, intrinsicErr("States.JsonMerge", "need two objects and false (deep merge is not supported)")
	}
	out := deepCopy(a).(map[string]any)
	for k, v := range b {
		out[k] = deepCopy(v)
	}
	return out, nil
}

func fnMathRandom(args []any, _ []arg) (any, error) {
	if len(args) != 2 && len(args) != 3 {
		return nil, intrinsicErr("States.MathRandom", "expected 2 or 3 arguments")
	}
	s, ok1 := isInteger(args[0])
	e, ok2 := isInteger(args[1])
	if !ok1 || !ok2 || e <= s {
		return nil, intrinsicErr("States.MathRandom", "need integers start < end")
	}
	var r *mrand.Rand
	if len(args) == 3 {
		seed, _ := isInteger(args[2])
		r = mrand.New(mrand.NewPCG(uint64(seed), 0))
	} else {
		r = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	return s + r.Int64N(e-s), nil
}

func fnMathAdd(args []any, _ []arg) (any, error) {
	if err := wantN("States.MathAdd", args, 2); err != nil {
		return nil, err
	}
	a, ok1 := toFloat(args[0])
	b, ok2 := toFloat(args[1])
	if !ok1 || !ok2 {
		return nil, intrinsicErr("States.MathAdd", "arguments are not numbers")
	}
	// MathAdd takes integers; "if you specify a non-integer value for one
	// or both the arguments, Step Functions will round it off to the nearest
	// integer" (intrinsic functions page), halves up as Java's Math.round.
	sum := javaRound(a) + javaRound(b)
	if math.IsInf(sum, 0) || math.IsNaN(sum) {
		return nil, intrinsicErr("States.MathAdd", "result out of range")
	}
	return numberValue(sum), nil
}

// javaRound rounds to the nearest integer, halves up (towards positive
// infinity) as Java's Math.round: 2.5 -> 3, -2.5 -> -2.
func javaRound(f float64) float64 {
	if f < 0 && f-math.Trunc(f) == -0.5 {
		return math.Trunc(f)
	}
	return math.Round(f)
}

func fnStringSplit(args []any, _ []arg) (any, error) {
	if err := wantN("States.StringSplit", args, 2); err != nil {
		return nil, err
	}
	s, ok1 := args[0].(string)
	sep, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, intrinsicErr("States.StringSplit", "arguments are not strings")
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(sep, r) })
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func fnUUID(args []any, _ []arg) (any, error) {
	if len(args) != 0 {
		return nil, intrinsicErr("States.UUID", "takes no arguments")
	}
	return newUUID(), nil
}

// newUUID returns a random version-4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// jsonEqual compares two values as JSON (numbers by value).
func jsonEqual(a, b any) bool {
	if fa, ok := toFloat(a); ok {
		fb, ok := toFloat(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}
