// Package eventpattern is the Amazon EventBridge event-pattern language: it
// parses a pattern, refuses one EventBridge would refuse (with the reason,
// as InvalidEventPatternException carries it), and decides whether an event
// matches.
//
// It implements what the EventBridge user guide documents ("Event patterns",
// "Comparison operators for use in event patterns", "Arrays in event
// patterns", "Matching events on null values and empty strings"): exact
// strings, numbers, booleans and null; prefix and suffix (also with
// equals-ignore-case); equals-ignore-case; wildcard; anything-but with a
// value, a list of strings or of numbers, and with prefix, suffix, wildcard
// or equals-ignore-case (each a string or a list; these match every value
// that is not a string, null included); numeric ranges; cidr (IPv4 and
// IPv6); exists; $or at any level; nested objects, also written as dotted
// keys ("detail.state"), in patterns and in events alike; and arrays (a field
// matches when any of its array elements does, each object element of an
// array matched as a whole). A field whose wildcards are too complex is
// refused with "Rule is too complex" (MaxWildcardComplexity).
//
// The cases of testdata/conformance.json, written from those pages, are run
// here and through the local EventBridge's TestEventPattern.
//
// The package is pure Go with no AWS types, for the local EventBridge
// emulator and for any consumer that wants to filter as a rule would.
package eventpattern

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"sort"
	"strings"
)

// NumericLimit is the magnitude limit of numbers in numeric matching: the
// content-filtering page documents values between -5.0e9 and +5.0e9
// inclusive.
const NumericLimit = 5.0e9

// MaxNumericDecimals is how many digits right of the decimal point numeric
// matching keeps (the content-filtering page: "six digits to the right of
// the decimal point").
const MaxNumericDecimals = 6

// InvalidError is a pattern EventBridge refuses. Its message is AWS's
// "Event pattern is not valid. Reason: …".
type InvalidError struct {
	// Reason says what is wrong, naming the field where there is one.
	Reason string
}

func (e *InvalidError) Error() string { return "Event pattern is not valid. Reason: " + e.Reason }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// Pattern is a parsed, valid event pattern. It is immutable and safe for
// concurrent use.
type Pattern struct {
	root *object
	src  string
}

// object is one level of a pattern: fields that must all match, and $or
// groups of which one alternative must match.
type object struct {
	fields []field
	ors    [][]*object
}

// field is one key of a pattern object: a list of leaf filters (any one
// must match) or a nested object.
type field struct {
	key     string
	filters []filter
	sub     *object
}

// Parse parses and validates src. An invalid pattern gives an *InvalidError.
//
// A key written with dots stands for the nested fields it names, as EventBridge
// addresses every field by its dotted path: {"detail.state": [...]} is
// {"detail": {"state": [...]}}.
func Parse(src string) (p *Pattern, err error) {
	defer func() {
		// A pattern must never crash its caller (a PutRule must not become an
		// HTTP 500); a panic here is a bug, reported as an invalid pattern.
		if r := recover(); r != nil {
			p, err = nil, invalid("pattern could not be parsed: %v", r)
		}
	}()
	v, err := decode([]byte(src))
	if err != nil {
		return nil, invalid("%s", err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("Filter is not an object")
	}
	root, err := parseObject(nestDottedPattern(m), "")
	if err != nil {
		return nil, err
	}
	if err := checkComplexity(root); err != nil {
		return nil, err
	}
	return &Pattern{root: root, src: src}, nil
}

// Validate reports whether src is a pattern EventBridge accepts: nil, or an
// *InvalidError naming what is wrong.
func Validate(src string) error {
	_, err := Parse(src)
	return err
}

// Match parses pattern and matches the JSON event against it. An invalid
// pattern or event is an error (and never a match).
func Match(pattern, event string) (bool, error) {
	p, err := Parse(pattern)
	if err != nil {
		return false, err
	}
	return p.Matches([]byte(event))
}

// nestDottedPattern rewrites the keys of a pattern object that contain dots
// into nested objects ("a.b": X becomes "a": {"b": X}), merging them with
// the objects written nested; $or alternatives are rewritten too. When the
// same field is written both ways, the dotted key (taken later, in key
// order, than the plain key it extends) wins.
func nestDottedPattern(m map[string]any) map[string]any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]any, len(m))
	for _, k := range keys {
		v := m[k]
		switch t := v.(type) {
		case map[string]any:
			v = nestDottedPattern(t)
		case []any:
			if k == "$or" {
				alts := make([]any, len(t))
				for i, a := range t {
					if am, ok := a.(map[string]any); ok {
						alts[i] = nestDottedPattern(am)
					} else {
						alts[i] = a
					}
				}
				v = alts
			}
		}
		if k == "$or" || !strings.Contains(k, ".") {
			out[k] = mergePattern(out[k], v)
			continue
		}
		segs := strings.Split(k, ".")
		for i := len(segs) - 1; i > 0; i-- {
			v = map[string]any{segs[i]: v}
		}
		out[segs[0]] = mergePattern(out[segs[0]], v)
	}
	return out
}

