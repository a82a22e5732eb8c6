package localaws

import "testing"

// StartTest starts an Env on a free loopback port and closes it when the test ends.
func StartTest(t testing.TB) *Env {
	t.Helper()
	env, err := Start(Options{})
	if err != nil {
		t.Fatalf("start local AWS: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}
