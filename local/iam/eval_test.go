package iam

import (
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

func TestWildcard(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "anything:at/all", true},
		{"s3:Get*", "s3:GetObject", true},
		{"s3:Get*", "s3:PutObject", false},
		{"arn:aws:s3:::b/exports/*", "arn:aws:s3:::b/exports/job/Patient-1.ndjson", true},
		{"arn:aws:s3:::b/exports/*", "arn:aws:s3:::b/manifests/x", false},
		{"arn:aws:s3:::b/exports/*", "arn:aws:s3:::b/exports", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"exports/*", "exports/", true},
		{"abc", "abcd", false},
	} {
		if got := Wildcard(c.pattern, c.s); got != c.want {
			t.Errorf("Wildcard(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	stmts := []iampolicy.Statement{
		{Sid: "Read", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:aws:s3:::b/exports/*"}},
		{Sid: "List", Actions: []string{"s3:ListBucket"}, Resources: []string{"arn:aws:s3:::b"},
			Conditions: iampolicy.Conditions{"StringLike": {"s3:prefix": {"exports/*"}}}},
		{Sid: "Pass", Actions: []string{"iam:PassRole"}, Resources: []string{"arn:aws:iam::1:role/r"},
			Conditions: iampolicy.Conditions{"StringEquals": {"iam:PassedToService": {"healthlake.amazonaws.com"}}}},
		{Sid: "NotSource", Actions: []string{"sqs:SendMessage"}, Resources: []string{"*"},
			Conditions: iampolicy.Conditions{"ArnNotEquals": {"aws:SourceArn": {"arn:aws:x"}}}},
		{Sid: "Maybe", Actions: []string{"events:PutEvents"}, Resources: []string{"*"},
			Conditions: iampolicy.Conditions{"StringEqualsIfExists": {"aws:SourceAccount": {"1"}}}},
		{Sid: "NoSecret", Deny: true, Actions: []string{"s3:*"}, Resources: []string{"arn:aws:s3:::b/exports/secret*"}},
		{Sid: "Odd", Actions: []string{"sns:Publish"}, Resources: []string{"*"},
			Conditions: iampolicy.Conditions{"NumericLessThan": {"x": {"1"}}}},
	}
	for _, c := range []struct {
		name string
		req  Request
		want Decision
	}{
		{"allowed by action and resource", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/exports/f"}, Decision{Allowed: true, Sid: "Read"}},
		{"action names are case-insensitive", Request{Action: "S3:getobject", Resource: "arn:aws:s3:::b/exports/f"}, Decision{Allowed: true, Sid: "Read"}},
		{"resources are case-sensitive", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/Exports/f"}, Decision{}},
		{"other action", Request{Action: "s3:PutObject", Resource: "arn:aws:s3:::b/exports/f"}, Decision{}},
		{"list under the prefix", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b", Context: map[string][]string{"s3:prefix": {"exports/job/"}}}, Decision{Allowed: true, Sid: "List"}},
		{"list elsewhere", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b", Context: map[string][]string{"s3:prefix": {"quarantine/"}}}, Decision{}},
		{"list without a prefix", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b"}, Decision{}},
		{"pass to the right service", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/r", Context: map[string][]string{"iam:PassedToService": {"healthlake.amazonaws.com"}}}, Decision{Allowed: true, Sid: "Pass"}},
		{"pass to another service", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/r", Context: map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}}, Decision{}},
		{"negated operator, key absent", Request{Action: "sqs:SendMessage", Resource: "q"}, Decision{Allowed: true, Sid: "NotSource"}},
		{"negated operator, key matches", Request{Action: "sqs:SendMessage", Resource: "q", Context: map[string][]string{"aws:SourceArn": {"arn:aws:x"}}}, Decision{}},
		{"IfExists, key absent", Request{Action: "events:PutEvents", Resource: "bus"}, Decision{Allowed: true, Sid: "Maybe"}},
		{"IfExists, key differs", Request{Action: "events:PutEvents", Resource: "bus", Context: map[string][]string{"aws:SourceAccount": {"2"}}}, Decision{}},
		{"explicit deny wins over allow", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/exports/secret.ndjson"}, Decision{Sid: "NoSecret", ExplicitDeny: true}},
		{"unknown operator fails closed", Request{Action: "sns:Publish", Resource: "t", Context: map[string][]string{"x": {"0"}}}, Decision{}},
		{"default deny", Request{Action: "dynamodb:GetItem", Resource: "t"}, Decision{}},
	} {
		if got := Evaluate(stmts, c.req); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestEvaluateMultivaluedKeys: ForAllValues holds when every request value
// matches, also for none at all (IAM's documented caveat, which Null false
// closes); ForAnyValue when one does; a single-valued operator refuses a
// multivalued key.
func TestEvaluateMultivaluedKeys(t *testing.T) {
	const lk = "dynamodb:LeadingKeys"
	own := []iampolicy.Statement{{Sid: "Own", Actions: []string{"dynamodb:GetItem"}, Resources: []string{"t"},
		Conditions: iampolicy.OwnItems("EXPORT#*", "RUN")}}
	bare := []iampolicy.Statement{{Sid: "Bare", Actions: []string{"dynamodb:GetItem"}, Resources: []string{"t"},
		Conditions: iampolicy.Conditions{"ForAllValues:StringLike": {lk: {"EXPORT#*"}}}}}
	anyOf := []iampolicy.Statement{{Sid: "Any", Actions: []string{"dynamodb:GetItem"}, Resources: []string{"t"},
		Conditions: iampolicy.Conditions{"ForAnyValue:StringEquals": {lk: {"RUN"}}}}}
	single := []iampolicy.Statement{{Sid: "One", Actions: []string{"dynamodb:GetItem"}, Resources: []string{"t"},
		Conditions: iampolicy.Conditions{"StringEquals": {lk: {"RUN"}}}}}
	absent := []iampolicy.Statement{{Sid: "Absent", Actions: []string{"dynamodb:GetItem"}, Resources: []string{"t"},
		Conditions: iampolicy.Conditions{"Null": {lk: {"true"}}}}}
	req := func(keys ...string) Request {
		r := Request{Action: "dynamodb:GetItem", Resource: "t"}
		if keys != nil {
			r.Context = map[string][]string{lk: keys}
		}
		return r
	}
	for _, c := range []struct {
		name  string
		stmts []iampolicy.Statement
		req   Request
		want  bool
	}{
		{"own: one own key", own, req("EXPORT#r1"), true},
		{"own: every key own", own, req("EXPORT#r1", "RUN"), true},
		{"own: one key another's", own, req("EXPORT#r1", "RECONCILE"), false},
		{"own: pattern is anchored", own, req("EXPORTJOB#j1"), false},
		{"own: exact value", own, req("RUNX"), false},
		{"own: no key (Null false)", own, req(), false},
		{"bare ForAllValues: no key holds", bare, req(), true},
		{"bare ForAllValues: empty set holds", bare, Request{Action: "dynamodb:GetItem", Resource: "t", Context: map[string][]string{lk: {}}}, true},
		{"ForAnyValue: one matches", anyOf, req("EXPORT#r1", "RUN"), true},
		{"ForAnyValue: none matches", anyOf, req("EXPORT#r1"), false},
		{"ForAnyValue: no key", anyOf, req(), false},
		{"single-valued operator, one value", single, req("RUN"), true},
		{"single-valued operator, two values", single, req("RUN", "RUN#2"), false},
		{"Null true, key absent", absent, req(), true},
		{"Null true, key present", absent, req("RUN"), false},
	} {
		if got := Evaluate(c.stmts, c.req).Allowed; got != c.want {
			t.Errorf("%s: allowed = %v, want %v", c.name, got, c.want)
		}
	}
}
