package iampolicy

import (
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy/sar"
)

// testResources names every resource, the reconciliation's included.
func testResources() Resources {
	arn := func(svc, res string) string { return "arn:aws:" + svc + ":us-east-1:111122223333:" + res }
	logs := map[Principal]string{}
	for _, p := range Functions() {
		logs[p] = arn("logs", "log-group:/aws/lambda/"+string(p)+":*")
	}
	return Resources{
		BucketARN: "arn:aws:s3:::artifacts", TableARN: arn("dynamodb", "table/cdc"), KeyARN: arn("kms", "key/k"),
		DatastoreARN:  arn("healthlake", "datastore/fhir/ds"),
		StartQueueARN: arn("sqs", "start"), RecheckQueueARN: arn("sqs", "recheck"), EventBusARN: arn("events", "event-bus/cdc"),
		StateMachineARN: arn("states", "stateMachine:cdc"), ExecutionsARN: arn("states", "execution:cdc:*"),
		MapRunExecutionsARN: arn("states", "execution:cdc/*"),
		RunLockFunctionARN:  arn("lambda", "function:run-lock"), PrepareChangeFunctionARN: arn("lambda", "function:prepare-change"),
		ExportRoleARN: "arn:aws:iam::111122223333:role/export", LogGroupARNs: logs,
		ReconcileFunctionARN: arn("lambda", "function:reconcile"), ReconcileStateMachineARN: arn("states", "stateMachine:rec"),
		ReconcileExecutionsARN: arn("states", "execution:rec:*"), ReconcileMapRunExecutionsARN: arn("states", "execution:rec/*"),
		FastPathQueueARN: arn("sqs", "fast-path"), InVPC: true,
		DatastoreKeyARN: arn("kms", "key/datastore"), Region: "us-east-1",
	}
}

// TestHealthLakeCallersMayUseTheDatastoreKey: with a data store on a
// customer-managed key, every principal that calls HealthLake may use the
// key — only through HealthLake, and only with the KMS actions its
// HealthLake actions need (DatastoreKeyActions) — and no other principal
// may; without the key, none has the statement.
func TestHealthLakeCallersMayUseTheDatastoreKey(t *testing.T) {
	r := testResources()
	callers := 0
	for _, p := range All() {
		stmts, err := Policy(p, r)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, a := range Actions(stmts) {
			want = append(want, DatastoreKeyActions(a)...)
		}
		want = Actions([]Statement{{Actions: want}})
		var got *Statement
		for i := range stmts {
			if stmts[i].Sid == "UseDatastoreKey" {
				got = &stmts[i]
			}
		}
		if len(want) == 0 {
			if got != nil {
				t.Errorf("%s calls no HealthLake API but may use the data store's key", p)
			}
			continue
		}
		callers++
		if got == nil {
			t.Errorf("%s calls HealthLake but may not use the data store's key", p)
			continue
		}
		if strings.Join(got.Actions, " ") != strings.Join(want, " ") || len(got.Resources) != 1 || got.Resources[0] != r.DatastoreKeyARN {
			t.Errorf("%s: UseDatastoreKey %v on %v, want %v on %s", p, got.Actions, got.Resources, want, r.DatastoreKeyARN)
		}
		if via := got.Conditions["StringEquals"][ViaService]; strings.Join(via, " ") != "healthlake.us-east-1.amazonaws.com healthlake.amazonaws.com" {
			t.Errorf("%s: UseDatastoreKey through %v, want only HealthLake", p, via)
		}
	}
	if callers != 7 {
		t.Errorf("%d principals call HealthLake, want 7 (the Lambdas)", callers)
	}
	r.DatastoreKeyARN = ""
	for _, p := range All() {
		stmts, _ := Policy(p, r)
		if len(Without(stmts, "UseDatastoreKey")) != len(stmts) {
			t.Errorf("%s may use a data store key the stack was given none of", p)
		}
	}
}

// TestFunctionsInAVPCMayManageTheirNetworkInterfaces: with InVPC every
// function's role, and no other, has the statement Lambda needs to attach
// the function to the VPC; without it, none has.
func TestFunctionsInAVPCMayManageTheirNetworkInterfaces(t *testing.T) {
	for _, inVPC := range []bool{false, true} {
		r := testResources()
		r.InVPC = inVPC
		functions := 0
		for _, p := range All() {
			stmts, err := Policy(p, r)
			if err != nil {
				t.Fatal(err)
			}
			has := len(Without(stmts, "VpcNetworkInterfaces")) < len(stmts)
			if IsFunction(p) {
				functions++
			}
			if want := inVPC && IsFunction(p); has != want {
				t.Errorf("InVPC %v: %s has VpcNetworkInterfaces %v, want %v", inVPC, p, has, want)
			}
		}
		if functions != 8 {
			t.Errorf("%d function roles, want the 8 Lambdas' (start-export, check-export, prepare-change, run-lock, check-datastore, reconcile, fast-path, fast-path-setup)", functions)
		}
	}
}

