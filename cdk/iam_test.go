package main

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

const deployDoc = "../docs/DEPLOY.md"

// starEntry is one Allow statement with Resource "*": who owns it, in which
// template resource type, with which actions.
type starEntry struct {
	Owner, ResourceType, Actions string
}

func (e starEntry) String() string {
	return "| `" + e.Owner + "` | `" + e.ResourceType + "` | `" + e.Actions + "` |"
}

func entry(owner, typ string, actions []string) starEntry {
	a := append([]string{}, actions...)
	sort.Strings(a)
	return starEntry{owner, typ, strings.Join(a, ", ")}
}

// documentedStars reads the table between the resource-star markers of
// docs/DEPLOY.md: | owner | type | actions | reason |.
func documentedStars(t *testing.T) map[starEntry]string {
	t.Helper()
	b, err := os.ReadFile(deployDoc)
	if err != nil {
		t.Fatalf("%s: %v", deployDoc, err)
	}
	text := string(b)
	begin := strings.Index(text, "<!-- resource-star:begin -->")
	end := strings.Index(text, "<!-- resource-star:end -->")
	if begin < 0 || end < begin {
		t.Fatalf("%s has no resource-star table markers", deployDoc)
	}
	out := map[starEntry]string{}
	for _, line := range strings.Split(text[begin:end], "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| owner") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("%s: row %q has %d cells, want 4", deployDoc, line, len(cells))
		}
		clean := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		var actions []string
		for _, a := range strings.Split(clean(cells[2]), ",") {
			actions = append(actions, strings.Trim(strings.TrimSpace(a), "`"))
		}
		reason := strings.TrimSpace(cells[3])
		// The owner cell may name several owners with the same statement.
		for _, owner := range strings.Split(cells[0], ",") {
			e := entry(clean(owner), clean(cells[1]), actions)
			if len(reason) < 20 {
				t.Errorf("%s: %v has no real reason: %q", deployDoc, e, reason)
			}
			out[e] = reason
		}
	}
	return out
}

// TestNoUnscopedIAM scans every Allow statement of every policy in the
// template. Resource "*" is allowed only where docs/DEPLOY.md lists it with
// its reason, and the list must match the template exactly; every other
// resource names something of this stack or this datastore.
func TestNoUnscopedIAM(t *testing.T) {
	documented := documentedStars(t)
	found := map[starEntry]bool{}
	for _, s := range statements() {
		if _, ok := s.Raw["NotResource"]; ok && s.Effect == "Allow" {
			t.Errorf("%s %s: Allow with NotResource", s.ResourceType, s.Owner)
		}
		if _, ok := s.Raw["NotAction"]; ok && s.Effect == "Allow" {
			t.Errorf("%s %s: Allow with NotAction", s.ResourceType, s.Owner)
		}
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Actions {
			if a == "*" || strings.HasSuffix(a, ":*") && s.ResourceType != "AWS::KMS::Key" {
				t.Errorf("%s %s: wildcard action %s", s.ResourceType, s.Owner, a)
			}
		}
		for _, r := range s.Resources {
			f := flatten(r)
			if f == "*" {
				e := entry(s.Owner, s.ResourceType, s.Actions)
				found[e] = true
				if _, ok := documented[e]; !ok {
					t.Errorf("undocumented Resource \"*\"; add it to %s with its reason:\n%s", deployDoc, e)
				}
				continue
			}
			if err := scoped(f); err != "" {
				t.Errorf("%s %s: %v on %s: %s", s.ResourceType, s.Owner, s.Actions, f, err)
			}
		}
	}
	// Rows for what only the options add (FastPath, a VPC) are found in
	// the template with every option (TestFastPathStackNagIAMNamesAndLifecycle
	// checks that template's stars are documented).
	onFastPath(t, func() {
		for _, s := range statements() {
			for _, r := range s.Resources {
				if s.Effect == "Allow" && flatten(r) == "*" {
					found[entry(s.Owner, s.ResourceType, s.Actions)] = true
				}
			}
		}
	})
	for e := range documented {
		if !found[e] {
			t.Errorf("%s lists %v, which no template has", deployDoc, e)
		}
	}
}