// mergePattern merges two pattern values for one key: objects key by key,
// anything else the later one.
func mergePattern(old, v any) any {
	om, ok1 := old.(map[string]any)
	vm, ok2 := v.(map[string]any)
	if !ok1 || !ok2 {
		return v
	}
	for k, x := range vm {
		om[k] = mergePattern(om[k], x)
	}
	return om
}

// MustParse is Parse for patterns known to be valid; it panics otherwise.
// Only for constants in tests and package-level variables.
func MustParse(src string) *Pattern {
	p, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern's source text.
func (p *Pattern) String() string { return p.src }

// decode reads one JSON value keeping numbers as json.Number; trailing
// content is an error.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %v", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("not valid JSON: content after the top-level value")
	}
	return v, nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func parseObject(m map[string]any, path string) (*object, error) {
	if len(m) == 0 {
		if path == "" {
			return nil, invalid("Empty objects are not allowed")
		}
		return nil, invalid("Empty objects are not allowed (at %s)", path)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := &object{}
	for _, k := range keys {
		p := joinPath(path, k)
		v := m[k]
		if k == "$or" {
			alts, err := parseOr(v, path)
			if err != nil {
				return nil, err
			}
			o.ors = append(o.ors, alts)
			continue
		}
		switch t := v.(type) {
		case map[string]any:
			sub, err := parseObject(t, p)
			if err != nil {
				return nil, err
			}
			o.fields = append(o.fields, field{key: k, sub: sub})
		case []any:
			fs, err := parseFilters(t, p)
			if err != nil {
				return nil, err
			}
			o.fields = append(o.fields, field{key: k, filters: fs})
		default:
			return nil, invalid("%q must be an object or an array", p)
		}
	}
	return o, nil
}

func parseOr(v any, path string) ([]*object, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, invalid("Value of $or must be an array (at %s)", orWhere(path))
	}
	if len(arr) < 2 {
		return nil, invalid("$or must have at least 2 elements (at %s)", orWhere(path))
	}
	alts := make([]*object, 0, len(arr))
	for i, a := range arr {
		m, ok := a.(map[string]any)
		if !ok {
			return nil, invalid("Elements of $or must be objects (at %s[%d])", orWhere(path), i)
		}
		o, err := parseObject(m, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, o)
	}
	return alts, nil
}

func orWhere(path string) string {
	if path == "" {
		return "$or"
	}
	return path + ".$or"
}

// Matches reports whether the JSON event matches. An event that is not a
// JSON object is an error.
func (p *Pattern) Matches(event []byte) (bool, error) {
	v, err := decode(event)
	if err != nil {
		return false, fmt.Errorf("event: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false, fmt.Errorf("event: not a JSON object")
	}
	return p.MatchesValue(m), nil
}

// MatchesValue reports whether an event decoded with json.Decoder.UseNumber
// (objects as map[string]any, numbers as json.Number) matches. Numbers
// decoded as float64 are accepted too.
//
// A key of the event written with dots is the nested field it names, as
// for patterns: {"detail.state": "x"} matches {"detail": {"state": ["x"]}}.
func (p *Pattern) MatchesValue(event map[string]any) bool {
	if hasDottedKey(event) {
		event = nestDottedEvent(event).(map[string]any)
	}
	return p.root.match(event)
}

// hasDottedKey reports whether an object of v has a key with a dot.
func hasDottedKey(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if strings.Contains(k, ".") || hasDottedKey(x) {
				return true
			}
		}
	case []any:
		for _, x := range t {
			if hasDottedKey(x) {
				return true
			}
		}
	}
	return false
}

