package iam

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy/sar"
)

const (
	testRegion, testAccount = "us-east-1", "111122223333"
	testTable               = "cdc"
	testDatastore           = "ds1"
)

func testMapper() *Mapper {
	return &Mapper{Region: testRegion, Account: testAccount, TaskTokenResource: "arn:aws:states:us-east-1:111122223333:stateMachine:cdc"}
}

// jsonTargets are the X-Amz-Target prefixes of the JSON-protocol services.
var jsonTargets = map[string]string{
	"sqs": "AmazonSQS", "dynamodb": "DynamoDB_20120810", "events": "AWSEvents", "states": "AWSStepFunctions", "healthlake": "HealthLake",
}

// example builds a request that takes route rt.
func example(t *testing.T, rt Route) (*http.Request, []byte) {
	t.Helper()
	if rt.Op != "" {
		op, kind, _ := strings.Cut(rt.Op, "/")
		body := `{"TableName":"` + testTable + `","DatastoreId":"` + testDatastore + `","QueueUrl":"https://sqs/1/q"}`
		switch {
		case op == "BatchGetItem":
			body = `{"RequestItems":{"` + testTable + `":{"Keys":[{"pk":{"S":"RUN"},"sk":{"S":"STATE"}}]}}}`
		case op == "BatchWriteItem":
			body = `{"RequestItems":{"` + testTable + `":[{"PutRequest":{"Item":{"pk":{"S":"RUN"}}}}]}}`
		case kind != "":
			body = `{"TransactItems":[{"` + kind + `":{"TableName":"` + testTable + `","Key":{"pk":{"S":"RUN"}},"Item":{"pk":{"S":"RUN"}}}}]}`
		}
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", jsonTargets[rt.Service]+"."+op)
		return r, []byte(body)
	}
	repl := strings.NewReplacer("{bucket}", "b", "{key+}", "dir/obj.json", "{datastore}", testDatastore,
		"{type}", "Patient", "{id}", "p1", "{jobId}", "job1", "{vid}", "2")
	target := repl.Replace(rt.Path)
	if rt.Query != "" {
		target += "?" + rt.Query + "=1"
	}
	return httptest.NewRequest(rt.Method, target, nil), nil
}

// TestEveryRouteMapsToAnActionOfTheReference walks the whole mapping: each
// route's example request maps to the route's action, and every check it
// yields names an action AWS's Service Authorization Reference lists
// (internal/iampolicy/sar).
func TestEveryRouteMapsToAnActionOfTheReference(t *testing.T) {
	ref, err := sar.Load()
	if err != nil {
		t.Fatal(err)
	}
	m := testMapper()
	seen := map[string]bool{}
	for _, rt := range Routes() {
		if seen[rt.Service+" "+rt.Pattern()] {
			t.Errorf("route %s listed twice", rt.Pattern())
		}
		seen[rt.Service+" "+rt.Pattern()] = true
		if !strings.HasPrefix(rt.Action, rt.Service+":") {
			t.Errorf("%s: action %s of another service", rt.Pattern(), rt.Action)
		}
		if !ref.Has(rt.Action) {
			t.Errorf("%s: %s is not in the Service Authorization Reference data", rt.Pattern(), rt.Action)
		}
		r, body := example(t, rt)
		checks := m.Checks(rt.Service, r, body)
		if len(checks) == 0 || checks[0].Action != rt.Action {
			t.Errorf("%s: example %s %s maps to %+v, want %s", rt.Pattern(), r.Method, r.URL, checks, rt.Action)
			continue
		}
		for _, c := range checks {
			if !ref.Has(c.Action) {
				t.Errorf("%s: check %s is not in the Service Authorization Reference data", rt.Pattern(), c.Action)
			}
		}
	}
}