// TestEveryActionIsInTheServiceAuthorizationReference: every action of every
// principal's statements is an action AWS's Service Authorization Reference
// names for its service (internal/iampolicy/sar), and every service-specific
// condition key a statement uses is one SAR lists for each of its actions.
func TestEveryActionIsInTheServiceAuthorizationReference(t *testing.T) {
	ref, err := sar.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range All() {
		stmts, err := Policy(p, testResources())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			for _, a := range s.Actions {
				act, ok := ref.Lookup(a)
				if !ok {
					t.Errorf("%s/%s: %s is not in the Service Authorization Reference data (internal/iampolicy/sar/actions.json)", p, s.Sid, a)
					continue
				}
				for _, keys := range s.Conditions {
					for key := range keys {
						if strings.HasPrefix(key, "aws:") {
							continue // global condition keys apply to every action
						}
						found := false
						for _, k := range act.ConditionKeys {
							found = found || k == key
						}
						if !found {
							t.Errorf("%s/%s: SAR lists no condition key %s for %s", p, s.Sid, key, a)
						}
					}
				}
			}
		}
	}
}

// TestHistoryReadsUseTheSARAction: the instance history the reconciliation
// reads and the type-level history prepare-change reads are authorized by
// healthlake:GetHistoryByResourceId on the data store, not ReadResource.
func TestHistoryReadsUseTheSARAction(t *testing.T) {
	res := testResources()
	for _, c := range []struct {
		p    Principal
		want []string
	}{
		{Reconcile, []string{"healthlake:GetHistoryByResourceId", "healthlake:ReadResource"}},
		{PrepareChange, []string{"healthlake:GetHistoryByResourceId"}},
	} {
		for _, a := range c.want {
			if !grants(MustPolicy(c.p, res), a, res.DatastoreARN) {
				t.Errorf("%s lacks %s on %s", c.p, a, res.DatastoreARN)
			}
		}
	}
}

func grants(stmts []Statement, action, resource string) bool {
	for _, s := range stmts {
		for _, a := range s.Actions {
			for _, r := range s.Resources {
				if a == action && r == resource && !s.Deny {
					return true
				}
			}
		}
	}
	return false
}

// TestDynamoDBStatementsAreLimitedToOwnItems: every statement with a
// DynamoDB item action carries the owner's dynamodb:LeadingKeys patterns
// (ForAllValues:StringLike) and requires the key (Null false), which
// ForAllValues alone does not (it holds for an empty set).
func TestDynamoDBStatementsAreLimitedToOwnItems(t *testing.T) {
	want := map[Principal][]string{
		RunLock:     {PKRun, PKExportLedger},
		StartExport: {PKExportLedger, PKExportJob},
		CheckExport: {PKExportLedger, PKExportJob},
		Reconcile:   {PKReconcile, PKRun}, // RUN: read only, the checkpoint
		// Its run's PutEvents share item, and (read only) the fast
		// path's record items.
		PrepareChange: {PKShare, PKFastPath},
		// Its record items, written only.
		FastPath: {PKFastPath},
	}
	for _, p := range All() {
		var got []string
		for _, s := range MustPolicy(p, testResources()) {
			ddb := false
			for _, a := range s.Actions {
				ddb = ddb || strings.HasPrefix(a, "dynamodb:")
			}
			if !ddb {
				continue
			}
			pats := s.Conditions["ForAllValues:StringLike"][LeadingKeys]
			if len(pats) == 0 {
				t.Errorf("%s/%s: DynamoDB statement without a %s condition", p, s.Sid, LeadingKeys)
			}
			if n := s.Conditions["Null"][LeadingKeys]; len(n) != 1 || n[0] != "false" {
				t.Errorf("%s/%s: %s not required (Null false): %v", p, s.Sid, LeadingKeys, s.Conditions)
			}
			for _, a := range s.Actions {
				if a == "dynamodb:Scan" || a == "dynamodb:BatchWriteItem" || a == "dynamodb:DeleteItem" {
					t.Errorf("%s/%s: %s", p, s.Sid, a)
				}
			}
			got = append(got, pats...)
		}
		if strings.Join(got, ",") != strings.Join(want[p], ",") {
			t.Errorf("%s: leading keys %v, want %v", p, got, want[p])
		}
	}
}