var (
	stackRef  = regexp.MustCompile(`\$\{[A-Za-z0-9]+(\.[A-Za-z]+)?\}`)
	pseudoRef = regexp.MustCompile(`\$\{AWS::[A-Za-z]+\}`)
)

// scoped explains why a flattened resource is too broad, or returns "".
// A "*" may only end the resource, after a concrete name or prefix, and the
// resource must name something of this stack (a reference to one of its
// resources or parameters) or a fixed name the stack gives.
func scoped(f string) string {
	body := strings.TrimSuffix(f, "*")
	// A whole path element may be a wildcard between fixed ones
	// (exports/*/OperationOutcome/*: any job's error files, nothing else).
	inner := strings.ReplaceAll(body, "/*/", "/x/")
	if strings.Contains(inner, "*") || strings.HasPrefix(body, "*/") {
		return "wildcard inside the resource"
	}
	if strings.HasSuffix(f, "*") && !(strings.HasSuffix(body, "/") || strings.HasSuffix(body, ":")) {
		return "wildcard that is not a whole path element"
	}
	if strings.HasPrefix(body, "arn:") {
		// ${AWS::Region} and friends contain colons; name them first.
		named := pseudoRef.ReplaceAllStringFunc(body, func(m string) string { return "<" + m[7:len(m)-1] + ">" })
		parts := strings.SplitN(named, ":", 6)
		if len(parts) < 6 || strings.Trim(parts[5], ":/") == "" {
			return "ARN without a resource part"
		}
		if parts[2] == "" || parts[3] == "" && parts[2] != "s3" || parts[4] == "" && parts[2] != "s3" {
			return "ARN with an empty service, region or account"
		}
		return ""
	}
	withoutPseudo := pseudoRef.ReplaceAllString(body, "")
	if !stackRef.MatchString(withoutPseudo) {
		return "names nothing of this stack"
	}
	return ""
}

func TestScopedRejectsBroadResources(t *testing.T) {
	for _, f := range []string{
		"arn:aws:s3:::*",
		"arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:*",
		"arn:${AWS::Partition}:lambda:*:${AWS::AccountId}:function:x",
		"${Bucket.Arn}*",
		"arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:",
		"${AWS::AccountId}/x",
		"${Bucket1234ABCD.Arn}/exp*/x",
	} {
		if scoped(f) == "" {
			t.Errorf("scoped(%q) accepted a broad resource", f)
		}
	}
	for _, f := range []string{
		"${Bucket1234ABCD.Arn}/exports/*",
		"${Queue.Arn}",
		"${Bucket1234ABCD.Arn}/exports/*/OperationOutcome/*",
		"arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:S-Pipeline:*",
		"arn:${AWS::Partition}:healthlake:${AWS::Region}:${AWS::AccountId}:datastore/fhir/${DatastoreId}",
	} {
		if why := scoped(f); why != "" {
			t.Errorf("scoped(%q) = %s", f, why)
		}
	}
}

// TestRolesHaveNoManagedPolicies: AWS managed policies (such as
// AWSLambdaBasicExecutionRole, whose logs actions are on "*") would hide
// unscoped statements from the scan above.
func TestRolesHaveNoManagedPolicies(t *testing.T) {
	ids, roles := ofType("AWS::IAM::Role")
	if len(ids) != 10 {
		t.Errorf("%d roles, want 10 (4 Lambdas, state machine, scheduler, HealthLake export; the data store check; the reconciliation's Lambda and state machine): %v", len(ids), ids)
	}
	for i, r := range roles {
		if m := props(r)["ManagedPolicyArns"]; m != nil {
			t.Errorf("role %s has managed policies %v", ids[i], m)
		}
	}
	// Every Lambda writes only its own log group.
	for _, name := range []string{"RunLock", "StartExport", "CheckExport", "PrepareChange", "Reconcile"} {
		lg, _ := oneOfType(t, "AWS::Logs::LogGroup", name+"Logs")
		if !allows(name+"Role", "${"+lg+".Arn}", "logs:CreateLogStream", "logs:PutLogEvents") {
			t.Errorf("%s cannot write its log group", name)
		}
		for _, s := range statements() {
			if s.Owner != name+"Role" {
				continue
			}
			for _, a := range s.Actions {
				if strings.HasPrefix(a, "logs:") {
					for _, r := range s.Resources {
						if flatten(r) != "${"+lg+".Arn}" {
							t.Errorf("%s: %s on %s", name, a, flatten(r))
						}
					}
				}
			}
		}
	}
}

