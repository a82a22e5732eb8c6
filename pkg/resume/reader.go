// Package resume reads one object over as many requests as it takes: when
// the connection ends part way through a body, the reader opens the object
// again at the first byte it has not returned, and the caller sees one
// unbroken stream.
//
// A long read needs it. prepare-change reads an export object at the pace it
// publishes, for minutes; an S3 connection that ends early ("unexpected EOF",
// a reset) is not retried by the SDK, whose retries end when the response
// headers arrive, and before this package such a read failed its whole
// batch, which Step Functions then ran again from its first line.
package resume

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// Opener opens the object at offset (bytes from where the first body
// began) and returns its body and the version it serves (an ETag). A
// caller's Opener asks for that version only (S3's If-Match) where the
// store supports it; the Reader checks it either way.
type Opener func(ctx context.Context, offset int64) (body io.ReadCloser, version string, err error)

// DefaultMaxStalls is how many reopened bodies in a row may end before
// returning a byte, before the Reader gives up.
const DefaultMaxStalls = 3

// Options tune a Reader; the zero value is usable.
type Options struct {
	// MaxStalls bounds the reopened bodies in a row that end before
	// returning a byte (DefaultMaxStalls when ≤ 0). A body that returns
	// bytes resets the count, so a long read may resume any number of
	// times while it makes progress.
	MaxStalls int
	// Base and Max bound the wait before each reopen (exponential, from
	// 100 ms to 2 s when zero).
	Base, Max time.Duration
}

// Reader is an io.ReadCloser over an object read in one or more requests.
// It is not safe for concurrent use.
type Reader struct {
	ctx     context.Context
	open    Opener
	opts    Options
	body    io.ReadCloser
	version string
	offset  int64 // bytes returned so far
	stalls  int   // reopened bodies in a row that returned no byte
	resumed int64
	err     error // sticky: set once the Reader has given up
}

// New returns a Reader over body, the first response's (version is what it
// serves), reopening with open from where a failed body stopped.
func New(ctx context.Context, body io.ReadCloser, version string, open Opener, opts Options) *Reader {
	if opts.MaxStalls <= 0 {
		opts.MaxStalls = DefaultMaxStalls
	}
	if opts.Base <= 0 {
		opts.Base = 100 * time.Millisecond
	}
	if opts.Max <= 0 {
		opts.Max = 2 * time.Second
	}
	return &Reader{ctx: ctx, open: open, opts: opts, body: body, version: version}
}

// ChangedError: the object served on a reopen is not the version the read
// began with. Its bytes cannot continue the stream.
type ChangedError struct {
	Offset         int64
	Before, Served string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("resume at byte %d: the object changed (version %s, now %s)", e.Offset, e.Before, e.Served)
}

// Read reads from the current body; when that body fails, it reopens the
// object at the next byte and goes on. It returns an error when the
// context ends, when a reopen fails (the Opener's request has its own
// retries), when the object has changed, or after MaxStalls reopened
// bodies in a row ended without a byte — wrapping the read error that
// started it.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for {
		n, err := r.body.Read(p)
		r.offset += int64(n)
		if n > 0 {
			r.stalls = 0
		}
		if err == nil || err == io.EOF {
			return n, err
		}
		if cerr := r.ctx.Err(); cerr != nil {
			r.err = fmt.Errorf("read at byte %d: %w", r.offset, err)
			return n, r.err
		}
		if rerr := r.reopen(err); rerr != nil {
			r.err = rerr
			return n, rerr
		}
		if n > 0 {
			return n, nil
		}
	}
}

// reopen replaces the failed body with one from r.offset.
func (r *Reader) reopen(cause error) error {
	_ = r.body.Close()
	r.body = io.NopCloser(eofReader{})
	if r.stalls >= r.opts.MaxStalls {
		return fmt.Errorf("read at byte %d: %d reopened bodies in a row ended without a byte: %w", r.offset, r.stalls, cause)
	}
	r.stalls++
	if err := backoff.Sleep(r.ctx, backoff.Ceiling(r.opts.Base, r.opts.Max, r.stalls)); err != nil {
		return fmt.Errorf("read at byte %d: %w (then %v)", r.offset, cause, err)
	}
	body, version, err := r.open(r.ctx, r.offset)
	if err != nil {
		return fmt.Errorf("read at byte %d: %w; reopening: %w", r.offset, cause, err)
	}
	if version != r.version {
		_ = body.Close()
		return &ChangedError{Offset: r.offset, Before: r.version, Served: version}
	}
	r.body = body
	r.resumed++
	return nil
}

// Close closes the current body.
func (r *Reader) Close() error { return r.body.Close() }

// Resumed returns how many times the Reader reopened the object.
func (r *Reader) Resumed() int64 { return r.resumed }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
