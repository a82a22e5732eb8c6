package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// fastPathSynth is the app's stack with the FastPath setting on (and the
// id-only payload, a 3-second batching window, a permissions boundary:
// boundaryName, the functions in a VPC: testVPC, and claim-check readers in
// other accounts: testClaimCheckReaders), synthesized once
// under cdk-nag's packs: every role the stack can create, with every option
// that adds to them.
var fastPathSynth struct {
	once     sync.Once
	json     map[string]any
	findings []string
	cfg      Config
	err      error
}

func fastPathTemplate(t *testing.T) map[string]any {
	t.Helper()
	fastPathSynth.once.Do(func() {
		cfg := synthesized.cfg
		cfg.PermissionsBoundary = boundaryName
		cfg.VPC = &testVPC
		cfg.ClaimCheckReaders = testClaimCheckReaders
		if err := cfg.Settings.Apply(map[string]string{"FastPath": "true", "FastPathPayload": "id-only", "FastPathBatchingWindow": "3s"}); err != nil {
			fastPathSynth.err = err
			return
		}
		// The fast path's two bootstraps beside the others (TestMain removes the directory).
		for _, l := range pipeline.LambdasOf(cfg.Settings) {
			if err := os.MkdirAll(filepath.Join(cfg.LambdaDir, l), 0o755); err != nil {
				fastPathSynth.err = err
				return
			}
			if err := os.WriteFile(filepath.Join(cfg.LambdaDir, l, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
				fastPathSynth.err = err
				return
			}
		}
		if err := cfg.Validate(); err != nil {
			fastPathSynth.err = err
			return
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(cfg.LambdaDir, "cdk.out.fastpath"))})
		ApplyNagPacks(app)
		stack, err := NewPipelineStack(app, cfg, nil)
		if err != nil {
			fastPathSynth.err = err
			return
		}
		fastPathSynth.json = *assertions.Template_FromStack(stack, nil).ToJSON()
		fastPathSynth.findings = errorAnnotations(stack)
		fastPathSynth.cfg = cfg
	})
	if fastPathSynth.err != nil {
		t.Fatalf("FastPath stack: %v", fastPathSynth.err)
	}
	return fastPathSynth.json
}

// onFastPath runs f with the template helpers (resources, ofType,
// statements, …) reading the FastPath stack instead of the default one.
func onFastPath(t *testing.T, f func()) {
	t.Helper()
	tpl := fastPathTemplate(t)
	saved := synthesized.json
	synthesized.json = tpl
	defer func() { synthesized.json = saved }()
	f()
}

// hasConstruct reports whether the current template has a resource of typ
// with the construct id.
func hasConstruct(typ, construct string) bool {
	ids, _ := ofType(typ)
	for _, id := range ids {
		if constructID(id) == construct {
			return true
		}
	}
	return false
}

// notificationBusPolicy returns the one AWS::Events::EventBusPolicy of the
// bus with logical id busID.
func notificationBusPolicy(t *testing.T, busID string) (string, map[string]any) {
	t.Helper()
	var id string
	var body map[string]any
	ids, bodies := ofType("AWS::Events::EventBusPolicy")
	for i, b := range bodies {
		if jsonEq(props(b)["EventBusName"], ref(busID)) {
			if body != nil {
				t.Fatalf("two policies of %s", busID)
			}
			id, body = ids[i], b
		}
	}
	if body == nil {
		t.Fatalf("no policy of %s (have %v)", busID, ids)
	}
	return id, body
}

// fastPathParts are the resources only the fast path deploys, by type and
// construct id.
var fastPathParts = [][2]string{
	{"AWS::Events::EventBus", "NotificationBus"},
	{"AWS::Events::Rule", "FastPathNotificationRule"},
	{"AWS::SQS::Queue", "FastPathQueue"},
	{"AWS::SQS::Queue", "FastPathDeadLetterQueue"},
	{"AWS::Lambda::Function", "FastPath"},
	{"AWS::Lambda::Function", "FastPathSetup"},
	{"AWS::IAM::Role", "FastPathRole"},
	{"AWS::IAM::Role", "FastPathSetupRole"},
	{"AWS::Logs::LogGroup", "FastPathLogs"},
	{"AWS::Logs::LogGroup", "FastPathSetupLogs"},
	{"Custom::HealthLakeSubscription", "FastPathSubscription"},
	{"AWS::CloudWatch::Alarm", "FastPathDeadLetterAlarm"},
	{"AWS::CloudWatch::Alarm", "FastPathMissedAlarm"},
	{"AWS::Events::Rule", "FastPathSubscriptionCheck"},
	{"AWS::Lambda::Permission", "FastPathSubscriptionCheckPermission"},
	{"AWS::CloudWatch::Alarm", "FastPathSubscriptionAlarm"},
}