// TestLeastPrivilegePerFunction pins what each Lambda may do, so a new grant
// is a visible change.
func TestLeastPrivilegePerFunction(t *testing.T) {
	bucket, _ := oneOfType(t, "AWS::S3::Bucket", "ArtifactBucket")
	obj := func(prefix string) string { return "${" + bucket + ".Arn}/" + prefix + "*" }
	execs := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:" + StateMachineName(stackName) + ":*"
	cases := []struct {
		role     string
		resource string
		actions  []string
	}{
		{"RunLockRole", obj(PrefixMapResults), []string{"s3:GetObject"}},
		{"RunLockRole", execs, []string{"states:DescribeExecution"}},
		{"PrepareChangeRole", obj(PrefixExports), []string{"s3:GetObject"}},
		{"PrepareChangeRole", obj(PrefixClaimCheck), []string{"s3:PutObject"}},
		{"PrepareChangeRole", obj(PrefixQuarantine), []string{"s3:PutObject"}},
		{"CheckExportRole", obj(PrefixManifests), []string{"s3:PutObject"}},
		// The reconciliation (docs/RECONCILE.md): delivered-index objects
		// read and written, its own objects; no export, no lock.
		{"ReconcileRole", obj(iampolicy.PrefixDelivered), []string{"s3:GetObject"}},
		{"ReconcileRole", obj(iampolicy.PrefixDelivered), []string{"s3:PutObject"}},
		{"ReconcileRole", obj(iampolicy.PrefixReconcile), []string{"s3:GetObject"}},
	}
	for _, c := range cases {
		if !allows(c.role, c.resource, c.actions...) {
			t.Errorf("%s lacks %v on %s", c.role, c.actions, c.resource)
		}
	}
	// Reads of export files (PHI): prepare-change only (the reconciliation
	// exports nothing; it reads its own listed pages).
	for _, st := range statements() {
		if st.Effect == "Allow" && containsAll(st.Actions, []string{"s3:GetObject"}) {
			for _, r := range st.Resources {
				if flatten(r) == obj(PrefixExports) && st.Owner != "PrepareChangeRole" {
					t.Errorf("%s may read export files", st.Owner)
				}
			}
		}
	}
	// S3 writes per role: exactly these prefixes.
	writes := map[string][]string{
		// the delivered index (docs/RECONCILE.md) and the next window's overlap (docs/RUNLOCK.md, "Overlap")
		"PrepareChangeRole":    {obj(PrefixClaimCheck), obj(PrefixQuarantine), obj(iampolicy.PrefixDelivered), obj(iampolicy.PrefixOverlap)},
		"CheckExportRole":      {obj(PrefixManifests), obj(PrefixQuarantine)},
		"HealthLakeExportRole": {obj(PrefixExports)},
		"StateMachineRole":     {obj(PrefixMapResults)},
		"ReconcileRole":        {obj(iampolicy.PrefixReconcile), obj(iampolicy.PrefixDelivered), obj(PrefixClaimCheck)},
	}
	got := map[string][]string{}
	artifact := strings.TrimSuffix(obj(""), "*") // writes into the artifact bucket (PHI)
	for _, s := range statements() {
		if s.Effect == "Allow" && containsAll(s.Actions, []string{"s3:PutObject"}) {
			for _, r := range s.Resources {
				if strings.HasPrefix(flatten(r), artifact) {
					got[s.Owner] = append(got[s.Owner], flatten(r))
				}
			}
		}
	}
	for role, w := range writes {
		sort.Strings(w)
		sort.Strings(got[role])
		if strings.Join(w, " ") != strings.Join(got[role], " ") {
			t.Errorf("%s writes %v, want %v", role, got[role], w)
		}
	}
	for role := range got {
		if _, ok := writes[role]; !ok {
			t.Errorf("%s may write to the bucket: %v", role, got[role])
		}
	}
	// Only the Lambdas that own the RUN record and export ledger touch the
	// table, and prepare-change its run's PutEvents share item (RATE#{runId},
	// internal/share) with UpdateItem alone.
	for _, s := range statements() {
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "dynamodb:") && s.Effect == "Allow" {
				switch s.Owner {
				case "RunLockRole", "StartExportRole", "CheckExportRole", "ReconcileRole": // reconcile: RECONCILE/STATE
				case "PrepareChangeRole":
					if a != "dynamodb:UpdateItem" || !leadingKeysOnly(s, iampolicy.PKShare) {
						t.Errorf("%s may use DynamoDB beyond its share item (%s)", s.Owner, a)
					}
				default:
					t.Errorf("%s may use DynamoDB (%s)", s.Owner, a)
				}
				if a == "dynamodb:Scan" || a == "dynamodb:DeleteTable" || a == "dynamodb:*" {
					t.Errorf("%s: %s", s.Owner, a)
				}
			}
		}
	}
}

