package fakeeventbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// rulesEnv is local AWS with the emulator delivering to goaws through the
// gateway, and clients for both.
type rulesEnv struct {
	eb  *sdk.Client
	sqs *sqs.Client
	em  *fakeeventbridge.Emulator
	env *localaws.Env
}

func startRules(t *testing.T, opts fakeeventbridge.Options) *rulesEnv {
	t.Helper()
	env := localawstest.Start(t)
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	sq := sqs.NewFromConfig(cfg)
	opts.Region, opts.AccountID, opts.Queues = env.Region, env.AccountID, sq
	if opts.RetryDelay == nil {
		opts.RetryDelay = func(int) time.Duration { return time.Millisecond }
	}
	em := fakeeventbridge.New(opts)
	t.Cleanup(em.Close)
	env.Gateway.Handle(localaws.ServiceEventBridge, em)
	return &rulesEnv{eb: sdk.NewFromConfig(cfg), sqs: sq, em: em, env: env}
}

// queue creates a uniquely named queue and returns its URL and ARN.
func (r *rulesEnv) queue(t *testing.T, name string) (string, string) {
	t.Helper()
	name = fmt.Sprintf("eb-%s-%d", name, time.Now().UnixNano())
	out, err := r.sqs.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	return aws.ToString(out.QueueUrl), r.env.ARN("sqs", name)
}

// receive reads every message on the queue (after the emulator is idle).
func (r *rulesEnv) receive(t *testing.T, url string) []sqstypes.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.em.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var out []sqstypes.Message
	for {
		m, err := r.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		if len(m.Messages) == 0 {
			return out
		}
		for _, msg := range m.Messages {
			out = append(out, msg)
			_, _ = r.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: msg.ReceiptHandle})
		}
	}
}

func (r *rulesEnv) put(t *testing.T, bus string, details ...string) {
	t.Helper()
	var entries []types.PutEventsRequestEntry
	for _, d := range details {
		entries = append(entries, entry(bus, d))
	}
	out, err := r.eb.PutEvents(context.Background(), &sdk.PutEventsInput{Entries: entries})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("PutEvents: %v %+v", err, out)
	}
}

func bodies(ms []sqstypes.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = aws.ToString(m.Body)
	}
	return out
}

