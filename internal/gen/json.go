package gen

import (
	"strconv"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// obj is a JSON object whose members keep their order (resourceType first, as
// FHIR servers write it).
type obj []kv

// arr is a JSON array.
type arr []any

// appendValue appends the compact JSON of v. Supported: string, int, int64,
// float64, bool, obj, arr, nil.
func appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return envelope.AppendString(dst, x)
	case int:
		return strconv.AppendInt(dst, int64(x), 10)
	case int64:
		return strconv.AppendInt(dst, x, 10)
	case float64:
		return strconv.AppendFloat(dst, x, 'f', -1, 64)
	case bool:
		return strconv.AppendBool(dst, x)
	case obj:
		dst = append(dst, '{')
		for i, m := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = envelope.AppendString(dst, m.k)
			dst = append(dst, ':')
			dst = appendValue(dst, m.v)
		}
		return append(dst, '}')
	case arr:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, e)
		}
		return append(dst, ']')
	case nil:
		return append(dst, "null"...)
	default:
		panic("gen: unsupported JSON value type") // programming error inside this package only
	}
}
