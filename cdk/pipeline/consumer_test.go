package pipeline

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/eventpattern"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/cdcevent"
)

// consumerStack synthesizes a stack with a bus and one consumer of Patient
// upserts, under cdk-nag's AwsSolutions and HIPAA Security packs.
func consumerStack(t *testing.T) (awscdk.Stack, *Consumer, map[string]any) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewHIPAASecurityChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	stack := awscdk.NewStack(app, jsii.String("ConsumerTest"), nil)
	bus := awsevents.EventBus_FromEventBusName(stack, jsii.String("Bus"), jsii.String("healthlake-cdc"))
	c, err := NewConsumer(stack, "PatientSync", ConsumerProps{
		Bus:    bus,
		Detail: map[string]any{"resourceType": []any{"Patient"}, "operation": []any{"upsert"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tpl := assertions.Template_FromStack(stack, nil)
	return stack, c, *tpl.ToJSON()
}

func resourcesOf(tpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == typ {
			out[id] = r.(map[string]any)
		}
	}
	return out
}

func only(t *testing.T, tpl map[string]any, typ string) (string, map[string]any) {
	t.Helper()
	rs := resourcesOf(tpl, typ)
	if len(rs) != 1 {
		t.Fatalf("%d %s, want 1", len(rs), typ)
	}
	for id, r := range rs {
		return id, r["Properties"].(map[string]any)
	}
	return "", nil
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// changeEvent is an event as the pipeline publishes it: envelope and a
// detail built by internal/envelope.
func changeEvent(t *testing.T, source, resourceType string) []byte {
	t.Helper()
	r := envelope.Resource{ResourceType: resourceType, ID: "x1", VersionID: "3", LastUpdated: "2026-11-21T10:01:00.000Z",
		Raw: []byte(`{"resourceType":"` + resourceType + `","id":"x1"}`)}
	w := envelope.Window{Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)}
	detail := envelope.AppendDetail(nil, r, w, envelope.ExportRef{DatastoreID: "d", JobID: "j"}, nil)
	ev, err := json.Marshal(map[string]any{"version": "0", "id": "e1", "detail-type": cdcevent.DefaultDetailType,
		"source": source, "account": "111122223333", "time": "2026-11-21T10:05:00Z", "region": "eu-west-1",
		"resources": []string{}, "detail": json.RawMessage(detail)})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestConsumerRuleQueueAndDeadLetterQueue(t *testing.T) {
	stack, c, tpl := consumerStack(t)

	// The rule: on the bus, the pipeline's source and detail type and the
	// detail filter, to the queue, failed deliveries to the DLQ.
	_, rule := only(t, tpl, "AWS::Events::Rule")
	queues := resourcesOf(tpl, "AWS::SQS::Queue")
	var queueID, dlqID string
	for id := range queues {
		if p, _ := queues[id]["Properties"].(map[string]any); p["RedrivePolicy"] != nil {
			queueID = id
		} else {
			dlqID = id
		}
	}
	if len(queues) != 2 || queueID == "" || dlqID == "" {
		t.Fatalf("queues %v: want a queue with a redrive policy and its DLQ", queues)
	}
	wantPattern := `{"detail":{"operation":["upsert"],"resourceType":["Patient"]},"detail-type":["FHIR Resource Changed"],"source":["healthlake.cdc"]}`
	if js(rule["EventPattern"]) != wantPattern {
		t.Errorf("pattern = %s", js(rule["EventPattern"]))
	}
	if rule["EventBusName"] != "healthlake-cdc" {
		t.Errorf("rule bus = %v", rule["EventBusName"])
	}
	target := rule["Targets"].([]any)[0].(map[string]any)
	if js(target["Arn"]) != js(map[string]any{"Fn::GetAtt": []any{queueID, "Arn"}}) ||
		js(target["DeadLetterConfig"]) != js(map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}}}) {
		t.Errorf("target = %s", js(target))
	}

	// Both queues SSE-KMS with the customer-managed key; the queue redrives
	// to the DLQ after 5 receives.
	keyID, key := only(t, tpl, "AWS::KMS::Key")
	if key["EnableKeyRotation"] != true {
		t.Errorf("key rotation off")
	}
	for id, q := range queues {
		p := q["Properties"].(map[string]any)
		if js(p["KmsMasterKeyId"]) != js(map[string]any{"Fn::GetAtt": []any{keyID, "Arn"}}) {
			t.Errorf("queue %s not encrypted with the consumer's key: %v", id, p["KmsMasterKeyId"])
		}
	}
	redrive := queues[queueID]["Properties"].(map[string]any)["RedrivePolicy"].(map[string]any)
	if js(redrive["deadLetterTargetArn"]) != js(map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}}) || redrive["maxReceiveCount"] != 5.0 {
		t.Errorf("redrive = %s", js(redrive))
	}

	// Each queue's policy: EventBridge may send only for this rule; the
	// rest denies non-TLS access.
	ruleArn := js(map[string]any{"Fn::GetAtt": []any{only2(t, tpl, "AWS::Events::Rule"), "Arn"}})
	policed := map[string]bool{}
	for _, pol := range resourcesOf(tpl, "AWS::SQS::QueuePolicy") {
		p := pol["Properties"].(map[string]any)
		for _, s := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := s.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			cond := js(st["Condition"])
			if js(st["Principal"]) != `{"Service":"events.amazonaws.com"}` || js(st["Action"]) != `"sqs:SendMessage"` ||
				cond != `{"ArnEquals":{"aws:SourceArn":`+ruleArn+`}}` {
				t.Errorf("queue policy allows %s", js(st))
			}
			for _, q := range p["Queues"].([]any) {
				policed[js(q)] = true
			}
		}
	}
	for _, id := range []string{queueID, dlqID} {
		if !policed[js(map[string]any{"Ref": id})] {
			t.Errorf("queue %s: no statement admitting the rule", id)
		}
	}
	// The key lets EventBridge encrypt messages to the queues.
	found := false
	for _, s := range key["KeyPolicy"].(map[string]any)["Statement"].([]any) {
		st := s.(map[string]any)
		if js(st["Principal"]) == `{"Service":"events.amazonaws.com"}` {
			acts := map[string]bool{}
			for _, a := range asStrings(st["Action"]) {
				acts[a] = true
			}
			found = acts["kms:Decrypt"] && acts["kms:GenerateDataKey"] && len(acts) == 2
		}
	}
	if !found {
		t.Errorf("key policy lets EventBridge neither encrypt nor decrypt")
	}

	// The deployed pattern receives the pipeline's Patient events and no other.
	p, err := eventpattern.Parse(js(c.Pattern))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		source, typ string
		want        bool
	}{{cdcevent.DefaultSource, "Patient", true}, {cdcevent.DefaultSource, "Observation", false}, {"other.app", "Patient", false}} {
		got, err := p.Matches(changeEvent(t, tc.source, tc.typ))
		if err != nil || got != tc.want {
			t.Errorf("%s %s: matches=%v (%v), want %v", tc.source, tc.typ, got, err, tc.want)
		}
	}

	// cdk-nag's AwsSolutions and HIPAA Security packs find nothing.
	findings := errorAnnotations(stack)
	for _, f := range findings {
		t.Error(f)
	}
}

