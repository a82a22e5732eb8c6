package main

import "testing"

// The app adds the pipeline construct with the id "Default", which CDK
// leaves out of logical ids: the retained, stateful resources keep the
// logical ids they had before the pipeline became a construct, so an update
// of a deployed stack replaces (and orphans) none of them.
func TestStatefulResourcesKeepTheirLogicalIDs(t *testing.T) {
	for id, typ := range map[string]string{
		"Key961B73FD":                    "AWS::KMS::Key",
		"ArtifactBucket7410C9EF":         "AWS::S3::Bucket",
		"AccessLogBucketDA470295":        "AWS::S3::Bucket",
		"TableCD117FA1":                  "AWS::DynamoDB::Table",
		"EventBus7B8748AA":               "AWS::Events::EventBus",
		"EventArchive":                   "AWS::Events::Archive",
		"StartQueue0122B2D4":             "AWS::SQS::Queue",
		"StartDeadLetterQueueAED2CB85":   "AWS::SQS::Queue",
		"RecheckQueue53AC60E1":           "AWS::SQS::Queue",
		"RecheckDeadLetterQueueFADD5959": "AWS::SQS::Queue",
		"StateMachine2E01A3A5":           "AWS::StepFunctions::StateMachine",
		"StateMachineLogs3CB16D3C":       "AWS::Logs::LogGroup",
		"RunLockLogs7AEB41B3":            "AWS::Logs::LogGroup",
		"StartExportLogsA503BDAA":        "AWS::Logs::LogGroup",
		"CheckExportLogs9DB74CBA":        "AWS::Logs::LogGroup",
		"PrepareChangeLogs32580BDE":      "AWS::Logs::LogGroup",
	} {
		r, _ := resources()[id].(map[string]any)
		if r == nil || r["Type"] != typ {
			t.Errorf("no %s with logical id %s: the stack would replace it", typ, id)
		}
	}
}

// TestTheArchiveIsNamedAfterThePipelineAndFollowsTheBus: the archive has a
// name of its own (the pipeline's, not the bus's) and the bus as its source,
// which is why EventBusName is fixed once deployed (docs/DEPLOY.md): a new
// bus name would need the archive replaced, and CloudFormation replaces no
// custom-named resource.
func TestTheArchiveIsNamedAfterThePipelineAndFollowsTheBus(t *testing.T) {
	r, _ := resources()["EventArchive"].(map[string]any)
	p, _ := r["Properties"].(map[string]any)
	name, _ := p["ArchiveName"].(string)
	src, _ := p["SourceArn"].(map[string]any)
	att, _ := src["Fn::GetAtt"].([]any)
	if name == "" || name == "healthlake-cdc-events" || len(att) != 2 || att[0] != "EventBus7B8748AA" || att[1] != "Arn" {
		t.Fatalf("archive name %q (want the pipeline's, a literal), source %v (want the bus's ARN)", name, p["SourceArn"])
	}
	if bus, _ := resources()["EventBus7B8748AA"].(map[string]any)["Properties"].(map[string]any); bus == nil || bus["Name"] == nil {
		t.Fatalf("the bus has no name property: %v", bus)
	}
}
