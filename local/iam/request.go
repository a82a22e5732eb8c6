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
}

func (m *Mapper) arn(service, resource string) string {
	return "arn:aws:" + service + ":" + m.Region + ":" + m.Account + ":" + resource
}

func check(action, resource string, ctx map[string]string) Check {
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
	return []Check{check(service+":"+targetOp(r), "*", nil)}
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
	key := m.Keys[resourceARN]
	if key == "" {
		return checks
	}
	for _, a := range actions {
		checks = append(checks, check(a, key, nil))
	}
	return checks
}

// --- S3 (REST, path-style) ---------------------------------------------------

func (m *Mapper) s3(r *http.Request, body []byte) []Check {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if path == "" {
		return []Check{check("s3:ListAllMyBuckets", "*", nil)}
	}
	bucket, key, hasKey := strings.Cut(path, "/")
	if u, err := url.PathUnescape(key); err == nil {
		key = u
	}
	q := r.URL.Query()
	bucketARN := "arn:aws:s3:::" + bucket
	if !hasKey || key == "" {
		return m.s3Bucket(r, q, bucketARN, body)
	}
	obj := bucketARN + "/" + key
	_, upload := q["uploadId"]
	switch r.Method {
	case http.MethodGet:
		if upload {
			return []Check{check("s3:ListMultipartUploadParts", obj, nil)}
		}
		return m.withKey([]Check{check("s3:GetObject", obj, nil)}, bucketARN, "kms:Decrypt")
	case http.MethodHead:
		return []Check{check("s3:GetObject", obj, nil)}
	case http.MethodPut:
		out := []Check{check("s3:PutObject", obj, nil)}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			if u, err := url.PathUnescape(src); err == nil {
				src = u
			}
			out = append(out, check("s3:GetObject", "arn:aws:s3:::"+strings.TrimPrefix(src, "/"), nil))
		}
		return m.withKey(out, bucketARN, "kms:GenerateDataKey")
	case http.MethodPost:
		if upload { // CompleteMultipartUpload: S3 decrypts the parts.
			return m.withKey([]Check{check("s3:PutObject", obj, nil)}, bucketARN, "kms:Decrypt")
		}
		// CreateMultipartUpload (?uploads).
		return m.withKey([]Check{check("s3:PutObject", obj, nil)}, bucketARN, "kms:GenerateDataKey")
	case http.MethodDelete:
		if upload {
			return []Check{check("s3:AbortMultipartUpload", obj, nil)}
		}
		return []Check{check("s3:DeleteObject", obj, nil)}
	}
	return []Check{check("s3:"+r.Method+"Object", obj, nil)}
}

func (m *Mapper) s3Bucket(r *http.Request, q url.Values, bucketARN string, body []byte) []Check {
	sub := func(name string) bool { _, ok := q[name]; return ok }
	switch r.Method {
	case http.MethodGet:
		switch {
		case sub("uploads"):
			return []Check{check("s3:ListBucketMultipartUploads", bucketARN, nil)}
		case sub("location"):
			return []Check{check("s3:GetBucketLocation", bucketARN, nil)}
		case sub("publicAccessBlock"):
			return []Check{check("s3:GetBucketPublicAccessBlock", bucketARN, nil)}
		case sub("encryption"):
			return []Check{check("s3:GetEncryptionConfiguration", bucketARN, nil)}
		case sub("versioning"):
			return []Check{check("s3:GetBucketVersioning", bucketARN, nil)}
		case sub("versions"):
			return []Check{check("s3:ListBucketVersions", bucketARN, listContext(q))}
		}
		// ListObjects and ListObjectsV2.
		return []Check{check("s3:ListBucket", bucketARN, listContext(q))}
	case http.MethodHead:
		return []Check{check("s3:ListBucket", bucketARN, nil)}
	case http.MethodPut:
		return []Check{check("s3:CreateBucket", bucketARN, nil)}
	case http.MethodDelete:
		return []Check{check("s3:DeleteBucket", bucketARN, nil)}
	case http.MethodPost:
		if sub("delete") { // DeleteObjects: one s3:DeleteObject per key
			var req struct {
				Objects []struct{ Key string } `xml:"Object"`
			}
			if err := xml.Unmarshal(body, &req); err != nil || len(req.Objects) == 0 {
				return []Check{check("s3:DeleteObject", bucketARN+"/*", nil)}
			}
			var out []Check
			for _, o := range req.Objects {
				out = append(out, check("s3:DeleteObject", bucketARN+"/"+o.Key, nil))
			}
			return out
		}
	}
	return []Check{check("s3:"+r.Method+"Bucket", bucketARN, nil)}
}

