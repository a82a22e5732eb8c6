package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runctl"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakesfn/sfntest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestWiringServesTheActionsAgainstLocalAWS(t *testing.T) {
	env := localawstest.Start(t)
	runs := sfntest.Start(t, env)
	if err := runlock.CreateTable(context.Background(), dynamodb.NewFromConfig(env.Config()), "cdc-wiring"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_REGION", env.Region)
	t.Setenv("AWS_ENDPOINT_URL", env.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", localaws.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", localaws.SecretAccessKey)
	vars := map[string]string{
		"CDC_TABLE": "cdc-wiring", "CDC_DATASTORE_ID": "ds1",
		"CDC_INITIAL_CHECKPOINT": "2026-11-20T00:00:00Z", "CDC_MAX_WINDOW": "1h",
	}
	h, err := newHandler(context.Background(), func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		t.Fatalf("newHandler: %v", err)
	}
	arn := env.ARN("states", "execution:cdc:run-1")
	runs.Set(t, arn, "RUNNING")
	invoke := lambda.NewHandler(h.Handle)
	out, err := invoke.Invoke(context.Background(), []byte(`{"action":"acquire","executionId":"`+arn+`","executionName":"run-1","startTime":"2026-11-21T10:00:00.000Z"}`))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	var a struct {
		Acquired bool
		Window   struct{ Since, Until string }
	}
	if err := json.Unmarshal(out, &a); err != nil || !a.Acquired || a.Window.Since != "2026-11-20T00:00:00.000Z" || a.Window.Until != "2026-11-20T01:00:00.000Z" {
		t.Fatalf("acquire output %s (%v)", out, err)
	}
	// A second execution is refused after asking Step Functions about the owner.
	arn2 := env.ARN("states", "execution:cdc:run-2")
	runs.Set(t, arn2, "RUNNING")
	out, err = invoke.Invoke(context.Background(), []byte(`{"action":"acquire","executionId":"`+arn2+`","executionName":"run-2"}`))
	if err != nil || !strings.Contains(string(out), `"acquired":false`) {
		t.Fatalf("second acquire = %s, %v", out, err)
	}
	if env.Gateway.Calls()["states:DescribeExecution"] == 0 {
		t.Fatalf("the owner was not checked through Step Functions")
	}
	out, err = invoke.Invoke(context.Background(), []byte(`{"action":"commit","executionId":"`+arn+`","executionName":"run-1","results":null}`))
	if err != nil || !strings.Contains(string(out), `"checkpoint":"2026-11-20T01:00:00.000Z"`) {
		t.Fatalf("commit = %s, %v", out, err)
	}
}

func TestWiringRefusesAMissingTable(t *testing.T) {
	t.Setenv("AWS_REGION", "us-east-1")
	_, err := newHandler(context.Background(), func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "CDC_TABLE") {
		t.Fatalf("err = %v, want one naming CDC_TABLE", err)
	}
}

// newHandler is what main hands lambdart.Start: the deployed runtime and
// runctl.NewFromEnv over getenv.
func newHandler(ctx context.Context, getenv func(string) string) (*runctl.Handler, error) {
	rt, err := lambdart.FromLambda(ctx, "run-lock")
	if err != nil {
		return nil, err
	}
	return runctl.NewFromEnv(getenv, rt)
}
