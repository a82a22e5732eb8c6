package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// applyPolicy adds p's statements, as internal/iampolicy defines them, to
// role's policy. Every identity statement of the stack's roles comes from
// there; cdc-local enforces the same ones.
func applyPolicy(role awsiam.Role, p iampolicy.Principal, res iampolicy.Resources) {
	for _, s := range iampolicy.MustPolicy(p, res) {
		effect := awsiam.Effect_ALLOW
		if s.Deny {
			effect = awsiam.Effect_DENY
		}
		props := &awsiam.PolicyStatementProps{
			Sid:       jsii.String(s.Sid),
			Effect:    effect,
			Actions:   jsii.Strings(s.Actions...),
			Resources: jsii.Strings(s.Resources...),
		}
		if len(s.Conditions) > 0 {
			cond := map[string]any{}
			for op, keys := range s.Conditions {
				m := map[string]any{}
				for k, v := range keys {
					if len(v) == 1 {
						m[k] = v[0]
					} else {
						m[k] = v
					}
				}
				cond[op] = m
			}
			props.Conditions = &cond
		}
		role.AddToPolicy(awsiam.NewPolicyStatement(props))
	}
}
