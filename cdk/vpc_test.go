package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/cdk/pipeline"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// testVPC is the placement the FastPath synth gives the functions
// (fastPathTemplate).
var testVPC = pipeline.VPC{
	SubnetIDs:        []string{"subnet-0123456789abcdef0", "subnet-0fedcba9876543210"},
	SecurityGroupIDs: []string{"sg-0123456789abcdef0"},
}

// functionsAndRoles returns each AWS::Lambda::Function of the current
// template by logical id, with the construct id of its role.
func functionsAndRoles() map[string]string {
	out := map[string]string{}
	ids, bodies := ofType("AWS::Lambda::Function")
	for i, b := range bodies {
		role, _ := path(props(b), "Role", "Fn::GetAtt").([]any)
		if len(role) == 0 {
			out[ids[i]] = ""
			continue
		}
		out[ids[i]] = constructID(role[0].(string))
	}
	return out
}

// Accounts whose rules require functions in a VPC (an SCP on
// lambda:VpcIds, Security Hub's Lambda.3) get every function of the stack
// in the given subnets and security groups; each function's role has what
// Lambda needs to attach it, and the function waits for that policy. By
// default no function is in a VPC and no role has the statement.
func TestFunctionsInAVPC(t *testing.T) {
	for id, role := range functionsAndRoles() {
		if v := props(resources()[id].(map[string]any))["VpcConfig"]; v != nil {
			t.Errorf("default stack: function %s has a VpcConfig %v", id, v)
		}
		if actionsOf(role)["ec2:CreateNetworkInterface"] {
			t.Errorf("default stack: role %s may create network interfaces", role)
		}
	}
	onFastPath(t, func() {
		fns := functionsAndRoles()
		if len(fns) != 8 {
			t.Errorf("FastPath stack: %d functions, want 8", len(fns))
		}
		want := map[string]any{"SubnetIds": []any{testVPC.SubnetIDs[0], testVPC.SubnetIDs[1]}, "SecurityGroupIds": []any{testVPC.SecurityGroupIDs[0]}}
		for id, role := range fns {
			b := resources()[id].(map[string]any)
			if got := props(b)["VpcConfig"]; !jsonEq(got, want) {
				t.Errorf("function %s: VpcConfig %v, want %v", id, got, want)
			}
			acts := actionsOf(role)
			for _, a := range []string{"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DeleteNetworkInterface",
				"ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"} {
				if !acts[a] {
					t.Errorf("function %s: its role %s lacks %s", id, role, a)
				}
			}
			// The network-interface statement is a policy of its own (kept
			// until CloudFormation's cleanup when the VPC placement is
			// removed), and the function depends on each of its role's
			// policies.
			var policies []string
			network := 0
			pids, pols := ofType("AWS::IAM::ManagedPolicy")
			for i, p := range pols {
				for _, r := range asList(props(p)["Roles"]) {
					if constructID(path(r, "Ref").(string)) != role {
						continue
					}
					policies = append(policies, pids[i])
					sts := asList(path(props(p), "PolicyDocument", "Statement"))
					for _, st := range sts {
						if path(st, "Sid") == iampolicy.SidVpcNetworkInterfaces {
							network++
							if len(sts) != 1 {
								t.Errorf("function %s: %s holds VpcNetworkInterfaces and %d other statements", id, pids[i], len(sts)-1)
							}
						}
					}
				}
			}
			if network != 1 || len(policies) != 2 {
				t.Errorf("function %s: role %s has %d policies, %d with VpcNetworkInterfaces; want 2 and 1", id, role, len(policies), network)
			}
			for _, policy := range policies {
				if !slices.Contains(strs(b["DependsOn"]), policy) {
					t.Errorf("function %s does not depend on its role's policy %s (DependsOn %v)", id, policy, b["DependsOn"])
				}
			}
		}
		for _, r := range []string{"StateMachineRole", "SchedulerRole", "HealthLakeExportRole", "ReconcileStateMachineRole"} {
			if actionsOf(r)["ec2:CreateNetworkInterface"] {
				t.Errorf("%s, not a function's role, may create network interfaces", r)
			}
		}
	})
}

func TestVPCSetting(t *testing.T) {
	lookup := func(subnets, groups string) func(string) any {
		return func(k string) any {
			switch k {
			case ContextVPCSubnetIDs:
				return subnets
			case ContextVPCSecurityGroupIDs:
				return groups
			}
			return nil
		}
	}
	cfg, err := ConfigFromContext(lookup("subnet-0123456789abcdef0, subnet-89abcdef", "sg-0123456789abcdef0"))
	if err != nil || cfg.VPC == nil || len(cfg.VPC.SubnetIDs) != 2 || cfg.VPC.SubnetIDs[1] != "subnet-89abcdef" || len(cfg.VPC.SecurityGroupIDs) != 1 {
		t.Fatalf("ConfigFromContext: %+v, %v", cfg.VPC, err)
	}
	if err := ValidateVPC(cfg.VPC); err != nil {
		t.Error(err)
	}
	if cfg, _ := ConfigFromContext(lookup("", "")); cfg.VPC != nil {
		t.Errorf("no context: VPC %+v, want none", cfg.VPC)
	}
	many := func(prefix string, n int) string {
		var ids []string
		for i := range n {
			ids = append(ids, prefix+strings.Repeat(string(rune('a'+i)), 8))
		}
		return strings.Join(ids, ",")
	}
	for _, bad := range [][2]string{
		{"subnet-0123456789abcdef0", ""},            // no security group: no outbound rule at all
		{"", "sg-0123456789abcdef0"},                // no subnet
		{"subnet-xyz", "sg-0123456789abcdef0"},      // not a subnet id
		{"subnet-0123456789abcdef0", "sg-1"},        // not a security group id
		{"sg-0123456789abcdef0", "subnet-01234567"}, // swapped
		{"subnet-01234567,subnet-01234567", "sg-01234567"},
		{many("subnet-", 17), "sg-01234567"},
		{"subnet-01234567", many("sg-", 6)},
	} {
		cfg, err := ConfigFromContext(lookup(bad[0], bad[1]))
		if err == nil {
			err = ValidateVPC(cfg.VPC)
		}
		if err == nil || !strings.Contains(err.Error(), ContextVPCSubnetIDs) {
			t.Errorf("subnets %q, security groups %q: %v, want an error naming -c %s", bad[0], bad[1], err, ContextVPCSubnetIDs)
		}
	}
}
