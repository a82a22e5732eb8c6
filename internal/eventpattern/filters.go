package eventpattern

import (
	"encoding/json"
	"net/netip"
	"sort"
	"strings"
)

// filter is one element of a leaf's array: it matches one scalar value.
type filter interface {
	match(v any) bool
}

type exactFilter struct{ value any }

func (f exactFilter) match(v any) bool { return sameValue(f.value, v) }

// existsFilter is {"exists": true|false}; field.match handles it, since it
// is about the presence of leaves, not about one of them.
type existsFilter bool

func (existsFilter) match(any) bool { return false }

type prefixFilter struct {
	s          string
	ignoreCase bool
}

func (f prefixFilter) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if f.ignoreCase {
		return strings.HasPrefix(strings.ToLower(s), f.s)
	}
	return strings.HasPrefix(s, f.s)
}

type suffixFilter struct {
	s          string
	ignoreCase bool
}

func (f suffixFilter) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if f.ignoreCase {
		return strings.HasSuffix(strings.ToLower(s), f.s)
	}
	return strings.HasSuffix(s, f.s)
}

type ignoreCaseFilter struct{ values []string }

func (f ignoreCaseFilter) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	for _, x := range f.values {
		if strings.EqualFold(s, x) {
			return true
		}
	}
	return false
}

type wildcardFilter struct{ globs []glob }

func (f wildcardFilter) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	for _, g := range f.globs {
		if g.match(s) {
			return true
		}
	}
	return false
}

type cidrFilter struct{ prefix netip.Prefix }

func (f cidrFilter) match(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	a, err := netip.ParseAddr(s)
	return err == nil && f.prefix.Contains(a.Unmap())
}

// numericFilter is a range; a nil bound is open.
type numericFilter struct {
	lower, upper         *float64
	lowerOpen, upperOpen bool // > and < (rather than >= and <=)
}

func (f numericFilter) match(v any) bool {
	x, ok := number(v)
	if !ok {
		return false
	}
	x = roundNumeric(x)
	if f.lower != nil && (x < *f.lower || f.lowerOpen && x == *f.lower) {
		return false
	}
	if f.upper != nil && (x > *f.upper || f.upperOpen && x == *f.upper) {
		return false
	}
	return true
}

// anythingButFilter matches a leaf that none of its inner filters matches.
// The string forms (prefix, suffix, wildcard, equals-ignore-case) never
// match a value that is not a string, so anything-but of them matches every
// number, boolean and null, as AWS does.
type anythingButFilter struct{ not filter }

func (f anythingButFilter) match(v any) bool { return !f.not.match(v) }

type anyOf []filter

func (a anyOf) match(v any) bool {
	for _, f := range a {
		if f.match(v) {
			return true
		}
	}
	return false
}

func parseFilters(arr []any, path string) ([]filter, error) {
	if len(arr) == 0 {
		return nil, invalid("Empty arrays are not allowed (at %s)", path)
	}
	out := make([]filter, 0, len(arr))
	for _, e := range arr {
		switch t := e.(type) {
		case string, bool, nil, json.Number:
			if n, ok := t.(json.Number); ok {
				if err := checkNumber(n, path); err != nil {
					return nil, err
				}
			}
			out = append(out, exactFilter{value: t})
		case map[string]any:
			f, err := parseOperator(t, path)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		default:
			return nil, invalid("Match value must be String, number, true, false, or null (at %s)", path)
		}
	}
	return out, nil
}

func checkNumber(n json.Number, path string) error {
	f, ok := number(n)
	if !ok || f < -NumericLimit || f > NumericLimit {
		return invalid("Value %s is out of range: numbers must be between -5.0e9 and 5.0e9 (at %s)", n.String(), path)
	}
	return nil
}

