package localaws

import (
	"sync"
	"time"
)

// rateMeter keeps, for each API, the most calls that arrived within any
// one second of the gateway's clock: the figure to hold against a
// service's request-rate quota (HealthLake's searches and reads per data
// store, docs/LOCAL.md "HealthLake limits"). Safe for concurrent use.
type rateMeter struct {
	mu  sync.Mutex
	ops map[string]*opRate
}

// opRate holds the arrival times (Unix ns) of an API's calls of the last
// second, oldest first, and the most it ever held.
type opRate struct {
	window []int64
	peak   int
}

// add counts a call of key arriving at t.
func (m *rateMeter) add(key string, t time.Time) {
	now := t.UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ops == nil {
		m.ops = map[string]*opRate{}
	}
	o := m.ops[key]
	if o == nil {
		o = &opRate{}
		m.ops[key] = o
	}
	cut := 0
	for cut < len(o.window) && o.window[cut] <= now-int64(time.Second) {
		cut++
	}
	if cut > 0 {
		// Drop the calls older than a second; reuse the array once half of
		// it is dead, so that a steady rate keeps a bounded slice.
		o.window = o.window[cut:]
		if cap(o.window) > 2*len(o.window)+64 {
			o.window = append(make([]int64, 0, 2*len(o.window)+16), o.window...)
		}
	}
	o.window = append(o.window, now)
	o.peak = max(o.peak, len(o.window))
}

// peaks returns the peak of every API counted, by key.
func (m *rateMeter) peaks() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.ops))
	for k, o := range m.ops {
		out[k] = o.peak
	}
	return out
}

// PeakRates returns, keyed "service:Operation" with the operation named as
// the latency table names it (HealthLake's SearchWithGet, VReadResource,
// ReadHistory, …; LatencyOperation), the most calls that arrived within one
// second of the gateway's clock (a sliding second, so that a burst across a
// second's boundary counts whole). Only the calls the latency model delays
// count — the pipeline's own, not the emulators' calls as AWS services nor
// the local stack's setup and observers — or every call when no model is
// installed.
func (g *Gateway) PeakRates() map[string]int { return g.rates.peaks() }
