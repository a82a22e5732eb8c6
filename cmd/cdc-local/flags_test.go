package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `cdc-local -h` (and `--help`, and `cdc-local fhir -h`) prints the flags
// and exits 0: asking for help is no usage error.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"fhir", "-h"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, nil, &stdout, &stderr); code != exitOK {
			t.Errorf("%v: exit %d, want 0\n%s", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String()+stderr.String(), "-endpoint") && args[0] == "fhir" {
			t.Errorf("%v printed no flags:\n%s%s", args, stdout.String(), stderr.String())
		}
		if args[0] != "fhir" && (!strings.Contains(stdout.String(), "-fault-rate") || stderr.Len() != 0) {
			t.Errorf("%v: the flags are not on stdout alone:\nstdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
		}
	}
	// A flag that does not exist is still a usage error.
	if code := run(context.Background(), []string{"--nope"}, nil, io.Discard, io.Discard); code != exitUsage {
		t.Errorf("--nope: exit %d, want %d", code, exitUsage)
	}
}

// docFlagRow is one row of docs/LOCAL.md's "## Flags" table.
type docFlagRow struct {
	name, def string
}

// docFlags reads the rows of the "## Flags" table of docs/LOCAL.md: the
// flag named in each row's first cell and the row's default cell.
func docFlags(t *testing.T) []docFlagRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "LOCAL.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n## Flags\n")
	if i < 0 {
		t.Fatal("docs/LOCAL.md has no \"## Flags\" section")
	}
	section := text[i+len("\n## Flags\n"):]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	nameRE := regexp.MustCompile("^`(--?[a-z][a-z0-9-]*)")
	var rows []docFlagRow
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `-") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.ReplaceAll(line, `\|`, "\x00"), "| "), "|")
		if len(cells) < 3 {
			t.Fatalf("flag row with %d cells: %s", len(cells), line)
		}
		first := strings.TrimSpace(cells[0])
		m := nameRE.FindStringSubmatch(first)
		if m == nil {
			t.Fatalf("flag row whose first cell names no flag: %s", line)
		}
		if strings.Count(first, "`-") != 1 || strings.Count(first, " --") > 0 {
			t.Errorf("row names more than one flag (one row per flag): %s", first)
		}
		rows = append(rows, docFlagRow{name: strings.TrimLeft(m[1], "-"), def: strings.TrimSpace(cells[1])})
	}
	return rows
}

// docs/LOCAL.md's "## Flags" table describes every flag of cdc-local
// exactly once, and nothing else, with the flag's real default.
func TestFlagsSectionOfLocalMDMatchesTheFlagSet(t *testing.T) {
	var c config
	fs := newFlagSet(&c, io.Discard)
	rows := docFlags(t)
	seen := map[string]int{}
	codeRE := regexp.MustCompile("`([^`]*)`")
	for _, r := range rows {
		seen[r.name]++
		f := fs.Lookup(r.name)
		if f == nil {
			t.Errorf("docs/LOCAL.md describes --%s, which cdc-local does not have", r.name)
			continue
		}
		m := codeRE.FindStringSubmatch(r.def)
		switch {
		case r.def == "":
			if !zeroDefault(f.DefValue) {
				t.Errorf("--%s: the doc gives no default, the flag's is %q", r.name, f.DefValue)
			}
		case m != nil:
			if !sameDefault(m[1], f.DefValue) {
				t.Errorf("--%s: the doc's default is %q, the flag's %q", r.name, m[1], f.DefValue)
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		switch n := seen[f.Name]; {
		case n == 0:
			t.Errorf("docs/LOCAL.md's \"## Flags\" does not describe --%s", f.Name)
		case n > 1:
			t.Errorf("docs/LOCAL.md's \"## Flags\" describes --%s %d times", f.Name, n)
		}
	})
}

func zeroDefault(v string) bool {
	return v == "" || v == "false" || v == "0" || v == "0s"
}

// sameDefault compares a documented default with a flag's DefValue,
// durations by value ("5m" is "5m0s").
func sameDefault(doc, def string) bool {
	if doc == def {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(def)
	return errA == nil && errB == nil && a == b
}

// honouredBySimulate are the flags --simulate acts on.
var honouredBySimulate = map[string]bool{"simulate": true, "workload": true, "report": true, "scale": true, "latency": true, "v": true}

// A flag --simulate does not honour is refused (exit 2) with what to use
// instead, before anything runs; --fault-rate points to the workload's
// outages.
func TestSimulateRefusesFlagsItDoesNotHonour(t *testing.T) {
	wl := filepath.Join("..", "..", "testdata", "workloads", "steady.json")
	// Cancelled: a flag not refused must not start a simulation here.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A value other than the default for every flag of the set.
	values := map[string]string{
		"addr": "127.0.0.1:0", "seed": t.TempDir(), "sample": "5", "every": "1m", "reconcile-every": "1h", "once": "true",
		"sink": "file:" + filepath.Join(t.TempDir(), "e"), "safety-lag": "1s", "fault-rate": "0.2", "fault-seed": "3",
		"state": t.TempDir(), "export-delay": "1s", "export-startup": "1s", "export-per-mb": "1s",
		"export-visibility-lag": "1s", "history-lag": "1s", "iam": "off", "fast-path": "true", "fast-path-payload": "id-only",
		"healthlake-quotas": "legacy", "datastore-key": "arn:aws:kms:us-east-1:000000000000:key/k",
	}
	var c config
	newFlagSet(&c, io.Discard).VisitAll(func(f *flag.Flag) {
		if honouredBySimulate[f.Name] {
			return
		}
		v, ok := values[f.Name]
		if !ok {
			t.Errorf("--%s: does --simulate honour it? Add it to honouredBySimulate or give it a value here", f.Name)
			return
		}
		var stderr bytes.Buffer
		args := []string{"--simulate", "1h", "--workload", wl, "--" + f.Name + "=" + v}
		if code := run(ctx, args, nil, io.Discard, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (refused)\n%s", args, code, exitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--"+f.Name+" is not honoured by --simulate") || !strings.Contains(stderr.String(), "docs/SIMULATION.md") {
			t.Errorf("%v: stderr does not say why and where to look:\n%s", args, stderr.String())
		}
	})
	var stderr bytes.Buffer
	run(ctx, []string{"--simulate", "1h", "--workload", wl, "--fault-rate", "0.2"}, nil, io.Discard, &stderr)
	if !strings.Contains(stderr.String(), "outages") {
		t.Errorf("--fault-rate with --simulate does not point to the workload's outages:\n%s", stderr.String())
	}
	stderr.Reset()
	run(ctx, []string{"--simulate", "1h", "--workload", wl, "--fast-path"}, nil, io.Discard, &stderr)
	if !strings.Contains(stderr.String(), "the workload's fastPath section") {
		t.Errorf("--fast-path with --simulate does not point to the workload's fastPath section:\n%s", stderr.String())
	}
}

// Flags that only --simulate reads, or that --once ignores, are refused
// without it / with it.
func TestFlagsIgnoredInAModeAreRefused(t *testing.T) {
	// Cancelled: a flag not refused must not start a stack here.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "127.0.0.1:0", "--scale", "0.1"}, "--scale needs --simulate"},
		{[]string{"--addr", "127.0.0.1:0", "--once", "--every", "1m"}, "--every is not honoured by --once"},
		{[]string{"--addr", "127.0.0.1:0", "--once", "--reconcile-every", "1h"}, "--reconcile-every is not honoured by --once"},
	} {
		var stderr bytes.Buffer
		if code := run(ctx, c.args, nil, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}
