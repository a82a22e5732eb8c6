package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

func TestFlagsDefaultsAndValidation(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.addr != "127.0.0.1:4566" || c.every != 5*time.Minute || c.sink != "stdout" || c.safetyLag != 0 || c.once || c.iam != "on" || c.historyLag != stack.DefaultHistoryLag {
		t.Errorf("defaults = %+v", c)
	}
	if c.latencyModel.Off || c.latencyModel.Lookup("s3", "GetObject") != localaws.DefaultLatency().Lookup("s3", "GetObject") {
		t.Errorf("the latency model is not on by default: %+v", c.latencyModel.Off)
	}
	if c, err := parseFlags([]string{"--latency", "off"}, io.Discard); err != nil || !c.latencyModel.Off {
		t.Errorf("--latency off: %v, %v", c.latencyModel.Off, err)
	}
	c, err = parseFlags([]string{"--once", "--seed", "dir", "--every", "2s", "--sink", "file:/tmp/x", "--fault-rate", "0.2", "--fault-seed", "9", "--report", "r.json", "--state", "st", "--safety-lag", "1s", "--reconcile-every", "6h"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.once || c.seed != "dir" || c.every != 2*time.Second || c.faultRate != 0.2 || c.faultSeed != 9 || c.report != "r.json" || c.state != "st" || c.safetyLag != time.Second || c.reconcileEvery != 6*time.Hour {
		t.Errorf("parsed = %+v", c)
	}
	for _, bad := range [][]string{{"--every", "0s"}, {"--fault-rate", "2"}, {"--safety-lag", "-1s"}, {"--history-lag", "-1s"}, {"extra"}, {"--nope"}, {"--iam", "maybe"}, {"--healthlake-quotas", "old"}, {"--latency", filepath.Join(t.TempDir(), "none.json")}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--sink", "ftp://x"}, nil, io.Discard, &stderr); code != exitUsage {
		t.Errorf("bad sink exit = %d", code)
	}
}

func TestFHIRSubcommandSignsRequestsTheEmulatorAccepts(t *testing.T) {
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"local"}}))
	ctx := context.Background()
	body := `{"resourceType":"Patient","id":"p1","name":[{"family":"Doe"}]}`

	var out, errb bytes.Buffer
	if code := run(ctx, []string{"fhir", "PUT", "Patient/p1", "--endpoint", env.URL}, strings.NewReader(body), &out, &errb); code != exitOK {
		t.Fatalf("PUT exit %d: %s %s", code, out.String(), errb.String())
	}
	out.Reset()
	if code := run(ctx, []string{"fhir", "GET", "Patient/p1", "--endpoint", env.URL}, nil, &out, &errb); code != exitOK {
		t.Fatalf("GET exit %d: %s", code, errb.String())
	}
	var got struct {
		ID   string `json:"id"`
		Meta struct {
			VersionID string `json:"versionId"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.ID != "p1" || got.Meta.VersionID != "1" {
		t.Fatalf("GET returned %s (%v)", out.String(), err)
	}
	// A missing resource is a failure exit.
	if code := run(ctx, []string{"fhir", "GET", "Patient/none", "--endpoint", env.URL}, nil, io.Discard, io.Discard); code != exitFailed {
		t.Errorf("GET of a missing resource exit = %d", code)
	}
	if code := run(ctx, []string{"fhir", "GET"}, nil, io.Discard, io.Discard); code != exitUsage {
		t.Errorf("usage exit = %d", code)
	}
}

// The banner documents a curl line; it must really work against the
// emulator's SigV4 check.
func TestBannerCurlLineIsAccepted(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed")
	}
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"local"}}))
	body := `{"resourceType":"Patient","id":"c1","name":[{"family":"Curl"}]}`
	cmd := exec.Command(curl, "-sS", "-f", "--aws-sigv4", "aws:amz:"+env.Region+":healthlake",
		"--user", localaws.AccessKeyID+":"+localaws.SecretAccessKey,
		"-X", "PUT", "-H", "Content-Type: application/fhir+json", "--data", body,
		env.URL+"/datastore/local/r4/Patient/c1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	if !strings.Contains(string(out), `"c1"`) {
		t.Errorf("curl response %s", out)
	}
}

func TestOnceSeedsRunsOneWindowAndExitsZero(t *testing.T) {
	dir := t.TempDir()
	events := filepath.Join(dir, "events.ndjson")
	reportPath := filepath.Join(dir, "report.json")
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--once", "--addr", "127.0.0.1:0", "--sample", "12",
		"--sink", "file:" + events, "--report", reportPath}, nil, io.Discard, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d event lines, want 12", len(lines))
	}
	var ev map[string]json.RawMessage
	if err := json.Unmarshal([]byte(lines[0]), &ev); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "id", "detail-type", "source", "account", "time", "region", "resources", "detail"} {
		if _, ok := ev[k]; !ok {
			t.Errorf("event line lacks %q", k)
		}
	}
	rb, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		WindowsRun           int              `json:"windowsRun"`
		Events               int              `json:"events"`
		MaxConcurrentExports int              `json:"maxConcurrentExports"`
		Calls                map[string]int64 `json:"calls"`
		LambdaSeconds        map[string]struct {
			Max         float64 `json:"max"`
			Timeout     float64 `json:"timeout"`
			Invocations int     `json:"invocations"`
		} `json:"lambdaSeconds"`
	}
	if err := json.Unmarshal(rb, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.WindowsRun != 1 || rep.Events != 12 || rep.MaxConcurrentExports != 1 || rep.Calls["events:PutEvents"] == 0 {
		t.Errorf("report %s", rb)
	}
	// The latency model is on: prepare-change's run took at least its
	// calls' modelled latencies, and the report gives it with its timeout.
	if pc := rep.LambdaSeconds["prepare-change"]; pc.Invocations == 0 || pc.Max < 0.01 || pc.Timeout != 240 {
		t.Errorf("lambdaSeconds[prepare-change] = %+v", pc)
	}
	if !strings.Contains(stderr.String(), "cdc-local: lambda prepare-change: max") {
		t.Errorf("stderr does not list the slowest functions: %s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "committed") {
		t.Errorf("stderr does not report the window: %s", stderr.String())
	}
}