func parseOperator(m map[string]any, path string) (filter, error) {
	if len(m) != 1 {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(m) == 0 {
			return nil, invalid("Empty objects are not allowed in a match list (at %s)", path)
		}
		return nil, invalid("Only one key allowed in match expression, found %s (at %s)", strings.Join(keys, ", "), path)
	}
	for op, v := range m {
		switch op {
		case "prefix", "suffix":
			s, ic, err := stringOrIgnoreCase(op, v, path)
			if err != nil {
				return nil, err
			}
			if op == "prefix" {
				return prefixFilter{s: s, ignoreCase: ic}, nil
			}
			return suffixFilter{s: s, ignoreCase: ic}, nil
		case "equals-ignore-case":
			s, ok := v.(string)
			if !ok {
				return nil, invalid("equals-ignore-case match pattern must be a string (at %s)", path)
			}
			return ignoreCaseFilter{values: []string{s}}, nil
		case "wildcard":
			s, ok := v.(string)
			if !ok {
				return nil, invalid("wildcard match pattern must be a string (at %s)", path)
			}
			g, err := parseGlob(s, path)
			if err != nil {
				return nil, err
			}
			return wildcardFilter{globs: []glob{g}}, nil
		case "exists":
			b, ok := v.(bool)
			if !ok {
				return nil, invalid("exists match pattern must be either true or false (at %s)", path)
			}
			return existsFilter(b), nil
		case "numeric":
			return parseNumeric(v, path)
		case "cidr":
			s, ok := v.(string)
			if !ok {
				return nil, invalid("cidr match pattern must be a string (at %s)", path)
			}
			p, err := parseCIDR(s)
			if err != nil {
				return nil, invalid("%s (at %s)", err.Error(), path)
			}
			return cidrFilter{prefix: p}, nil
		case "anything-but":
			return parseAnythingBut(v, path)
		case "$or":
			return nil, invalid("$or is not allowed inside a match list (at %s)", path)
		default:
			return nil, invalid("Unrecognized match type %s (at %s)", op, path)
		}
	}
	return nil, invalid("Empty objects are not allowed in a match list (at %s)", path)
}

// stringOrIgnoreCase reads the value of prefix or suffix: a string or
// {"equals-ignore-case": string}. An ignore-case value comes back lower-cased.
func stringOrIgnoreCase(op string, v any, path string) (string, bool, error) {
	switch t := v.(type) {
	case string:
		return t, false, nil
	case map[string]any:
		if len(t) == 1 {
			if s, ok := t["equals-ignore-case"].(string); ok {
				return strings.ToLower(s), true, nil
			}
		}
		return "", false, invalid("%s match pattern must be a string or {\"equals-ignore-case\": string} (at %s)", op, path)
	}
	return "", false, invalid("%s match pattern must be a string (at %s)", op, path)
}

func parseNumeric(v any, path string) (filter, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, invalid("Value of numeric must be an array (at %s)", path)
	}
	if len(arr) == 0 || len(arr)%2 != 0 || len(arr) > 4 {
		return nil, invalid("numeric must be one or two pairs of an operator and a number (at %s)", path)
	}
	var f numericFilter
	for i := 0; i < len(arr); i += 2 {
		op, ok := arr[i].(string)
		if !ok {
			return nil, invalid("Unrecognized numeric range operator %v (at %s)", arr[i], path)
		}
		n, ok := arr[i+1].(json.Number)
		if !ok {
			return nil, invalid("Value of %s must be numeric (at %s)", op, path)
		}
		if err := checkNumber(n, path); err != nil {
			return nil, err
		}
		x, _ := number(n)
		x = roundNumeric(x)
		switch op {
		case "=":
			if len(arr) != 2 {
				return nil, invalid("= must be used alone in numeric (at %s)", path)
			}
			f.lower, f.upper = &x, &x
		case ">", ">=":
			if f.lower != nil {
				return nil, invalid("numeric has two lower bounds (at %s)", path)
			}
			f.lower, f.lowerOpen = &x, op == ">"
		case "<", "<=":
			if f.upper != nil {
				return nil, invalid("numeric has two upper bounds (at %s)", path)
			}
			f.upper, f.upperOpen = &x, op == "<"
		default:
			return nil, invalid("Unrecognized numeric range operator %s (at %s)", op, path)
		}
	}
	if f.lower != nil && f.upper != nil && (*f.lower > *f.upper || *f.lower == *f.upper && (f.lowerOpen || f.upperOpen)) {
		return nil, invalid("Bad numeric range: the lower bound must be below the upper bound (at %s)", path)
	}
	return f, nil
}

