package main

import (
	"strings"
	"testing"
)

// Issue "Deploys on a fresh AWS account", item 5: the bus encrypted with the
// customer-managed key has a dead-letter queue (EventBridge recommends one
// for events that fail to encrypt or decrypt), and so does every target the
// stack's rule and schedules deliver to; one encrypted, TLS-only queue
// serves them all, with an alarm on its depth.
func TestEventsDeadLetterQueueOfTheBusRuleAndSchedules(t *testing.T) {
	dlqID, dlq := oneOfType(t, "AWS::SQS::Queue", "EventsDeadLetterQueue")
	dlqArn := getAtt(dlqID, "Arn")
	if !jsonEq(path(props(dlq), "KmsMasterKeyId"), keyArn(t)) {
		t.Errorf("events DLQ key = %v, want the stack's key", path(props(dlq), "KmsMasterKeyId"))
	}
	if path(props(dlq), "MessageRetentionPeriod") != 1209600.0 {
		t.Errorf("events DLQ retention = %v, want 14 days", path(props(dlq), "MessageRetentionPeriod"))
	}

	busID, bus := oneOfType(t, "AWS::Events::EventBus", "EventBus")
	if !jsonEq(path(props(bus), "DeadLetterConfig", "Arn"), dlqArn) {
		t.Errorf("bus DeadLetterConfig = %v, want the events DLQ", path(props(bus), "DeadLetterConfig"))
	}
	ruleID, rule := oneOfType(t, "AWS::Events::Rule", "HealthLakeJobEventRule")
	for _, target := range asList(props(rule)["Targets"]) {
		if !jsonEq(path(target, "DeadLetterConfig", "Arn"), dlqArn) {
			t.Errorf("%s target %v has no DeadLetterConfig on the events DLQ", ruleID, path(target, "Id"))
		}
	}
	// Every rule of the stack has one (consumer rules, in their own
	// construct, have their own queue's).
	ruleIDs, rules := ofType("AWS::Events::Rule")
	for i, r := range rules {
		for _, target := range asList(props(r)["Targets"]) {
			if path(target, "DeadLetterConfig", "Arn") == nil {
				t.Errorf("rule %s target %v has no dead-letter queue", ruleIDs[i], path(target, "Id"))
			}
		}
	}
	ids, schedules := ofType("AWS::Scheduler::Schedule")
	if len(ids) != 2 {
		t.Fatalf("schedules = %v, want the runs' and the reconciliation's", ids)
	}
	for i, s := range schedules {
		if !jsonEq(path(props(s), "Target", "DeadLetterConfig", "Arn"), dlqArn) {
			t.Errorf("schedule %s DeadLetterConfig = %v, want the events DLQ", ids[i], path(props(s), "Target", "DeadLetterConfig"))
		}
	}

	// Who may send: EventBridge for the bus and the rule only
	// (aws:SourceArn), the schedules' role (Scheduler sends dead letters
	// with the execution role), over TLS only.
	roleID, _ := oneOfType(t, "AWS::IAM::Role", "SchedulerRole")
	ruleArn := "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/" + flatten(props(rule)["Name"])
	var events, scheduler, tls bool
	for _, s := range statements() {
		if s.ResourceType != "AWS::SQS::QueuePolicy" || s.Owner != "EventsDeadLetterQueuePolicy" {
			continue
		}
		switch {
		case s.Effect == "Deny" && jsonEq(path(s.Raw, "Condition", "Bool", "aws:SecureTransport"), "false"):
			tls = true
		case s.Effect != "Allow":
		case flatten(path(s.Raw, "Principal", "Service")) == "events.amazonaws.com":
			var src []string
			for _, a := range asList(path(s.Raw, "Condition", "ArnEquals", "aws:SourceArn")) {
				src = append(src, flatten(a))
			}
			want := []string{flatten(getAtt(busID, "Arn")), ruleArn}
			if strings.Join(src, " ") != strings.Join(want, " ") || !jsonEq(s.Actions, []string{"sqs:SendMessage"}) {
				t.Errorf("EventBridge may send %v for %v, want sqs:SendMessage for %v", s.Actions, src, want)
			}
			events = true
		case jsonEq(path(s.Raw, "Principal", "AWS"), getAtt(roleID, "Arn")):
			if !jsonEq(s.Actions, []string{"sqs:SendMessage"}) {
				t.Errorf("the scheduler role may %v, want sqs:SendMessage", s.Actions)
			}
			scheduler = true
		default:
			t.Errorf("unexpected statement on the events DLQ: %v", s.Raw)
		}
	}
	if !events || !scheduler || !tls {
		t.Errorf("events DLQ policy: EventBridge %v, scheduler role %v, TLS only %v", events, scheduler, tls)
	}
	// The key lets the scheduler role encrypt for SQS only, and EventBridge
	// for the queues (TestHealthLakeJobEventRule).
	var schedKey bool
	for _, s := range statements() {
		if s.ResourceType == "AWS::KMS::Key" && jsonEq(path(s.Raw, "Principal", "AWS"), getAtt(roleID, "Arn")) {
			schedKey = containsAll(s.Actions, []string{"kms:GenerateDataKey", "kms:Decrypt"}) && len(s.Actions) == 2 &&
				flatten(path(s.Raw, "Condition", "StringEquals", "kms:ViaService")) == "sqs.${AWS::Region}.amazonaws.com"
		}
	}
	if !schedKey {
		t.Errorf("the key does not let the scheduler role (and only through SQS) encrypt dead letters")
	}

	// The alarm on its depth notifies the topic.
	topicID, _ := oneOfType(t, "AWS::SNS::Topic", "AlarmTopic")
	_, alarm := oneOfType(t, "AWS::CloudWatch::Alarm", "EventsDeadLetterAlarm")
	p := props(alarm)
	if p["Namespace"] != "AWS/SQS" || p["MetricName"] != "ApproximateNumberOfMessagesVisible" ||
		p["ComparisonOperator"] != "GreaterThanThreshold" || p["Threshold"] != 0.0 ||
		!jsonEq(path(p, "Dimensions", 0, "Value"), getAtt(dlqID, "QueueName")) ||
		!jsonEq(asList(p["AlarmActions"]), []any{ref(topicID)}) || p["TreatMissingData"] != "notBreaching" {
		t.Errorf("EventsDeadLetterAlarm = %v", p)
	}
	if desc, _ := p["AlarmDescription"].(string); !strings.Contains(desc, "docs/OPERATIONS.md, \"EventsDeadLetterAlarm\"") {
		t.Errorf("EventsDeadLetterAlarm description %q does not name its runbook entry", desc)
	}
	// Its output, for the runbook's commands.
	if !jsonEq(path(synthesized.json, "Outputs", "EventsDeadLetterQueueUrl", "Value"), ref(dlqID)) {
		t.Errorf("no EventsDeadLetterQueueUrl output")
	}
}
