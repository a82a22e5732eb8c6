package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --simulate and --workload go together, and a bad workload is refused with
// its reason before anything runs.
func TestSimulateFlagsAreCheckedBeforeRunning(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"name":"x","streams":[{"resourceType":"Spaceship","createsPerDay":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workload", "x.json"}, "--workload needs --simulate"},
		{[]string{"--simulate", "1h"}, "--simulate needs --workload"},
		{[]string{"--simulate", "1h", "--workload", bad}, "Spaceship"},
		{[]string{"--simulate", "-1h", "--workload", bad}, "must not be negative"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), c.args, nil, io.Discard, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", c.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: stderr %q does not say %q", c.args, stderr.String(), c.want)
		}
	}
}
