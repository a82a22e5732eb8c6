// Package clip shortens strings to a byte limit for the size-limited fields
// of AWS APIs: Step Functions' SendTaskFailure error (256 characters) and
// cause (32,768), DynamoDB attributes holding a reason, log fields.
package clip

import "unicode/utf8"

// Ellipsis ends a shortened string.
const Ellipsis = "…"

// String returns s when it is at most n bytes long; otherwise its longest
// prefix that ends on a rune boundary and leaves room for Ellipsis, followed
// by Ellipsis. The result is never longer than n bytes (and so never more
// than n characters); for n smaller than Ellipsis it is a prefix of s alone.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	keep, tail := n-len(Ellipsis), Ellipsis
	if keep < 0 {
		keep, tail = n, ""
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + tail
}