func only2(t *testing.T, tpl map[string]any, typ string) string {
	id, _ := only(t, tpl, typ)
	return id
}

// A detail pattern EventBridge would refuse fails the synth with the reason;
// so does a consumer without a bus or with an impossible receive count.
func TestConsumerRefusesBadProps(t *testing.T) {
	if _, err := ConsumerPattern("", "", map[string]any{"resourceType": "Patient"}); err == nil {
		t.Errorf("a detail filter that is not an array was accepted")
	}
	if _, err := ConsumerPattern("", "", map[string]any{"versionId": []any{map[string]any{"numeric": []any{">", "x"}}}}); err == nil {
		t.Errorf("a bad numeric filter was accepted")
	}
	p, err := ConsumerPattern("", "", nil)
	if err != nil || js(p) != `{"detail-type":["FHIR Resource Changed"],"source":["healthlake.cdc"]}` {
		t.Errorf("default pattern = %s, %v", js(p), err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	stack := awscdk.NewStack(app, jsii.String("Bad"), nil)
	if _, err := NewConsumer(stack, "NoBus", ConsumerProps{}); err == nil {
		t.Errorf("consumer without a bus accepted")
	}
	bus := awsevents.EventBus_FromEventBusName(stack, jsii.String("Bus"), jsii.String("b"))
	if _, err := NewConsumer(stack, "Receives", ConsumerProps{Bus: bus, MaxReceiveCount: 1001}); err == nil {
		t.Errorf("MaxReceiveCount 1001 accepted")
	}
	// EventBridge's PutRule takes 64 characters of [.-_A-Za-z0-9].
	for _, name := range []string{strings.Repeat("r", 65), "patient sync"} {
		if _, err := NewConsumer(stack, "Rule"+fmt.Sprint(len(name)), ConsumerProps{Bus: bus, RuleName: name}); err == nil || !strings.Contains(err.Error(), "RuleName") {
			t.Errorf("RuleName %q: %v, want an error naming RuleName", name, err)
		}
	}
}

func asStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// A consumer whose queue is in another account: the rule in this account
// delivers to that queue as an execution role of this account (AWS requires
// the role for a target in another account), which may send to that queue
// and use its key, and nothing else; no queue of its own, the dead-letter
// queue for undeliverable events stays here; cdk-nag finds nothing.
func TestConsumerWithARemoteQueue(t *testing.T) {
	const queue = "arn:aws:sqs:us-east-1:111122223333:patient-sync"
	const key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(t.TempDir(), "cdk.out"))})
	ApplyNagPacks(app)
	stack := awscdk.NewStack(app, jsii.String("RemoteConsumerTest"), nil)
	bus := awsevents.EventBus_FromEventBusName(stack, jsii.String("Bus"), jsii.String("healthlake-cdc"))
	c, err := NewConsumer(stack, "PatientSync", ConsumerProps{
		Bus: bus, Detail: map[string]any{"resourceType": []any{"Patient"}},
		RemoteQueueARN: queue, RemoteQueueKeyARN: key,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Queue != nil || c.Role == nil {
		t.Fatalf("Queue %v, Role %v: want no queue of its own and a delivery role", c.Queue, c.Role)
	}
	for _, f := range errorAnnotations(stack) {
		t.Error(f)
	}
	tpl := *assertions.Template_FromStack(stack, nil).ToJSON()
	if n := len(resourcesOf(tpl, "AWS::SQS::Queue")); n != 1 {
		t.Errorf("%d queues, want the dead-letter queue only", n)
	}
	var rule map[string]any
	for _, r := range resourcesOf(tpl, "AWS::Events::Rule") {
		rule = r["Properties"].(map[string]any)
	}
	target := rule["Targets"].([]any)[0].(map[string]any)
	if target["Arn"] != queue || target["RoleArn"] == nil || target["DeadLetterConfig"] == nil || target["RetryPolicy"] == nil {
		t.Errorf("rule target %s: want the remote queue, a RoleArn, a dead-letter queue and a retry policy", js(target))
	}
	var trust, policy string
	for _, r := range resourcesOf(tpl, "AWS::IAM::Role") {
		trust = js(r["Properties"].(map[string]any)["AssumeRolePolicyDocument"])
	}
	for _, p := range resourcesOf(tpl, "AWS::IAM::ManagedPolicy") {
		policy = js(p["Properties"].(map[string]any)["PolicyDocument"])
	}
	for _, want := range []string{"events.amazonaws.com", "aws:SourceAccount"} {
		if !strings.Contains(trust, want) {
			t.Errorf("trust %s lacks %s", trust, want)
		}
	}
	for _, want := range []string{`"sqs:SendMessage"`, `"Resource":"` + queue + `"`, `"kms:GenerateDataKey"`, `"kms:Decrypt"`, `"Resource":"` + key + `"`} {
		if !strings.Contains(policy, want) {
			t.Errorf("role policy %s lacks %s", policy, want)
		}
	}
	if strings.Count(policy, `"Sid"`) != 2 {
		t.Errorf("role policy %s: want the two statements only", policy)
	}
	bad := awscdk.NewStack(app, jsii.String("Bad"), nil)
	for _, p := range []ConsumerProps{
		{Bus: bus, RemoteQueueARN: "https://sqs.us-east-1.amazonaws.com/111122223333/q"},
		{Bus: bus, RemoteQueueARN: queue, RemoteQueueKeyARN: "alias/q"},
		{Bus: bus, RemoteQueueKeyARN: key},
	} {
		if _, err := NewConsumer(bad, fmt.Sprintf("C%d", len(p.RemoteQueueARN)+len(p.RemoteQueueKeyARN)), p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
}
