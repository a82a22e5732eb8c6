package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// testDatastoreKey is the customer-managed key the IAM tests' data stores
// are encrypted with: every HealthLake call then also uses the key
// (UseDatastoreKey), which the tests cover with the other statements.
const testDatastoreKey = "arn:aws:kms:us-east-1:000000000000:key/datastore-cmk"

// runConcurrent starts two executions together and waits for both: the
// second finds the lock held and asks Step Functions about its holder.
func runConcurrent(t *testing.T, st *Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var arns []string
	for range 2 {
		a, err := st.StartExecution(ctx)
		if err != nil {
			t.Fatal(err)
		}
		arns = append(arns, a)
	}
	var wg sync.WaitGroup
	for _, a := range arns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := st.Wait(ctx, a, time.Now(), 0); err != nil {
				t.Errorf("wait: %v", err)
			}
		}()
	}
	wg.Wait()
}

// runTakeOver stops an execution while its export runs and starts the next,
// which takes the lock over and cancels the abandoned export.
func runTakeOver(t *testing.T, st *Stack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	jobs := len(st.HealthLake.Jobs())
	a, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first execution's export", func() bool { return len(st.HealthLake.Jobs()) == jobs+1 })
	if err := st.SFN.StopExecution(a, "Test.Abort", "stopped without its failure handler"); err != nil {
		t.Fatal(err)
	}
	b, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second execution's export", func() bool { return len(st.HealthLake.Jobs()) == jobs+2 })
	_ = st.SFN.StopExecution(b, "Test.Done", "")
}

// coverageStacks runs the scenarios whose calls together exercise the
// stack's statements: windows with and without changes with exports that
// take a few re-checks, two executions started together, and a take-over
// of an abandoned run.
func coverageStacks(t *testing.T) (allowed map[string]int64, stacks []*Stack) {
	allowed = map[string]int64{}
	// Exports outlast the first re-check (1 s), so check-export re-queues
	// before HealthLake's job event ends the wait.
	st := startStack(t, func(o *Options) {
		o.DatastoreKey = testDatastoreKey
		o.SampleSize = 12
		o.ExportDelay = 1200 * time.Millisecond
	})
	for _, name := range []string{"seeded", "idle", "big", "retried-start", "completed-with-errors"} {
		prepareScenario(t, st, name)
		w := runWindow(t, st)
		if w.Status != "SUCCEEDED" || (name != "idle" && w.Outcome != report.OutcomeCommitted) {
			t.Errorf("%s window = %+v", name, w)
		}
	}
	runConcurrent(t, st)
	runReconcileScenario(t, st, nil)
	to := startStack(t, func(o *Options) {
		o.DatastoreKey = testDatastoreKey
		o.SampleSize = 6
		o.ExportDelay = time.Hour
		o.RecheckDelay = 200 * time.Second
	})
	runTakeOver(t, to)
	fp := fastPathCoverage(t)
	for _, s := range []*Stack{st, to, fp} {
		for k, v := range s.IAM.Allowed() {
			allowed[k] += v
		}
	}
	return allowed, []*Stack{st, to, fp}
}

// fastPathCoverage runs the fast path's calls: a stack with it on (id-only,
// so versions are read back) whose Subscription is created at start and
// activates, a window, and a change the fast path publishes and records.
func fastPathCoverage(t *testing.T) *Stack {
	t.Helper()
	st := startStack(t, func(o *Options) {
		o.DatastoreKey = testDatastoreKey
		o.SampleSize = 2
		o.FastPath, o.FastPathPayload, o.FastPathTypes = true, "id-only", []string{"Patient"}
		o.Subscriptions.ActivationDelay = 200 * time.Millisecond
		o.Subscriptions.NotificationDelay = 50 * time.Millisecond
		o.Subscriptions.NotificationJitter = 10 * time.Millisecond
	})
	runWindow(t, st)
	time.Sleep(time.Second) // past the Subscription's activation
	recorded := func() bool {
		return st.IAM.Allowed()["fast-path/RecordPublished"] > 0 && st.IAM.Allowed()["fast-path/WriteClaimChecks"] > 0
	}
	runFastPathUntil(t, st, recorded)
	if !recorded() {
		t.Fatal("the fast path wrote no record item or no claim-check")
	}
	runWindow(t, st) // reads the record
	return st
}