// Off by default: the default stack has none of the fast path's resources,
// prepare-change may not read its records, and nothing else changed for it
// (no Rules section, no fastpath/ lifecycle rule, the events DLQ admits the
// change bus and the job-event rule only).
func TestFastPathOffDeploysNothingOfIt(t *testing.T) {
	if synthesized.cfg.Settings.FastPath {
		t.Fatal("the default settings deploy the fast path")
	}
	for _, p := range fastPathParts {
		if hasConstruct(p[0], p[1]) {
			t.Errorf("%s %s exists without the FastPath setting", p[0], p[1])
		}
	}
	if ids, _ := ofType("AWS::Events::EventBusPolicy"); len(ids) != 0 {
		t.Errorf("event bus policies without the fast path: %v", ids)
	}
	for name := range path(synthesized.json, "Rules").(map[string]any) {
		if name != "CheckBootstrapVersion" {
			t.Errorf("template Rule %s without the fast path", name)
		}
	}
	for _, s := range statements() {
		if sid, _ := s.Raw["Sid"].(string); strings.Contains(sid, "FastPath") || strings.Contains(sid, "NotificationBus") {
			t.Errorf("%s %s: statement %s without the fast path", s.ResourceType, s.Owner, sid)
		}
		if strings.Contains(flatten(s.Raw["Condition"]), iampolicy.PKFastPath) {
			t.Errorf("%s %s: condition on %s without the fast path", s.ResourceType, s.Owner, iampolicy.PKFastPath)
		}
	}
	_, bucket := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	for _, rule := range asList(path(props(bucket), "LifecycleConfiguration", "Rules")) {
		if path(rule, "Prefix") == pipeline.LegacyPrefixFastPath {
			t.Errorf("lifecycle rule for %s without the fast path", pipeline.LegacyPrefixFastPath)
		}
	}
	_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
	if v := path(props(pc), "Environment", "Variables", stackconfig.EnvFastPath); v != "false" {
		t.Errorf("prepare-change %s = %v, want false", stackconfig.EnvFastPath, v)
	}
	outputs, _ := synthesized.json["Outputs"].(map[string]any)
	for _, o := range []string{"NotificationBusArn", "FastPathQueueUrl", "FastPathDeadLetterQueueUrl"} {
		if outputs[o] != nil {
			t.Errorf("output %s without the fast path", o)
		}
	}
}

// The notification bus HealthLake delivers to: named from the pipeline,
// under the stack's key (the key policy names it as encryption context),
// its undeliverable events in the events DLQ, and a policy that admits
// HealthLake's service principal for this account only.
func TestFastPathNotificationBus(t *testing.T) {
	onFastPath(t, func() {
		busID, bus := oneOfType(t, "AWS::Events::EventBus", "NotificationBus")
		bp := props(bus)
		if bp["Name"] != pipeline.NotificationBusName(stackName) || bp["Name"] != stackName+"-notifications" {
			t.Errorf("notification bus name = %v, want %s-notifications", bp["Name"], stackName)
		}
		if !jsonEq(bp["KmsKeyIdentifier"], keyArn(t)) {
			t.Errorf("notification bus key = %v, want the stack's key", bp["KmsKeyIdentifier"])
		}
		dlqID, _ := oneOfType(t, "AWS::SQS::Queue", "EventsDeadLetterQueue")
		if !jsonEq(path(bp, "DeadLetterConfig", "Arn"), getAtt(dlqID, "Arn")) {
			t.Errorf("notification bus DeadLetterConfig = %v, want the events DLQ", bp["DeadLetterConfig"])
		}
		_, pol := notificationBusPolicy(t, busID)
		st := props(pol)["Statement"]
		if path(st, "Effect") != "Allow" || path(st, "Principal", "Service") != "healthlake.amazonaws.com" ||
			path(st, "Action") != "events:PutEvents" || !jsonEq(path(st, "Resource"), getAtt(busID, "Arn")) {
			t.Errorf("bus policy statement = %v, want healthlake.amazonaws.com events:PutEvents on the bus", st)
		}
		if !jsonEq(path(st, "Condition"), map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": ref("AWS::AccountId")}}) {
			t.Errorf("bus policy condition = %v, want aws:SourceAccount = the stack's account only", path(st, "Condition"))
		}
		// EventBridge may use the key for this bus only.
		busArn := "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/" + stackName + "-notifications"
		found := false
		for _, s := range statements() {
			if s.ResourceType == "AWS::KMS::Key" && s.Raw["Sid"] == "EventBridgeNotificationBusEncryption" {
				found = true
				ctx := asList(path(s.Raw, "Condition", "StringEquals", "kms:EncryptionContext:aws:events:event-bus:arn"))
				if len(ctx) != 1 || flatten(ctx[0]) != busArn || path(s.Raw, "Principal", "Service") != "events.amazonaws.com" {
					t.Errorf("key statement for the notification bus = %v", s.Raw)
				}
			}
		}
		if !found {
			t.Error("the key policy does not let EventBridge encrypt the notification bus")
		}
		// The events DLQ admits EventBridge for the notification bus.
		admitted := false
		for _, s := range statements() {
			if s.ResourceType == "AWS::SQS::QueuePolicy" && s.Owner == "EventsDeadLetterQueuePolicy" && s.Raw["Sid"] == "NotificationBus" {
				admitted = jsonEq(path(s.Raw, "Condition", "ArnEquals", "aws:SourceArn"), getAtt(busID, "Arn"))
			}
		}
		if !admitted {
			t.Error("the events DLQ does not admit EventBridge for the notification bus (aws:SourceArn)")
		}
		_, alarm := oneOfType(t, "AWS::CloudWatch::Alarm", "EventsDeadLetterAlarm")
		if !strings.Contains(flatten(props(alarm)["AlarmDescription"]), "notification") {
			t.Errorf("EventsDeadLetterAlarm does not name the notification bus: %v", props(alarm)["AlarmDescription"])
		}
	})
}