// roleOf names each principal's role construct in the template.
var roleOf = map[iampolicy.Principal]string{
	iampolicy.RunLock: "RunLockRole", iampolicy.StartExport: "StartExportRole", iampolicy.CheckExport: "CheckExportRole",
	iampolicy.PrepareChange: "PrepareChangeRole", iampolicy.StateMachine: "StateMachineRole",
	iampolicy.HealthLakeExport: "HealthLakeExportRole", iampolicy.Scheduler: "SchedulerRole",
	iampolicy.Reconcile: "ReconcileRole", iampolicy.ReconcileStateMachine: "ReconcileStateMachineRole",
	iampolicy.FastPath: "FastPathRole", iampolicy.FastPathSetup: "FastPathSetupRole",
	iampolicy.CheckDatastore: "CheckDatastoreRole",
}

// templateResources are the iampolicy.Resources as the template renders
// them (flattened references to this stack's resources).
func templateResources(t *testing.T) iampolicy.Resources {
	t.Helper()
	arn := func(typ, id string) string {
		logical, _ := oneOfType(t, typ, id)
		return "${" + logical + ".Arn}"
	}
	fnArn := func(id string) string { return arn("AWS::Lambda::Function", id) }
	logs := map[iampolicy.Principal]string{}
	for p, id := range map[iampolicy.Principal]string{iampolicy.RunLock: "RunLockLogs", iampolicy.StartExport: "StartExportLogs",
		iampolicy.CheckExport: "CheckExportLogs", iampolicy.PrepareChange: "PrepareChangeLogs", iampolicy.Reconcile: "ReconcileLogs",
		iampolicy.CheckDatastore: "CheckDatastoreLogs"} {
		logs[p] = arn("AWS::Logs::LogGroup", id)
	}
	// The fast path's, where the template has it (the FastPath setting).
	fastPathQueue := ""
	if hasConstruct("AWS::SQS::Queue", "FastPathQueue") {
		fastPathQueue = arn("AWS::SQS::Queue", "FastPathQueue")
		logs[iampolicy.FastPath] = arn("AWS::Logs::LogGroup", "FastPathLogs")
		logs[iampolicy.FastPathSetup] = arn("AWS::Logs::LogGroup", "FastPathSetupLogs")
	}
	// The functions' placement in a VPC, where the template has one.
	_, runLock := oneOfType(t, "AWS::Lambda::Function", "RunLock")
	inVPC := props(runLock)["VpcConfig"] != nil
	states := "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:"
	sm := StateMachineName(stackName)
	rsm := pipeline.ReconcileStateMachineName(stackName)
	return iampolicy.Resources{
		InVPC:                    inVPC,
		FastPathQueueARN:         fastPathQueue,
		BucketARN:                arn("AWS::S3::Bucket", "ArtifactBucket"),
		TableARN:                 arn("AWS::DynamoDB::Table", "Table"),
		KeyARN:                   arn("AWS::KMS::Key", "Key"),
		DatastoreARN:             "arn:${AWS::Partition}:healthlake:${AWS::Region}:${AWS::AccountId}:datastore/fhir/${" + ParamDatastoreID + "}",
		StartQueueARN:            arn("AWS::SQS::Queue", "StartQueue"),
		RecheckQueueARN:          arn("AWS::SQS::Queue", "RecheckQueue"),
		EventBusARN:              arn("AWS::Events::EventBus", "EventBus"),
		StateMachineARN:          states + "stateMachine:" + sm,
		ExecutionsARN:            states + "execution:" + sm + ":*",
		MapRunExecutionsARN:      states + "execution:" + sm + "/*",
		RunLockFunctionARN:       fnArn("RunLock"),
		PrepareChangeFunctionARN: fnArn("PrepareChange"),
		ExportRoleARN:            arn("AWS::IAM::Role", "HealthLakeExportRole"),
		LogGroupARNs:             logs,

		ReconcileFunctionARN:         fnArn("Reconcile"),
		ReconcileStateMachineARN:     states + "stateMachine:" + rsm,
		ReconcileExecutionsARN:       states + "execution:" + rsm + ":*",
		ReconcileMapRunExecutionsARN: states + "execution:" + rsm + "/*",
	}
}