// TestIAMNormalRunIsAllowedAndUsesEveryStatement: with every principal's
// statements enforced (the default), the pipeline's scenarios run with no
// denied call, and every statement allowed some call — no unused grants —
// except those whose NotExercised says why a local run makes none of its
// calls.
func TestIAMNormalRunIsAllowedAndUsesEveryStatement(t *testing.T) {
	t.Parallel()
	allowed, stacks := coverageStacks(t)
	for _, st := range stacks {
		if n := st.IAM.DeniedTotal(); n != 0 {
			t.Errorf("%d calls denied in a normal run: %v", n, st.IAM.Denials())
		}
	}
	for _, p := range iampolicy.All() {
		for _, s := range stacks[0].IAM.Statements(p) {
			n := allowed[string(p)+"/"+s.Sid]
			switch {
			case s.NotExercised == "" && n == 0:
				t.Errorf("%s/%s allowed no call: an unused grant (%v on %v)", p, s.Sid, s.Actions, s.Resources)
			case s.NotExercised != "" && n > 0:
				t.Errorf("%s/%s is marked NotExercised but allowed %d calls: drop the mark", p, s.Sid, n)
			}
		}
	}
}

// bigResource is over the EventBridge entry limit, so its event carries a
// claim-check.
func bigResource(id string) []byte {
	return []byte(`{"resourceType":"Patient","id":"` + id + `","name":[{"family":"` + strings.Repeat("x", 300<<10) + `"}]}`)
}

// prepareScenario sets up what the named window needs: "big" writes a
// resource over the entry limit (claim-check), "retried-start" makes the
// export's POST start its job but answer 500 (start-export's retry then
// finds and cancels the duplicate job by name), "completed-with-errors"
// ends the export COMPLETED_WITH_ERRORS (check-export reads the error file
// and quarantines its entries); others write nothing.
func prepareScenario(t *testing.T, st *Stack, name string) {
	t.Helper()
	switch name {
	case "big":
		if _, err := st.PutResource(context.Background(), "Patient", "iam-big", bigResource("iam-big")); err != nil {
			t.Fatal(err)
		}
	case "retried-start":
		if _, err := st.PutResource(context.Background(), "Patient", "iam-retried", []byte(`{"resourceType":"Patient","id":"iam-retried"}`)); err != nil {
			t.Fatal(err)
		}
		st.HealthLake.AcceptThenFailNext(1, 500)
	case "fastpath":
		// The setup role's calls: the custom resource's Ensure again (the
		// Patient runUntil writes is the fast path's notification).
		_ = st.ensureSubscription(context.Background())
	case "completed-with-errors":
		if _, err := st.PutResource(context.Background(), "Patient", "iam-cwe", []byte(`{"resourceType":"Patient","id":"iam-cwe"}`)); err != nil {
			t.Fatal(err)
		}
		st.HealthLake.CompleteNextJobWithErrors("iam test")
	}
}

// scenarioOf says which run makes a statement's calls: most are made by
// any window with a change; following exports by run-lock and the lock
// holder's status only by a take-over; start-export follows exports only
// after an ambiguous start; claim-checks need a resource over the limit;
// the data store check runs at a deploy ("deploy": the stack's start).
func scenarioOf(p iampolicy.Principal, sid string) string {
	switch {
	case p == iampolicy.StartExport && sid == "FollowExports":
		return "retried-start"
	case p == iampolicy.RunLock && (sid == "FollowExports" || sid == "LockHolderStatus" || sid == "UseDatastoreKey"):
		return "takeover"
	case p == iampolicy.PrepareChange && sid == "WriteClaimChecksAndQuarantine":
		return "big"
	case p == iampolicy.CheckExport && sid == "SendRecheck":
		return "recheck"
	case p == iampolicy.CheckExport && (sid == "ReadExportErrors" || sid == "WriteQuarantine"):
		return "completed-with-errors"
	case p == iampolicy.Reconcile || p == iampolicy.ReconcileStateMachine || (p == iampolicy.Scheduler && sid == "StartReconciliation"):
		return "reconcile"
	case p == iampolicy.FastPath || p == iampolicy.FastPathSetup:
		return "fastpath"
	case p == iampolicy.CheckDatastore:
		return "deploy"
	}
	return "window"
}

