package eventpattern

import (
	"sort"
	"strconv"
	"strings"
)

// MaxWildcardComplexity is the most wildcard complexity a field of a pattern
// may have; more is refused with "Rule is too complex".
//
// The user guide ("Comparison operators for use in event patterns",
// "Wildcards and event pattern complexity") says that EventBridge refuses a
// rule that is too complex with InvalidEventPatternException, and that the
// complexity grows with the number of wildcard characters and with the
// character sequences that repeat after a wildcard; it gives no number. The
// measure and the number here are modelled (see wildcardComplexity): the
// complexity of a field is the largest number of matching positions after a
// wildcard that one value of the field can keep alive at the same time — the
// "wildcard rule prefixes that match a theoretical worst-case event" by which
// Event Ruler (EventBridge's matching library) describes it. The limit is set
// from one observation of AWS: three values "*:stack/NAME/*" on one field are
// accepted, four are refused (complexity 12 and 16 here), and the limit is
// put between them.
const MaxWildcardComplexity = 14

// maxComplexityStates bounds the worst-case search of wildcardComplexity: a
// field whose wildcards have more distinct matching states than this is
// refused as too complex without searching further.
const maxComplexityStates = 10000

// tooComplex is AWS's reason for a wildcard pattern over the limit.
const tooComplex = "Rule is too complex - try using fewer wildcard characters or fewer repeating character sequences after a wildcard character"

// checkComplexity refuses a pattern one of whose fields has wildcards over
// MaxWildcardComplexity. The wildcards of a field are taken together wherever
// they appear in the pattern (also in $or alternatives and anything-but), as
// they share one matching machine.
func checkComplexity(root *object) error {
	byField := map[string][]glob{}
	collectGlobs(root, "", byField)
	paths := make([]string, 0, len(byField))
	for p := range byField {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if wildcardComplexity(byField[p], MaxWildcardComplexity) > MaxWildcardComplexity {
			return invalid("%s (at %s)", tooComplex, p)
		}
	}
	return nil
}

func collectGlobs(o *object, path string, out map[string][]glob) {
	for _, f := range o.fields {
		p := joinPath(path, f.key)
		if f.sub != nil {
			collectGlobs(f.sub, p, out)
			continue
		}
		for _, flt := range f.filters {
			if ab, ok := flt.(anythingButFilter); ok {
				flt = ab.not
			}
			if w, ok := flt.(wildcardFilter); ok {
				for _, g := range w.globs {
					if len(g.parts) > 1 {
						out[p] = append(out[p], g)
					}
				}
			}
		}
	}
	for _, alts := range o.ors {
		for _, a := range alts {
			collectGlobs(a, path, out)
		}
	}
}

// nfaState is one position in a wildcard value: before a literal byte, or on
// a '*' (which loops on any byte).
type nfaState struct {
	star    bool
	b       byte
	next    int  // the state after this one; -1 for the end of the value
	counted bool // at or after the value's first '*'
}

// wildcardComplexity returns the largest number of counted states that one
// input string can keep active at once in the non-deterministic matcher of
// globs, searching every reachable set of states (a subset construction).
// It returns limit+1 as soon as the answer exceeds limit, or when the search
// meets more than maxComplexityStates sets.
func wildcardComplexity(globs []glob, limit int) int {
	var states []nfaState
	var starts []int
	alphabet := map[byte]bool{}
	for _, g := range globs {
		first := len(states)
		starts = append(starts, first)
		afterStar := false
		for i, part := range g.parts {
			if i > 0 {
				afterStar = true
				states = append(states, nfaState{star: true, counted: true})
			}
			for j := 0; j < len(part); j++ {
				states = append(states, nfaState{b: part[j], counted: afterStar})
				alphabet[part[j]] = true
			}
		}
		for k := first; k < len(states); k++ {
			states[k].next = k + 1
		}
		if len(states) > first {
			states[len(states)-1].next = -1 // the end of the value is not counted
		}
	}
	// Input bytes: each literal byte, and one byte that is none of them.
	var symbols []int
	for b := range alphabet {
		symbols = append(symbols, int(b))
	}
	sort.Ints(symbols)
	symbols = append(symbols, -1)

	closure := func(set map[int]bool) []int {
		stack := make([]int, 0, len(set))
		for s := range set {
			stack = append(stack, s)
		}
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if states[s].star && states[s].next >= 0 && !set[states[s].next] {
				set[states[s].next] = true
				stack = append(stack, states[s].next)
			}
		}
		out := make([]int, 0, len(set))
		for s := range set {
			out = append(out, s)
		}
		sort.Ints(out)
		return out
	}
	key := func(set []int) string {
		var b strings.Builder
		for _, s := range set {
			b.WriteString(strconv.Itoa(s))
			b.WriteByte(',')
		}
		return b.String()
	}
	count := func(set []int) int {
		n := 0
		for _, s := range set {
			if states[s].counted {
				n++
			}
		}
		return n
	}

	init := map[int]bool{}
	for _, s := range starts {
		init[s] = true
	}
	first := closure(init)
	seen := map[string]bool{key(first): true}
	queue := [][]int{first}
	best := count(first)
	for len(queue) > 0 {
		if best > limit || len(seen) > maxComplexityStates {
			return limit + 1
		}
		cur := queue[0]
		queue = queue[1:]
		for _, c := range symbols {
			next := map[int]bool{}
			for _, s := range cur {
				st := states[s]
				switch {
				case st.star:
					next[s] = true
				case int(st.b) == c && st.next >= 0:
					next[st.next] = true
				}
			}
			if len(next) == 0 {
				continue
			}
			set := closure(next)
			k := key(set)
			if seen[k] {
				continue
			}
			seen[k] = true
			if n := count(set); n > best {
				best = n
			}
			queue = append(queue, set)
		}
	}
	if best > limit {
		return limit + 1
	}
	return best
}