// TestGrantedActionsAreReachable: every action a statement grants is one a
// mapped request can need — a route's action, or one the mapping adds (KMS,
// iam:PassRole) or checks outside HTTP (lambda:InvokeFunction) — or the
// statement says why no local call makes it (logs).
func TestGrantedActionsAreReachable(t *testing.T) {
	reach := map[string]bool{
		"kms:Decrypt": true, "kms:GenerateDataKey": true, "kms:DescribeKey": true,
		"iam:PassRole": true, "lambda:InvokeFunction": true,
	}
	for _, rt := range Routes() {
		reach[rt.Action] = true
	}
	res := iampolicy.Resources{
		BucketARN: "arn:aws:s3:::b", TableARN: "t", KeyARN: "k", DatastoreARN: "d", StartQueueARN: "q1", RecheckQueueARN: "q2",
		EventBusARN: "e", StateMachineARN: "sm", ExecutionsARN: "x", MapRunExecutionsARN: "y", RunLockFunctionARN: "f1",
		PrepareChangeFunctionARN: "f2", ExportRoleARN: "r", LogGroupARNs: map[iampolicy.Principal]string{},
		ReconcileFunctionARN: "f3", ReconcileStateMachineARN: "sm2", ReconcileExecutionsARN: "x2", ReconcileMapRunExecutionsARN: "y2",
		FastPathQueueARN: "q3",
	}
	for _, p := range iampolicy.Functions() {
		res.LogGroupARNs[p] = "lg-" + string(p)
	}
	for _, p := range iampolicy.All() {
		for _, s := range iampolicy.MustPolicy(p, res) {
			for _, a := range s.Actions {
				if !reach[a] && !strings.HasPrefix(a, "logs:") {
					t.Errorf("%s/%s grants %s, which no mapped request needs", p, s.Sid, a)
				}
			}
		}
	}
}

// TestHistoryMapsToGetHistoryByResourceId: instance, type-level and
// system-level history are healthlake:GetHistoryByResourceId (the one
// history action SAR names), not ReadResource.
func TestHistoryMapsToGetHistoryByResourceId(t *testing.T) {
	ds := "arn:aws:healthlake:us-east-1:111122223333:datastore/fhir/" + testDatastore
	m := testMapper()
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/Patient/p1/_history", "healthlake:GetHistoryByResourceId"},
		{"GET", "/Patient/p1/_history?_count=100", "healthlake:GetHistoryByResourceId"},
		{"GET", "/Patient/_history?_since=2026-11-25T00:00:00Z", "healthlake:GetHistoryByResourceId"},
		{"GET", "/_history", "healthlake:GetHistoryByResourceId"},
		{"GET", "/Patient/p1/_history/3", "healthlake:VersionReadResource"},
		{"GET", "/Patient/p1", "healthlake:ReadResource"},
		{"GET", "/Patient?_summary=count&_lastUpdated=gt2026-11-25T00:00:00Z", "healthlake:SearchWithGet"},
		{"GET", "/Patient", "healthlake:SearchWithGet"},
		{"POST", "/Patient/_search", "healthlake:SearchWithPost"},
		{"POST", "/Patient/p1/$erase", "healthlake:DeleteResource"},
		{"GET", "/$erase/job-1", "healthlake:DeleteResource"},
		{"POST", "/Observation/$bulk-delete?isHardDelete=false", "healthlake:StartFHIRBulkDeleteJob"},
		{"GET", "/$bulk-delete/job-1", "healthlake:DescribeFHIRBulkDeleteJob"},
		{"GET", "/export/job-1", "healthlake:DescribeFHIRExportJobWithGet"},
		{"DELETE", "/export/job-1", "healthlake:CancelFHIRExportJobWithDelete"},
		{"PUT", "/Patient/p1", "healthlake:UpdateResource"},
		{"DELETE", "/Patient/p1", "healthlake:DeleteResource"},
		{"POST", "/Patient", "healthlake:CreateResource"},
		{"GET", "/metadata", "healthlake:GetCapabilities"},
		{"GET", "/Patient/$nosuch", "healthlake:Unmapped(GET /datastore/ds1/r4/Patient/$nosuch)"},
	} {
		r := httptest.NewRequest(c.method, "/datastore/"+testDatastore+"/r4"+c.path, nil)
		got := m.Checks("healthlake", r, nil)
		if len(got) != 1 || got[0].Action != c.want {
			t.Errorf("%s %s: %+v, want %s", c.method, c.path, got, c.want)
			continue
		}
		if !strings.Contains(c.want, "Unmapped") && got[0].Resource != ds {
			t.Errorf("%s %s: resource %s, want %s", c.method, c.path, got[0].Resource, ds)
		}
	}
	for _, op := range []string{"ListFHIRDatastores", "DescribeFHIRDatastore"} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("X-Amz-Target", "HealthLake."+op)
		body := []byte(`{}`)
		want := "*"
		if op == "DescribeFHIRDatastore" {
			body, want = []byte(`{"DatastoreId":"`+testDatastore+`"}`), ds
		}
		got := m.Checks("healthlake", r, body)
		if len(got) != 1 || got[0].Action != "healthlake:"+op || got[0].Resource != want {
			t.Errorf("%s: %+v", op, got)
		}
	}
}

