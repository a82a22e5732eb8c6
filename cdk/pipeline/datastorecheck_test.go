package pipeline

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// TestTheDeployChecksTheDataStore: the stack has the data store check, a
// custom resource served by the check-datastore Lambda with the data store
// and the key the roles are granted as its properties (so CloudFormation
// checks again when either changes), bounded by a ServiceTimeout of the
// Lambda's three attempts; its role may only describe that data store (and
// write its logs); and what starts runs or calls HealthLake — both
// schedules and, with the fast path, the Subscription — is created after it,
// so a data store the pipeline cannot run on fails the first deploy before
// any of them exists; so is every resource the stack retains (the key, the
// table, the buckets, the log groups) but the check's own log group, so
// that such a deploy leaves nothing else behind.
func TestTheDeployChecksTheDataStore(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	p := fastPathProps(t, fastPathLambdaDir(t), map[string]string{"DatastoreKey": key})
	p.ResourceTypes = jsii.String("Patient,Observation")
	_, tpl := synthProps(t, p)

	crs := resourcesOf(tpl, "Custom::HealthLakeDatastoreCheck")
	if len(crs) != 1 {
		t.Fatalf("%d data store checks, want 1", len(crs))
	}
	var crID string
	for id := range crs {
		crID = id
	}
	cr := crs[crID]
	fnID := ""
	for id := range resourcesOf(tpl, "AWS::Lambda::Function") {
		if strings.HasPrefix(id, "CdcCheckDatastore") {
			fnID = id
		}
	}
	want := map[string]any{
		"ServiceToken": map[string]any{"Fn::GetAtt": []any{fnID, "Arn"}},
		"DatastoreId":  "ds-1",
		"DatastoreKey": key,
		// CDK renders the number as a string; CloudFormation takes both.
		"ServiceTimeout": strconv.Itoa(3*stackconfig.Seconds(p.Settings.CheckDatastoreFunction.Timeout) + 180),
	}
	if got := cr["Properties"]; fnID == "" || js(got) != js(want) {
		t.Errorf("%s properties = %s\nwant %s", crID, js(got), js(want))
	}

	// The role: DescribeFHIRDatastore on the data store, its log group.
	var actions []string
	for id, pol := range resourcesOf(tpl, "AWS::IAM::ManagedPolicy") {
		if !strings.HasPrefix(id, "CdcCheckDatastoreRole") {
			continue
		}
		for _, st := range pol["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			actions = append(actions, strs(st.(map[string]any)["Action"])...)
			if slices.Contains(strs(st.(map[string]any)["Action"]), "healthlake:DescribeFHIRDatastore") &&
				!strings.Contains(js(st.(map[string]any)["Resource"]), "datastore/fhir/ds-1") {
				t.Errorf("DescribeFHIRDatastore on %s, want the data store", js(st.(map[string]any)["Resource"]))
			}
		}
	}
	slices.Sort(actions)
	if js(actions) != js([]string{"healthlake:DescribeFHIRDatastore", "logs:CreateLogStream", "logs:PutLogEvents"}) {
		t.Errorf("the check's role may %v", actions)
	}

	retained := 0
	for id, r := range tpl["Resources"].(map[string]any) {
		if r.(map[string]any)["DeletionPolicy"] != "Retain" || strings.HasPrefix(id, "CdcCheckDatastoreLogs") {
			continue
		}
		retained++
		if !dependsOn(tpl, id, crID) {
			t.Errorf("%s (retained) does not wait for the data store check", id)
		}
	}
	if retained < 5 {
		t.Errorf("%d retained resources, want the key, the table, two buckets and the log groups", retained)
	}

	for _, typ := range []string{"AWS::Scheduler::Schedule", "Custom::HealthLakeSubscription"} {
		rs := resourcesOf(tpl, typ)
		if len(rs) == 0 {
			t.Errorf("no %s", typ)
		}
		for id, r := range rs {
			if !slices.Contains(strs(r["DependsOn"]), crID) {
				t.Errorf("%s %s does not depend on the data store check: DependsOn %v", typ, id, r["DependsOn"])
			}
		}
	}
}

// strs is a template list of strings (or one string) as a slice.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, s := range v {
			if s, ok := s.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// dependsOn reports whether CloudFormation creates resource id after target:
// target is among its DependsOn, Ref, Fn::GetAtt and Fn::Sub references, or
// theirs.
func dependsOn(tpl map[string]any, id, target string) bool {
	res := tpl["Resources"].(map[string]any)
	seen := map[string]bool{}
	todo := []string{id}
	for len(todo) > 0 {
		cur := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[cur] {
			continue
		}
		seen[cur] = true
		r, ok := res[cur].(map[string]any)
		if !ok {
			continue
		}
		deps := strs(r["DependsOn"])
		refsIn(r["Properties"], func(ref string) { deps = append(deps, ref) })
		for _, d := range deps {
			if d == target {
				return true
			}
			todo = append(todo, d)
		}
	}
	return false
}

// subRef matches the resources named in a Fn::Sub string.
var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9]+)(\.[A-Za-z0-9.]+)?\}`)

// refsIn calls f with each logical id v refers to.
func refsIn(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch k {
			case "Ref":
				if s, ok := x.(string); ok {
					f(s)
				}
			case "Fn::GetAtt":
				if l, ok := x.([]any); ok && len(l) > 0 {
					if s, ok := l[0].(string); ok {
						f(s)
					}
				}
			case "Fn::Sub":
				s, _ := x.(string)
				if l, ok := x.([]any); ok && len(l) > 0 {
					s, _ = l[0].(string)
					refsIn(l[1:], f)
				}
				for _, m := range subRef.FindAllStringSubmatch(s, -1) {
					f(m[1])
				}
			default:
				refsIn(x, f)
			}
		}
	case []any:
		for _, x := range v {
			refsIn(x, f)
		}
	}
}
