package main

import (
	"regexp"
	"testing"
)

// The first run of a fresh deployment publishes the whole store by default.
func TestInitialCheckpointDefaultsToSnapshot(t *testing.T) {
	if d := path(parameters(), ParamInitialCheckpoint, "Default"); d != "snapshot" {
		t.Fatalf("%s default = %v, want snapshot", ParamInitialCheckpoint, d)
	}
	pattern, _ := path(parameters(), ParamInitialCheckpoint, "AllowedPattern").(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("AllowedPattern %q: %v", pattern, err)
	}
	for v, ok := range map[string]bool{"snapshot": true, "now": true, "2026-11-01T00:00:00Z": true, "": true, "yesterday": false, "Snapshot": false} {
		if re.MatchString(v) != ok {
			t.Errorf("AllowedPattern %q matches %q = %v, want %v", pattern, v, !ok, ok)
		}
	}
}
