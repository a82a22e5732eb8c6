package iam

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// Check is one request to evaluate, made by the caller or, when As is set, by
// the role the caller hands the work to (HealthLake's export role).
type Check struct {
	Request
	As iampolicy.Principal
}

// Mapper turns a request the local gateway receives into the IAM checks AWS
// makes for it.
type Mapper struct {
	Region, Account string
	// Keys maps a bucket, queue or table ARN to the ARN of the KMS key its
	// data is encrypted with: AWS then also checks the caller's permission
	// to use the key (see docs/LOCAL.md, "IAM").
	Keys map[string]string
	// Roles maps a role ARN that can be passed to a service to the principal
	// whose statements apply when the service acts as it.
	Roles map[string]iampolicy.Principal
	// TaskTokenResource is the state machine SendTask* calls are evaluated
	// against (the one that issued the tokens; cdc-local has one).
	TaskTokenResource string
	// PartitionKeys maps a table name to its partition-key attribute, the
	// source of dynamodb:LeadingKeys; DefaultPartitionKey otherwise.
	PartitionKeys map[string]string
}

func (m *Mapper) arn(service, resource string) string {
	return "arn:aws:" + service + ":" + m.Region + ":" + m.Account + ":" + resource
}

// DefaultPartitionKey is the partition-key attribute of a table the Mapper
// has no entry for in PartitionKeys: the stack's one table is keyed pk/sk
// (docs/ARCHITECTURE.md, "DynamoDB table").
const DefaultPartitionKey = "pk"

func check(action, resource string, ctx map[string][]string) Check {
	return Check{Request: Request{Action: action, Resource: resource, Context: ctx}}
}

// Checks returns the checks for one request. Service is the SigV4 signing
// name, op the gateway's operation name; body is the request body.
func (m *Mapper) Checks(service string, r *http.Request, body []byte) []Check {
	switch service {
	case "s3":
		return m.s3(r, body)
	case "sqs":
		return m.sqs(r, body)
	case "dynamodb":
		return m.dynamodb(r, body)
	case "events":
		return m.events(r, body)
	case "states":
		return m.states(r, body)
	case "healthlake":
		return m.healthlake(r, body)
	}
	return []Check{check(unmapped(service, targetOp(r)), "*", nil)}
}

