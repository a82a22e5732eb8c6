package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/logging/loggingtest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
	"github.com/healthlake-cdc/healthlake-cdc/local/lambdas/lambdastest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

func waitForText(t *testing.T, b *loggingtest.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q:\n%s", want, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// A window started by hand (`aws stepfunctions start-execution`, `cdcctl
// run`) gets the same "window … committed …" line as a scheduled one, and
// a reconciliation started by hand (`cdcctl reconcile`) its own line with
// its outcome and counts.
func TestWindowsStartedByHandAreLoggedLikeScheduledOnes(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr loggingtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--addr", addr, "--sample", "2", "--every", "1h", "--reconcile-every", "-1s", "--latency", "off",
			"--sink", "file:" + t.TempDir() + "/events.ndjson"}, nil, &loggingtest.Buffer{}, &stderr)
	}()
	waitForText(t, &stderr, "cdc-local: window local-")
	cfg := localaws.Env{URL: "http://" + addr, Region: localaws.DefaultRegion}
	awsCfg := cfg.Config()
	sfnc := sfnapi.NewFromConfig(awsCfg)
	sm := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", localaws.DefaultRegion, localaws.DefaultAccount, stack.DefaultName)
	if _, err := sfnc.StartExecution(ctx, &sfnapi.StartExecutionInput{StateMachineArn: aws.String(sm), Name: aws.String("manual-by-hand")}); err != nil {
		t.Fatal(err)
	}
	waitForText(t, &stderr, "cdc-local: window manual-by-hand ")
	line := lineWith(stderr.String(), "cdc-local: window manual-by-hand ")
	if !strings.Contains(line, " empty (") && !strings.Contains(line, " committed (") {
		t.Errorf("the window started by hand is not logged like a scheduled one: %q", line)
	}
	if _, err := sfnc.StartExecution(ctx, &sfnapi.StartExecutionInput{StateMachineArn: aws.String(sm + "-reconcile"), Name: aws.String("reconcile-by-hand")}); err != nil {
		t.Fatal(err)
	}
	waitForText(t, &stderr, "cdc-local: reconciliation reconcile-by-hand ")
	if line := lineWith(stderr.String(), "cdc-local: reconciliation reconcile-by-hand "); !strings.Contains(line, "SUCCEEDED") || !strings.Contains(line, "deletes") || !strings.Contains(line, "repairs") {
		t.Errorf("reconciliation line %q lacks its outcome and counts", line)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
}

func lineWith(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, prefix) {
			return l
		}
	}
	return ""
}

// Under faults the window's line says what its run record (and so
// `cdcctl status`) says: a run that committed before its execution failed
// is committed, and the line adds that the execution failed afterwards.
func TestWindowLineSaysWhatTheRunRecordSays(t *testing.T) {
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Name: fmt.Sprintf("wlog-%d", time.Now().UnixNano()%1e9), SampleSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	// The commit (run-lock's second invocation) crashes after its side
	// effects, and so do the state machine's two retries of it.
	st.Lambdas.SetFaults(&lambdastest.Crash{Function: stack.FnRunLock, From: 2, Times: 3, After: true})
	w, err := st.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printWindow(&b, w)
	line := b.String()
	if !strings.Contains(line, "window "+w.RunID+" committed (") || !strings.Contains(line, "execution ended FAILED after the run committed") {
		t.Errorf("line %q: want committed, and that the execution then failed", line)
	}
}

// A window that published deletes says how many of its events were deletes
// (its run record's count, as `cdcctl status` shows it).
func TestWindowLineCountsTheDeletes(t *testing.T) {
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Name: fmt.Sprintf("wdel-%d", time.Now().UnixNano()%1e9), SampleSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.PutResource(ctx, "Patient", "brief", []byte(`{"resourceType":"Patient","id":"brief"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := st.FHIR(ctx, http.MethodDelete, "Patient/brief", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	time.Sleep(5 * time.Millisecond)
	w, err := st.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printWindow(&b, w)
	if line := b.String(); w.Deletes != 1 || !strings.Contains(line, ": 1 events (1 deletes) in ") {
		t.Errorf("line %q (deletes %d): want the window's one event counted as a delete", line, w.Deletes)
	}
}

// A finished reconciliation's line says what it checked beside what it
// found, as `cdcctl status` does.
func TestReconciliationLineSaysWhatItChecked(t *testing.T) {
	r := stack.Reconciliation{RunID: "reconcile-1", Status: "SUCCEEDED", Last: &reconcile.LastRun{RunID: "reconcile-1",
		Counts: reconcile.Result{Stats: reconcile.Stats{Store: 24, Deletes: 1, Pending: 2}, HardDeletes: 1, DeliveredLive: 60}}}
	var b bytes.Buffer
	printReconciliation(&b, r, nil)
	if want := ": 60 delivered versions checked, 1 deletes (1 hard), 0 repairs, 0 unconfirmed, 24 resources listed, 2 pending\n"; !strings.HasSuffix(b.String(), want) {
		t.Errorf("line %q, want it to end %q", b.String(), want)
	}
}