// TestADataStoresKeyIsCheckedThroughHealthLake: with the data store on a
// customer-managed key, each HealthLake call also checks the caller's use
// of the key — the KMS actions iampolicy.DatastoreKeyActions gives for the
// call, with kms:ViaService HealthLake's Regional endpoint; on another data
// store, or without the key, nothing more.
func TestADataStoresKeyIsCheckedThroughHealthLake(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:111122223333:key/ds-cmk"
	ds := "arn:aws:healthlake:us-east-1:111122223333:datastore/fhir/" + testDatastore
	m := testMapper()
	m.Keys = map[string]string{ds: key}
	for _, c := range []struct {
		method, path string
		want         []string
	}{
		{"GET", "/datastore/" + testDatastore + "/r4/Patient/p1", []string{"healthlake:ReadResource", "kms:Decrypt", "kms:DescribeKey"}},
		{"GET", "/datastore/" + testDatastore + "/r4/Patient/_history", []string{"healthlake:GetHistoryByResourceId", "kms:Decrypt", "kms:DescribeKey"}},
		{"PUT", "/datastore/" + testDatastore + "/r4/Subscription/s1", []string{"healthlake:UpdateResource", "kms:GenerateDataKey", "kms:DescribeKey"}},
		{"GET", "/datastore/" + testDatastore + "/r4/export/job-1", []string{"healthlake:DescribeFHIRExportJobWithGet", "kms:DescribeKey"}},
		{"GET", "/datastore/other/r4/Patient/p1", []string{"healthlake:ReadResource"}},
	} {
		got := m.Checks("healthlake", httptest.NewRequest(c.method, c.path, nil), nil)
		var actions []string
		for _, g := range got {
			actions = append(actions, g.Action)
			if strings.HasPrefix(g.Action, "kms:") {
				if g.Resource != key || strings.Join(g.Context[iampolicy.ViaService], ",") != "healthlake.us-east-1.amazonaws.com" {
					t.Errorf("%s %s: %s on %s via %v, want on %s via healthlake.us-east-1.amazonaws.com", c.method, c.path, g.Action, g.Resource, g.Context, key)
				}
			}
		}
		if strings.Join(actions, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s %s: checks %v, want %v", c.method, c.path, actions, c.want)
		}
	}
}

// ddbRequest is a DynamoDB JSON-protocol request signed with accessKey.
func ddbRequest(op, accessKey string, body any) *http.Request {
	b, _ := json.Marshal(body)
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+accessKey+"/20261125/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x")
	return r
}

func key(pk, sk string) map[string]any {
	return map[string]any{"pk": map[string]string{"S": pk}, "sk": map[string]string{"S": sk}}
}

