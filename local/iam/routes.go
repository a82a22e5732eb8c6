package iam

import (
	"net/http"
	"net/url"
	"strings"
)

// Route is one kind of request the Mapper recognises and the IAM action AWS
// evaluates for it, as AWS's Service Authorization Reference names it
// (internal/iampolicy/sar). Routes lists them all: the Mapper takes its
// actions from there and nowhere else, so a test walks the whole mapping.
type Route struct {
	Service string
	// REST APIs (S3, HealthLake's FHIR API): the method, the path pattern
	// and a query parameter the request must carry ("" for none). In the
	// pattern {type} is a FHIR resource type (a capitalised segment), {key+}
	// the rest of the path, and any other {name} one segment that does not
	// start with '$' or '_'.
	Method, Path, Query string
	// JSON-protocol APIs (X-Amz-Target, or SQS's query Action): the
	// operation. "Op/Kind" is one item kind of a DynamoDB transaction.
	Op string
	// Action is "service:Name".
	Action string
	// Note says why, when the action is not the operation's own name.
	Note string
}

// Pattern describes the route's requests.
func (r Route) Pattern() string {
	if r.Op != "" {
		return r.Service + " " + r.Op
	}
	p := r.Method + " " + r.Path
	if r.Query != "" {
		p += "?" + r.Query
	}
	return p
}

// unmapped is the action of a request no route matches: no statement names
// it, so the request is denied, and the denial says what was not mapped.
func unmapped(service, what string) string { return service + ":Unmapped(" + what + ")" }

const (
	hlBase = "/datastore/{datastore}/r4"

	noteHistory = "SAR names one history action, GetHistoryByResourceId; none of its own for type-level or system-level history"
	noteErase   = "SAR names no action for $erase; HealthLake's developer guide says $erase is logged as DeleteResource (not confirmed against AWS)"
)

// Routes returns every route of the mapping, in matching order (the first
// route that matches a request is taken).
func Routes() []Route {
	var out []Route
	rest := func(service string, rows ...[4]string) {
		for _, r := range rows {
			out = append(out, Route{Service: service, Method: r[0], Path: r[1], Query: r[2], Action: service + ":" + r[3]})
		}
	}
	// S3, path-style. The multipart and copy operations are authorized by
	// the object actions (SAR: s3 notes).
	rest("s3",
		[4]string{"GET", "/", "", "ListAllMyBuckets"},
		[4]string{"GET", "/{bucket}", "uploads", "ListBucketMultipartUploads"},
		[4]string{"GET", "/{bucket}", "location", "GetBucketLocation"},
		[4]string{"GET", "/{bucket}", "publicAccessBlock", "GetBucketPublicAccessBlock"},
		[4]string{"GET", "/{bucket}", "encryption", "GetEncryptionConfiguration"},
		[4]string{"GET", "/{bucket}", "versioning", "GetBucketVersioning"},
		[4]string{"GET", "/{bucket}", "versions", "ListBucketVersions"},
		[4]string{"GET", "/{bucket}", "", "ListBucket"}, // ListObjects, ListObjectsV2
		[4]string{"HEAD", "/{bucket}", "", "ListBucket"},
		[4]string{"PUT", "/{bucket}", "", "CreateBucket"},
		[4]string{"DELETE", "/{bucket}", "", "DeleteBucket"},
		[4]string{"POST", "/{bucket}", "delete", "DeleteObject"}, // DeleteObjects: one check per key
		[4]string{"GET", "/{bucket}/{key+}", "uploadId", "ListMultipartUploadParts"},
		[4]string{"GET", "/{bucket}/{key+}", "", "GetObject"},
		[4]string{"HEAD", "/{bucket}/{key+}", "", "GetObject"},
		[4]string{"PUT", "/{bucket}/{key+}", "", "PutObject"},          // PutObject, UploadPart, CopyObject
		[4]string{"POST", "/{bucket}/{key+}", "uploadId", "PutObject"}, // CompleteMultipartUpload
		[4]string{"POST", "/{bucket}/{key+}", "uploads", "PutObject"},  // CreateMultipartUpload
		[4]string{"DELETE", "/{bucket}/{key+}", "uploadId", "AbortMultipartUpload"},
		[4]string{"DELETE", "/{bucket}/{key+}", "", "DeleteObject"},
	)
	// HealthLake's FHIR REST API.
	hl := func(method, path, query, action, note string) {
		out = append(out, Route{Service: "healthlake", Method: method, Path: hlBase + path, Query: query, Action: "healthlake:" + action, Note: note})
	}
	hl("GET", "/metadata", "", "GetCapabilities", "")
	hl("POST", "/$export", "", "StartFHIRExportJobWithPost", "")
	hl("GET", "/$export", "", "StartFHIRExportJobWithGet", "")
	hl("GET", "/export/{jobId}", "", "DescribeFHIRExportJobWithGet", "")
	hl("DELETE", "/export/{jobId}", "", "CancelFHIRExportJobWithDelete", "")
	hl("GET", "/$bulk-delete/{jobId}", "", "DescribeFHIRBulkDeleteJob", "")
	hl("GET", "/$erase/{jobId}", "", "DeleteResource", noteErase+"; the erase job's status likewise")
	hl("GET", "/_history", "", "GetHistoryByResourceId", noteHistory)
	hl("POST", "", "", "ProcessBundle", "")
	hl("POST", "/{type}/$bulk-delete", "", "StartFHIRBulkDeleteJob", "")
	hl("GET", "/{type}/_history", "", "GetHistoryByResourceId", noteHistory)
	hl("POST", "/{type}/_search", "", "SearchWithPost", "")
	hl("GET", "/{type}", "", "SearchWithGet", "") // also ?_summary=count
	hl("POST", "/{type}", "", "CreateResource", "")
	hl("GET", "/{type}/{id}/$everything", "", "SearchEverything", "")
	hl("POST", "/{type}/{id}/$erase", "", "DeleteResource", noteErase)
	hl("GET", "/{type}/{id}/_history", "", "GetHistoryByResourceId", "")
	hl("POST", "/{type}/{id}/_history/{vid}/$erase", "", "DeleteResource", noteErase)
	hl("GET", "/{type}/{id}/_history/{vid}", "", "VersionReadResource", "")
	hl("GET", "/{type}/{id}", "", "ReadResource", "")
	hl("PUT", "/{type}/{id}", "", "UpdateResource", "")
	hl("PATCH", "/{type}/{id}", "", "PatchResource", "")
	hl("DELETE", "/{type}/{id}", "", "DeleteResource", "")

	// JSON-protocol operations: the action of the operation's own name
	// unless the row says otherwise.
	ops := func(service string, names ...string) {
		for _, n := range names {
			op, action, _ := strings.Cut(n, "=")
			if action == "" {
				action = op
			}
			out = append(out, Route{Service: service, Op: op, Action: service + ":" + action})
		}
	}
	ops("healthlake", "ListFHIRDatastores", "DescribeFHIRDatastore", "CreateFHIRDatastore", "DeleteFHIRDatastore",
		"StartFHIRExportJob", "DescribeFHIRExportJob", "ListFHIRExportJobs",
		"StartFHIRImportJob", "DescribeFHIRImportJob", "ListFHIRImportJobs",
		"ListTagsForResource", "TagResource", "UntagResource")
	ops("sqs", "SendMessage", "SendMessageBatch=SendMessage", "ReceiveMessage", "DeleteMessage",
		"DeleteMessageBatch=DeleteMessage", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch=ChangeMessageVisibility",
		"GetQueueAttributes", "SetQueueAttributes", "GetQueueUrl", "ListQueues", "CreateQueue", "DeleteQueue", "PurgeQueue")
	ops("dynamodb", "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
		// Transactions are authorized per item (SAR: dynamodb notes).
		"TransactWriteItems/Put=PutItem", "TransactWriteItems/Update=UpdateItem", "TransactWriteItems/Delete=DeleteItem",
		"TransactWriteItems/ConditionCheck=ConditionCheckItem", "TransactGetItems/Get=GetItem",
		"ListTables", "CreateTable", "DeleteTable", "DescribeTable", "UpdateTimeToLive", "DescribeTimeToLive")
	ops("events", "PutEvents", "CreateEventBus", "DescribeEventBus", "ListEventBuses", "DeleteEventBus",
		"PutRule", "DescribeRule", "ListRules", "DeleteRule", "EnableRule", "DisableRule",
		"PutTargets", "ListTargetsByRule", "RemoveTargets", "TestEventPattern",
		"CreateArchive", "DescribeArchive", "ListArchives", "DeleteArchive", "StartReplay", "DescribeReplay", "ListReplays")
	ops("states", "StartExecution", "StartSyncExecution", "DescribeExecution", "StopExecution", "GetExecutionHistory",
		"ListExecutions", "SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat",
		"CreateStateMachine", "DescribeStateMachine", "UpdateStateMachine", "DeleteStateMachine", "ListStateMachines",
		"DescribeMapRun", "ListMapRuns")
	return out
}