func parseAnythingBut(v any, path string) (filter, error) {
	switch t := v.(type) {
	case string:
		return anythingButFilter{not: exactFilter{value: t}}, nil
	case json.Number:
		if err := checkNumber(t, path); err != nil {
			return nil, err
		}
		return anythingButFilter{not: exactFilter{value: t}}, nil
	case []any:
		if len(t) == 0 {
			return nil, invalid("Empty arrays are not allowed in anything-but (at %s)", path)
		}
		var strs, nums int
		not := make(anyOf, 0, len(t))
		for _, e := range t {
			switch x := e.(type) {
			case string:
				strs++
			case json.Number:
				if err := checkNumber(x, path); err != nil {
					return nil, err
				}
				nums++
			default:
				return nil, invalid("Inside anything-but list, only strings or only numbers are allowed (at %s)", path)
			}
			not = append(not, exactFilter{value: e})
		}
		if strs > 0 && nums > 0 {
			return nil, invalid("Inside anything-but list, mixed types are not supported (at %s)", path)
		}
		return anythingButFilter{not: not}, nil
	case map[string]any:
		if len(t) != 1 {
			return nil, invalid("anything-but object must have exactly one of prefix, suffix, equals-ignore-case, wildcard (at %s)", path)
		}
		for op, x := range t {
			switch op {
			case "prefix", "suffix":
				list, err := stringList(x, "anything-but "+op, path)
				if err != nil {
					return nil, err
				}
				not := make(anyOf, len(list))
				for i, s := range list {
					if s == "" {
						return nil, invalid("Null %s not allowed in anything-but (at %s)", op, path)
					}
					if op == "prefix" {
						not[i] = prefixFilter{s: s}
					} else {
						not[i] = suffixFilter{s: s}
					}
				}
				return anythingButFilter{not: not}, nil
			case "equals-ignore-case":
				list, err := stringList(x, "anything-but equals-ignore-case", path)
				if err != nil {
					return nil, err
				}
				return anythingButFilter{not: ignoreCaseFilter{values: list}}, nil
			case "wildcard":
				list, err := stringList(x, "anything-but wildcard", path)
				if err != nil {
					return nil, err
				}
				globs := make([]glob, len(list))
				for i, s := range list {
					g, err := parseGlob(s, path)
					if err != nil {
						return nil, err
					}
					globs[i] = g
				}
				return anythingButFilter{not: wildcardFilter{globs: globs}}, nil
			default:
				return nil, invalid("Unsupported anything-but pattern: %s (at %s)", op, path)
			}
		}
	}
	return nil, invalid("Value of anything-but must be an array, a string, a number or an object (at %s)", path)
}

// stringList reads a string or a non-empty list of strings.
func stringList(v any, what, path string) ([]string, error) {
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []any:
		if len(t) == 0 {
			return nil, invalid("Empty arrays are not allowed in %s (at %s)", what, path)
		}
		out := make([]string, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, invalid("Inside %s list, only strings are allowed (at %s)", what, path)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, invalid("Value of %s must be a string or a list of strings (at %s)", what, path)
}

// glob is a wildcard pattern: literal runs separated by '*'.
type glob struct {
	parts []string // parts[0] prefix, last suffix, stars between each
}

// parseGlob reads a wildcard value: '*' matches any run of characters
// (also none); "\*" is a literal star and "\\" a literal backslash; any other
// escape, and two consecutive '*', are refused.
func parseGlob(s, path string) (glob, error) {
	var parts []string
	var cur strings.Builder
	prevStar := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '*' && s[i+1] != '\\') {
				return glob{}, invalid("Invalid escape character at pos %d in wildcard %q (at %s)", i, s, path)
			}
			cur.WriteByte(s[i+1])
			i++
			prevStar = false
		case '*':
			if prevStar {
				return glob{}, invalid("Consecutive wildcard characters at pos %d in wildcard %q (at %s)", i, s, path)
			}
			parts = append(parts, cur.String())
			cur.Reset()
			prevStar = true
		default:
			cur.WriteByte(c)
			prevStar = false
		}
	}
	parts = append(parts, cur.String())
	return glob{parts: parts}, nil
}

func (g glob) match(s string) bool {
	if len(g.parts) == 1 {
		return s == g.parts[0]
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	mid := s[len(first) : len(s)-len(last)]
	// Greedy leftmost placement of the middle parts is exact for '*'-only globs.
	for _, p := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(mid, p)
		if i < 0 {
			return false
		}
		mid = mid[i+len(p):]
	}
	return true
}
