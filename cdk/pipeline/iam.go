package pipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
)

// applyPolicy attaches p's statements, as internal/iampolicy defines them,
// to role as customer-managed policies (not inline ones: HIPAA Security
// IAMNoInlinePolicy), and returns them: "Policy" with every statement but
// the VPC's, and with the functions in a VPC "NetworkPolicy" with
// VpcNetworkInterfaces alone. A policy of its own is what keeps that
// statement while Lambda still needs it: taking the functions out of the
// VPC updates them first and deletes the policy only in CloudFormation's
// cleanup, after every update, where the statement in "Policy" would go
// with the policy's update, before the functions'. Every identity statement
// of the stack's roles comes from internal/iampolicy; cdc-local enforces the
// same ones.
func applyPolicy(role awsiam.Role, p iampolicy.Principal, res iampolicy.Resources) []awsiam.ManagedPolicy {
	var main, network []awsiam.PolicyStatement
	for _, s := range iampolicy.MustPolicy(p, res) {
		if s.Sid == iampolicy.SidVpcNetworkInterfaces {
			network = append(network, policyStatement(s))
		} else {
			main = append(main, policyStatement(s))
		}
	}
	policy := awsiam.NewManagedPolicy(role, jsii.String("Policy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("healthlake-cdc: the statements of " + string(p) + " (internal/iampolicy)"),
		Statements:  &main,
		Roles:       &[]awsiam.IRole{role},
	})
	suppressScopedWildcards(policy)
	out := []awsiam.ManagedPolicy{policy}
	if len(network) > 0 {
		np := awsiam.NewManagedPolicy(role, jsii.String("NetworkPolicy"), &awsiam.ManagedPolicyProps{
			Description: jsii.String("healthlake-cdc: the VPC statement of " + string(p) + " (internal/iampolicy, VpcNetworkInterfaces)"),
			Statements:  &network,
			Roles:       &[]awsiam.IRole{role},
		})
		suppress(np, nagRule{id: "AwsSolutions-IAM5", reason: "VpcNetworkInterfaces: Lambda creates, describes and deletes the function's network interfaces in the VPC under its role. ec2:DescribeNetworkInterfaces and ec2:DescribeSubnets support no resource-level permission; the interfaces' ids are Lambda's and unknown in advance. The statement is AWS's own managed policy AWSLambdaVPCAccessExecutionRole's, without its CloudWatch Logs actions.", appliesTo: []string{"Resource::*"}})
		out = append(out, np)
	}
	return out
}

// policyStatement is s as a CDK policy statement.
func policyStatement(s iampolicy.Statement) awsiam.PolicyStatement {
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
	return awsiam.NewPolicyStatement(props)
}

// suppressScopedWildcards records why the two kinds of wildcard the
// definition uses are as narrow as IAM allows (AwsSolutions-IAM5): object
// ARNs under one prefix of the stack's own bucket, and the executions of the
// stack's own state machine. Any other wildcard still fails the check.
func suppressScopedWildcards(policy awsiam.ManagedPolicy) {
	cdknag.NagSuppressions_AddResourceSuppressions(policy, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Objects under one prefix of the stack's own artifact bucket: the keys are made per run " +
			"(HealthLake's export files, manifest parts, map results, content-addressed claim-checks, quarantine and " +
			"delivered-index objects) and cannot be listed in advance; each prefix is granted only to the principal that " +
			"reads or writes it, with only the actions it uses."),
		AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::<[A-Za-z0-9]*ArtifactBucket[0-9A-F]{8}\.Arn>\/[a-z-]+\/\*(\/OperationOutcome\/\*)?$/g`)}},
	}, {
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("Executions of this stack's own state machine (and the child executions of its Distributed " +
			"Map), whose names are generated per run: describing or stopping them needs the execution ARN pattern of " +
			"that one state machine."),
		AppliesTo: &[]any{cdknag.RegexAppliesTo{Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:[A-Za-z0-9-]+[:\/]\*$/g`)}},
	}}, jsii.Bool(true))
}