var (
	restRoutes = map[string][]Route{}
	opRoutes   = map[string]map[string]Route{}
)

func init() {
	for _, r := range Routes() {
		if r.Op != "" {
			if opRoutes[r.Service] == nil {
				opRoutes[r.Service] = map[string]Route{}
			}
			opRoutes[r.Service][r.Op] = r
			continue
		}
		restRoutes[r.Service] = append(restRoutes[r.Service], r)
	}
}

// opAction is the action of a JSON-protocol operation.
func opAction(service, op string) string {
	if r, ok := opRoutes[service][op]; ok {
		return r.Action
	}
	return unmapped(service, op)
}

// restRoute returns the first REST route of service the request matches.
func restRoute(service string, r *http.Request) (Route, bool) {
	segs := splitPath(r.URL.Path)
	q := r.URL.Query()
	for _, rt := range restRoutes[service] {
		if rt.Method != r.Method {
			continue
		}
		if rt.Query != "" {
			if _, ok := q[rt.Query]; !ok {
				continue
			}
		}
		if matchPath(splitPath(rt.Path), segs) {
			return rt, true
		}
	}
	return Route{}, false
}

// splitPath returns the path's unescaped segments ("/" has none).
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if u, err := url.PathUnescape(s); err == nil {
			parts[i] = u
		}
	}
	return parts
}

func matchPath(pattern, segs []string) bool {
	for i, p := range pattern {
		if p == "{key+}" {
			return i < len(segs)
		}
		if i >= len(segs) {
			return false
		}
		s := segs[i]
		switch {
		case p == "{type}":
			if s == "" || s[0] < 'A' || s[0] > 'Z' {
				return false
			}
		case strings.HasPrefix(p, "{"):
			if s == "" || s[0] == '$' || s[0] == '_' {
				return false
			}
		case p != s:
			return false
		}
	}
	return len(pattern) == len(segs)
}
