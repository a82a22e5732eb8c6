package localaws

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// attrValue is one DynamoDB attribute value in the JSON protocol: one
// member named by its type.
type attrValue map[string]json.RawMessage

// itemSize is an item's size as DynamoDB counts it: each attribute's UTF-8
// name and its value; a string's UTF-8 bytes, a binary's raw bytes, a
// number's one byte per two significant digits and one, a Boolean or null
// one byte, a List or Map three bytes and one per element beside the
// elements (a Map's element with its name), a set its elements.
func itemSize(it map[string]json.RawMessage) (int, error) {
	n := 0
	for name, raw := range it {
		var v attrValue
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		s, err := v.size()
		if err != nil {
			return 0, fmt.Errorf("attribute %q: %w", name, err)
		}
		n += len(name) + s
	}
	return n, nil
}

func (v attrValue) size() (int, error) {
	for typ, raw := range v {
		switch typ {
		case "S":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, err
			}
			return len(s), nil
		case "N":
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, err
			}
			return numberSize(s), nil
		case "B":
			var b []byte // base64 in JSON
			if err := json.Unmarshal(raw, &b); err != nil {
				return 0, err
			}
			return len(b), nil
		case "BOOL", "NULL":
			return 1, nil
		case "SS":
			return setSize(raw, func(s string) (int, error) { return len(s), nil })
		case "NS":
			return setSize(raw, func(s string) (int, error) { return numberSize(s), nil })
		case "BS":
			return setSize(raw, func(s string) (int, error) {
				b, err := base64.StdEncoding.DecodeString(s)
				return len(b), err
			})
		case "L":
			var l []attrValue
			if err := json.Unmarshal(raw, &l); err != nil {
				return 0, err
			}
			n := 3
			for _, e := range l {
				s, err := e.size()
				if err != nil {
					return 0, err
				}
				n += 1 + s
			}
			return n, nil
		case "M":
			var m map[string]attrValue
			if err := json.Unmarshal(raw, &m); err != nil {
				return 0, err
			}
			n := 3
			for k, e := range m {
				s, err := e.size()
				if err != nil {
					return 0, err
				}
				n += 1 + len(k) + s
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no known type in %v", mapKeys(v))
}

// setSize is a set's size: the sum of its elements' sizes (no overhead is
// documented for sets).
func setSize(raw json.RawMessage, size func(string) (int, error)) (int, error) {
	var elems []string
	if err := json.Unmarshal(raw, &elems); err != nil {
		return 0, err
	}
	n := 0
	for _, e := range elems {
		s, err := size(e)
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}

func mapKeys(v attrValue) []string {
	out := make([]string, 0, len(v))
	for k := range v {
		out = append(out, k)
	}
	return out
}

// numberSize is a number's size: its significant digits (leading and
// trailing zeros trimmed), one byte per two, and one byte.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.Trim(s, "0")
	return (utf8.RuneCountInString(s)+1)/2 + 1
}