func TestRuleLifecycleAndValidation(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{Buses: []string{"cdc"}})
	ctx := context.Background()
	pattern := `{"source":["healthlake.cdc"],"detail":{"resourceType":["Patient"]}}`
	out, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc"), EventPattern: aws.String(pattern)})
	if err != nil {
		t.Fatalf("PutRule: %v", err)
	}
	if want := r.env.ARN("events", "rule/cdc/patients"); aws.ToString(out.RuleArn) != want {
		t.Errorf("RuleArn = %s, want %s", aws.ToString(out.RuleArn), want)
	}
	d, err := r.eb.DescribeRule(ctx, &sdk.DescribeRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")})
	if err != nil || aws.ToString(d.EventPattern) != pattern || d.State != types.RuleStateEnabled || aws.ToString(d.EventBusName) != "cdc" {
		t.Fatalf("DescribeRule = %+v, %v", d, err)
	}
	if _, err := r.eb.DisableRule(ctx, &sdk.DisableRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")}); err != nil {
		t.Fatal(err)
	}
	l, err := r.eb.ListRules(ctx, &sdk.ListRulesInput{EventBusName: aws.String("cdc")})
	if err != nil || len(l.Rules) != 1 || l.Rules[0].State != types.RuleStateDisabled {
		t.Fatalf("ListRules = %+v, %v", l, err)
	}
	if _, err := r.eb.EnableRule(ctx, &sdk.EnableRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")}); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.eb.ListRules(ctx, &sdk.ListRulesInput{EventBusName: aws.String("default")}); len(l.Rules) != 0 {
		t.Errorf("default bus lists %d rules", len(l.Rules))
	}

	// Invalid patterns are refused with the reason.
	_, err = r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("bad"), EventBusName: aws.String("cdc"), EventPattern: aws.String(`{"n":[{"numeric":[">",5,"<",1]}]}`)})
	if apiCode(err) != "InvalidEventPatternException" || !strings.Contains(err.Error(), "Event pattern is not valid. Reason: Bad numeric range") {
		t.Errorf("invalid pattern: %v", err)
	}
	_, err = r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("x"), EventBusName: aws.String("nope"), EventPattern: aws.String(pattern)})
	if apiCode(err) != "ResourceNotFoundException" {
		t.Errorf("rule on a missing bus: %v", err)
	}
	_, err = r.eb.DescribeRule(ctx, &sdk.DescribeRuleInput{Name: aws.String("missing"), EventBusName: aws.String("cdc")})
	if apiCode(err) != "ResourceNotFoundException" {
		t.Errorf("missing rule: %v", err)
	}

	// Targets: unsupported kinds and limits are refused; a rule with targets cannot be deleted.
	_, qarn := r.queue(t, "life")
	_, err = r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"),
		Targets: []types.Target{{Id: aws.String("fn"), Arn: aws.String("arn:aws:lambda:us-east-1:000000000000:function:f")}}})
	if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), "SQS queues, event buses and API destinations") {
		t.Errorf("lambda target: %v", err)
	}
	_, err = r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"),
		Targets: []types.Target{{Id: aws.String("q"), Arn: aws.String(qarn), Input: aws.String(`{}`), InputPath: aws.String("$.detail")}}})
	if apiCode(err) != "ValidationException" {
		t.Errorf("Input and InputPath together: %v", err)
	}
	var six []types.Target
	for i := 0; i < 6; i++ {
		six = append(six, types.Target{Id: aws.String(fmt.Sprintf("q%d", i)), Arn: aws.String(qarn)})
	}
	_, err = r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"), Targets: six})
	if apiCode(err) != "LimitExceededException" {
		t.Errorf("six targets: %v", err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"), Targets: six[:2]}); err != nil {
		t.Fatal(err)
	}
	lt, err := r.eb.ListTargetsByRule(ctx, &sdk.ListTargetsByRuleInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc")})
	if err != nil || len(lt.Targets) != 2 || aws.ToString(lt.Targets[0].Arn) != qarn {
		t.Fatalf("ListTargetsByRule = %+v, %v", lt, err)
	}
	_, err = r.eb.DeleteRule(ctx, &sdk.DeleteRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")})
	if apiCode(err) != "ValidationException" {
		t.Errorf("delete a rule with targets: %v", err)
	}
	if _, err := r.eb.RemoveTargets(ctx, &sdk.RemoveTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"), Ids: []string{"q0", "q1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.DeleteRule(ctx, &sdk.DeleteRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")}); err != nil {
		t.Fatal(err)
	}
	if l, _ := r.eb.ListRules(ctx, &sdk.ListRulesInput{EventBusName: aws.String("cdc")}); len(l.Rules) != 0 {
		t.Errorf("rule still listed after DeleteRule")
	}
}

func TestTestEventPattern(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{})
	ctx := context.Background()
	ev := `{"id":"1","account":"123456789012","source":"healthlake.cdc","time":"2026-01-01T00:00:00Z","region":"us-east-1","resources":[],"detail-type":"FHIR Resource Changed","detail":{"resourceType":"Patient","op":"update"}}`
	for _, c := range []struct {
		pattern string
		want    bool
	}{
		{`{"detail":{"resourceType":["Patient"]}}`, true},
		{`{"detail":{"resourceType":[{"anything-but":"Patient"}]}}`, false},
		{`{"$or":[{"detail":{"op":["delete"]}},{"detail-type":[{"prefix":"FHIR"}]}]}`, true},
	} {
		out, err := r.eb.TestEventPattern(ctx, &sdk.TestEventPatternInput{EventPattern: aws.String(c.pattern), Event: aws.String(ev)})
		if err != nil || out.Result != c.want {
			t.Errorf("TestEventPattern(%s) = %+v, %v; want %v", c.pattern, out, err, c.want)
		}
	}
	_, err := r.eb.TestEventPattern(ctx, &sdk.TestEventPatternInput{EventPattern: aws.String(`{"a":"b"}`), Event: aws.String(ev)})
	if apiCode(err) != "InvalidEventPatternException" {
		t.Errorf("invalid pattern: %v", err)
	}
	_, err = r.eb.TestEventPattern(ctx, &sdk.TestEventPatternInput{EventPattern: aws.String(`{"a":["b"]}`), Event: aws.String(`{"source":"x"}`)})
	if apiCode(err) != "ValidationException" {
		t.Errorf("event without the required fields: %v", err)
	}
}

func TestRuleDeliversToSQSAsTransformed(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{Buses: []string{"cdc"}})
	ctx := context.Background()
	rawURL, rawARN := r.queue(t, "raw")
	tURL, tARN := r.queue(t, "transformed")
	pURL, pARN := r.queue(t, "path")
	cURL, cARN := r.queue(t, "const")
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc"),
		EventPattern: aws.String(`{"detail":{"resourceType":["Patient"]}}`)}); err != nil {
		t.Fatal(err)
	}
	_, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("patients"), EventBusName: aws.String("cdc"), Targets: []types.Target{
		{Id: aws.String("raw"), Arn: aws.String(rawARN)},
		{Id: aws.String("transformed"), Arn: aws.String(tARN), InputTransformer: &types.InputTransformer{
			InputPathsMap: map[string]string{"id": "$.detail.id", "n": "$.detail.n", "gone": "$.missing"},
			InputTemplate: aws.String(`{"id":<id>,"text":"<id> has \"<n>\"","n":<n>,"gone":<gone>,"in":"<gone>","other":<other>,"rule":"<aws.events.rule-name>"}`),
		}},
		{Id: aws.String("path"), Arn: aws.String(pARN), InputPath: aws.String("$.detail")},
		{Id: aws.String("const"), Arn: aws.String(cARN), Input: aws.String(`{"fixed":true}`)},
	}})
	if err != nil {
		t.Fatalf("PutTargets: %v", err)
	}
	r.put(t, "cdc", `{"resourceType":"Patient","id":"p\"1","n":2}`, `{"resourceType":"Observation","id":"o1","n":3}`)

	raw := bodies(r.receive(t, rawURL))
	if len(raw) != 1 {
		t.Fatalf("raw target got %d messages, want 1 (the Patient)", len(raw))
	}
	var ev fakeeventbridge.Event
	if err := json.Unmarshal([]byte(raw[0]), &ev); err != nil || ev.Source != "healthlake.cdc" || ev.DetailType != "FHIR Resource Changed" ||
		string(ev.Detail) != `{"resourceType":"Patient","id":"p\"1","n":2}` {
		t.Errorf("raw target body = %s (%v)", raw[0], err)
	}
	tr := bodies(r.receive(t, tURL))
	want := `{"id":"p\"1","text":"p\"1 has \"2\"","n":2,"gone":null,"in":"","other":<other>,"rule":"patients"}`
	if len(tr) != 1 || tr[0] != want {
		t.Errorf("transformed = %q, want %q", tr, want)
	}
	if p := bodies(r.receive(t, pURL)); len(p) != 1 || p[0] != `{"id":"p\"1","n":2,"resourceType":"Patient"}` {
		t.Errorf("InputPath = %q", p)
	}
	if c := bodies(r.receive(t, cURL)); len(c) != 1 || c[0] != `{"fixed":true}` {
		t.Errorf("Input = %q", c)
	}
	st := r.em.Stats()
	if st.MatchedEvents != 1 || st.Invocations != 4 || st.FailedInvocations != 0 {
		t.Errorf("stats = %+v", st)
	}

	// A disabled rule delivers nothing.
	if _, err := r.eb.DisableRule(ctx, &sdk.DisableRuleInput{Name: aws.String("patients"), EventBusName: aws.String("cdc")}); err != nil {
		t.Fatal(err)
	}
	r.put(t, "cdc", `{"resourceType":"Patient","id":"p2"}`)
	if got := r.receive(t, rawURL); len(got) != 0 {
		t.Errorf("disabled rule delivered %d messages", len(got))
	}
}

