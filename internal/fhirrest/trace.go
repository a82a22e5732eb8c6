package fhirrest

import "context"

// Trace observes the attempts of the calls made with a context from
// WithTrace, as net/http/httptrace observes a request: a caller that paces
// its own requests learns from it that HealthLake refused one for its
// request rate.
type Trace struct {
	// Throttled is called after each attempt HealthLake throttled (HTTP 429,
	// or a ThrottlingException of another status), before the client waits
	// to retry it. It may be called from several goroutines at once.
	Throttled func()
}

type traceKey struct{}

// WithTrace returns ctx carrying t: the client's calls made with it report
// to t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceOf is the Trace ctx carries, or nil.
func traceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// throttled reports a throttled attempt; a nil Trace or hook ignores it.
func (t *Trace) throttled() {
	if t != nil && t.Throttled != nil {
		t.Throttled()
	}
}
