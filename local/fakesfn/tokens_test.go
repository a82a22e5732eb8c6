package fakesfn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/healthlake-cdc/healthlake-cdc/local/asl"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// startSFN serves a new Emulator behind a local gateway and returns it with
// a real SDK client pointed at it.
func startSFN(t *testing.T, opts Options) (*Emulator, *awssfn.Client, *localaws.Env) {
	t.Helper()
	env := startEnv(t)
	em, client := startSFNOn(t, env, opts)
	return em, client, env
}

func startEnv(t *testing.T) *localaws.Env {
	t.Helper()
	return localawstest.Start(t)
}

// startSFNOn serves a new Emulator on env and returns it with an SDK client.
func startSFNOn(t *testing.T, env *localaws.Env, opts Options) (*Emulator, *awssfn.Client) {
	t.Helper()
	if opts.Region == "" {
		opts.Region = env.Region
		opts.AccountID = env.AccountID
	}
	em := New(opts)
	t.Cleanup(em.Close)
	env.Gateway.Handle(localaws.ServiceSFN, em)
	return em, awssfn.NewFromConfig(env.Config())
}

func TestSendTaskSuccessRecordsOutputOnce(t *testing.T) {
	ctx := context.Background()
	em, client, _ := startSFN(t, Options{})
	tok := em.IssueTaskToken(0, 0)

	if _, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(tok), Output: aws.String(`{"fileCount":3}`)}); err != nil {
		t.Fatalf("SendTaskSuccess: %v", err)
	}
	got, ok := em.TaskOutcome(tok)
	if !ok || got.Status != asl.TokenSucceeded || got.Output != `{"fileCount":3}` {
		t.Fatalf("outcome = %+v, %v; want SUCCEEDED with the output", got, ok)
	}
	_, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(tok), Output: aws.String(`{}`)})
	var timedOut *types.TaskTimedOut
	if !errors.As(err, &timedOut) {
		t.Fatalf("second SendTaskSuccess error = %v, want *types.TaskTimedOut", err)
	}
}

func TestSendTaskFailureRecordsErrorAndCause(t *testing.T) {
	ctx := context.Background()
	em, client, _ := startSFN(t, Options{})
	tok := em.IssueTaskToken(time.Minute, time.Hour)
	if _, err := client.SendTaskFailure(ctx, &awssfn.SendTaskFailureInput{TaskToken: aws.String(tok), Error: aws.String("Export.Failed"), Cause: aws.String("job FAILED")}); err != nil {
		t.Fatalf("SendTaskFailure: %v", err)
	}
	got, _ := em.TaskOutcome(tok)
	if got.Status != asl.TokenFailed || got.Error != "Export.Failed" || got.Cause != "job FAILED" {
		t.Fatalf("outcome = %+v, want FAILED Export.Failed/job FAILED", got)
	}
	_, err := client.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(tok)})
	var timedOut *types.TaskTimedOut
	if !errors.As(err, &timedOut) {
		t.Fatalf("heartbeat after failure: error = %v, want *types.TaskTimedOut", err)
	}
	long := strings.Repeat("e", 257)
	_, err = client.SendTaskFailure(ctx, &awssfn.SendTaskFailureInput{TaskToken: aws.String(em.IssueTaskToken(0, 0)), Error: aws.String(long)})
	if err == nil || !strings.Contains(err.Error(), "ValidationException") {
		t.Fatalf("257-character error: %v, want ValidationException", err)
	}
}

func TestSendTaskHeartbeatCountsAndKeepsTokenAlive(t *testing.T) {
	ctx := context.Background()
	clock := asl.NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	em, client, _ := startSFN(t, Options{Clock: clock})
	tok := em.IssueTaskToken(10*time.Second, 0)
	for i := 0; i < 3; i++ {
		clock.Advance(9 * time.Second) // 27 s in all, never 10 s without a beat
		if _, err := client.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(tok)}); err != nil {
			t.Fatalf("heartbeat %d: %v", i, err)
		}
	}
	got, _ := em.TaskOutcome(tok)
	if got.Status != asl.TokenPending || got.Heartbeats != 3 {
		t.Fatalf("outcome = %+v, want PENDING with 3 heartbeats", got)
	}
}