func targetOp(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// withKey appends the KMS check AWS makes when the resource's data is
// encrypted with a customer-managed key.
func (m *Mapper) withKey(checks []Check, resourceARN string, actions ...string) []Check {
	return m.withKeyVia(checks, resourceARN, nil, actions...)
}

// withKeyVia is withKey with the request context of the KMS checks (the
// service that uses the key on the caller's behalf: kms:ViaService).
func (m *Mapper) withKeyVia(checks []Check, resourceARN string, ctx map[string][]string, actions ...string) []Check {
	key := m.Keys[resourceARN]
	if key == "" {
		return checks
	}
	for _, a := range actions {
		checks = append(checks, check(a, key, ctx))
	}
	return checks
}

// --- S3 (REST, path-style) ---------------------------------------------------

func (m *Mapper) s3(r *http.Request, body []byte) []Check {
	rt, ok := restRoute("s3", r)
	segs := splitPath(r.URL.Path)
	if !ok {
		return []Check{check(unmapped("s3", r.Method+" "+r.URL.Path), "*", nil)}
	}
	if len(segs) == 0 {
		return []Check{check(rt.Action, "*", nil)}
	}
	bucketARN := "arn:aws:s3:::" + segs[0]
	if len(segs) == 1 {
		switch {
		case rt.Query == "delete": // DeleteObjects: one s3:DeleteObject per key
			var req struct {
				Objects []struct{ Key string } `xml:"Object"`
			}
			if err := xml.Unmarshal(body, &req); err != nil || len(req.Objects) == 0 {
				return []Check{check(rt.Action, bucketARN+"/*", nil)}
			}
			var out []Check
			for _, o := range req.Objects {
				out = append(out, check(rt.Action, bucketARN+"/"+o.Key, nil))
			}
			return out
		case r.Method == http.MethodGet && (rt.Query == "" || rt.Query == "versions"):
			return []Check{check(rt.Action, bucketARN, listContext(r.URL.Query()))}
		}
		return []Check{check(rt.Action, bucketARN, nil)}
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if u, err := url.PathUnescape(key); err == nil {
		key = u
	}
	obj := bucketARN + "/" + key
	out := []Check{check(rt.Action, obj, nil)}
	switch {
	case r.Method == http.MethodGet && rt.Query == "":
		return m.withKey(out, bucketARN, "kms:Decrypt")
	case r.Method == http.MethodPut:
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			if u, err := url.PathUnescape(src); err == nil {
				src = u
			}
			out = append(out, check("s3:GetObject", "arn:aws:s3:::"+strings.TrimPrefix(src, "/"), nil))
		}
		return m.withKey(out, bucketARN, "kms:GenerateDataKey")
	case r.Method == http.MethodPost && rt.Query == "uploadId": // CompleteMultipartUpload: S3 decrypts the parts.
		return m.withKey(out, bucketARN, "kms:Decrypt")
	case r.Method == http.MethodPost: // CreateMultipartUpload (?uploads)
		return m.withKey(out, bucketARN, "kms:GenerateDataKey")
	}
	return out
}

// listContext returns the condition keys of a list request: s3:prefix,
// s3:delimiter and s3:max-keys, each present only when the request has it.
func listContext(q url.Values) map[string][]string {
	ctx := map[string][]string{}
	for param, key := range map[string]string{"prefix": "s3:prefix", "delimiter": "s3:delimiter", "max-keys": "s3:max-keys"} {
		if v, ok := q[param]; ok && len(v) > 0 {
			ctx[key] = []string{v[0]}
		}
	}
	return ctx
}

// --- SQS (JSON protocol; the query protocol's Action form works too) ------------

func (m *Mapper) sqs(r *http.Request, body []byte) []Check {
	op := targetOp(r)
	var in struct {
		QueueUrl, QueueName string
		Entries             []json.RawMessage
	}
	if op != "" {
		_ = json.Unmarshal(body, &in)
	} else if form, err := url.ParseQuery(string(body)); err == nil {
		op, in.QueueUrl, in.QueueName = form.Get("Action"), form.Get("QueueUrl"), form.Get("QueueName")
	}
	name := in.QueueName
	if in.QueueUrl != "" {
		name = in.QueueUrl[strings.LastIndexByte(in.QueueUrl, '/')+1:]
	}
	queue := "*"
	if name != "" {
		queue = m.arn("sqs", name)
	}
	action := opAction("sqs", op)
	out := []Check{check(action, queue, nil)}
	switch action {
	case "sqs:ListQueues":
		out[0].Resource = "*"
	case "sqs:SendMessage": // the producer needs both (SQS developer guide, key management)
		out = m.withKey(out, queue, "kms:GenerateDataKey", "kms:Decrypt")
	case "sqs:ReceiveMessage":
		out = m.withKey(out, queue, "kms:Decrypt")
	}
	return out
}

// --- DynamoDB ------------------------------------------------------------------

// dataPlane are the DynamoDB operations that read or write items; with a
// customer-managed table key DynamoDB decrypts the table key with the
// caller's permission.
var dataPlane = map[string]bool{
	"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true, "Query": true, "Scan": true,
	"BatchGetItem": true, "BatchWriteItem": true, "TransactGetItems": true, "TransactWriteItems": true,
}

// item is a DynamoDB item or key in the wire format: attribute → {type: value}.
type item map[string]map[string]json.RawMessage

func (m *Mapper) dynamodb(r *http.Request, body []byte) []Check {
	op := targetOp(r)
	table := func(name string) string { return m.arn("dynamodb", "table/"+name) }
	type keyed struct {
		TableName string
		Key, Item item
	}
	var in struct {
		TableName, IndexName      string
		Key, Item                 item
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues item
		RequestItems              map[string]json.RawMessage
		TransactItems             []map[string]keyed
	}
	_ = json.Unmarshal(body, &in)
	var out []Check
	tables := map[string]bool{}
	add := func(action, name string, leading []string) {
		var ctx map[string][]string
		if leading != nil {
			ctx = map[string][]string{iampolicy.LeadingKeys: leading}
		}
		out = append(out, check(action, table(name), ctx))
		tables[table(name)] = true
	}
	pk := func(name string) string {
		if k := m.PartitionKeys[name]; k != "" {
			return k
		}
		return DefaultPartitionKey
	}
	switch op {
	case "ListTables":
		return []Check{check(opAction("dynamodb", op), "*", nil)}
	case "BatchGetItem", "BatchWriteItem":
		names := make([]string, 0, len(in.RequestItems))
		for n := range in.RequestItems {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			var items []item
			if op == "BatchGetItem" {
				var req struct{ Keys []item }
				_ = json.Unmarshal(in.RequestItems[n], &req)
				items = req.Keys
			} else {
				var reqs []struct {
					PutRequest    *struct{ Item item }
					DeleteRequest *struct{ Key item }
				}
				_ = json.Unmarshal(in.RequestItems[n], &reqs)
				for _, w := range reqs {
					switch {
					case w.PutRequest != nil:
						items = append(items, w.PutRequest.Item)
					case w.DeleteRequest != nil:
						items = append(items, w.DeleteRequest.Key)
					}
				}
			}
			add(opAction("dynamodb", op), n, leadingKeys(pk(n), items...))
		}
	case "TransactWriteItems", "TransactGetItems":
		// Authorized per item by the item's own action.
		for _, ti := range in.TransactItems {
			kinds := make([]string, 0, len(ti))
			for k := range ti {
				kinds = append(kinds, k)
			}
			sort.Strings(kinds)
			for _, kind := range kinds {
				v := ti[kind]
				it := v.Key
				if kind == "Put" {
					it = v.Item
				}
				add(opAction("dynamodb", op+"/"+kind), v.TableName, leadingKeys(pk(v.TableName), it))
			}
		}
	case "GetItem", "UpdateItem", "DeleteItem":
		add(opAction("dynamodb", op), in.TableName, leadingKeys(pk(in.TableName), in.Key))
	case "PutItem":
		add(opAction("dynamodb", op), in.TableName, leadingKeys(pk(in.TableName), in.Item))
	case "Query", "Scan":
		if in.IndexName != "" {
			// SAR: Query and Scan of an index are authorized against the
			// index's ARN. Its partition key is not the table's: no
			// LeadingKeys value is derived.
			out = append(out, check(opAction("dynamodb", op), table(in.TableName)+"/index/"+in.IndexName, nil))
			tables[table(in.TableName)] = true
			break
		}
		var leading []string
		if op == "Query" {
			if v := queryPartitionValue(in.KeyConditionExpression, pk(in.TableName), in.ExpressionAttributeNames, in.ExpressionAttributeValues); v != "" {
				leading = []string{v}
			}
		}
		add(opAction("dynamodb", op), in.TableName, leading)
	default:
		add(opAction("dynamodb", op), in.TableName, nil)
	}
	if dataPlane[op] {
		names := make([]string, 0, len(tables))
		for t := range tables {
			names = append(names, t)
		}
		sort.Strings(names)
		for _, t := range names {
			out = m.withKey(out, t, "kms:Decrypt")
		}
	}
	return out
}

// leadingKeys returns the distinct partition-key values of items (the
// dynamodb:LeadingKeys of the request), or nil when none carries the key.
func leadingKeys(pk string, items ...item) []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		v := attrString(it[pk])
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// attrString is a key attribute's value as IAM compares it: the string of
// S, N or (base64) B.
func attrString(v map[string]json.RawMessage) string {
	for _, t := range []string{"S", "N", "B"} {
		var s string
		if raw, ok := v[t]; ok && json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return ""
}

// queryPartitionValue finds the partition-key equality of a Query's
// KeyConditionExpression ("pk = :pk AND begins_with(sk, :p)", names through
// #placeholders) and returns the value it binds, or "".
func queryPartitionValue(expr, pk string, names map[string]string, values item) string {
	for _, clause := range splitAnd(expr) {
		left, right, ok := strings.Cut(clause, "=")
		if !ok || strings.ContainsAny(left, "<>") || strings.ContainsAny(right, "<>") {
			continue
		}
		left, right = strings.Trim(strings.TrimSpace(left), "()"), strings.Trim(strings.TrimSpace(right), "()")
		if strings.HasPrefix(left, ":") {
			left, right = right, left
		}
		if n, ok := names[left]; ok {
			left = n
		}
		if left == pk && strings.HasPrefix(right, ":") {
			return attrString(values[right])
		}
	}
	return ""
}

// splitAnd splits a condition expression at its top-level AND keywords.
func splitAnd(expr string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && i+5 <= len(expr) && strings.EqualFold(expr[i:i+5], " AND ") {
			out = append(out, expr[start:i])
			start = i + 5
			i += 4
		}
	}
	return append(out, expr[start:])
}

// --- EventBridge ------------------------------------------------------------------

func (m *Mapper) events(r *http.Request, body []byte) []Check {
	op := targetOp(r)
	bus := func(name string) string {
		if name == "" {
			name = "default"
		}
		if strings.HasPrefix(name, "arn:") {
			return name
		}
		return m.arn("events", "event-bus/"+name)
	}
	// rule is a rule's ARN as SAR gives it: rule/{name} on the default
	// bus, rule/{bus}/{name} on a custom one.
	rule := func(busName, name string) string {
		if i := strings.LastIndex(busName, "event-bus/"); strings.HasPrefix(busName, "arn:") && i >= 0 {
			busName = busName[i+len("event-bus/"):]
		}
		if busName == "" || busName == "default" {
			return m.arn("events", "rule/"+name)
		}
		return m.arn("events", "rule/"+busName+"/"+name)
	}
	var in struct {
		EventBusName, Name, Rule string
		ArchiveName, ReplayName  string
		EventSourceArn           string
		Destination              struct{ Arn string }
		Entries                  []struct{ EventBusName string }
	}
	_ = json.Unmarshal(body, &in)
	action := opAction("events", op)
	switch op {
	case "PutEvents":
		seen := map[string]bool{}
		var out []Check
		for _, e := range in.Entries {
			if b := bus(e.EventBusName); !seen[b] {
				seen[b] = true
				out = append(out, check(action, b, nil))
			}
		}
		if len(out) == 0 {
			out = append(out, check(action, bus(""), nil))
		}
		return out
	case "PutRule", "DescribeRule", "DeleteRule", "EnableRule", "DisableRule":
		return []Check{check(action, rule(in.EventBusName, in.Name), nil)}
	case "PutTargets", "RemoveTargets", "ListTargetsByRule":
		return []Check{check(action, rule(in.EventBusName, in.Rule), nil)}
	case "CreateArchive":
		return []Check{check(action, m.arn("events", "archive/"+in.ArchiveName), nil), check(action, bus(in.EventSourceArn), nil)}
	case "DescribeArchive", "DeleteArchive", "UpdateArchive":
		return []Check{check(action, m.arn("events", "archive/"+in.ArchiveName), nil)}
	case "StartReplay":
		return []Check{check(action, in.EventSourceArn, nil), check(action, bus(in.Destination.Arn), nil),
			check(action, m.arn("events", "replay/"+in.ReplayName), nil)}
	case "DescribeReplay", "CancelReplay":
		return []Check{check(action, m.arn("events", "replay/"+in.ReplayName), nil)}
	case "CreateEventBus", "DeleteEventBus", "DescribeEventBus", "UpdateEventBus":
		name := in.Name
		if name == "" {
			name = in.EventBusName
		}
		return []Check{check(action, bus(name), nil)}
	}
	// ListRules, ListEventBuses, ListArchives, ListReplays, TestEventPattern:
	// SAR names no resource type.
	return []Check{check(action, "*", nil)}
}

// --- Step Functions -----------------------------------------------------------------

func (m *Mapper) states(r *http.Request, body []byte) []Check {
	op := targetOp(r)
	var in struct{ StateMachineArn, ExecutionArn, MapRunArn string }
	_ = json.Unmarshal(body, &in)
	resource := "*"
	switch {
	case strings.HasPrefix(op, "SendTask"):
		resource = m.TaskTokenResource
	case in.ExecutionArn != "":
		resource = in.ExecutionArn
	case in.StateMachineArn != "":
		resource = in.StateMachineArn
	case in.MapRunArn != "":
		resource = in.MapRunArn
	}
	return []Check{check(opAction("states", op), resource, nil)}
}

// --- HealthLake ---------------------------------------------------------------------

func (m *Mapper) healthlake(r *http.Request, body []byte) []Check {
	if op := targetOp(r); op != "" {
		var in struct{ DatastoreId, ResourceARN string }
		_ = json.Unmarshal(body, &in)
		res := "*"
		switch {
		case in.DatastoreId != "":
			res = m.arn("healthlake", "datastore/fhir/"+in.DatastoreId)
		case in.ResourceARN != "":
			res = in.ResourceARN
		}
		action := opAction("healthlake", op)
		return m.withDatastoreKey([]Check{check(action, res, nil)}, res, action)
	}
	// FHIR REST: /datastore/{id}/r4/…
	rt, ok := restRoute("healthlake", r)
	if !ok {
		return []Check{check(unmapped("healthlake", r.Method+" "+r.URL.Path), "*", nil)}
	}
	ds := m.arn("healthlake", "datastore/fhir/"+splitPath(r.URL.Path)[1])
	switch rt.Action {
	case "healthlake:StartFHIRExportJobWithPost", "healthlake:StartFHIRExportJobWithGet":
		return m.withDatastoreKey(m.startExport(rt.Action, body, ds), ds, rt.Action)
	}
	return m.withDatastoreKey([]Check{check(rt.Action, ds, nil)}, ds, rt.Action)
}

// withDatastoreKey appends the KMS checks of a data store on a
// customer-managed key (Keys): HealthLake uses the key with the caller's
// permission, as its Regional endpoint in kms:ViaService, with the KMS
// actions iampolicy.DatastoreKeyActions gives for the call.
func (m *Mapper) withDatastoreKey(checks []Check, ds, action string) []Check {
	via := map[string][]string{iampolicy.ViaService: {iampolicy.HealthLakeEndpoint(m.Region)}}
	return m.withKeyVia(checks, ds, via, iampolicy.DatastoreKeyActions(action)...)
}

// startExport: the caller starts the job and passes the data access role;
// HealthLake, acting as that role, checks the bucket and the key before it
// accepts the job (HealthLake developer guide, "Setting up permissions for
// export jobs").
func (m *Mapper) startExport(action string, body []byte, ds string) []Check {
	out := []Check{check(action, ds, nil)}
	var in struct {
		DataAccessRoleArn string
		OutputDataConfig  struct {
			S3Configuration struct{ S3Uri, KmsKeyId string }
		}
	}
	if json.Unmarshal(body, &in) != nil || in.DataAccessRoleArn == "" {
		return out
	}
	out = append(out, check("iam:PassRole", in.DataAccessRoleArn, map[string][]string{"iam:PassedToService": {iampolicy.HealthLakeService}}))
	key := in.OutputDataConfig.S3Configuration.KmsKeyId
	if key != "" {
		out = append(out, check("kms:DescribeKey", key, nil))
	}
	role, ok := m.Roles[in.DataAccessRoleArn]
	if !ok {
		return out
	}
	bucket := strings.TrimPrefix(in.OutputDataConfig.S3Configuration.S3Uri, "s3://")
	bucket, _, _ = strings.Cut(bucket, "/")
	as := func(action, resource string) Check {
		c := check(action, resource, nil)
		c.As = role
		return c
	}
	if bucket != "" {
		b := "arn:aws:s3:::" + bucket
		out = append(out, as("s3:ListBucket", b), as("s3:GetBucketPublicAccessBlock", b), as("s3:GetEncryptionConfiguration", b))
	}
	if key != "" {
		out = append(out, as("kms:DescribeKey", key))
	}
	return out
}
