package statemachine

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testValues are realistic substitutions for tests.
func testValues() map[string]string {
	return map[string]string{
		RunLockFunctionArn:       "arn:aws:lambda:us-east-1:000000000000:function:run-lock",
		PrepareChangeFunctionArn: "arn:aws:lambda:us-east-1:000000000000:function:prepare-change",
		StartQueueURL:            "https://sqs.us-east-1.amazonaws.com/000000000000/healthlake-cdc-start",
		ArtifactBucket:           "healthlake-cdc-artifacts",
		ExportHeartbeatSeconds:   "900",
		ExportTimeoutSeconds:     "21600",
		MapMaxConcurrency:        "10",
		RunTimeoutSeconds:        "90000",
	}
}

func TestPlaceholdersAreTheDocumentedOnes(t *testing.T) {
	got := strings.Join(Placeholders(), ",")
	want := "ArtifactBucket,ExportHeartbeatSeconds,ExportTimeoutSeconds,MapMaxConcurrency,PrepareChangeFunctionArn,RunLockFunctionArn,RunTimeoutSeconds,StartQueueUrl"
	if got != want {
		t.Fatalf("Placeholders() = %s, want %s", got, want)
	}
}

func TestSubstitute(t *testing.T) {
	def, err := Substitute(Definition(), testValues())
	if err != nil {
		t.Fatalf("Substitute: %v", err)
	}
	var m struct{ TimeoutSeconds int }
	var wait struct{ HeartbeatSeconds int }
	var pc struct{ MaxConcurrency int }
	if err := errors.Join(json.Unmarshal(def, &m), json.Unmarshal(stateNamed(t, def, "WaitForExport"), &wait),
		json.Unmarshal(stateNamed(t, def, "PublishChanges"), &pc)); err != nil {
		t.Fatal(err)
	}
	if m.TimeoutSeconds != 90000 || wait.HeartbeatSeconds != 900 || pc.MaxConcurrency != 10 {
		t.Fatalf("numeric placeholders not substituted as numbers: timeout %d, heartbeat %d, Map concurrency %d", m.TimeoutSeconds, wait.HeartbeatSeconds, pc.MaxConcurrency)
	}
	if strings.Contains(string(def), "${") {
		t.Fatalf("placeholders left")
	}

	for _, name := range []string{StartQueueURL, RunTimeoutSeconds} {
		v := testValues()
		delete(v, name)
		if _, err := Substitute(Definition(), v); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("missing %s: err = %v", name, err)
		}
	}
	v := testValues()
	v[MapMaxConcurrency] = "ten"
	if _, err := Substitute(Definition(), v); err == nil {
		t.Fatalf("a non-number for a numeric placeholder was accepted")
	}
	v = testValues()
	v["Unused"] = "fine"
	if _, err := Substitute(Definition(), v); err != nil {
		t.Fatalf("an unused value was rejected: %v", err)
	}
	if _, err := Substitute([]byte(`{"a":"${ not-a-name }"}`), nil); err == nil {
		t.Fatalf("a leftover ${ was accepted")
	}
}