func TestTransformerPlainTextTemplate(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{})
	ctx := context.Background()
	url, arn := r.queue(t, "text")
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("all"), EventPattern: aws.String(`{"source":["healthlake.cdc"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("all"), Targets: []types.Target{{Id: aws.String("q"), Arn: aws.String(arn),
		InputTransformer: &types.InputTransformer{InputPathsMap: map[string]string{"instance": "$.detail.instance", "status": "$.detail.status"},
			InputTemplate: aws.String(`<instance> is in state <status>`)}}}}); err != nil {
		t.Fatal(err)
	}
	r.put(t, "default", `{"instance":"i-1","status":"running"}`)
	if got := bodies(r.receive(t, url)); len(got) != 1 || got[0] != "i-1 is in state running" {
		t.Errorf("plain-text template = %q", got)
	}
	_, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("all"), Targets: []types.Target{{Id: aws.String("r"), Arn: aws.String(arn),
		InputTransformer: &types.InputTransformer{InputPathsMap: map[string]string{"aws.events.rule-name": "$.source"}, InputTemplate: aws.String(`<x>`)}}}})
	if apiCode(err) != "ValidationException" || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("reserved variable: %v", err)
	}
}

func TestFailedDeliveryRetriesThenDeadLetters(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{})
	ctx := context.Background()
	dlqURL, dlqARN := r.queue(t, "dlq")
	var mu sync.Mutex
	calls, fail := 0, 2
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if req.Header.Get("x-api-key") != "k" || req.URL.Query().Get("q") != "1" || req.URL.Path != "/hook/p1" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if calls <= fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if strings.Contains(string(b), `"reject"`) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got = append(got, string(b))
	}))
	defer srv.Close()
	conn, err := r.eb.CreateConnection(ctx, &sdk.CreateConnectionInput{Name: aws.String("hook"), AuthorizationType: types.ConnectionAuthorizationTypeApiKey,
		AuthParameters: &types.CreateConnectionAuthRequestParameters{ApiKeyAuthParameters: &types.CreateConnectionApiKeyAuthRequestParameters{ApiKeyName: aws.String("x-api-key"), ApiKeyValue: aws.String("k")}}})
	if err != nil {
		t.Fatal(err)
	}
	dest, err := r.eb.CreateApiDestination(ctx, &sdk.CreateApiDestinationInput{Name: aws.String("hook"), ConnectionArn: conn.ConnectionArn,
		InvocationEndpoint: aws.String(srv.URL + "/hook/*"), HttpMethod: types.ApiDestinationHttpMethodPost})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("hook"), EventPattern: aws.String(`{"source":["healthlake.cdc"]}`)}); err != nil {
		t.Fatal(err)
	}
	_, err = r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("hook"), Targets: []types.Target{
		{Id: aws.String("api"), Arn: dest.ApiDestinationArn, InputPath: aws.String("$.detail"),
			HttpParameters:   &types.HttpParameters{PathParameterValues: []string{"p1"}, QueryStringParameters: map[string]string{"q": "1"}},
			RetryPolicy:      &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(5)},
			DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(dlqARN)}},
		{Id: aws.String("gone"), Arn: aws.String(r.env.ARN("sqs", "no-such-queue")), DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(dlqARN)}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	r.put(t, "default", `{"n":1}`)
	dl := r.receive(t, dlqURL)
	mu.Lock()
	if calls != 3 || len(got) != 1 || got[0] != `{"n":1}` {
		t.Errorf("API destination: %d calls, bodies %q; want 2 failures then {\"n\":1}", calls, got)
	}
	mu.Unlock()
	// The missing queue is not retried: straight to the DLQ with AWS's attributes.
	if len(dl) != 1 {
		t.Fatalf("DLQ has %d messages, want 1", len(dl))
	}
	a := dl[0].MessageAttributes
	if aws.ToString(a["TARGET_ARN"].StringValue) != r.env.ARN("sqs", "no-such-queue") || aws.ToString(a["RULE_ARN"].StringValue) != r.env.ARN("events", "rule/hook") ||
		aws.ToString(a["RETRY_ATTEMPTS"].StringValue) != "0" || aws.ToString(a["ERROR_CODE"].StringValue) == "" {
		t.Errorf("DLQ attributes = %+v", a)
	}
	if !strings.Contains(aws.ToString(dl[0].Body), `"detail":{"n":1}`) {
		t.Errorf("DLQ body = %s", aws.ToString(dl[0].Body))
	}

	// A 400 is not retried; with retries exhausted on 5xx the event is dead-lettered too.
	r.put(t, "default", `{"reject":true}`)
	dl = r.receive(t, dlqURL)
	if len(dl) != 2 {
		t.Fatalf("DLQ has %d messages, want 2 (the 400 and the missing queue)", len(dl))
	}
	mu.Lock()
	fail = 1 << 30
	mu.Unlock()
	r.put(t, "default", `{"n":2}`)
	dl = r.receive(t, dlqURL)
	var exhausted bool
	for _, m := range dl {
		if aws.ToString(m.MessageAttributes["EXHAUSTED_RETRY_CONDITION"].StringValue) == "MaximumRetryAttempts" &&
			aws.ToString(m.MessageAttributes["RETRY_ATTEMPTS"].StringValue) == "5" {
			exhausted = true
		}
	}
	if !exhausted {
		t.Errorf("no DLQ message after 5 retries")
	}
	if st := r.em.Stats(); st.InvocationsSentToDLQ != 5 || st.FailedInvocations != 5 {
		t.Errorf("stats = %+v", st)
	}
}

func TestBusTargetAndArchiveReplay(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testBusTargetAndArchiveReplay(t, "") })
	t.Run("archive on disk", func(t *testing.T) {
		dir := t.TempDir()
		testBusTargetAndArchiveReplay(t, dir)
		if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 1 {
			t.Errorf("archive files %v, want one", files)
		} else if fi, err := os.Stat(files[0]); err != nil || fi.Size() == 0 {
			t.Errorf("archive file %v holds nothing (err %v)", files[0], err)
		}
	})
}

func testBusTargetAndArchiveReplay(t *testing.T, archiveDir string) {
	r := startRules(t, fakeeventbridge.Options{Buses: []string{"cdc", "consumer"}, ArchiveDir: archiveDir})
	ctx := context.Background()
	url, arn := r.queue(t, "replayed")
	arch, err := r.eb.CreateArchive(ctx, &sdk.CreateArchiveInput{ArchiveName: aws.String("cdc-events"), EventSourceArn: aws.String(r.em.BusARN("cdc"))})
	if err != nil {
		t.Fatal(err)
	}
	// cdc → consumer bus → queue.
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("fwd"), EventBusName: aws.String("cdc"), EventPattern: aws.String(`{"source":["healthlake.cdc"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("fwd"), EventBusName: aws.String("cdc"),
		Targets: []types.Target{{Id: aws.String("bus"), Arn: aws.String(r.em.BusARN("consumer"))}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("q"), EventBusName: aws.String("consumer"), EventPattern: aws.String(`{"source":["healthlake.cdc"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("q"), EventBusName: aws.String("consumer"),
		Targets: []types.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Minute)
	r.put(t, "cdc", `{"n":1}`, `{"n":2}`)
	first := r.receive(t, url)
	if len(first) != 2 {
		t.Fatalf("consumer queue got %d events through the bus target, want 2", len(first))
	}
	d, err := r.eb.DescribeArchive(ctx, &sdk.DescribeArchiveInput{ArchiveName: aws.String("cdc-events")})
	if err != nil || d.EventCount != 2 || aws.ToString(d.ArchiveArn) != aws.ToString(arch.ArchiveArn) {
		t.Fatalf("DescribeArchive = %+v, %v", d, err)
	}
	if l, err := r.eb.ListArchives(ctx, &sdk.ListArchivesInput{}); err != nil || len(l.Archives) != 1 {
		t.Fatalf("ListArchives = %+v, %v", l, err)
	}

	// Replays go to the source bus only, and carry replay-name.
	_, err = r.eb.StartReplay(ctx, &sdk.StartReplayInput{ReplayName: aws.String("x"), EventSourceArn: arch.ArchiveArn,
		EventStartTime: aws.Time(start), EventEndTime: aws.Time(time.Now().Add(time.Minute)), Destination: &types.ReplayDestination{Arn: aws.String(r.em.BusARN("consumer"))}})
	if apiCode(err) != "ValidationException" {
		t.Errorf("cross-bus replay: %v", err)
	}
	_, err = r.eb.StartReplay(ctx, &sdk.StartReplayInput{ReplayName: aws.String("again"), EventSourceArn: arch.ArchiveArn,
		EventStartTime: aws.Time(start), EventEndTime: aws.Time(time.Now().Add(time.Minute)), Destination: &types.ReplayDestination{Arn: aws.String(r.em.BusARN("cdc"))}})
	if err != nil {
		t.Fatalf("StartReplay: %v", err)
	}
	replayed := r.receive(t, url)
	if len(replayed) != 2 {
		t.Fatalf("replay delivered %d events, want 2", len(replayed))
	}
	ids := map[string]bool{}
	for _, m := range first {
		var ev fakeeventbridge.Event
		_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &ev)
		ids[ev.ID] = true
	}
	for _, m := range replayed {
		var ev fakeeventbridge.Event
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil || ev.ReplayName != "again" || !ids[ev.ID] {
			t.Errorf("replayed event = %s", aws.ToString(m.Body))
		}
	}
	rd, err := r.eb.DescribeReplay(ctx, &sdk.DescribeReplayInput{ReplayName: aws.String("again")})
	if err != nil || rd.State != types.ReplayStateCompleted || rd.EventLastReplayedTime == nil {
		t.Fatalf("DescribeReplay = %+v, %v", rd, err)
	}
	// Replayed events are not archived again.
	if d, _ := r.eb.DescribeArchive(ctx, &sdk.DescribeArchiveInput{ArchiveName: aws.String("cdc-events")}); d.EventCount != 2 {
		t.Errorf("archive has %d events after the replay, want 2", d.EventCount)
	}
}

func TestServiceEventsReachDefaultBusRules(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{})
	ctx := context.Background()
	url, arn := r.queue(t, "svc")
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("hl"), EventPattern: aws.String(`{"source":["aws.healthlake"]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("hl"), Targets: []types.Target{{Id: aws.String("q"), Arn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.em.PutServiceEvent("default", fakeeventbridge.Event{Source: "aws.healthlake", DetailType: "Export Job Completed", Detail: json.RawMessage(`{"jobId":"j1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := r.em.PutServiceEvent("nope", fakeeventbridge.Event{Source: "aws.healthlake", Detail: json.RawMessage(`{}`)}); err == nil {
		t.Error("service event on a missing bus accepted")
	}
	got := bodies(r.receive(t, url))
	if len(got) != 1 || !strings.Contains(got[0], `"source":"aws.healthlake"`) || !strings.Contains(got[0], `"detail":{"jobId":"j1"}`) {
		t.Errorf("service event = %q", got)
	}
}

// The stack's job-event rule as the CDK app deploys it (exportjob's values)
// turns HealthLake's event into the message check-export handles.
func TestExportJobRuleMakesTheCheckExportMessage(t *testing.T) {
	r := startRules(t, fakeeventbridge.Options{})
	ctx := context.Background()
	url, arn := r.queue(t, "recheck")
	pattern, _ := json.Marshal(map[string]any{"source": []string{exportjob.JobEventSource}, "detail-type": exportjob.JobEventDetailTypes,
		"detail": map[string]any{"datastoreId": []string{"ds1"}}})
	if _, err := r.eb.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("jobs"), EventPattern: aws.String(string(pattern))}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eb.PutTargets(ctx, &sdk.PutTargetsInput{Rule: aws.String("jobs"), Targets: []types.Target{{Id: aws.String("q"), Arn: aws.String(arn),
		InputTransformer: &types.InputTransformer{InputPathsMap: exportjob.JobEventInputPathsMap, InputTemplate: aws.String(exportjob.JobEventInputTemplate)}}}}); err != nil {
		t.Fatal(err)
	}
	put := func(ds, detailType string) {
		err := r.em.PutServiceEvent("default", fakeeventbridge.Event{Source: "aws.healthlake", DetailType: detailType,
			Detail: json.RawMessage(`{"datastoreId":"` + ds + `","jobId":"j\"1","submitTime":"2026-11-21T10:00:00Z","outputDataConfig":{"s3Uri":"s3://b/exports/"}}`)})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("ds1", "Export Job Completed")
	put("ds2", "Export Job Completed") // another data store
	put("ds1", "Export Job In Progress")
	got := bodies(r.receive(t, url))
	if len(got) != 1 {
		t.Fatalf("re-check queue got %d messages, want 1: %q", len(got), got)
	}
	m, err := exportjob.ParseJobEventMessage([]byte(got[0]))
	want := exportjob.JobEventMessage{Kind: "jobEvent", DatastoreID: "ds1", JobID: `j"1`, JobStatus: "Export Job Completed"}
	if err != nil || m != want {
		t.Errorf("%s → %+v, %v; want %+v", got[0], m, err, want)
	}
}