// TestIAMEveryStatementIsNeeded removes exactly one statement at a time from
// one principal's policy and runs the scenario that needs it: the call is
// denied with that statement's action. Statements with NotExercised are
// skipped for the reason they give.
func TestIAMEveryStatementIsNeeded(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs one window per statement")
	}
	shared := startStack(t, func(o *Options) {
		o.DatastoreKey = testDatastoreKey
		o.SampleSize = 4
		o.ExportDelay = 200 * time.Millisecond
	})
	runWindow(t, shared)
	// Stacks of the scenarios that need other timings, started on first use
	// and closed when the whole test ends.
	stacks := map[string]*Stack{}
	stackFor := func(sc string) *Stack {
		if st, ok := stacks[sc]; ok {
			return st
		}
		var st *Stack
		switch sc {
		case "takeover":
			st = startStack(t, func(o *Options) {
				o.DatastoreKey = testDatastoreKey
				o.SampleSize = 2
				o.ExportDelay = time.Hour
				o.RecheckDelay = 200 * time.Second
			})
		case "recheck":
			// Exports that take a few re-checks.
			st = startStack(t, func(o *Options) {
				o.DatastoreKey = testDatastoreKey
				o.SampleSize = 2
				o.ExportDelay = 2 * time.Second
			})
		case "reconcile":
			st = startStack(t, func(o *Options) {
				o.DatastoreKey = testDatastoreKey
				o.SampleSize = 2
			})
			runWindow(t, st)
		case "fastpath":
			// id-only: every version is read back (VersionReadResource).
			st = startStack(t, func(o *Options) {
				o.DatastoreKey = testDatastoreKey
				o.SampleSize = 2
				o.FastPath, o.FastPathPayload, o.FastPathTypes = true, "id-only", []string{"Patient"}
				o.Subscriptions.ActivationDelay = 200 * time.Millisecond
				o.Subscriptions.NotificationDelay = 50 * time.Millisecond
			})
			runWindow(t, st)
			time.Sleep(time.Second) // past the Subscription's activation
		default:
			st = shared
		}
		stacks[sc] = st
		return st
	}
	for _, p := range iampolicy.All() {
		for _, s := range shared.IAM.Statements(p) {
			t.Run(string(p)+"/"+s.Sid, func(t *testing.T) {
				if s.NotExercised != "" {
					t.Skip(s.NotExercised)
				}
				st := stackFor(scenarioOf(p, s.Sid))
				full := st.IAM.Statements(p)
				st.IAM.SetStatements(p, iampolicy.Without(full, s.Sid))
				st.IAM.Reset()
				defer st.IAM.SetStatements(p, full)
				denied := func() bool {
					for k := range st.IAM.Denied() {
						for _, a := range s.Actions {
							if k == string(p)+" "+a {
								return true
							}
						}
					}
					return false
				}
				switch sc := scenarioOf(p, s.Sid); sc {
				case "takeover":
					runTakeOverUntil(t, st, denied)
				case "reconcile":
					runReconcileScenario(t, st, denied)
				case "fastpath":
					runFastPathUntil(t, st, denied)
				case "deploy":
					// The deploy's data store check, as the stack makes it
					// at start.
					_, _ = st.CheckDatastore(context.Background(), testDatastoreKey)
				default:
					runUntil(t, st, denied, func() { prepareScenario(t, st, sc) })
				}
				if !denied() {
					t.Errorf("without %s/%s no call was denied %v; denied: %v", p, s.Sid, s.Actions, st.IAM.DeniedKeys())
				}
			})
		}
	}
	// Every statement back, the shared stack runs a clean window again.
	shared.IAM.Reset()
	ctx := context.Background()
	if _, err := shared.PutResource(ctx, "Patient", "iam-final", []byte(`{"resourceType":"Patient","id":"iam-final"}`)); err != nil {
		t.Fatal(err)
	}
	if w := runWindow(t, shared); w.Status != "SUCCEEDED" {
		t.Errorf("window after the removals = %+v (denied %v)", w, shared.IAM.DeniedKeys())
	}
}

var iamSeq atomic.Int64

