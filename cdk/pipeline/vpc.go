// Functions in a VPC: the optional placement of every Lambda of the
// pipeline in the account's own subnets (docs/DEPLOY.md, "Functions in a
// VPC").

package pipeline

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// VPC places the pipeline's functions in a VPC: Lambda attaches each to
// these subnets with these security groups. The subnets must reach the
// AWS APIs the functions call (VPC endpoints or a NAT gateway:
// docs/DEPLOY.md lists them).
type VPC struct {
	// SubnetIDs: 1–16 subnet ids, in at least two Availability Zones for
	// a function to keep running when one fails.
	SubnetIDs []string
	// SecurityGroupIDs: 1–5 security group ids; they need outbound HTTPS
	// (443) to the endpoints and no inbound rule.
	SecurityGroupIDs []string
}

// Limits of Lambda's VpcConfig (Lambda API reference, VpcConfig:
// SubnetIds at most 16 items, SecurityGroupIds at most 5) and the id
// shapes AWS documents for them (Inspector's LambdaVpcConfig patterns:
// subnet-/sg- and 8 or 17 characters).
const (
	MaxVPCSubnets        = 16
	MaxVPCSecurityGroups = 5
)

var (
	subnetIDRE        = regexp.MustCompile(`^subnet-([a-z0-9]{8}|[a-z0-9]{17})$`)
	securityGroupIDRE = regexp.MustCompile(`^sg-([a-z0-9]{8}|[a-z0-9]{17})$`)
)

// Check refuses a placement Lambda would refuse at CreateFunction — after
// the bucket, key and table already exist: no subnet or no security group
// (a function in a VPC with no security group has no outbound rule at
// all), too many of either, or an id of another shape. Tokens (values
// resolved at deploy time) are left to CloudFormation.
func (v VPC) Check() error {
	if len(v.SubnetIDs) == 0 || len(v.SecurityGroupIDs) == 0 {
		return fmt.Errorf("VPC: give both subnet ids and security group ids (got %d subnets, %d security groups)", len(v.SubnetIDs), len(v.SecurityGroupIDs))
	}
	if len(v.SubnetIDs) > MaxVPCSubnets {
		return fmt.Errorf("VPC: %d subnets, Lambda takes at most %d", len(v.SubnetIDs), MaxVPCSubnets)
	}
	if len(v.SecurityGroupIDs) > MaxVPCSecurityGroups {
		return fmt.Errorf("VPC: %d security groups, Lambda takes at most %d", len(v.SecurityGroupIDs), MaxVPCSecurityGroups)
	}
	seen := map[string]bool{}
	for _, ids := range []struct {
		what string
		ids  []string
		re   *regexp.Regexp
	}{{"subnet", v.SubnetIDs, subnetIDRE}, {"security group", v.SecurityGroupIDs, securityGroupIDRE}} {
		for _, id := range ids.ids {
			if *awscdk.Token_IsUnresolved(id) {
				continue
			}
			if !ids.re.MatchString(id) {
				return fmt.Errorf("VPC: %s id %q: want %s", ids.what, id, ids.re)
			}
			if seen[id] {
				return fmt.Errorf("VPC: %s id %q given twice", ids.what, id)
			}
			seen[id] = true
		}
	}
	return nil
}

// placeInVPC attaches f to the VPC of the props, if any. It sets the
// function's VpcConfig directly: CDK's Vpc property would attach the AWS
// managed policy AWSLambdaVPCAccessExecutionRole, and every statement of
// the roles comes from internal/iampolicy (VpcNetworkInterfaces).
func (b *builder) placeInVPC(f awslambda.Function) {
	v := b.cfg.VPC
	if v == nil {
		suppress(f, nagRule{id: "HIPAA.Security-LambdaInsideVPC", reason: "Outside a VPC by default: the function reaches only AWS service APIs over TLS, every call authorised by its IAM role and the KMS key policy, and accepts no inbound connections. Accounts whose rules require functions in a VPC set the VPC prop (the app: -c vpcSubnetIds and -c vpcSecurityGroupIds) (docs/DEPLOY.md, \"Functions in a VPC\")."})
		return
	}
	f.Node().DefaultChild().(awslambda.CfnFunction).SetVpcConfig(&awslambda.CfnFunction_VpcConfigProperty{
		SubnetIds:        jsii.Strings(v.SubnetIDs...),
		SecurityGroupIds: jsii.Strings(v.SecurityGroupIDs...),
	})
}
