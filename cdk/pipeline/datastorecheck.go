// The deploy's check of the HealthLake data store: a custom resource whose
// Lambda fails the deploy, before any run starts, on a data store the
// pipeline cannot run on (internal/datastorecheck).

package pipeline

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// datastoreCheckFunction creates the check-datastore Lambda (its role's
// statements come with the others': iamPolicies). It and what it needs come
// before the stack's key: its environment is the pipeline's name alone and
// its log group is not under the key (it logs data store ids, statuses and
// key ARNs, never a resource), so that the key, and with it everything the
// stack retains, can wait for the check (datastoreCheck).
func (b *builder) datastoreCheckFunction() {
	const id = "CheckDatastore"
	lg := awslogs.NewLogGroup(b.stack, b.s(id+"Logs"), &awslogs.LogGroupProps{RemovalPolicy: awscdk.RemovalPolicy_RETAIN})
	lg.Node().DefaultChild().(awslogs.CfnLogGroup).SetRetentionInDays(b.p.LogRetentionDays)
	suppress(lg, nagRule{id: "HIPAA.Security-CloudWatchLogGroupEncrypted", reason: "The data store check's log group holds data store ids, statuses, key ARNs and HealthLake's error texts, never a resource (CloudWatch Logs encrypts it at rest all the same). It is not under the stack's key because the key waits for the check: a data store the pipeline cannot run on fails the first deploy before the key, the table and the buckets, which the stack retains, exist."})
	b.checkDatastore = b.function(id, stackconfig.CheckDatastore,
		"healthlake-cdc: checks at a deploy that the pipeline can run on its HealthLake data store (custom resource)",
		map[string]string{stackconfig.EnvPipelineName: b.cfg.Name}, lg)
	suppressDatastoreCheckFindings(b.checkDatastore.f, b.set)
}

// datastoreCheck creates the custom resource: its properties are the
// DatastoreId parameter and the key the roles are granted (DatastoreKey), so
// CloudFormation runs the check when the stack is created and at every
// update that changes either. Created once the check's role has its
// statements (the function depends on its policies). The stack's key and
// the access-log bucket wait for it — and with the key everything under it,
// the table, the artifact bucket and the other log groups among them — so a
// first deploy the check fails leaves nothing retained behind but the
// check's own log group.
func (b *builder) datastoreCheck() {
	timeout := b.set.CheckDatastoreFunction.Timeout
	b.dsCheck = awscdk.NewCustomResource(b.stack, b.s("DatastoreCheck"), &awscdk.CustomResourceProps{
		ServiceToken: b.checkDatastore.f.FunctionArn(),
		ResourceType: b.s("Custom::HealthLakeDatastoreCheck"),
		Properties: &map[string]any{
			datastorecheck.PropDatastoreID:  b.p.DatastoreID,
			datastorecheck.PropDatastoreKey: b.set.DatastoreKeyARN(),
		},
		// CloudFormation invokes the function asynchronously: Lambda
		// retries a failed invocation twice (after about 1 and 2 minutes).
		ServiceTimeout: seconds(3*timeout + 3*time.Minute),
	})
	b.afterDatastoreCheck(b.key, b.accessLogs)
}

// afterDatastoreCheck makes each of cs wait for the data store check: what
// starts runs or calls HealthLake is created only on a data store that
// passed (and a failed check rolls the stack back before it exists).
func (b *builder) afterDatastoreCheck(cs ...constructs.IConstruct) {
	for _, c := range cs {
		c.Node().AddDependency(b.dsCheck)
	}
}

// suppressDatastoreCheckFindings records why HIPAA checks do not apply to
// the check's Lambda, which CloudFormation invokes only at deploys.
func suppressDatastoreCheckFindings(f awslambda.Function, set stackconfig.Config) {
	if set.ReservedConcurrencyOf(stackconfig.CheckDatastore) == 0 {
		suppress(f, nagRule{id: "HIPAA.Security-LambdaConcurrency", reason: "CloudFormation invokes this custom resource's function once per stack create or update that changes the data store settings (and Lambda's retries of that): a reservation would hold account concurrency for a function that runs a second per deploy, and with the ReservedConcurrency setting off (the default) fail the first deploy into a new account."})
	}
	suppress(f,
		nagRule{id: "HIPAA.Security-LambdaDLQ", reason: "CloudFormation invokes the custom resource's function asynchronously with a request it must answer at the request's pre-signed URL; an invocation that fails after Lambda's two retries fails the stack operation (at the custom resource's ServiceTimeout), which CloudFormation shows and rolls back. A dead-letter queue would hold a request nothing can answer any more: the retry is the next deploy."},
	)
}
