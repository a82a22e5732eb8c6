package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The limits a template must keep to deploy, as AWS documents them
// (docs/DEPLOY.md, "Limits the template keeps"). A stack over one of them
// fails in CloudFormation, or in IAM or Lambda during the deploy — a
// failure a user would otherwise find first.
const (
	// CloudFormation quotas (CloudFormation User Guide, "quotas"): the
	// lesser of the figures AWS has published, so that a template within
	// them deploys whichever applies.
	cfnMaxResources     = 200
	cfnMaxParameters    = 60
	cfnMaxOutputs       = 60
	cfnMaxTemplateBytes = 460_800 // in an S3 object, as the CDK uploads it
	// IAM and AWS STS quotas (IAM User Guide): characters without white space.
	iamMaxInlinePerRole     = 10_240 // all of a role's inline policies together
	iamMaxManagedPolicy     = 6_144
	iamMaxManagedPerRole    = 10 // the default quota of managed policies attached to a role
	iamMaxTrustPolicy       = 2_048
	lambdaMaxEnvironment    = 4_096     // Lambda quotas: all variables of a function together
	sfnMaxDefinition        = 1_048_576 // Step Functions quotas: the 1 MB of a request
	sqsMaxPolicyBytes       = 8_192     // Amazon SQS policy quotas
	sqsMaxPolicyStatements  = 20
	sqsMaxActionsPerStmt    = 7
	sqsMaxConditionsPerStmt = 10
	sqsMaxPrincipalsPerStmt = 50
)

// tokenChars is how long a Ref, Fn::GetAtt or other intrinsic counts once
// CloudFormation resolves it: longer than any ARN, name or URL of this
// stack's resources and of the pseudo parameters (modelled; the stack's
// own ARNs are under 120 characters).
const tokenChars = 160

