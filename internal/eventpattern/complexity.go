package eventpattern

import "sort"

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
// wildcard that one input string keeps alive at the same time over all the
// field's wildcard values — close to the "wildcard rule prefixes that match a
// theoretical worst-case event" by which Event Ruler (EventBridge's matching
// library) describes it, with repeated sequences counted as the guide says.
// The limit is set from one public observation of AWS (a CDK app's rule,
// github.com/vals-ai/Valkyrie pull request 278): three values
// "*:stack/NAME/*" on one field were accepted, four refused with "Rule is too
// complex" (complexity 12 and 16 here); the limit is put between them.
const MaxWildcardComplexity = 14

// maxComplexityStates bounds the worst-case search of wildcardComplexity: a
// field whose wildcards have more distinct matching states than this is
// refused as too complex without searching further.
const maxComplexityStates = 5000

// tooComplex is the reason for a wildcard pattern over the limit; AWS's
// starts "Rule is too complex".
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
			}
		}
		for k := first; k < len(states); k++ {
			states[k].next = k + 1
		}
		if len(states) > first {
			states[len(states)-1].next = -1 // the end of the value is not counted
		}
	}
	mark := make([]int, len(states)) // mark[s] == gen: s is in the set being built
	gen := 0
	// add puts s and the states it reaches without input into set.
	add := func(set []int, s int) []int {
		for s >= 0 && mark[s] != gen {
			mark[s] = gen
			set = append(set, s)
			if !states[s].star {
				break
			}
			s = states[s].next
		}
		return set
	}
	key := func(set []int) string {
		b := make([]byte, 0, 3*len(set))
		for _, s := range set {
			b = append(b, byte(s>>16), byte(s>>8), byte(s))
		}
		return string(b)
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
	// step is the set after one input byte c (-1: a byte no literal has).
	step := func(cur []int, c int) []int {
		gen++
		var set []int
		for _, s := range cur {
			st := states[s]
			switch {
			case st.star:
				set = add(set, s)
			case int(st.b) == c && st.next >= 0:
				set = add(set, st.next)
			}
		}
		sort.Ints(set)
		return set
	}

	gen++
	var first []int
	for _, s := range starts {
		first = add(first, s)
	}
	sort.Ints(first)
	seen := map[string]bool{key(first): true}
	queue := [][]int{first}
	best := count(first)
	var symbols []int
	for len(queue) > 0 {
		if best > limit || len(seen) > maxComplexityStates {
			return limit + 1
		}
		cur := queue[0]
		queue = queue[1:]
		// Only the bytes the set's literal states wait for, and one other
		// byte, lead to different sets.
		symbols = append(symbols[:0], -1)
		for _, s := range cur {
			if st := states[s]; !st.star {
				symbols = append(symbols, int(st.b))
			}
		}
		sort.Ints(symbols)
		for i, c := range symbols {
			if i > 0 && c == symbols[i-1] {
				continue
			}
			set := step(cur, c)
			if len(set) == 0 {
				continue
			}
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