// The rule on the notification bus sends HealthLake's notifications (and
// nothing else) to the fast-path queue; the queue and its dead-letter
// queue are named from the pipeline, SSE-KMS with the stack's key, admit
// EventBridge for this rule only, and the dead-letter queue has an alarm.
func TestFastPathRuleQueueAndDeadLetterQueue(t *testing.T) {
	onFastPath(t, func() {
		busID, _ := oneOfType(t, "AWS::Events::EventBus", "NotificationBus")
		ruleID, rule := oneOfType(t, "AWS::Events::Rule", "FastPathNotificationRule")
		qID, q := oneOfType(t, "AWS::SQS::Queue", "FastPathQueue")
		dlqID, dlq := oneOfType(t, "AWS::SQS::Queue", "FastPathDeadLetterQueue")
		rp := props(rule)
		if !jsonEq(rp["EventBusName"], ref(busID)) || rp["State"] != "ENABLED" {
			t.Errorf("rule on %v (%v), want the notification bus, enabled", rp["EventBusName"], rp["State"])
		}
		if !jsonEq(rp["EventPattern"], map[string]any{"source": []any{"healthlake"}, "detail-type": []any{"FHIR Subscription Notification"}}) {
			t.Errorf("rule pattern = %v", rp["EventPattern"])
		}
		targets := asList(rp["Targets"])
		if len(targets) != 1 || !jsonEq(path(targets[0], "Arn"), getAtt(qID, "Arn")) ||
			!jsonEq(path(targets[0], "DeadLetterConfig", "Arn"), getAtt(dlqID, "Arn")) {
			t.Errorf("rule targets = %v, want the fast-path queue with the fast-path DLQ", targets)
		}
		if props(q)["QueueName"] != stackName+"-fast-path" || props(dlq)["QueueName"] != stackName+"-fast-path-dlq" {
			t.Errorf("queue names %v, %v", props(q)["QueueName"], props(dlq)["QueueName"])
		}
		for id, body := range map[string]map[string]any{qID: q, dlqID: dlq} {
			if !jsonEq(props(body)["KmsMasterKeyId"], keyArn(t)) {
				t.Errorf("%s is not SSE-KMS with the stack's key", id)
			}
			// A notification's detail is up to 256 KB; with EventBridge's
			// envelope it needs more than SQS's default 256 KiB.
			if props(body)["MaximumMessageSize"] != 1048576.0 {
				t.Errorf("%s MaximumMessageSize = %v, want 1 MiB", id, props(body)["MaximumMessageSize"])
			}
		}
		set := fastPathSynth.cfg.Settings
		if !jsonEq(path(props(q), "RedrivePolicy", "deadLetterTargetArn"), getAtt(dlqID, "Arn")) ||
			path(props(q), "RedrivePolicy", "maxReceiveCount") != float64(set.MaxReceiveCount) {
			t.Errorf("fast-path queue redrive = %v, want the DLQ after %d receives", path(props(q), "RedrivePolicy"), set.MaxReceiveCount)
		}
		if path(props(dlq), "MessageRetentionPeriod") != 1209600.0 {
			t.Errorf("fast-path DLQ retention = %v, want 14 days", path(props(dlq), "MessageRetentionPeriod"))
		}
		if v := path(props(q), "VisibilityTimeout"); v != float64(stackconfig.Seconds(set.FastPathVisibility())) ||
			v != float64(stackconfig.Seconds(stackconfig.VisibilityTimeout(set.FastPathFunction)+set.FastPathBatchingWindow)) {
			t.Errorf("fast-path queue visibility = %v, want %d × the Lambda's timeout plus the batching window", v, stackconfig.VisibilityFactor)
		}
		for _, owner := range []string{"FastPathQueuePolicy", "FastPathDeadLetterQueuePolicy"} {
			var events, tls bool
			for _, s := range statements() {
				if s.ResourceType != "AWS::SQS::QueuePolicy" || s.Owner != owner {
					continue
				}
				if s.Effect == "Deny" && path(s.Raw, "Condition", "Bool", "aws:SecureTransport") == "false" {
					tls = true
				}
				if s.Effect == "Allow" {
					if path(s.Raw, "Principal", "Service") != "events.amazonaws.com" || !containsAll(s.Actions, []string{"sqs:SendMessage"}) ||
						!jsonEq(path(s.Raw, "Condition", "ArnEquals", "aws:SourceArn"), getAtt(ruleID, "Arn")) {
						t.Errorf("%s allows %v", owner, s.Raw)
					}
					events = true
				}
			}
			if !events || !tls {
				t.Errorf("%s: EventBridge for the rule %v, TLS only %v", owner, events, tls)
			}
		}
		topicID, _ := oneOfType(t, "AWS::SNS::Topic", "AlarmTopic")
		_, a := oneOfType(t, "AWS::CloudWatch::Alarm", "FastPathDeadLetterAlarm")
		ap := props(a)
		if ap["Namespace"] != "AWS/SQS" || ap["MetricName"] != "ApproximateNumberOfMessagesVisible" || ap["Threshold"] != 0.0 ||
			ap["ComparisonOperator"] != "GreaterThanThreshold" || !jsonEq(path(ap, "Dimensions", 0, "Value"), getAtt(dlqID, "QueueName")) ||
			!jsonEq(asList(ap["AlarmActions"]), []any{ref(topicID)}) {
			t.Errorf("FastPathDeadLetterAlarm = %v", ap)
		}
	})
}