// resolvedJSON writes v as CloudFormation would pass it on: intrinsics
// replaced by tokenChars characters (Fn::Join joined, Fn::If its longer
// branch), no white space.
func resolvedJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resolveIntrinsics(v)); err != nil {
		return strings.Repeat("x", 1<<20) // never fits: reported by the caller's limit
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func resolveIntrinsics(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				switch {
				case k == "Fn::Join":
					if a, ok := arg.([]any); ok && len(a) == 2 {
						sep, _ := a[0].(string)
						parts, _ := a[1].([]any)
						var s []string
						for _, p := range parts {
							r := resolveIntrinsics(p)
							if str, ok := r.(string); ok {
								s = append(s, str)
							} else {
								s = append(s, resolvedJSON(r))
							}
						}
						return strings.Join(s, sep)
					}
				case k == "Fn::If":
					if a, ok := arg.([]any); ok && len(a) == 3 {
						t, f := resolveIntrinsics(a[1]), resolveIntrinsics(a[2])
						if len(resolvedJSON(t)) >= len(resolvedJSON(f)) {
							return t
						}
						return f
					}
				case k == "Ref" || strings.HasPrefix(k, "Fn::"):
					return strings.Repeat("x", tokenChars)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = resolveIntrinsics(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = resolveIntrinsics(e)
		}
		return out
	}
	return v
}

// refsOf returns the logical ids a list of {"Ref": id} names.
func refsOf(v any) []string {
	var ids []string
	list, _ := v.([]any)
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if id, ok := m["Ref"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// templateLimitViolations lists every limit tpl breaks, one line each.
func templateLimitViolations(tpl map[string]any) []string {
	var out []string
	over := func(what string, got, max int) {
		if got > max {
			out = append(out, fmt.Sprintf("%s: %d, above %d", what, got, max))
		}
	}
	res, _ := tpl["Resources"].(map[string]any)
	params, _ := tpl["Parameters"].(map[string]any)
	outputs, _ := tpl["Outputs"].(map[string]any)
	over("CloudFormation resources", len(res), cfnMaxResources)
	over("CloudFormation parameters", len(params), cfnMaxParameters)
	over("CloudFormation outputs", len(outputs), cfnMaxOutputs)
	if b, err := json.MarshalIndent(tpl, "", " "); err == nil {
		over("template bytes (as the CDK writes it)", len(b), cfnMaxTemplateBytes)
	}

	inline := map[string]int{}  // role → characters of its inline policies
	managed := map[string]int{} // role → managed policies attached
	for _, id := range sortedKeys(res) {
		r, _ := res[id].(map[string]any)
		typ, _ := r["Type"].(string)
		p := props(r)
		switch typ {
		case "AWS::IAM::Role":
			over("trust policy of "+id, len(resolvedJSON(p["AssumeRolePolicyDocument"])), iamMaxTrustPolicy)
			pols, _ := p["Policies"].([]any)
			for _, pol := range pols {
				inline[id] += len(resolvedJSON(path(pol, "PolicyDocument")))
			}
			arns, _ := p["ManagedPolicyArns"].([]any)
			managed[id] += len(arns)
		case "AWS::IAM::Policy":
			n := len(resolvedJSON(p["PolicyDocument"]))
			for _, role := range refsOf(p["Roles"]) {
				inline[role] += n
			}
		case "AWS::IAM::ManagedPolicy":
			over("managed policy "+id, len(resolvedJSON(p["PolicyDocument"])), iamMaxManagedPolicy)
			for _, role := range refsOf(p["Roles"]) {
				managed[role]++
			}
		case "AWS::Lambda::Function":
			vars, _ := path(p, "Environment", "Variables").(map[string]any)
			n := 0
			for k, v := range vars {
				n += len(k)
				if s, ok := resolveIntrinsics(v).(string); ok {
					n += len(s)
				} else {
					n += len(resolvedJSON(v))
				}
			}
			over("environment of "+id, n, lambdaMaxEnvironment)
		case "AWS::StepFunctions::StateMachine":
			def := p["DefinitionString"]
			if def == nil {
				def = p["Definition"]
			}
			s, ok := resolveIntrinsics(def).(string)
			if !ok {
				s = resolvedJSON(def)
			}
			over("definition of "+id, len(s), sfnMaxDefinition)
		case "AWS::SQS::QueuePolicy":
			doc := p["PolicyDocument"]
			over("queue policy "+id+" bytes", len(resolvedJSON(doc)), sqsMaxPolicyBytes)
			stmts, _ := path(doc, "Statement").([]any)
			over("queue policy "+id+" statements", len(stmts), sqsMaxPolicyStatements)
			for i, st := range stmts {
				s, _ := st.(map[string]any)
				over(fmt.Sprintf("queue policy %s statement %d actions", id, i), countOf(s["Action"]), sqsMaxActionsPerStmt)
				conds := 0
				if c, ok := s["Condition"].(map[string]any); ok {
					for _, kv := range c {
						if m, ok := kv.(map[string]any); ok {
							conds += len(m)
						}
					}
				}
				over(fmt.Sprintf("queue policy %s statement %d conditions", id, i), conds, sqsMaxConditionsPerStmt)
				principals := 0
				if pr, ok := s["Principal"].(map[string]any); ok {
					for _, v := range pr {
						principals += countOf(v)
					}
				}
				over(fmt.Sprintf("queue policy %s statement %d principals", id, i), principals, sqsMaxPrincipalsPerStmt)
			}
		}
	}
	for _, role := range sortedKeys(inline) {
		over("inline policies of role "+role, inline[role], iamMaxInlinePerRole)
	}
	for _, role := range sortedKeys(managed) {
		over("managed policies attached to role "+role, managed[role], iamMaxManagedPerRole)
	}
	return out
}

// countOf is how many values a policy element holds: one for a string or
// an intrinsic, the length of a list.
func countOf(v any) int {
	if l, ok := v.([]any); ok {
		return len(l)
	}
	if v == nil {
		return 0
	}
	return 1
}

// The default stack and the FastPath stack stay within every limit above;
// the largest figures are logged, so that growth toward one shows in the
// test output before it fails a deploy.
func TestTemplateWithinAWSLimits(t *testing.T) {
	for name, tpl := range map[string]map[string]any{
		"default":  synthesized.json,
		"FastPath": fastPathTemplate(t),
	} {
		for _, v := range templateLimitViolations(tpl) {
			t.Errorf("%s stack: %s", name, v)
		}
		res, _ := tpl["Resources"].(map[string]any)
		largest, inline, attached := 0, map[string]int{}, map[string]int{}
		for _, r := range res {
			r := r.(map[string]any)
			switch r["Type"] {
			case "AWS::IAM::ManagedPolicy":
				largest = max(largest, len(resolvedJSON(props(r)["PolicyDocument"])))
				for _, role := range refsOf(props(r)["Roles"]) {
					attached[role]++
				}
			case "AWS::IAM::Policy":
				for _, role := range refsOf(props(r)["Roles"]) {
					inline[role] += len(resolvedJSON(props(r)["PolicyDocument"]))
				}
			}
		}
		mostInline, mostAttached := 0, 0
		for _, n := range inline {
			mostInline = max(mostInline, n)
		}
		for _, n := range attached {
			mostAttached = max(mostAttached, n)
		}
		t.Logf("%s stack: %d resources, %d parameters, %d outputs; largest managed policy %d of %d characters, most inline on a role %d of %d, most managed policies on a role %d of %d",
			name, len(res), len(tpl["Parameters"].(map[string]any)), len(tpl["Outputs"].(map[string]any)),
			largest, iamMaxManagedPolicy, mostInline, iamMaxInlinePerRole, mostAttached, iamMaxManagedPerRole)
	}
}

// The check itself finds what would break a deploy: a managed policy, a
// role's inline policies, an environment and a queue policy statement each
// made too large, and a template with too many resources.
func TestTemplateLimitsAreChecked(t *testing.T) {
	big := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = fmt.Sprintf("sqs:Action%02d", i)
		}
		return out
	}
	doc := func(actions []any) map[string]any {
		return map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
			"Effect": "Allow", "Action": actions, "Resource": map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}}}}
	}
	resources := map[string]any{
		"Role": map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{
			"AssumeRolePolicyDocument": doc(big(1))}},
		"Managed": map[string]any{"Type": "AWS::IAM::ManagedPolicy", "Properties": map[string]any{
			"PolicyDocument": doc(big(500)), "Roles": []any{map[string]any{"Ref": "Role"}}}},
		"InlineA": map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
			"PolicyDocument": doc(big(400)), "Roles": []any{map[string]any{"Ref": "Role"}}}},
		"InlineB": map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
			"PolicyDocument": doc(big(400)), "Roles": []any{map[string]any{"Ref": "Role"}}}},
		"Fn": map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{
			"Environment": map[string]any{"Variables": map[string]any{"BIG": strings.Repeat("v", 4100)}}}},
		"QueuePolicy": map[string]any{"Type": "AWS::SQS::QueuePolicy", "Properties": map[string]any{
			"PolicyDocument": doc(big(8))}},
	}
	for i := 0; i < cfnMaxResources; i++ {
		resources[fmt.Sprintf("Topic%03d", i)] = map[string]any{"Type": "AWS::SNS::Topic"}
	}
	got := strings.Join(templateLimitViolations(map[string]any{
		"Resources": resources, "Parameters": map[string]any{}, "Outputs": map[string]any{},
	}), "\n")
	for _, want := range []string{
		"CloudFormation resources",
		"managed policy Managed",
		"inline policies of role Role",
		"environment of Fn",
		"queue policy QueuePolicy statement 0 actions: 8",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations do not name %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "trust policy") {
		t.Errorf("a small trust policy reported:\n%s", got)
	}
}