// listContext returns the condition keys of a list request: s3:prefix,
// s3:delimiter and s3:max-keys, each present only when the request has it.
func listContext(q url.Values) map[string]string {
	ctx := map[string]string{}
	for param, key := range map[string]string{"prefix": "s3:prefix", "delimiter": "s3:delimiter", "max-keys": "s3:max-keys"} {
		if v, ok := q[param]; ok && len(v) > 0 {
			ctx[key] = v[0]
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
	action := map[string]string{
		"SendMessageBatch":             "SendMessage",
		"DeleteMessageBatch":           "DeleteMessage",
		"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
	}[op]
	if action == "" {
		action = op
	}
	out := []Check{check("sqs:"+action, queue, nil)}
	switch action {
	case "ListQueues":
		out[0].Resource = "*"
	case "SendMessage": // the producer needs both (SQS developer guide, key management)
		out = m.withKey(out, queue, "kms:GenerateDataKey", "kms:Decrypt")
	case "ReceiveMessage":
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

func (m *Mapper) dynamodb(r *http.Request, body []byte) []Check {
	op := targetOp(r)
	table := func(name string) string { return m.arn("dynamodb", "table/"+name) }
	var in struct {
		TableName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	_ = json.Unmarshal(body, &in)
	var out []Check
	tables := map[string]bool{}
	add := func(action, name string) {
		out = append(out, check("dynamodb:"+action, table(name), nil))
		tables[table(name)] = true
	}
	switch op {
	case "ListTables":
		return []Check{check("dynamodb:ListTables", "*", nil)}
	case "BatchGetItem", "BatchWriteItem":
		names := make([]string, 0, len(in.RequestItems))
		for n := range in.RequestItems {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			add(op, n)
		}
	case "TransactWriteItems", "TransactGetItems":
		// Authorized per item by the item's own action.
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		for _, item := range in.TransactItems {
			for kind, v := range item {
				if a := actions[kind]; a != "" {
					add(a, v.TableName)
				}
			}
		}
	default:
		add(op, in.TableName)
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
	var in struct {
		EventBusName, Name string
		Entries            []struct{ EventBusName string }
	}
	_ = json.Unmarshal(body, &in)
	if op == "PutEvents" {
		seen := map[string]bool{}
		var out []Check
		for _, e := range in.Entries {
			if b := bus(e.EventBusName); !seen[b] {
				seen[b] = true
				out = append(out, check("events:PutEvents", b, nil))
			}
		}
		if len(out) == 0 {
			out = append(out, check("events:PutEvents", bus(""), nil))
		}
		return out
	}
	name := in.EventBusName
	if name == "" && strings.Contains(op, "EventBus") {
		name = in.Name
	}
	if name == "" {
		return []Check{check("events:"+op, "*", nil)}
	}
	return []Check{check("events:"+op, bus(name), nil)}
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
	return []Check{check("states:"+op, resource, nil)}
}

// --- HealthLake ---------------------------------------------------------------------

func (m *Mapper) healthlake(r *http.Request, body []byte) []Check {
	if op := targetOp(r); op != "" {
		var in struct{ DatastoreId string }
		_ = json.Unmarshal(body, &in)
		res := "*"
		if in.DatastoreId != "" {
			res = m.arn("healthlake", "datastore/fhir/"+in.DatastoreId)
		}
		return []Check{check("healthlake:"+op, res, nil)}
	}
	// FHIR REST: /datastore/{id}/r4/…
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "datastore" {
		return []Check{check("healthlake:"+r.Method, "*", nil)}
	}
	id := parts[1]
	if u, err := url.PathUnescape(id); err == nil {
		id = u
	}
	ds := m.arn("healthlake", "datastore/fhir/"+id)
	rest := parts[3:]
	switch {
	case len(rest) == 1 && rest[0] == "$export":
		return m.startExport(r, body, ds)
	case len(rest) == 2 && rest[0] == "export":
		if r.Method == http.MethodDelete {
			return []Check{check("healthlake:CancelFHIRExportJobWithDelete", ds, nil)}
		}
		return []Check{check("healthlake:DescribeFHIRExportJobWithGet", ds, nil)}
	}
	action := map[string]string{
		http.MethodGet: "ReadResource", http.MethodPost: "CreateResource", http.MethodPut: "UpdateResource", http.MethodDelete: "DeleteResource",
	}[r.Method]
	if r.Method == http.MethodGet && len(rest) < 2 {
		action = "SearchWithGet"
	}
	if action == "" {
		action = r.Method
	}
	return []Check{check("healthlake:"+action, ds, nil)}
}

// startExport: the caller starts the job and passes the data access role;
// HealthLake, acting as that role, checks the bucket and the key before it
// accepts the job (HealthLake developer guide, "Setting up permissions for
// export jobs").
func (m *Mapper) startExport(r *http.Request, body []byte, ds string) []Check {
	action := "healthlake:StartFHIRExportJobWithPost"
	if r.Method == http.MethodGet {
		action = "healthlake:StartFHIRExportJobWithGet"
	}
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
	out = append(out, check("iam:PassRole", in.DataAccessRoleArn, map[string]string{"iam:PassedToService": iampolicy.HealthLakeService}))
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
