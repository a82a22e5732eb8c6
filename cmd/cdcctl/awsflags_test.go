package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn/sfntest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

var ctlTableSeq atomic.Int64

// ctlStack is a local stack for the AWS-facing subcommands: DynamoDB
// (minidyn) with a fresh table, the Step Functions emulator holding the
// executions the test arranges (local/fakesfn/sfntest), and a store over the
// same table to arrange and check the RUN record.
type ctlStack struct {
	env   *localaws.Env
	sfn   *sfntest.Runs
	table string
	store *runlock.Store
}

func newCtlStack(t *testing.T) *ctlStack {
	t.Helper()
	env := localawstest.Start(t)
	runs := sfntest.Start(t, env)
	db := dynamodb.NewFromConfig(env.Config())
	table := fmt.Sprintf("cdcctl-%d", ctlTableSeq.Add(1))
	if err := runlock.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	// Isolate from a developer's AWS setup; sign like the local clients.
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ACCESS_KEY_ID", localaws.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", localaws.SecretAccessKey)
	t.Setenv("AWS_REGION", env.Region)
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv(envTable, "")
	t.Setenv(envStateMachineARN, "")
	t.Setenv(envActor, "tester")
	store, err := runlock.New(db, runlock.Config{Table: table, InitialCheckpoint: time.Now().Add(-time.Hour),
		Owners: runlock.SFNOwnerChecker{Client: sfn.NewFromConfig(env.Config())}})
	if err != nil {
		t.Fatal(err)
	}
	return &ctlStack{env: env, sfn: runs, table: table, store: store}
}

// acquire takes the lock for a RUNNING execution named name.
func (s *ctlStack) acquire(t *testing.T, name string) (string, runlock.Acquisition) {
	t.Helper()
	arn := s.env.ARN("states", "execution:cdc:"+name)
	s.sfn.Set(t, arn, "RUNNING")
	a, err := s.store.Acquire(context.Background(), runlock.AcquireRequest{Owner: arn, RunID: name})
	if err != nil || !a.Acquired {
		t.Fatalf("acquire %s: %+v, %v", name, a, err)
	}
	return arn, a
}

// cdcctl runs the CLI with the stack's endpoint and table.
func (s *ctlStack) cdcctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	full := append([]string{args[0], "--endpoint", s.env.URL, "--table", s.table}, args[1:]...)
	var out, errb bytes.Buffer
	code := run(context.Background(), full, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, s)
	}
}

func TestAWSFlagsDefaultFromTheEnvironment(t *testing.T) {
	s := newCtlStack(t)
	t.Setenv(envTable, s.table)
	t.Setenv("AWS_ENDPOINT_URL", s.env.URL)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"status", "--json"}, strings.NewReader(""), &out, &errb); code != exitOK {
		t.Fatalf("status with env defaults: exit %d: %s", code, errb.String())
	}
	var v statusView
	decodeJSON(t, out.String(), &v)
	if v.Table != s.table || v.Exists {
		t.Fatalf("status = %+v, want table %s without a record", v, s.table)
	}
}

func TestMissingTableSaysWhatToDo(t *testing.T) {
	s := newCtlStack(t)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"status", "--endpoint", s.env.URL}, strings.NewReader(""), &out, &errb)
	if code != exitFailure || !strings.Contains(errb.String(), "--table") || !strings.Contains(errb.String(), "CDC_TABLE") {
		t.Fatalf("exit %d, stderr %q; want a failure naming --table and CDC_TABLE", code, errb.String())
	}
	code, _, stderr := s.cdcctl(t, "status", "--table", "no-such-table")
	if code != exitFailure || !strings.Contains(stderr, "not found") || !strings.Contains(stderr, "--region") {
		t.Fatalf("unknown table: exit %d, stderr %q", code, stderr)
	}
}
