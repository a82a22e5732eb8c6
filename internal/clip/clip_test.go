package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven byte", 10, "eleven …"},
		{"ab", 0, ""},
		{"abcdef", 2, "ab"},
		{"aééé", 5, "a…"}, // é is 2 bytes: "aé…" would be 6
		{"ééé", 5, "é…"},
	}
	for _, c := range cases {
		if got := String(c.in, c.n); got != c.want {
			t.Errorf("String(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestStringStaysWithinTheLimitOnRuneBoundaries(t *testing.T) {
	s := strings.Repeat("aé€😀", 40)
	for n := 0; n <= len(s)+1; n++ {
		got := String(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("String(…, %d) = %q: %d bytes, valid %v", n, got, len(got), utf8.ValidString(got))
		}
		if len(s) > n && n >= len(Ellipsis) && !strings.HasSuffix(got, Ellipsis) {
			t.Fatalf("String(…, %d) = %q lacks the ellipsis", n, got)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, Ellipsis)) {
			t.Fatalf("String(…, %d) = %q is not a prefix", n, got)
		}
	}
}