func TestLeadingKeysOfEachOperation(t *testing.T) {
	m := testMapper()
	for _, c := range []struct {
		op   string
		body any
		want [][]string // per check
	}{
		{"GetItem", map[string]any{"TableName": testTable, "Key": key("RUN", "STATE")}, [][]string{{"RUN"}}},
		{"PutItem", map[string]any{"TableName": testTable, "Item": key("EXPORT#r1", "JOB")}, [][]string{{"EXPORT#r1"}}},
		{"UpdateItem", map[string]any{"TableName": testTable, "Key": key("EXPORTJOB#j1", "RUN")}, [][]string{{"EXPORTJOB#j1"}}},
		{"DeleteItem", map[string]any{"TableName": testTable, "Key": key("RECONCILE", "STATE")}, [][]string{{"RECONCILE"}}},
		{"Query", map[string]any{"TableName": testTable, "KeyConditionExpression": "pk = :pk AND begins_with(sk, :pfx)",
			"ExpressionAttributeValues": map[string]any{":pk": map[string]string{"S": "RUN"}, ":pfx": map[string]string{"S": "HISTORY#"}}}, [][]string{{"RUN"}}},
		{"Query", map[string]any{"TableName": testTable, "KeyConditionExpression": "(begins_with(sk, :p)) and #k = :v",
			"ExpressionAttributeNames":  map[string]string{"#k": "pk"},
			"ExpressionAttributeValues": map[string]any{":v": map[string]string{"S": "EXPORT#r1"}, ":p": map[string]string{"S": "J"}}}, [][]string{{"EXPORT#r1"}}},
		{"Query", map[string]any{"TableName": testTable, "KeyConditionExpression": "sk = :s",
			"ExpressionAttributeValues": map[string]any{":s": map[string]string{"S": "RUN"}}}, [][]string{nil}},
		{"Scan", map[string]any{"TableName": testTable}, [][]string{nil}},
		{"BatchGetItem", map[string]any{"RequestItems": map[string]any{testTable: map[string]any{"Keys": []any{key("RUN", "STATE"), key("EXPORT#r1", "JOB"), key("RUN", "X")}}}},
			[][]string{{"RUN", "EXPORT#r1"}}},
		{"BatchWriteItem", map[string]any{"RequestItems": map[string]any{testTable: []any{
			map[string]any{"PutRequest": map[string]any{"Item": key("EXPORT#r1", "JOB")}},
			map[string]any{"DeleteRequest": map[string]any{"Key": key("RECONCILE", "STATE")}}}}},
			[][]string{{"EXPORT#r1", "RECONCILE"}}},
		{"TransactWriteItems", map[string]any{"TransactItems": []any{
			map[string]any{"Update": map[string]any{"TableName": testTable, "Key": key("RUN", "STATE")}},
			map[string]any{"Put": map[string]any{"TableName": testTable, "Item": key("RUN", "HISTORY#1")}}}},
			[][]string{{"RUN"}, {"RUN"}}},
	} {
		b, _ := json.Marshal(c.body)
		got := m.Checks("dynamodb", ddbRequest(c.op, "k", c.body), b)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d checks %+v, want %d", c.op, len(got), got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if g := got[i].Context[iampolicy.LeadingKeys]; strings.Join(g, ",") != strings.Join(w, ",") {
				t.Errorf("%s check %d (%s): leading keys %v, want %v", c.op, i, got[i].Action, g, w)
			}
		}
	}
}