func TestHeartbeatTimeoutAnswersTaskTimedOut(t *testing.T) {
	ctx := context.Background()
	clock := asl.NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	em, client, _ := startSFN(t, Options{Clock: clock})
	tok := em.IssueTaskToken(10*time.Second, time.Hour)
	clock.Advance(11 * time.Second)
	_, err := client.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(tok)})
	var timedOut *types.TaskTimedOut
	if !errors.As(err, &timedOut) {
		t.Fatalf("heartbeat after 11 s of silence: error = %v, want *types.TaskTimedOut", err)
	}
	got, _ := em.TaskOutcome(tok)
	if got.Status != asl.TokenTimedOut || got.Error != asl.ErrorHeartbeatTimeout {
		t.Fatalf("outcome = %+v, want TIMED_OUT States.HeartbeatTimeout", got)
	}
}

func TestTaskTimeoutAnswersTaskTimedOut(t *testing.T) {
	ctx := context.Background()
	clock := asl.NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC))
	em, client, _ := startSFN(t, Options{Clock: clock})
	tok := em.IssueTaskToken(0, time.Minute)
	clock.Advance(30 * time.Second)
	if _, err := client.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(tok)}); err != nil {
		t.Fatalf("heartbeat within the timeout: %v", err)
	}
	clock.Advance(31 * time.Second)
	_, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(tok), Output: aws.String(`{}`)})
	var timedOut *types.TaskTimedOut
	if !errors.As(err, &timedOut) {
		t.Fatalf("success after the timeout: error = %v, want *types.TaskTimedOut", err)
	}
	got, _ := em.TaskOutcome(tok)
	if got.Status != asl.TokenTimedOut || got.Error != asl.ErrorTimeout || got.Heartbeats != 1 {
		t.Fatalf("outcome = %+v, want TIMED_OUT States.Timeout after 1 heartbeat", got)
	}
}

func TestUnknownTokenAnswersTaskDoesNotExist(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startSFN(t, Options{})
	other := New(Options{})
	foreign := other.IssueTaskToken(0, 0) // well formed, never issued here
	_, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(foreign), Output: aws.String(`{}`)})
	var notExist *types.TaskDoesNotExist
	if !errors.As(err, &notExist) {
		t.Fatalf("error = %v, want *types.TaskDoesNotExist", err)
	}
}

func TestMalformedTokenAnswersInvalidToken(t *testing.T) {
	ctx := context.Background()
	_, client, _ := startSFN(t, Options{})
	for _, tok := range []string{"not-a-token", "AQ!!!!", "AQ" + strings.Repeat("A", 10)} {
		_, err := client.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(tok)})
		var invalid *types.InvalidToken
		if !errors.As(err, &invalid) {
			t.Fatalf("token %q: error = %v, want *types.InvalidToken", tok, err)
		}
	}
}

func TestBadOutputAnswersInvalidOutput(t *testing.T) {
	ctx := context.Background()
	em, client, _ := startSFN(t, Options{})
	tok := em.IssueTaskToken(0, 0)
	big := `"` + strings.Repeat("x", asl.MaxPayloadBytes) + `"`
	for name, out := range map[string]string{"not JSON": `{"a":`, "over 256 KiB": big} {
		_, err := client.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(tok), Output: aws.String(out)})
		var invalid *types.InvalidOutput
		if !errors.As(err, &invalid) {
			t.Fatalf("%s: error = %v, want *types.InvalidOutput", name, err)
		}
	}
	if got, _ := em.TaskOutcome(tok); got.Status != asl.TokenPending {
		t.Fatalf("rejected outputs changed the token: %+v", got)
	}
}