// runReconcileScenario delivers a new resource, erases it ($erase: no
// history left) and runs a window and a reconciliation, which counts,
// lists, reads the history (gone) and the resource (gone) and publishes its
// delete, until done() holds (nil: to the end, which must be a finished
// reconciliation). A reconciliation still running is stopped.
func runReconcileScenario(t *testing.T, st *Stack, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := fmt.Sprintf("iam-rec-%d", iamSeq.Add(1))
	if _, err := st.PutResource(ctx, "Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	runWindow(t, st)
	eraseResource(t, st, "Patient", id)
	runWindow(t, st)
	if done == nil {
		reconcileNow(t, st)
		return
	}
	arn, err := st.StartReconciliation(ctx)
	if err != nil {
		if !done() {
			t.Fatalf("start reconciliation: %v", err)
		}
		return
	}
	followUntil(ctx, t, st, arn, "reconciliation", done)
}

// runUntil writes a change and runs one execution until done() holds or
// the execution ends; an execution still running is stopped.
func runUntil(t *testing.T, st *Stack, done func() bool, prepare func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := fmt.Sprintf("iam-%d", iamSeq.Add(1))
	if _, err := st.PutResource(ctx, "Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
		t.Fatal(err)
	}
	prepare()
	arn, err := st.StartExecution(ctx)
	if err != nil {
		if !done() {
			t.Fatalf("start execution: %v", err)
		}
		return
	}
	followUntil(ctx, t, st, arn, "execution", done)
}

// runFastPathUntil writes a Patient (its notification reaches the fast
// path) and keeps the setup's Ensure going until done() holds, at most 30 s:
// the fast path's mapping long-polls its queue (up to 20 s a poll).
func runFastPathUntil(t *testing.T, st *Stack, done func() bool) {
	t.Helper()
	id := fmt.Sprintf("iam-fp-%d", iamSeq.Add(1))
	// Over the 256 KB entry limit: the fast path (and the window) publish
	// it with a claim-check.
	big := strings.Repeat("x", 300<<10)
	if _, err := st.PutResource(context.Background(), "Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`","name":[{"text":"`+big+`"}]}`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !done() && time.Now().Before(deadline); {
		prepareScenario(t, st, "fastpath")
		time.Sleep(100 * time.Millisecond)
	}
}

// followUntil waits until done() holds or the execution arn ends; one still
// running is then stopped.
func followUntil(ctx context.Context, t *testing.T, st *Stack, arn, what string, done func() bool) {
	t.Helper()
	for !done() {
		out, err := st.sfnc.DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != "RUNNING" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still running and nothing denied: %v", what, st.IAM.DeniedKeys())
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = st.SFN.StopExecution(arn, "Test.Done", "")
}

// runTakeOverUntil is runTakeOver that stops waiting once done() holds.
func runTakeOverUntil(t *testing.T, st *Stack, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := len(st.HealthLake.Jobs())
	a, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for len(st.HealthLake.Jobs()) == jobs && !done() {
		out, err := st.sfnc.DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(a)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != "RUNNING" {
			t.Fatalf("first execution %s (%s: %s) before its export; denied %v", out.Status, aws.ToString(out.Error), aws.ToString(out.Cause), st.IAM.DeniedKeys())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = st.SFN.StopExecution(a, "Test.Abort", "stopped without its failure handler")
	b, err := st.StartExecution(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = st.SFN.StopExecution(b, "Test.Done", "")
}

// TestIAMAbortQuarantineUpload: prepare-change may abort the multipart
// uploads of quarantine objects it starts (issue 11.11), and may write
// claim-checks; another principal may not.
func TestIAMAbortQuarantineUpload(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = -1 })
	ctx := context.Background()
	pc := awsclient.NewS3(st.principalConfig(iampolicy.PrepareChange))
	key := aws.String("quarantine/run-1/exports/x/Patient-1.ndjson.ndjson")
	up, err := pc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(st.Res.Bucket), Key: key})
	if err != nil {
		t.Fatalf("prepare-change CreateMultipartUpload: %v", err)
	}
	if _, err := pc.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(st.Res.Bucket), Key: key, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("{}\n"))}); err != nil {
		t.Fatalf("prepare-change UploadPart: %v", err)
	}
	ce := awsclient.NewS3(st.principalConfig(iampolicy.CheckExport))
	_, err = ce.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(st.Res.Bucket), Key: key, UploadId: up.UploadId})
	wantCode(t, "check-export AbortMultipartUpload", err, "AccessDenied")
	if _, err := pc.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(st.Res.Bucket), Key: key, UploadId: up.UploadId}); err != nil {
		t.Errorf("prepare-change AbortMultipartUpload: %v", err)
	}
	if _, err := pc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(st.Res.Bucket), Key: aws.String("claim-check/run-1/x.json"), Body: bytes.NewReader([]byte("{}"))}); err != nil {
		t.Errorf("prepare-change claim-check PutObject: %v", err)
	}
	// Without the statement the abort is refused.
	full := st.IAM.Statements(iampolicy.PrepareChange)
	st.IAM.SetStatements(iampolicy.PrepareChange, iampolicy.Without(full, "AbortQuarantineUpload"))
	_, err = pc.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(st.Res.Bucket), Key: key, UploadId: aws.String("any")})
	wantCode(t, "prepare-change AbortMultipartUpload without the statement", err, "AccessDenied")
}

func wantCode(t *testing.T, what string, err error, codes ...string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v, want an API error %v", what, err, codes)
		return
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			if !strings.Contains(ae.ErrorMessage(), "is not authorized to perform") {
				t.Errorf("%s: message %q does not name the action and resource", what, ae.ErrorMessage())
			}
			return
		}
	}
	t.Errorf("%s: code %q (%v), want %v", what, ae.ErrorCode(), err, codes)
}

// TestIAMDenialsInEachServicesWireFormat calls every service as a principal
// that may not, through the real SDK clients: each surfaces AWS's code.
func TestIAMDenialsInEachServicesWireFormat(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = -1 })
	ctx := context.Background()
	cfg := st.principalConfig(iampolicy.Scheduler)
	before := st.IAM.DeniedTotal()

	_, err := awsclient.NewS3(cfg).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(st.Res.Bucket), Key: aws.String("exports/x")})
	wantCode(t, "S3 GetObject", err, "AccessDenied")
	_, err = awsclient.NewS3(cfg).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(st.Res.Bucket), Prefix: aws.String("exports/")})
	wantCode(t, "S3 ListObjectsV2", err, "AccessDenied")
	_, err = sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.Res.StartQueueURL), MessageBody: aws.String("{}")})
	wantCode(t, "SQS SendMessage", err, "AccessDenied", "AccessDeniedException")
	_, err = dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.Res.Table),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "x"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
	wantCode(t, "DynamoDB GetItem", err, "AccessDeniedException")
	_, err = eventbridge.NewFromConfig(cfg).PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(st.Res.Bus), Source: aws.String("t"), DetailType: aws.String("t"), Detail: aws.String("{}")}}})
	wantCode(t, "EventBridge PutEvents", err, "AccessDeniedException")
	_, err = sfnapi.NewFromConfig(cfg).DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(st.Env.ARN("states", "execution:"+st.opts.Name+":x"))})
	wantCode(t, "Step Functions DescribeExecution", err, "AccessDeniedException")
	_, err = hlsdk.NewFromConfig(cfg, func(o *hlsdk.Options) { o.BaseEndpoint = aws.String(st.Res.HealthLakeEndpoint) }).
		ListFHIRExportJobs(ctx, &hlsdk.ListFHIRExportJobsInput{DatastoreId: aws.String(st.Res.DatastoreID)})
	wantCode(t, "HealthLake ListFHIRExportJobs", err, "AccessDeniedException")

	// HealthLake's FHIR REST API, through the project's client.
	hc, err := fhirrest.NewFromConfig(cfg, st.Res.HealthLakeEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hc.DescribeExport(ctx, st.Res.DatastoreID, "job-1")
	if err == nil || !strings.Contains(err.Error(), "is not authorized to perform: healthlake:DescribeFHIRExportJobWithGet") {
		t.Errorf("HealthLake FHIR describe: %v", err)
	}

	// The state machine's in-process Lambda invocations are checked too.
	_, _, err = iam.CheckedInvoker{Next: st.Lambdas, Auth: st.IAM, Principal: iampolicy.Scheduler, FunctionARN: st.Lambdas.ARN}.
		Invoke(ctx, FnRunLock, []byte("{}"))
	var d *iam.DeniedError
	if !errors.As(err, &d) || d.Action != "lambda:InvokeFunction" || d.Resource != st.Lambdas.ARN(FnRunLock) {
		t.Errorf("in-process Invoke as the scheduler: %v", err)
	}
	if st.IAM.DeniedTotal() <= before {
		t.Error("denials not counted")
	}
	for _, a := range []string{"s3:GetObject", "s3:ListBucket", "sqs:SendMessage", "dynamodb:GetItem", "events:PutEvents",
		"states:DescribeExecution", "healthlake:ListFHIRExportJobs", "healthlake:DescribeFHIRExportJobWithGet", "lambda:InvokeFunction"} {
		if st.IAM.Denied()["scheduler "+a] == 0 {
			t.Errorf("denial of %s not counted: %v", a, st.IAM.DeniedKeys())
		}
	}
}

// TestIAMOffAllowsAndCounts: --iam=off lets every call through and counts
// what the statements would have denied.
func TestIAMOffAllowsAndCounts(t *testing.T) {
	st := startStack(t, func(o *Options) { o.SampleSize = -1; o.IAMOff = true })
	ctx := context.Background()
	_, err := sqs.NewFromConfig(st.principalConfig(iampolicy.Scheduler)).SendMessage(ctx,
		&sqs.SendMessageInput{QueueUrl: aws.String(st.Res.StartQueueURL), MessageBody: aws.String("{}")})
	if err != nil {
		t.Fatalf("with IAM off: %v", err)
	}
	if st.IAM.Denied()["scheduler sqs:SendMessage"] != 1 {
		t.Errorf("would-be denial not counted: %v", st.IAM.Denied())
	}
}
