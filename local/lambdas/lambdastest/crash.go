// Package lambdastest holds test helpers for the local Lambda registry
// (local/lambdas).
package lambdastest

import "sync"

// Crash is a lambdas.Faults that crashes Times invocations of one function
// from the From-th (counted from 1), before its handler runs or, with
// After, after its side effects. Times 0 crashes one.
type Crash struct {
	Function    string
	From, Times int
	After       bool

	mu    sync.Mutex
	calls int
}

func (c *Crash) hit(fn string, after bool) bool {
	if fn != c.Function || after != c.After {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.calls >= c.From && c.calls < c.From+max(c.Times, 1)
}

// CrashBefore implements lambdas.Faults.
func (c *Crash) CrashBefore(fn string) bool { return c.hit(fn, false) }

// CrashAfter implements lambdas.Faults.
func (c *Crash) CrashAfter(fn string) bool { return c.hit(fn, true) }