// iamPolicies gives every role its statements from the one definition
// (internal/iampolicy).
func (b *builder) iamPolicies() {
	res := iampolicy.Resources{
		BucketARN:       *b.bucket.BucketArn(),
		TableARN:        *b.table.TableArn(),
		KeyARN:          *b.key.KeyArn(),
		DatastoreARN:    *b.datastoreArn,
		StartQueueARN:   *b.startQ.QueueArn(),
		RecheckQueueARN: *b.recheckQ.QueueArn(),
		EventBusARN:     *b.bus.EventBusArn(),
		// The state machine's ARN is built from its fixed name: its own
		// role may name it without a dependency cycle.
		StateMachineARN:              *b.smArn,
		ExecutionsARN:                *executionsArn(b.smName),
		MapRunExecutionsARN:          *mapRunExecutionsArn(b.smName),
		RunLockFunctionARN:           *b.runLock.f.FunctionArn(),
		PrepareChangeFunctionARN:     *b.prepareChange.f.FunctionArn(),
		ExportRoleARN:                *b.exportRole.RoleArn(),
		LogGroupARNs:                 map[iampolicy.Principal]string{},
		ReconcileFunctionARN:         *b.reconcileFn.f.FunctionArn(),
		ReconcileStateMachineARN:     *b.rec.arn,
		ReconcileExecutionsARN:       *executionsArn(b.rec.name),
		ReconcileMapRunExecutionsARN: *mapRunExecutionsArn(b.rec.name),
		InVPC:                        b.cfg.VPC != nil,
		DatastoreKeyARN:              b.set.DatastoreKeyARN(),
		Region:                       *awscdk.Aws_REGION(),
	}
	functions := map[iampolicy.Principal]fn{
		iampolicy.RunLock: b.runLock, iampolicy.StartExport: b.startExport, iampolicy.CheckExport: b.checkExport,
		iampolicy.PrepareChange: b.prepareChange, iampolicy.Reconcile: b.reconcileFn,
		iampolicy.CheckDatastore: b.checkDatastore,
	}
	if b.fp != nil {
		// Set only with the fast path: prepare-change then also reads its
		// record items (iampolicy, HasFastPath).
		res.FastPathQueueARN = *b.fp.out.Queue.QueueArn()
		functions[iampolicy.FastPath] = b.fp.fn
		functions[iampolicy.FastPathSetup] = b.fp.setup
	}
	roles := map[iampolicy.Principal]awsiam.Role{
		iampolicy.StateMachine: b.smRole, iampolicy.HealthLakeExport: b.exportRole,
		iampolicy.Scheduler: b.schedRole, iampolicy.ReconcileStateMachine: b.rec.role,
	}
	if k := res.DatastoreKeyARN; k != "" {
		awscdk.Annotations_Of(b.stack).AddWarningV2(b.s("healthlake-cdc:DatastoreKey"), b.s(
			"DatastoreKey: HealthLake uses the data store's key "+k+" with the caller's permission. Each role that calls "+
				"HealthLake is granted it (UseDatastoreKey), which takes effect only if that key's policy lets IAM policies "+
				"of this account grant its use (the default key policy does); otherwise add the roles to the key policy "+
				"(docs/DEPLOY.md, \"Prerequisites\")."))
	}
	for p, f := range functions {
		roles[p] = f.role
		res.LogGroupARNs[p] = *f.logs.LogGroupArn()
	}
	for p, role := range roles {
		policies := applyPolicy(role, p, res)
		// A function is created after its role's policies and deleted
		// before them: Lambda checks a VPC function's role for the
		// network-interface actions at CreateFunction, and needs them to
		// delete the function's interfaces; and a function's first
		// invocations have every grant.
		if f, ok := functions[p]; ok {
			for _, policy := range policies {
				f.f.Node().AddDependency(policy)
			}
		}
	}
}