// TestEachPrincipalTouchesOnlyItsOwnItems: through the Authorizer, as each
// principal, the items of the table's other owners are refused with
// DynamoDB's AccessDeniedException and its own allowed.
func TestEachPrincipalTouchesOnlyItsOwnItems(t *testing.T) {
	arn := func(svc, res string) string {
		return "arn:aws:" + svc + ":" + testRegion + ":" + testAccount + ":" + res
	}
	res := iampolicy.Resources{
		BucketARN: "arn:aws:s3:::b", TableARN: arn("dynamodb", "table/"+testTable), KeyARN: arn("kms", "key/k"),
		DatastoreARN: arn("healthlake", "datastore/fhir/"+testDatastore), StartQueueARN: arn("sqs", "start"),
		RecheckQueueARN: arn("sqs", "recheck"), EventBusARN: arn("events", "event-bus/cdc"), StateMachineARN: arn("states", "stateMachine:cdc"),
		ExecutionsARN: arn("states", "execution:cdc:*"), MapRunExecutionsARN: arn("states", "execution:cdc/*"),
		RunLockFunctionARN: arn("lambda", "function:rl"), PrepareChangeFunctionARN: arn("lambda", "function:pc"),
		ExportRoleARN: "arn:aws:iam::111122223333:role/export", LogGroupARNs: map[iampolicy.Principal]string{},
		ReconcileFunctionARN: arn("lambda", "function:rec"), ReconcileStateMachineARN: arn("states", "stateMachine:rec"),
		ReconcileExecutionsARN: arn("states", "execution:rec:*"), ReconcileMapRunExecutionsARN: arn("states", "execution:rec/*"),
		FastPathQueueARN: arn("sqs", "fast-path"),
	}
	for _, p := range iampolicy.Functions() {
		res.LogGroupARNs[p] = arn("logs", "log-group:"+string(p)+":*")
	}
	m := testMapper()
	m.Keys = map[string]string{res.TableARN: res.KeyARN}
	a := NewAuthorizer(m, Enforce)
	keyOf := func(p iampolicy.Principal) string {
		return "AKID" + strings.ToUpper(strings.ReplaceAll(string(p), "-", ""))
	}
	for _, p := range iampolicy.All() {
		a.AddIdentity(keyOf(p), Identity{Principal: p, ARN: "arn:aws:sts::111122223333:assumed-role/" + string(p) + "/t", Statements: iampolicy.MustPolicy(p, res)})
	}
	get := func(pk, sk string) (string, any) {
		return "GetItem", map[string]any{"TableName": testTable, "Key": key(pk, sk)}
	}
	put := func(pk, sk string) (string, any) {
		return "PutItem", map[string]any{"TableName": testTable, "Item": key(pk, sk)}
	}
	update := func(pk, sk string) (string, any) {
		return "UpdateItem", map[string]any{"TableName": testTable, "Key": key(pk, sk), "UpdateExpression": "SET lastRunTime = :t"}
	}
	query := func(pk string) (string, any) {
		return "Query", map[string]any{"TableName": testTable, "KeyConditionExpression": "pk = :pk",
			"ExpressionAttributeValues": map[string]any{":pk": map[string]string{"S": pk}}}
	}
	transact := func(pks ...string) (string, any) {
		var items []any
		for _, pk := range pks {
			items = append(items, map[string]any{"Update": map[string]any{"TableName": testTable, "Key": key(pk, "STATE")}})
		}
		return "TransactWriteItems", map[string]any{"TransactItems": items}
	}
	scan := func() (string, any) { return "Scan", map[string]any{"TableName": testTable} }
	type call struct {
		op   string
		body any
	}
	c := func(op string, body any) call { return call{op, body} }
	cases := map[iampolicy.Principal][]call{
		iampolicy.StartExport: {
			c(update("RUN", "STATE")), c(put("RUN", "STATE")), c(get("RUN", "STATE")), c(get("RECONCILE", "STATE")), c(transact("RUN")),
			c(query("RUN")), c(scan()),
			c(get("EXPORT#r1", "JOB")), c(put("EXPORT#r1", "JOB")), c(update("EXPORT#r1", "JOB")), c(put("EXPORTJOB#j1", "RUN")),
		},
		iampolicy.CheckExport: {
			c(update("RUN", "STATE")), c(get("RUN", "STATE")), c(put("RECONCILE", "STATE")),
			c(get("EXPORTJOB#j1", "RUN")), c(update("EXPORT#r1", "JOB")),
		},
		iampolicy.RunLock: {
			c(get("RECONCILE", "STATE")), c(put("EXPORTJOB#j1", "RUN")), c(scan()), c(transact("RUN", "RECONCILE")),
			c(get("RUN", "STATE")), c(query("RUN")), c(transact("RUN", "RUN")), c(update("RUN", "STATE")),
			c(get("EXPORT#r1", "JOB")), c(update("EXPORT#r1", "JOB")),
		},
		iampolicy.Reconcile: {
			c(get("RUN", "STATE")), c(put("RUN", "STATE")), c(get("EXPORT#r1", "JOB")),
			c(get("RECONCILE", "STATE")), c(put("RECONCILE", "STATE")),
		},
		iampolicy.PrepareChange: {c(get("EXPORT#r1", "JOB")), c(get("RUN", "STATE"))},
	}
	// What each principal may do; every other call above is refused.
	allowed := map[iampolicy.Principal]map[string]bool{
		iampolicy.StartExport: {"GetItem EXPORT#r1": true, "PutItem EXPORT#r1": true, "UpdateItem EXPORT#r1": true, "PutItem EXPORTJOB#j1": true},
		iampolicy.CheckExport: {"GetItem EXPORTJOB#j1": true, "UpdateItem EXPORT#r1": true},
		iampolicy.RunLock: {"GetItem RUN": true, "Query RUN": true, "TransactWriteItems RUN,RUN": true, "UpdateItem RUN": true,
			"GetItem EXPORT#r1": true, "UpdateItem EXPORT#r1": true},
		// reconcile reads RUN/STATE (the checkpoint and origin) and never writes it.
		iampolicy.Reconcile: {"GetItem RECONCILE": true, "PutItem RECONCILE": true, "GetItem RUN": true},
	}
	for p, calls := range cases {
		for _, cl := range calls {
			name := cl.op + " " + pkOf(cl.body)
			want := allowed[p][name]
			b, _ := json.Marshal(cl.body)
			r := ddbRequest(cl.op, keyOf(p), cl.body)
			w := httptest.NewRecorder()
			refused := a.Authorize("dynamodb", w, r)
			if refused == want {
				t.Errorf("%s %s: refused=%v, want allowed=%v (%s)", p, name, refused, want, w.Body)
				continue
			}
			if refused {
				var e struct {
					Type    string `json:"__type"`
					Message string
				}
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Type != "AccessDeniedException" || w.Code != 400 ||
					!strings.Contains(e.Message, "is not authorized to perform: dynamodb:") {
					t.Errorf("%s %s: denial %d %s, want DynamoDB's AccessDeniedException", p, name, w.Code, w.Body)
				}
				if ct := w.Header().Get("Content-Type"); ct != "application/x-amz-json-1.0" {
					t.Errorf("%s %s: content type %q", p, name, ct)
				}
			} else if got, _ := readAll(r); !bytes.Equal(got, b) {
				t.Errorf("%s %s: body not restored for the service", p, name)
			}
		}
	}
}

