package eventpattern

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func globsOf(t *testing.T, values ...string) []glob {
	t.Helper()
	var gs []glob
	for _, v := range values {
		g, err := parseGlob(v, "k")
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

func TestWildcardComplexity(t *testing.T) {
	stacks := func(n int) []string {
		var out []string
		for _, name := range []string{"CoreStack", "DataStack", "ApiStack", "MonitoringStack"}[:n] {
			out = append(out, "*:stack/"+name+"/*")
		}
		return out
	}
	for _, c := range []struct {
		values []string
		want   int
	}{
		{[]string{"*"}, 1},
		{[]string{"abc*"}, 1},
		{[]string{"/Users/*/doc.txt"}, 3},
		{[]string{"/Users/*/dir/dir/dir/dir/dir/doc.txt"}, 8},
		{[]string{"arn:aws:events:us-east-1:*:event-bus/*"}, 4},
		{[]string{"*:*:*:*:*:event-bus/*"}, 12},
		{stacks(3), 12},
		{stacks(4), 16},
	} {
		if got := wildcardComplexity(globsOf(t, c.values...), 100); got != c.want {
			t.Errorf("complexity of %q = %d, want %d", c.values, got, c.want)
		}
	}
}

func TestTooComplexNamesTheField(t *testing.T) {
	_, err := Parse(`{"detail":{"a":[{"wildcard":"*1*2*3*4*5*6*7*8*"}],"b":[{"wildcard":"x*"}]}}`)
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "Rule is too complex") || !strings.HasSuffix(ie.Reason, "(at detail.a)") {
		t.Fatalf("Parse = %v", err)
	}
}

// TestComplexityIsCheap: the worst-case search stays fast for the largest
// patterns PutRule accepts (4096 characters).
func TestComplexityIsCheap(t *testing.T) {
	var vals []string
	for i := 0; len(strings.Join(vals, "")) < 3500; i++ {
		vals = append(vals, fmt.Sprintf(`{"wildcard":"*%c%s"}`, 'A'+i%50, strings.Repeat(string(rune('a'+i%26)), 40)))
	}
	many := `{"k":[` + strings.Join(vals, ",") + `]}`
	var distinct []string
	for i := 0; i < 6; i++ {
		var b strings.Builder
		for j := 0; j < 60; j++ {
			b.WriteByte(byte(33 + (i*60+j)%90))
		}
		distinct = append(distinct, `{"wildcard":"*`+strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(b.String(), `\`, ""), `"`, ""), "*", "")+`"}`)
	}
	combos := `{"k":[` + strings.Join(distinct, ",") + `]}`
	for _, p := range []string{many, combos} {
		start := time.Now()
		_, err := Parse(p)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Parse took %v (%v)", d, err)
		}
	}
}
