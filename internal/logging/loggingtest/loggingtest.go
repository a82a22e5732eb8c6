// Package loggingtest holds what tests need to read what the pipeline logs.
package loggingtest

import (
	"bytes"
	"sync"
)

// Buffer is a log sink safe for concurrent writers and readers: a logger's
// goroutines write to it while the test reads what it holds so far.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
