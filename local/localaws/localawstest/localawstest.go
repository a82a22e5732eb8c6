// Package localawstest starts the local AWS endpoint for tests (the way
// net/http/httptest serves net/http), so that packages built into
// cdc-local do not link the testing package.
package localawstest

import (
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Start starts a localaws.Env on a free loopback port and closes it when
// the test ends.
func Start(t testing.TB) *localaws.Env {
	t.Helper()
	env, err := localaws.Start(localaws.Options{})
	if err != nil {
		t.Fatalf("start local AWS: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}
