package localaws

import (
	"net/http"
)

// AnswerLoss decides, per call (r is the request, its signature checked),
// whether the gateway serves the request and then loses its answer: the
// service acts on it in full, and the connection closes before a byte of
// the answer goes out. The client cannot tell whether the call took
// effect; the SDKs send it again (a connection error is retryable:
// aws-sdk-go-v2's retry.RetryableConnectionError). AWS documents no rate
// for it, and needs none: any network between a client and an endpoint
// can drop a connection after the request arrived (docs/LOCAL.md,
// "Answers that never arrive").
type AnswerLoss func(service, operation string, r *http.Request) bool

// AnswersLost returns how many answers the gateway has dropped after
// serving their requests.
func (g *Gateway) AnswersLost() int64 { return g.answersLost.Load() }

// SetAnswerLoss installs (or, with nil, removes) the answer losses.
func (g *Gateway) SetAnswerLoss(l AnswerLoss) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loss = l
}

// discardWriter takes a served answer and keeps nothing of it.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header {
	if d.h == nil {
		d.h = http.Header{}
	}
	return d.h
}
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