// TestDefinitionPassesASLValidator runs the npm asl-validator (the Makefile
// installs asl-validator@4.0.0 and sets ASL_VALIDATOR) on the substituted
// definition.
func TestDefinitionPassesASLValidator(t *testing.T) {
	bin := os.Getenv("ASL_VALIDATOR")
	if bin == "" {
		t.Skip("ASL_VALIDATOR is not set; `make validate-asl` installs asl-validator@4.0.0 and runs this test")
	}
	values := testValues()
	values[ReconcileFunctionArn] = "arn:aws:lambda:us-east-1:000000000000:function:reconcile"
	// Both definitions the stack deploys: the runs' and the reconciliation's.
	for name, raw := range map[string][]byte{"cdc.asl.json": Definition(), "reconcile.asl.json": ReconcileDefinition()} {
		def, err := Substitute(raw, values)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(file, def, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--json-path", file).CombinedOutput()
		if err != nil {
			t.Fatalf("asl-validator rejected %s: %v\n%s", name, err, out)
		}
		if strings.Contains(strings.ToLower(string(out)), "error") {
			t.Fatalf("asl-validator reported errors in %s:\n%s", name, out)
		}
		t.Logf("asl-validator, %s: %s", name, strings.TrimSpace(string(out)))
	}
}

// TestMapChildRetriesHandlerErrorsWithJitterInsideTheExpressLimit: the Map
// child keeps the Lambda.* service retrier first and adds one for
// prepare-change's retryable errors (contract C4), any task failure and
// timeouts, with backoff and full jitter; its longest total wait between
// attempts stays small beside the 5-minute EXPRESS limit, so a batch that
// keeps failing fails its child (and the run, which retries the window)
// instead of being killed mid-attempt.
func TestMapChildRetriesHandlerErrorsWithJitterInsideTheExpressLimit(t *testing.T) {
	def, err := Substitute(Definition(), testValues())
	if err != nil {
		t.Fatal(err)
	}
	type retrier struct {
		ErrorEquals                  []string
		IntervalSeconds, MaxAttempts int
		BackoffRate                  float64
		MaxDelaySeconds              int
		JitterStrategy               string
	}
	var pc struct {
		ToleratedFailurePercentage *float64
		ItemBatcher                any
		ItemProcessor              struct {
			States map[string]struct{ Retry []retrier }
		}
	}
	if err := json.Unmarshal(stateNamed(t, def, "PublishChanges"), &pc); err != nil {
		t.Fatal(err)
	}
	if pc.ItemBatcher != nil || pc.ToleratedFailurePercentage == nil || *pc.ToleratedFailurePercentage != 0 {
		t.Fatalf("PublishChanges: ItemBatcher %v, ToleratedFailurePercentage %v; want none and 0", pc.ItemBatcher, pc.ToleratedFailurePercentage)
	}
	rs := pc.ItemProcessor.States["PrepareChange"].Retry
	if len(rs) != 2 || rs[0].ErrorEquals[0] != "Lambda.ServiceException" {
		t.Fatalf("PrepareChange retriers = %+v, want the Lambda.* one first and one more", rs)
	}
	r := rs[1]
	want := map[string]bool{"BatchDeadlineExceeded": true, "PublishFailed": true, "ReadFailed": true, "States.TaskFailed": true, "States.Timeout": true}
	for _, e := range r.ErrorEquals {
		delete(want, e)
	}
	if len(want) != 0 || r.IntervalSeconds <= 0 || r.BackoffRate <= 1 || r.MaxDelaySeconds <= 0 || r.JitterStrategy != "FULL" || r.MaxAttempts < 1 {
		t.Fatalf("handler retrier = %+v (missing %v)", r, want)
	}
	wait := 0.0
	for i := 0; i < r.MaxAttempts; i++ {
		wait += math.Min(float64(r.IntervalSeconds)*math.Pow(r.BackoffRate, float64(i)), float64(r.MaxDelaySeconds))
	}
	if wait > 60 {
		t.Fatalf("the handler retrier may wait %.0f s in all; keep it within 60 s of the 300 s EXPRESS limit", wait)
	}
}

// stateNamed returns the state called name in def, at the top level or in
// a Parallel's branch or a Map's processor.
func stateNamed(t *testing.T, def []byte, name string) json.RawMessage {
	t.Helper()
	type machine struct {
		States map[string]json.RawMessage
	}
	var find func(m machine) json.RawMessage
	find = func(m machine) json.RawMessage {
		if st, ok := m.States[name]; ok {
			return st
		}
		for _, raw := range m.States {
			var st struct {
				Branches      []machine
				ItemProcessor *machine
			}
			if json.Unmarshal(raw, &st) != nil {
				continue
			}
			if st.ItemProcessor != nil {
				st.Branches = append(st.Branches, *st.ItemProcessor)
			}
			for _, b := range st.Branches {
				if found := find(b); found != nil {
					return found
				}
			}
		}
		return nil
	}
	var m machine
	if err := json.Unmarshal(def, &m); err != nil {
		t.Fatal(err)
	}
	st := find(m)
	if st == nil {
		t.Fatalf("no state %s in the definition", name)
	}
	return st
}

// TestLambdaTasksRetryWhatAWSAdvises: every Lambda task of both machines
// retries the transient Lambda service errors AWS's best practice names
// ("Handle Lambda service exceptions", Step Functions Developer Guide:
// ClientExecutionTimeoutException, ServiceException, AWSLambdaException,
// SdkClientException) and throttling; the run-lock tasks also retry any
// other failure (a crash, a timeout: Lambda.Unknown and the like) after
// their final errors, which a retrier of no attempts ends at once.
func TestLambdaTasksRetryWhatAWSAdvises(t *testing.T) {
	type retrier struct {
		ErrorEquals []string
		MaxAttempts *int
	}
	type task struct {
		Type     string
		Resource string
		Retry    []retrier
	}
	want := []string{"Lambda.ClientExecutionTimeoutException", "Lambda.ServiceException", "Lambda.AWSLambdaException",
		"Lambda.SdkClientException", "Lambda.TooManyRequestsException"}
	cdc, err := Substitute(Definition(), testValues())
	if err != nil {
		t.Fatal(err)
	}
	for name, sub := range map[string][]byte{"cdc": cdc, "reconcile": reconcileDef(t)} {
		var walk func(states map[string]json.RawMessage)
		lambdaTasks := 0
		walk = func(states map[string]json.RawMessage) {
			for stateName, raw := range states {
				var st struct {
					task
					Branches      []struct{ States map[string]json.RawMessage }
					ItemProcessor *struct{ States map[string]json.RawMessage }
				}
				if err := json.Unmarshal(raw, &st); err != nil {
					t.Fatalf("%s/%s: %v", name, stateName, err)
				}
				for _, b := range st.Branches {
					walk(b.States)
				}
				if st.ItemProcessor != nil {
					walk(st.ItemProcessor.States)
				}
				if st.Type != "Task" || !strings.Contains(st.Resource, ":lambda:invoke") {
					continue
				}
				lambdaTasks++
				if len(st.Retry) == 0 {
					t.Errorf("%s/%s: no retrier", name, stateName)
					continue
				}
				have := map[string]bool{}
				for _, e := range st.Retry[0].ErrorEquals {
					have[e] = true
				}
				for _, e := range want {
					if !have[e] {
						t.Errorf("%s/%s: the first retrier misses %s", name, stateName, e)
					}
				}
				switch name + "/" + stateName {
				case "cdc/AcquireLock", "cdc/CommitRun", "cdc/HandleFailure":
					rs := st.Retry
					if len(rs) != 3 || rs[1].MaxAttempts == nil || *rs[1].MaxAttempts != 0 ||
						len(rs[2].ErrorEquals) != 1 || rs[2].ErrorEquals[0] != "States.ALL" || rs[2].MaxAttempts == nil || *rs[2].MaxAttempts < 1 {
						t.Errorf("%s/%s: retriers %+v, want Lambda.*, the final errors with no attempts, then States.ALL", name, stateName, rs)
						continue
					}
					final := strings.Join(rs[1].ErrorEquals, " ")
					for _, e := range []string{"DatastoreChangedError", "InputError", "LockLostError", "ChildrenFailedError"} {
						if !strings.Contains(final, e) {
							t.Errorf("%s/%s: %s is retried", name, stateName, e)
						}
					}
				}
			}
		}
		var m struct{ States map[string]json.RawMessage }
		if err := json.Unmarshal(sub, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		walk(m.States)
		if lambdaTasks == 0 {
			t.Errorf("%s: no Lambda task found", name)
		}
	}
}
