package main

import (
	"bytes"
	"context"
	"io"
	"slices"
	"testing"
)

func TestHoistGlobalFlags(t *testing.T) {
	cases := []struct{ in, want []string }{
		{[]string{"--region", "eu-west-1", "status", "--json"}, []string{"status", "--region", "eu-west-1", "--json"}},
		{[]string{"--endpoint=http://x", "-json", "replay", "--since", "t"}, []string{"replay", "--endpoint=http://x", "-json", "--since", "t"}},
		{[]string{"--table", "t", "--state-machine-arn", "a", "run"}, []string{"run", "--table", "t", "--state-machine-arn", "a"}},
		{[]string{"status", "--region", "r"}, []string{"status", "--region", "r"}},
		{[]string{"-h"}, []string{"-h"}},
		{[]string{"--unknown", "status"}, []string{"--unknown", "status"}},
		{[]string{"--region"}, []string{"--region"}},
		{[]string{"--json"}, []string{"--json"}},
	}
	for _, c := range cases {
		if got := hoistGlobalFlags(c.in); !slices.Equal(got, c.want) {
			t.Errorf("hoistGlobalFlags(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A global flag before the command reaches the command's flag set.
func TestRunAcceptsGlobalFlagsBeforeTheCommand(t *testing.T) {
	var got []string
	register("test-echo", command{summary: "test", run: func(_ context.Context, args []string, _ io.Reader, _, _ io.Writer) int {
		got = args
		return exitOK
	}})
	defer delete(commands, "test-echo")
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--region", "eu-west-1", "test-echo", "--json"}, nil, io.Discard, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := []string{"--region", "eu-west-1", "--json"}; !slices.Equal(got, want) {
		t.Errorf("command got %q, want %q", got, want)
	}
}