// The fast-path Lambda: the other Lambdas' runtime, its own log group,
// timeout and memory from the settings, exactly LambdaEnv's environment,
// and a mapping of up to 100 notifications within 1 s with partial batch
// responses. The setup Lambda likewise.
func TestFastPathLambdaAndMapping(t *testing.T) {
	onFastPath(t, func() {
		set := fastPathSynth.cfg.Settings
		bucketID, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
		tableID, _ := oneOfType(t, "AWS::DynamoDB::Table", "Table")
		keyID, _ := oneOfType(t, "AWS::KMS::Key", "Key")
		busID, _ := oneOfType(t, "AWS::Events::EventBus", "EventBus")
		roleID, _ := oneOfType(t, "AWS::IAM::Role", "HealthLakeExportRole")
		recheckID, _ := oneOfType(t, "AWS::SQS::Queue", "RecheckQueue")
		res := stackconfig.Resources{
			Pipeline: stackName, Bucket: "${" + bucketID + "}", Table: "${" + tableID + "}",
			DatastoreID: "${" + ParamDatastoreID + "}", HealthLakeEndpoint: "https://healthlake.${AWS::Region}.${AWS::URLSuffix}",
			ExportRoleARN: "${" + roleID + ".Arn}", KMSKeyID: "${" + keyID + ".Arn}", RecheckQueueURL: "${" + recheckID + "}",
			EventBus: "${" + busID + "}", EventSource: "healthlake.cdc", DetailType: "FHIR Resource Changed",
			ResourceTypes: "${" + ParamResourceTypes + "}", ExcludeTypes: "${" + ParamExcludeTypes + "}",
			MaxEntryBytes: "${" + ParamMaxEntryBytes + "}", Validate: "${" + ParamValidateLevel + "}",
			SafetyLag: "${" + ParamSafetyLag + "}", InitialCheckpoint: "${" + ParamInitialCheckpoint + "}",
		}
		for name, construct := range map[string]string{stackconfig.FastPath: "FastPath", stackconfig.FastPathSetup: "FastPathSetup"} {
			fnID, f := oneOfType(t, "AWS::Lambda::Function", construct)
			p := props(f)
			sf, _ := set.Function(name)
			if p["Runtime"] != "provided.al2023" || !jsonEq(p["Architectures"], []any{"arm64"}) || p["Handler"] != "bootstrap" {
				t.Errorf("%s runtime %v %v %v", fnID, p["Runtime"], p["Architectures"], p["Handler"])
			}
			if p["Timeout"] != float64(stackconfig.Seconds(sf.Timeout)) || p["MemorySize"] != float64(sf.MemoryMB) {
				t.Errorf("%s timeout %v memory %v, want %v and %d", fnID, p["Timeout"], p["MemorySize"], sf.Timeout, sf.MemoryMB)
			}
			if path(p, "Code", "S3Key") == nil {
				t.Errorf("%s code is not an asset", fnID)
			}
			if p["ReservedConcurrentExecutions"] != nil {
				t.Errorf("%s reserves concurrency by default", fnID)
			}
			if !strings.Contains(flatten(f["Metadata"]), "HIPAA.Security-LambdaConcurrency") {
				t.Errorf("%s: no LambdaConcurrency suppression", fnID)
			}
			got := map[string]string{}
			for k, v := range path(p, "Environment", "Variables").(map[string]any) {
				got[k] = flatten(v)
			}
			if want := set.LambdaEnv(name, res); !jsonEq(got, want) {
				t.Errorf("%s environment = %v\nwant LambdaEnv's %v", fnID, got, want)
			}
			lg, lgBody := oneOfType(t, "AWS::Logs::LogGroup", construct+"Logs")
			if !jsonEq(path(p, "LoggingConfig", "LogGroup"), ref(lg)) {
				t.Errorf("%s logs to %v, want %s", fnID, path(p, "LoggingConfig", "LogGroup"), lg)
			}
			if lgBody["DeletionPolicy"] != "Retain" || props(lgBody)["LogGroupName"] != nil ||
				!jsonEq(props(lgBody)["RetentionInDays"], ref(ParamLogRetentionDays)) || !jsonEq(props(lgBody)["KmsKeyId"], keyArn(t)) {
				t.Errorf("log group %s = %v: want retained, a generated name, LogRetentionDays, the stack's key", lg, lgBody)
			}
		}
		if env := set.LambdaEnv(stackconfig.FastPath, res); env[stackconfig.EnvFastPath] != "" {
			t.Errorf("the fast path's own env has %s", stackconfig.EnvFastPath)
		}
		_, pc := oneOfType(t, "AWS::Lambda::Function", "PrepareChange")
		if v := path(props(pc), "Environment", "Variables", stackconfig.EnvFastPath); v != "true" {
			t.Errorf("prepare-change %s = %v, want true", stackconfig.EnvFastPath, v)
		}

		fnID, _ := oneOfType(t, "AWS::Lambda::Function", "FastPath")
		qID, _ := oneOfType(t, "AWS::SQS::Queue", "FastPathQueue")
		var mapping map[string]any
		ids, esms := ofType("AWS::Lambda::EventSourceMapping")
		for i, e := range esms {
			if jsonEq(path(props(e), "EventSourceArn"), getAtt(qID, "Arn")) {
				if mapping != nil {
					t.Fatalf("two mappings of the fast-path queue")
				}
				mapping = e
				if !strings.HasPrefix(ids[i], "FastPath") {
					t.Errorf("mapping id %s", ids[i])
				}
			}
		}
		if mapping == nil {
			t.Fatalf("no mapping of the fast-path queue (have %v)", ids)
		}
		mp := props(mapping)
		if !jsonEq(mp["FunctionName"], ref(fnID)) || mp["BatchSize"] != 100.0 || mp["MaximumBatchingWindowInSeconds"] != 3.0 ||
			!jsonEq(mp["FunctionResponseTypes"], []any{"ReportBatchItemFailures"}) {
			t.Errorf("fast-path mapping = %v, want %s, batch 100 within the FastPathBatchingWindow setting (3 s), ReportBatchItemFailures", mp, fnID)
		}
		if v := path(mp, "ScalingConfig", "MaximumConcurrency"); v != float64(set.MapMaxConcurrency) {
			t.Errorf("fast-path mapping MaximumConcurrency = %v, want MapMaxConcurrency %d", v, set.MapMaxConcurrency)
		}
		// Lambda checks the role for sqs:ReceiveMessage when it creates
		// the mapping: the role's policy exists first.
		policyID, _ := oneOfType(t, "AWS::IAM::ManagedPolicy", "FastPathRolePolicy")
		if !containsAll(strs(mapping["DependsOn"]), []string{policyID}) {
			t.Errorf("fast-path mapping DependsOn %v, want the role's policy %s", mapping["DependsOn"], policyID)
		}
	})
}