// nestDottedEvent returns a copy of v whose dotted keys are nested objects.
// A field present both ways keeps all its values, as a list (any of them
// may match, as EventBridge sees both).
func nestDottedEvent(v any) any {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, len(t))
		for _, k := range keys {
			x := nestDottedEvent(t[k])
			segs := strings.Split(k, ".")
			for i := len(segs) - 1; i > 0; i-- {
				x = map[string]any{segs[i]: x}
			}
			if old, ok := out[segs[0]]; ok {
				x = mergeEvent(old, x)
			}
			out[segs[0]] = x
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = nestDottedEvent(x)
		}
		return out
	}
	return v
}

// mergeEvent merges two event values of one field: objects key by key,
// anything else into a list of both.
func mergeEvent(old, v any) any {
	om, ok1 := old.(map[string]any)
	vm, ok2 := v.(map[string]any)
	if ok1 && ok2 {
		for k, x := range vm {
			if o, ok := om[k]; ok {
				x = mergeEvent(o, x)
			}
			om[k] = x
		}
		return om
	}
	var list []any
	for _, x := range []any{old, v} {
		if a, ok := x.([]any); ok {
			list = append(list, a...)
		} else {
			list = append(list, x)
		}
	}
	return list
}

func (o *object) match(node map[string]any) bool {
	for _, f := range o.fields {
		if !f.match(node) {
			return false
		}
	}
	for _, alts := range o.ors {
		ok := false
		for _, a := range alts {
			if a.match(node) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (f *field) match(node map[string]any) bool {
	v, present := node[f.key]
	if f.sub != nil {
		var objs []map[string]any
		if present {
			collectObjects(v, &objs)
		}
		if len(objs) == 0 {
			// Nothing to descend into: only absence filters can hold.
			return f.sub.match(map[string]any{})
		}
		for _, c := range objs {
			if f.sub.match(c) {
				return true
			}
		}
		return false
	}
	var leaves []any
	if present {
		collectLeaves(v, &leaves)
	}
	for _, flt := range f.filters {
		if e, ok := flt.(existsFilter); ok {
			if bool(e) == (len(leaves) > 0) {
				return true
			}
			continue
		}
		for _, l := range leaves {
			if flt.match(l) {
				return true
			}
		}
	}
	return false
}

// collectLeaves appends the scalar values of v, looking through arrays.
func collectLeaves(v any, out *[]any) {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			collectLeaves(e, out)
		}
	case map[string]any:
	default:
		*out = append(*out, t)
	}
}

// collectObjects appends the objects of v, looking through arrays.
func collectObjects(v any, out *[]map[string]any) {
	switch t := v.(type) {
	case []any:
		for _, e := range t {
			collectObjects(e, out)
		}
	case map[string]any:
		*out = append(*out, t)
	}
}

// number returns the value of a numeric leaf.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false
		}
		return f, true
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	}
	return 0, false
}

// sameValue reports whether a pattern value equals an event leaf: strings
// exactly, numbers numerically, booleans and null by identity.
func sameValue(p, v any) bool {
	switch pt := p.(type) {
	case string:
		s, ok := v.(string)
		return ok && s == pt
	case bool:
		b, ok := v.(bool)
		return ok && b == pt
	case nil:
		return v == nil
	default:
		pf, ok1 := number(p)
		vf, ok2 := number(v)
		return ok1 && ok2 && roundNumeric(pf) == roundNumeric(vf)
	}
}

// roundNumeric keeps MaxNumericDecimals digits right of the point.
func roundNumeric(f float64) float64 {
	const scale = 1e6
	return math.Round(f*scale) / scale
}

// validCIDR parses a cidr filter value.
func parseCIDR(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		if a, err := netip.ParseAddr(s); err == nil {
			return netip.PrefixFrom(a, a.BitLen()), nil
		}
		return netip.Prefix{}, fmt.Errorf("nonstandard IP address: %s", s)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("malformed CIDR %q", s)
	}
	return p.Masked(), nil
}
