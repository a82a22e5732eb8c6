package loggingtest

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferKeepsEveryConcurrentWrite: lines written from many goroutines
// while the buffer is read all end up in it, whole.
func TestBufferKeepsEveryConcurrentWrite(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