// The custom resource keeps the SubscriptionTopic and Subscription: its
// function is the setup Lambda, its properties the data store, the
// pipeline's types, the notification bus, the payload and the name, and it
// is created after the bus admits HealthLake, the rule exists and the
// setup role has its statements. An empty ResourceTypes parameter is
// refused before the deploy touches anything (a template Rule).
func TestFastPathSubscriptionCustomResource(t *testing.T) {
	onFastPath(t, func() {
		setupID, _ := oneOfType(t, "AWS::Lambda::Function", "FastPathSetup")
		busID, _ := oneOfType(t, "AWS::Events::EventBus", "NotificationBus")
		crID, cr := oneOfType(t, "Custom::HealthLakeSubscription", "FastPathSubscription")
		p := props(cr)
		want := map[string]any{
			"ServiceToken":   getAtt(setupID, "Arn"),
			"DatastoreId":    ref(ParamDatastoreID),
			"Types":          map[string]any{"Fn::Split": []any{",", ref(ParamResourceTypes)}},
			"BusArn":         getAtt(busID, "Arn"),
			"Payload":        "id-only",
			"Name":           stackName,
			"ServiceTimeout": float64(3*stackconfig.Seconds(fastPathSynth.cfg.Settings.FastPathSetupFunction.Timeout) + 180),
		}
		got := map[string]string{}
		for k, v := range p {
			got[k] = flatten(v)
		}
		wantFlat := map[string]string{}
		for k, v := range want {
			wantFlat[k] = flatten(v)
		}
		if !jsonEq(got, wantFlat) {
			t.Errorf("%s properties = %v\nwant %v", crID, got, wantFlat)
		}
		polID, _ := notificationBusPolicy(t, busID)
		ruleID, _ := oneOfType(t, "AWS::Events::Rule", "FastPathNotificationRule")
		roleID, _ := oneOfType(t, "AWS::IAM::Role", "FastPathSetupRole")
		rolePolicyID, _ := oneOfType(t, "AWS::IAM::ManagedPolicy", "FastPathSetupRolePolicy")
		if deps := strs(cr["DependsOn"]); !containsAll(deps, []string{busID, polID, ruleID, roleID, rolePolicyID}) {
			t.Errorf("%s DependsOn %v, want the bus policy, the rule, the setup role and its policy", crID, deps)
		}
		rules, _ := synthesized.json["Rules"].(map[string]any)
		found := false
		for name, r := range rules {
			if !strings.HasPrefix(name, "FastPathNeedsResourceTypes") {
				continue
			}
			found = true
			a := path(r, "Assertions", 0)
			if !jsonEq(path(a, "Assert"), map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{ref(ParamResourceTypes), ""}}}}) ||
				!strings.Contains(flatten(path(a, "AssertDescription")), "ResourceTypes") {
				t.Errorf("rule %s = %v", name, r)
			}
		}
		if !found {
			t.Errorf("no template Rule refuses an empty %s: %v", ParamResourceTypes, rules)
		}
	})
}

