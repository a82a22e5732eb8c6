// Package iam enforces the stack's IAM statements (internal/iampolicy) on the
// local runtime: an evaluator of identity-policy statements, a mapping from
// each request the local gateway receives to the IAM checks AWS makes for it
// (action, resource ARN, condition keys), and an Authorizer that identifies
// the principal by its SigV4 access key id, denies what no statement allows
// with the error AWS returns in the service's wire format, and counts both.
package iam

import (
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// Request is one authorization question: may the principal perform Action on
// Resource, given the condition keys of Context.
type Request struct {
	Action   string
	Resource string
	// Context holds the request's condition keys (s3:prefix,
	// iam:PassedToService, dynamodb:LeadingKeys…), each with its values: one
	// for a single-valued key, the set for a multivalued one. A key that is
	// absent (or has no value) is not in the request context.
	Context map[string][]string
}

// Decision is the evaluator's answer.
type Decision struct {
	Allowed bool
	// Sid names the statement that allowed (or explicitly denied) the request.
	Sid string
	// ExplicitDeny is true when a Deny statement matched.
	ExplicitDeny bool
}

// Evaluate applies AWS's evaluation logic for one identity policy: an
// explicit Deny wins, otherwise an Allow that matches action, resource and
// every condition allows, otherwise the request is implicitly denied.
func Evaluate(stmts []iampolicy.Statement, req Request) Decision {
	var allow *iampolicy.Statement
	for i := range stmts {
		s := &stmts[i]
		if !matches(s, req) {
			continue
		}
		if s.Deny {
			return Decision{Sid: s.Sid, ExplicitDeny: true}
		}
		if allow == nil {
			allow = s
		}
	}
	if allow == nil {
		return Decision{}
	}
	return Decision{Allowed: true, Sid: allow.Sid}
}

func matches(s *iampolicy.Statement, req Request) bool {
	ok := false
	for _, a := range s.Actions {
		if Wildcard(strings.ToLower(a), strings.ToLower(req.Action)) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	ok = false
	for _, r := range s.Resources {
		if Wildcard(r, req.Resource) {
			ok = true
			break
		}
	}
	return ok && conditionsHold(s.Conditions, req.Context)
}

// conditionsHold evaluates a Condition block: every operator and every key
// must hold; any one of a key's policy values may match. An operator this
// evaluator does not know never holds (fail closed).
//
// Multivalued keys (dynamodb:LeadingKeys) take the set qualifiers as IAM
// documents them: ForAllValues:Op holds when every value in the request
// matches — also when the request has no value at all, which is why the
// stack's statements pair it with Null false (iampolicy.OwnItems) —
// ForAnyValue:Op when at least one does. Without a qualifier a key must have
// exactly one value; a multivalued one fails closed. Null: "true" holds when
// the key is absent, "false" when it is present.
func conditionsHold(c iampolicy.Conditions, ctx map[string][]string) bool {
	for op, keys := range c {
		set, base := "", op
		if q, rest, ok := strings.Cut(op, ":"); ok {
			set, base = q, rest
		}
		base, ifExists := strings.CutSuffix(base, "IfExists")
		for key, values := range keys {
			vs := ctx[key]
			present := len(vs) > 0
			switch {
			case base == "Null":
				if set != "" || ifExists || len(values) != 1 || (values[0] != "true" && values[0] != "false") {
					return false
				}
				if (values[0] == "true") == present {
					return false
				}
			case set == "ForAllValues":
				for _, v := range vs {
					if !operator(base, v, values) {
						return false
					}
				}
			case set == "ForAnyValue":
				ok := false
				for _, v := range vs {
					ok = ok || operator(base, v, values)
				}
				if !ok {
					return false
				}
			case set != "":
				return false
			case !present:
				// A missing key matches only negated operators and …IfExists.
				if !ifExists && !strings.Contains(base, "Not") {
					return false
				}
			case len(vs) != 1:
				return false
			default:
				if !operator(base, vs[0], values) {
					return false
				}
			}
		}
	}
	return true
}

func operator(op, v string, values []string) bool {
	any := func(f func(p string) bool) bool {
		for _, p := range values {
			if f(p) {
				return true
			}
		}
		return false
	}
	switch op {
	case "StringEquals", "ArnEquals":
		return any(func(p string) bool { return p == v })
	case "StringNotEquals", "ArnNotEquals":
		return !any(func(p string) bool { return p == v })
	case "StringEqualsIgnoreCase":
		return any(func(p string) bool { return strings.EqualFold(p, v) })
	case "StringLike", "ArnLike":
		return any(func(p string) bool { return Wildcard(p, v) })
	case "StringNotLike", "ArnNotLike":
		return !any(func(p string) bool { return Wildcard(p, v) })
	}
	return false
}

// Wildcard reports whether s matches pattern, where * matches any run of
// characters (also none, also across ':' and '/') and ? exactly one, as in
// IAM actions, resources and String/ArnLike conditions.
func Wildcard(pattern, s string) bool {
	// Iterative matcher with one backtracking point per '*'.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