// canonical renders one statement so that equal statements compare equal:
// sorted actions and resources, conditions as operator → key → sorted values.
func canonical(sid, effect string, actions, resources []string, cond map[string]map[string][]string) string {
	a := append([]string{}, actions...)
	r := append([]string{}, resources...)
	sort.Strings(a)
	sort.Strings(r)
	var c []string
	for op, keys := range cond {
		for k, v := range keys {
			v = append([]string{}, v...)
			sort.Strings(v)
			c = append(c, op+":"+k+"="+strings.Join(v, ","))
		}
	}
	sort.Strings(c)
	return fmt.Sprintf("%s %s %v on %v if %v", sid, effect, a, r, c)
}

func definitionStatements(t *testing.T, p iampolicy.Principal) []string {
	t.Helper()
	stmts, err := iampolicy.Policy(p, templateResources(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stmts {
		effect := "Allow"
		if s.Deny {
			effect = "Deny"
		}
		out = append(out, canonical(s.Sid, effect, s.Actions, s.Resources, s.Conditions))
	}
	sort.Strings(out)
	return out
}

// templateStatements returns the role's identity statements, without the
// documented Resource "*" statements CDK adds (no Sid) for Step Functions'
// log delivery and tracing (which are no grant to pipeline data).
func templateStatements(t *testing.T, owner string) []string {
	t.Helper()
	stars := documentedStars(t)
	var out []string
	for _, s := range statements() {
		if s.Owner != owner || (s.ResourceType != "AWS::IAM::Policy" && s.ResourceType != "AWS::IAM::ManagedPolicy" && s.ResourceType != "AWS::IAM::Role") {
			continue
		}
		var res []string
		for _, r := range s.Resources {
			res = append(res, flatten(r))
		}
		sid, _ := s.Raw["Sid"].(string)
		if len(res) == 1 && res[0] == "*" && sid == "" {
			if _, ok := stars[entry(s.Owner, s.ResourceType, s.Actions)]; ok {
				continue
			}
		}
		cond := map[string]map[string][]string{}
		if c, ok := s.Raw["Condition"].(map[string]any); ok {
			for op, keys := range c {
				cond[op] = map[string][]string{}
				for k, v := range keys.(map[string]any) {
					for _, x := range asList(v) {
						cond[op][k] = append(cond[op][k], flatten(x))
					}
				}
			}
		}
		out = append(out, canonical(sid, s.Effect, s.Actions, res, cond))
	}
	sort.Strings(out)
	return out
}

// TestRolePoliciesAreTheDefinition: every role's identity policy in the
// template is exactly its principal's statements in internal/iampolicy —
// the statements cdc-local enforces — and nothing else. The default stack
// deploys no fast path (no role of its principals, and prepare-change
// without its record statements); the stack with the FastPath setting has
// every principal's role, prepare-change's with them.
func TestRolePoliciesAreTheDefinition(t *testing.T) {
	check := func(t *testing.T, fastPath bool) {
		fp := map[iampolicy.Principal]bool{}
		for _, p := range iampolicy.FastPathPrincipals() {
			fp[p] = true
		}
		for _, p := range iampolicy.All() {
			if roleOf[p] == "" {
				t.Errorf("principal %s has no role in roleOf", p)
				continue
			}
			if fp[p] && !fastPath {
				if hasConstruct("AWS::IAM::Role", roleOf[p]) {
					t.Errorf("%s exists without the FastPath setting", roleOf[p])
				}
				continue
			}
			want := definitionStatements(t, p)
			got := templateStatements(t, roleOf[p])
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("%s: template statements differ from internal/iampolicy\n got:\n  %s\nwant:\n  %s",
					roleOf[p], strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		}
		var fastPathSids []string
		for _, s := range templateStatements(t, roleOf[iampolicy.PrepareChange]) {
			if strings.HasPrefix(s, "ReadFastPathRecords ") {
				fastPathSids = append(fastPathSids, s)
			}
		}
		if fastPath != (len(fastPathSids) == 1) {
			t.Errorf("FastPath %v: prepare-change's fast-path statements %v", fastPath, fastPathSids)
		}
	}
	t.Run("default", func(t *testing.T) { check(t, false) })
	t.Run("FastPath", func(t *testing.T) { onFastPath(t, func() { check(t, true) }) })
}

// TestCheckExportListsOnlyTheExportPrefix (issue 11.1): an export without an
// output list is found by listing its prefix, so check-export needs
// s3:ListBucket — on the bucket, and only for keys under exports/.
func TestCheckExportListsOnlyTheExportPrefix(t *testing.T) {
	bucket := templateResources(t).BucketARN
	found := false
	for _, s := range statements() {
		if s.Effect != "Allow" || !containsAll(s.Actions, []string{"s3:ListBucket"}) {
			continue
		}
		cond := path(s.Raw, "Condition", "StringLike", "s3:prefix")
		if s.Owner == "CheckExportRole" {
			if len(s.Resources) != 1 || flatten(s.Resources[0]) != bucket {
				t.Errorf("check-export lists %v, want only the artifact bucket", s.Resources)
			}
			if flatten(cond) != iampolicy.PrefixExports+"*" {
				t.Errorf("check-export's s3:ListBucket is not limited to %s*: condition %v", iampolicy.PrefixExports, s.Raw["Condition"])
			}
			found = true
		}
	}
	if !found {
		t.Error("check-export has no s3:ListBucket: an export without an output list cannot be listed (issue 11.1)")
	}
}

// TestPrepareChangeMayAbortItsUploads (issue 11.11): prepare-change writes
// quarantine objects by multipart upload and aborts a failed one.
func TestPrepareChangeMayAbortItsUploads(t *testing.T) {
	obj := templateResources(t).Objects(iampolicy.PrefixQuarantine)
	if !allows("PrepareChangeRole", obj, "s3:AbortMultipartUpload") {
		t.Errorf("prepare-change may not abort multipart uploads under %s", obj)
	}
}

// allowsAcross reports whether owner's Allow statements on resource grant
// every action in actions between them (statements are split by concern).
func allowsAcross(owner, resource string, actions ...string) bool {
	for _, a := range actions {
		if !allows(owner, resource, a) {
			return false
		}
	}
	return true
}

// stateMachineArnText is the state machine's ARN as the roles name it:
// built from its fixed name (the same value as its Ref).
func stateMachineArnText() string {
	return "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:" + StateMachineName(stackName)
}

// leadingKeysOnly reports whether s limits DynamoDB to items whose partition
// key matches pattern: ForAllValues:StringLike on dynamodb:LeadingKeys with
// only that pattern, and the key required (Null false).
func leadingKeysOnly(s statement, pattern string) bool {
	keys := asList(path(s.Raw, "Condition", "ForAllValues:StringLike", iampolicy.LeadingKeys))
	null := asList(path(s.Raw, "Condition", "Null", iampolicy.LeadingKeys))
	return len(keys) == 1 && flatten(keys[0]) == pattern && len(null) == 1 && flatten(null[0]) == "false"
}
