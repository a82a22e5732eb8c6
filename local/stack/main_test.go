package stack

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// parallelStacks is how many of the package's parallel tests run at once
// unless -test.parallel says otherwise. Each starts a stack and mostly
// waits on it (the package's tests use about a third of one core), so four
// at a time take less than half as long as the default of one per core on a
// 2-core machine, and end `make test` sooner: this package is its last.
const parallelStacks = 4

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelStacks))
	}
	os.Exit(m.Run())
}