// FastPathMissed pages when windows published versions the fast path had
// not delivered in three consecutive 5-minute periods; the dashboard shows
// it with FastPathSkipped, and the fast-path DLQ's depth.
func TestFastPathMissedAlarmAndDashboard(t *testing.T) {
	onFastPath(t, func() {
		topicID, _ := oneOfType(t, "AWS::SNS::Topic", "AlarmTopic")
		_, a := oneOfType(t, "AWS::CloudWatch::Alarm", "FastPathMissedAlarm")
		p := props(a)
		if p["Namespace"] != MetricNamespace || p["MetricName"] != metrics.FastPathMissed || p["Statistic"] != "Sum" ||
			p["Period"] != 300.0 || p["EvaluationPeriods"] != 3.0 || p["Threshold"] != 0.0 ||
			p["ComparisonOperator"] != "GreaterThanThreshold" || p["TreatMissingData"] != "notBreaching" {
			t.Errorf("FastPathMissedAlarm = %v", p)
		}
		if !jsonEq(p["Dimensions"], []any{map[string]any{"Name": MetricDimension, "Value": stackName}}) {
			t.Errorf("FastPathMissedAlarm dimensions = %v", p["Dimensions"])
		}
		if !jsonEq(asList(p["AlarmActions"]), []any{ref(topicID)}) || !jsonEq(asList(p["OKActions"]), []any{ref(topicID)}) {
			t.Errorf("FastPathMissedAlarm actions = %v / %v", p["AlarmActions"], p["OKActions"])
		}
		if desc, _ := p["AlarmDescription"].(string); !strings.Contains(desc, "docs/FASTPATH.md") || !strings.Contains(desc, "lost or late") {
			t.Errorf("FastPathMissedAlarm description %q: say what it means and where to look", desc)
		}
		_, d := oneOfType(t, "AWS::CloudWatch::Dashboard", "Dashboard")
		body := flatten(props(d)["DashboardBody"])
		for _, m := range []string{metrics.FastPathSkipped, metrics.FastPathMissed, "fast-path DLQ"} {
			if !strings.Contains(body, m) {
				t.Errorf("dashboard does not show %s", m)
			}
		}
	})
}

