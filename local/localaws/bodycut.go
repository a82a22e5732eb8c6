package localaws

import (
	"net/http"
	"strconv"
	"sync/atomic"
)

// BodyCut decides, per call (r is the request, its signature checked),
// whether the gateway ends a response's body
// part way, as a connection that closes early does: after fraction (in
// [0, 1)) of the body's Content-Length has gone out, the connection is
// dropped and the client reads "unexpected EOF". ok=false serves the body
// whole. S3 documents no such failure, and none is needed for it to
// happen: a GetObject body read for minutes crosses networks that reset
// connections, and the SDKs retry a request only until its response's
// headers arrive (docs/LOCAL.md, "Bodies that end early").
type BodyCut func(service, operation string, r *http.Request) (fraction float64, ok bool)

// BodyCutsMade returns how many bodies the gateway has ended part way: a
// body chosen to be cut whose reader closed it before the cut is not one.
func (g *Gateway) BodyCutsMade() int64 { return g.cutsMade.Load() }

// SetBodyCuts installs (or, with nil, removes) the body cuts.
func (g *Gateway) SetBodyCuts(c BodyCut) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cuts = c
}

// cutWriter passes a successful response through until its cut, then
// aborts the connection. Other answers go out whole.
type cutWriter struct {
	http.ResponseWriter
	fraction float64
	status   int
	limit    int64 // bytes of the body to send; < 0 until known
	sent     int64
	made     *atomic.Int64 // the gateway's count of bodies cut
}

func newCutWriter(w http.ResponseWriter, fraction float64, made *atomic.Int64) *cutWriter {
	return &cutWriter{ResponseWriter: w, fraction: fraction, limit: -1, made: made}
}

func (c *cutWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if c.status != http.StatusOK && c.status != http.StatusPartialContent {
		return c.ResponseWriter.Write(p)
	}
	if c.limit < 0 {
		n, err := strconv.ParseInt(c.Header().Get("Content-Length"), 10, 64)
		if err != nil || n <= 0 {
			c.status = -1 // no length to cut a share of: served whole
			return c.ResponseWriter.Write(p)
		}
		c.limit = int64(c.fraction * float64(n))
	}
	if c.sent+int64(len(p)) <= c.limit {
		n, err := c.ResponseWriter.Write(p)
		c.sent += int64(n)
		return n, err
	}
	n, err := c.ResponseWriter.Write(p[:c.limit-c.sent])
	c.sent += int64(n)
	if err != nil {
		return n, err // the reader has gone: nothing left to cut
	}
	// The headers and the share go out before the connection ends, through
	// any writer the gateway wrapped around the service's (a share still
	// in a buffer would be dropped, and the client, seeing no answer,
	// would retry: a milder fault than a body cut).
	_ = http.NewResponseController(c.ResponseWriter).Flush()
	c.made.Add(1)
	// net/http drops the connection without a log line.
	panic(http.ErrAbortHandler)
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (c *cutWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// Flush passes a flush through.
func (c *cutWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