// pkOf names the partition keys a test body touches, comma-separated.
func pkOf(body any) string {
	b, _ := json.Marshal(body)
	var in struct {
		Key, Item                 item
		ExpressionAttributeValues item
		TransactItems             []map[string]struct{ Key item }
	}
	_ = json.Unmarshal(b, &in)
	switch {
	case in.Key != nil:
		return attrString(in.Key["pk"])
	case in.Item != nil:
		return attrString(in.Item["pk"])
	case in.ExpressionAttributeValues != nil:
		return attrString(in.ExpressionAttributeValues[":pk"])
	}
	var pks []string
	for _, ti := range in.TransactItems {
		for _, v := range ti {
			pks = append(pks, attrString(v.Key["pk"]))
		}
	}
	return strings.Join(pks, ",")
}

func readAll(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// TestEventBridgeResourcesOfEachOperation: EventBridge calls are checked
// against the resources SAR names for their action — a rule's ARN
// (rule/{name} on the default bus, rule/{bus}/{name} on a custom one), an
// archive's, a replay's, a bus's — and "*" where SAR names none.
func TestEventBridgeResourcesOfEachOperation(t *testing.T) {
	m := testMapper()
	a := func(res string) string { return "arn:aws:events:" + testRegion + ":" + testAccount + ":" + res }
	for _, c := range []struct {
		op   string
		body map[string]any
		want []string
	}{
		{"PutEvents", map[string]any{"Entries": []any{map[string]any{"EventBusName": "cdc"}, map[string]any{}}}, []string{a("event-bus/cdc"), a("event-bus/default")}},
		{"PutRule", map[string]any{"Name": "r1"}, []string{a("rule/r1")}},
		{"PutRule", map[string]any{"Name": "r1", "EventBusName": "cdc"}, []string{a("rule/cdc/r1")}},
		{"PutTargets", map[string]any{"Rule": "r1", "EventBusName": a("event-bus/cdc")}, []string{a("rule/cdc/r1")}},
		{"ListTargetsByRule", map[string]any{"Rule": "r1"}, []string{a("rule/r1")}},
		{"CreateArchive", map[string]any{"ArchiveName": "ar", "EventSourceArn": a("event-bus/cdc")}, []string{a("archive/ar"), a("event-bus/cdc")}},
		{"StartReplay", map[string]any{"ReplayName": "rp", "EventSourceArn": a("archive/ar"), "Destination": map[string]any{"Arn": a("event-bus/cdc")}},
			[]string{a("archive/ar"), a("event-bus/cdc"), a("replay/rp")}},
		{"DescribeReplay", map[string]any{"ReplayName": "rp"}, []string{a("replay/rp")}},
		{"DescribeEventBus", map[string]any{"Name": "cdc"}, []string{a("event-bus/cdc")}},
		{"ListRules", map[string]any{"EventBusName": "cdc"}, []string{"*"}},
	} {
		b, _ := json.Marshal(c.body)
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(b))
		r.Header.Set("X-Amz-Target", "AWSEvents."+c.op)
		var got []string
		for _, ch := range m.Checks("events", r, b) {
			if ch.Action != "events:"+c.op {
				t.Errorf("%s: action %s", c.op, ch.Action)
			}
			got = append(got, ch.Resource)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s %v: resources %v, want %v", c.op, c.body, got, c.want)
		}
	}
}

// TestQueryAndScanOfAnIndexAreCheckedOnTheIndex: SAR names table and index
// for Query and Scan; a request with IndexName is authorized against
// table/{name}/index/{index}, so a policy on the table alone does not allow it.
func TestQueryAndScanOfAnIndexAreCheckedOnTheIndex(t *testing.T) {
	m := testMapper()
	for _, op := range []string{"Query", "Scan"} {
		body := map[string]any{"TableName": testTable, "IndexName": "byStatus", "KeyConditionExpression": "pk = :pk",
			"ExpressionAttributeValues": map[string]any{":pk": map[string]string{"S": "RUN"}}}
		b, _ := json.Marshal(body)
		got := m.Checks("dynamodb", ddbRequest(op, "k", body), b)
		if len(got) == 0 || got[0].Action != "dynamodb:"+op || !strings.HasSuffix(got[0].Resource, ":table/"+testTable+"/index/byStatus") {
			t.Errorf("%s with IndexName: checks %+v, want dynamodb:%s on the index's ARN", op, got, op)
		}
		if got[0].Context[iampolicy.LeadingKeys] != nil {
			t.Errorf("%s of an index: leading keys %v taken from the table's partition key", op, got[0].Context[iampolicy.LeadingKeys])
		}
	}
}