// The FastPath stack passes cdk-nag; every Resource "*" in it is one
// docs/DEPLOY.md lists, every other resource is scoped; its fixed names
// are those CheckName holds to their limits; prepare-change reads the
// fast path's records, which expire with delivered/.
func TestFastPathStackNagIAMNamesAndLifecycle(t *testing.T) {
	fastPathTemplate(t)
	for _, f := range fastPathSynth.findings {
		t.Error(f)
	}
	documented := documentedStars(t)
	onFastPath(t, func() {
		for _, s := range statements() {
			if s.Effect != "Allow" {
				continue
			}
			for _, r := range s.Resources {
				f := flatten(r)
				if f == "*" {
					if _, ok := documented[entry(s.Owner, s.ResourceType, s.Actions)]; !ok {
						t.Errorf("undocumented Resource \"*\": %v", entry(s.Owner, s.ResourceType, s.Actions))
					}
				} else if why := scoped(f); why != "" {
					t.Errorf("%s %s: %v on %s: %s", s.ResourceType, s.Owner, s.Actions, f, why)
				}
			}
		}
		derived := map[string]bool{}
		for _, d := range pipeline.DerivedNames(stackName) {
			derived[d.Name] = true
		}
		for typ, prop := range map[string]string{"AWS::SQS::Queue": "QueueName", "AWS::Events::EventBus": "Name", "AWS::Events::Rule": "Name"} {
			ids, rs := ofType(typ)
			for i, r := range rs {
				if v, ok := props(r)[prop]; ok {
					if s, _ := v.(string); !derived[s] && !(typ == "AWS::Events::EventBus" && jsonEq(v, ref(ParamEventBusName))) {
						t.Errorf("%s %s is named %v, not one of pipeline.DerivedNames", typ, ids[i], v)
					}
				}
			}
		}
		// The record: the fast path writes its items, prepare-change
		// queries them, each limited to FASTPATH# items.
		table := templateResources(t).TableARN
		for _, c := range []struct{ owner, action string }{{"FastPathRole", "dynamodb:PutItem"}, {"PrepareChangeRole", "dynamodb:Query"}} {
			found := false
			for _, s := range statements() {
				if s.Owner == c.owner && slices.Contains(s.Actions, c.action) && slices.ContainsFunc(s.Resources, func(r any) bool { return flatten(r) == table }) {
					found = true
					if !leadingKeysOnly(s, iampolicy.PKFastPath) {
						t.Errorf("%s %s on the table: not limited to %s items: %v", c.owner, c.action, iampolicy.PKFastPath, s.Raw["Condition"])
					}
				}
			}
			if !found {
				t.Errorf("%s may not %s the fast path's record", c.owner, c.action)
			}
		}
		// What an earlier version wrote under fastpath/ expires.
		_, b := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
		found := false
		for _, rule := range asList(path(props(b), "LifecycleConfiguration", "Rules")) {
			if path(rule, "Prefix") == pipeline.LegacyPrefixFastPath {
				found = path(rule, "ExpirationInDays") == float64(1)
			}
		}
		if !found {
			t.Errorf("no 1-day lifecycle rule for %s, the record objects earlier versions wrote", pipeline.LegacyPrefixFastPath)
		}
		_, fp := oneOfType(t, "AWS::Lambda::Function", "FastPath")
		if v := path(props(fp), "Environment", "Variables", stackconfig.EnvTable); v == nil {
			t.Errorf("the fast-path Lambda has no %s", stackconfig.EnvTable)
		}
		outputs, _ := synthesized.json["Outputs"].(map[string]any)
		var names []string
		for _, o := range []string{"NotificationBusArn", "FastPathQueueUrl", "FastPathDeadLetterQueueUrl"} {
			if outputs[o] == nil {
				names = append(names, o)
			}
		}
		sort.Strings(names)
		if len(names) > 0 {
			t.Errorf("outputs missing: %v", names)
		}
	})
}

