package sim

import (
	"flag"
	"fmt"
	"io"
	"time"
)

var flagProgress = flag.Duration("progress", 0, "TestSimulate: print the simulation's progress to stderr every this much wall time (0: never)")

// showProgress prints p to w every `every` of wall time, from outside the
// simulation's bubble, until the returned stop is called.
func showProgress(w io.Writer, p *Progress, every time.Duration) (stop func()) {
	began := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(w, "progress: "+p.Line(time.Since(began)))
			}
		}
	}()
	return func() { close(done); <-finished }
}
