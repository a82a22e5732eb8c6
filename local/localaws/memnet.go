package localaws

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// MemHost is the host name of an in-memory Env's URL; nothing resolves it,
// the Env's own transport dials the gateway directly.
const MemHost = "localaws.mem:4566"

// memListener is a net.Listener whose connections come from dial: each is
// one end of a net.Pipe, so no goroutine ever waits on the network (which
// matters under testing/synctest, where only goroutines blocked on
// channels, timers and the like let the fake clock advance).
type memListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	// open are the client ends dialled so far: Close closes them, so no
	// keep-alive connection (its transport's read loop and the server's)
	// outlives the gateway — under synctest a bubble may not end with one.
	mu   sync.Mutex
	open []net.Conn
}

func newMemListener() *memListener {
	return &memListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next dialled connection.
func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and further dials and closes every dialled pipe.
func (l *memListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	l.mu.Lock()
	open := l.open
	l.open = nil
	l.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
	}
	return nil
}

// Addr names the listener.
func (l *memListener) Addr() net.Addr { return memAddr{} }

// dial hands the server one end of a new pipe and returns the other.
func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		l.mu.Lock()
		l.open = append(l.open, client)
		l.mu.Unlock()
		return client, nil
	case <-l.closed:
		_ = client.Close()
		_ = server.Close()
		return nil, errors.New("localaws: in-memory gateway closed")
	case <-ctx.Done():
		_ = client.Close()
		_ = server.Close()
		return nil, ctx.Err()
	}
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return MemHost }

// InMemory reports whether the Env serves over in-memory pipes (Options.InMemory).
func (e *Env) InMemory() bool { return e.mem != nil }

// HTTPClient returns an HTTP client that reaches this Env: over loopback
// TCP, or through in-memory pipes when the Env is in memory. Every client
// of an in-memory Env must use it (or Config, which does).
func (e *Env) HTTPClient() *http.Client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	if e.mem != nil {
		tr.DialContext = e.mem.dial
	}
	return &http.Client{Timeout: ClientTimeout, Transport: tr}
}