// The fast-path Lambda logs in JSON with Lambda's platform lines at WARN
// (no START, END and REPORT line per invocation: docs/COST.md, "The fast
// path") and its own from INFO, in its log group; the other functions keep
// the default (text, every platform line).
func TestFastPathLoggingConfig(t *testing.T) {
	onFastPath(t, func() {
		ids, fns := ofType("AWS::Lambda::Function")
		if len(ids) != 8 {
			t.Errorf("%d functions with the fast path, want 8", len(ids))
		}
		for i, f := range fns {
			construct := constructID(ids[i])
			lg, _ := oneOfType(t, "AWS::Logs::LogGroup", construct+"Logs")
			want := map[string]any{"LogGroup": ref(lg)}
			if construct == "FastPath" {
				want = map[string]any{"ApplicationLogLevel": "INFO", "LogFormat": "JSON", "LogGroup": ref(lg), "SystemLogLevel": "WARN"}
			}
			if got := path(props(f), "LoggingConfig"); !jsonEq(got, want) {
				t.Errorf("%s LoggingConfig = %v, want %v", ids[i], got, want)
			}
		}
	})
}

// The setup Lambda checks the Subscription between deploys: a schedule
// every 10 minutes whose constant input is the custom resource's
// properties under "check" (subscription.CheckEvent), which only that rule
// may invoke it with, removed before the Subscription on stack deletion
// (it depends on the custom resource); an alarm when the check reports the
// Subscription inactive, or nothing, three times in a row.
func TestFastPathSubscriptionCheck(t *testing.T) {
	onFastPath(t, func() {
		setupID, _ := oneOfType(t, "AWS::Lambda::Function", "FastPathSetup")
		busID, _ := oneOfType(t, "AWS::Events::EventBus", "NotificationBus")
		crID, _ := oneOfType(t, "Custom::HealthLakeSubscription", "FastPathSubscription")
		ruleID, rule := oneOfType(t, "AWS::Events::Rule", "FastPathSubscriptionCheck")
		p := props(rule)
		if p["ScheduleExpression"] != "rate(10 minutes)" || p["State"] != "ENABLED" {
			t.Errorf("check rule = %v", p)
		}
		targets, _ := p["Targets"].([]any)
		if len(targets) != 1 {
			t.Fatalf("check rule targets = %v", p["Targets"])
		}
		tg, _ := targets[0].(map[string]any)
		if !jsonEq(tg["Arn"], getAtt(setupID, "Arn")) {
			t.Errorf("check target = %v, want the setup Lambda", tg["Arn"])
		}
		input := flatten(tg["Input"])
		for _, want := range []string{`{"check":{`, `"DatastoreId":"${` + ParamDatastoreID + `}"`, `"Types":"${` + ParamResourceTypes + `}"`,
			`"BusArn":"${` + busID + `.Arn}"`, `"Payload":"id-only"`, `"Name":"` + stackName + `"`} {
			if !strings.Contains(input, want) {
				t.Errorf("check input %s lacks %s", input, want)
			}
		}
		if deps := strs(rule["DependsOn"]); !containsAll(deps, []string{crID}) {
			t.Errorf("check rule DependsOn %v, want the custom resource %s", deps, crID)
		}
		_, perm := oneOfType(t, "AWS::Lambda::Permission", "FastPathSubscriptionCheckPermission")
		if pp := props(perm); !jsonEq(pp, map[string]any{"Action": "lambda:InvokeFunction", "FunctionName": getAtt(setupID, "Arn"),
			"Principal": "events.amazonaws.com", "SourceArn": getAtt(ruleID, "Arn"), "SourceAccount": ref("AWS::AccountId")}) {
			t.Errorf("check permission = %v", pp)
		}
		_, a := oneOfType(t, "AWS::CloudWatch::Alarm", "FastPathSubscriptionAlarm")
		ap := props(a)
		if ap["Namespace"] != MetricNamespace || ap["MetricName"] != metrics.FastPathSubscriptionInactive || ap["Statistic"] != "Maximum" ||
			ap["Period"] != 600.0 || ap["EvaluationPeriods"] != 3.0 || ap["Threshold"] != 0.0 ||
			ap["ComparisonOperator"] != "GreaterThanThreshold" || ap["TreatMissingData"] != "breaching" {
			t.Errorf("FastPathSubscriptionAlarm = %v", ap)
		}
		if desc, _ := ap["AlarmDescription"].(string); !strings.Contains(desc, "docs/OPERATIONS.md") {
			t.Errorf("FastPathSubscriptionAlarm description %q: say where to look", desc)
		}
	})
}
