package fakehealthlake

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"
)

// member is one member of a compact JSON object: its key as written
// (quotes included) and its value.
type member struct{ key, value []byte }

// splitObject splits a compact (json.Compact), valid JSON value into its
// members when it is an object, appending them to ms in their order.
func splitObject(c []byte, ms []member) ([]member, error) {
	if len(c) < 2 || c[0] != '{' {
		return ms, errors.New("not an object")
	}
	for i := 1; c[i] != '}'; {
		if c[i] == ',' {
			i++
		}
		k := skipValue(c, i) // a key is a string
		v := skipValue(c, k+1)
		ms = append(ms, member{key: c[i:k], value: c[k+1 : v]})
		i = v
	}
	return ms, nil
}

// skipValue returns the end of the compact, valid JSON value at c[i].
func skipValue(c []byte, i int) int {
	switch c[i] {
	case '"':
		for i++; c[i] != '"'; i++ {
			if c[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch c[i] {
			case '"':
				i = skipValue(c, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	default: // number, true, false, null
		for i < len(c) && c[i] != ',' && c[i] != '}' && c[i] != ']' {
			i++
		}
		return i
	}
}

// stringIs reports whether the JSON value v is the string s.
func stringIs(v []byte, s string) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1:len(v)-1]) == s
	}
	var got string
	return json.Unmarshal(v, &got) == nil && got == s
}

// find returns the value of the first member named key.
func find(ms []member, key string) ([]byte, bool) {
	for _, m := range ms {
		if stringIs(m.key, key) {
			return m.value, true
		}
	}
	return nil, false
}

// appendKey appends a member name as json.Marshal writes it (HTML-safe,
// escapes normalised): as written when it needs no change.
func appendKey(dst, raw []byte) []byte {
	plain := true
	for _, b := range raw[1 : len(raw)-1] {
		if b == '\\' || b == '<' || b == '>' || b == '&' || b >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return append(dst, raw...)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return append(dst, raw...) // not reached: raw is a valid string
	}
	k, _ := json.Marshal(s)
	return append(dst, k...)
}

// appendStored appends the bytes the emulator stores for a resource whose
// compact members are ms: resourceType, id and meta (versionId and
// lastUpdated, then the other members of any meta given) first, then the
// other members in their order.
func appendStored(dst []byte, ms []member, typ, id string, vid uint32, stamp int64) ([]byte, error) {
	var metaMembers []member
	if raw, ok := find(ms, "meta"); ok {
		var err error
		var buf [16]member
		if metaMembers, err = splitObject(raw, buf[:0]); err != nil {
			return dst, badRequest{"meta is not a JSON object"}
		}
	}
	dst = append(dst, `{"resourceType":"`...)
	dst = append(dst, typ...) // a known type name: nothing to escape
	dst = append(dst, `","id":"`...)
	dst = append(dst, id...) // [A-Za-z0-9-.]: nothing to escape
	dst = append(dst, `","meta":{"versionId":"`...)
	dst = strconv.AppendUint(dst, uint64(vid), 10)
	dst = append(dst, `","lastUpdated":"`...)
	dst = time.UnixMilli(stamp).UTC().AppendFormat(dst, InstantLayout)
	dst = append(dst, '"')
	for _, m := range metaMembers {
		if !stringIs(m.key, "versionId") && !stringIs(m.key, "lastUpdated") {
			dst = append(dst, ',')
			dst = appendKey(dst, m.key)
			dst = append(dst, ':')
			dst = append(dst, m.value...)
		}
	}
	dst = append(dst, '}')
	for _, m := range ms {
		if !stringIs(m.key, "resourceType") && !stringIs(m.key, "id") && !stringIs(m.key, "meta") {
			dst = append(dst, ',')
			dst = appendKey(dst, m.key)
			dst = append(dst, ':')
			dst = append(dst, m.value...)
		}
	}
	return append(dst, '}'), nil
}

// validID reports whether id is a FHIR id: 1 to 64 of [A-Za-z0-9-.].
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
