package stack

import (
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// localKeyID names the stack's one KMS key locally (there is no KMS
// emulator; the key's ARN is what the statements and the checks name).
const localKeyID = "local-cdc-key"

// roleARN is the ARN of one of the stack's roles (IAM ARNs have no region).
func (s *Stack) roleARN(p iampolicy.Principal) string {
	return "arn:aws:iam::" + s.Env.AccountID + ":role/" + s.opts.Name + "-" + string(p)
}

// keyARN is the stack's KMS key.
func (s *Stack) keyARN() string { return s.Env.ARN("kms", "key/"+localKeyID) }

// stateMachineName is the pipeline state machine's name.
func (s *Stack) stateMachineName() string { return s.opts.Name }

// PolicyResources returns the local ARNs the stack's IAM statements name.
func (s *Stack) PolicyResources() iampolicy.Resources {
	env, sm := s.Env, s.stateMachineName()
	logs := map[iampolicy.Principal]string{}
	for _, p := range iampolicy.Functions() {
		logs[p] = env.ARN("logs", "log-group:/aws/lambda/"+s.opts.Name+"-"+string(p)+":*")
	}
	rsm := s.reconcileMachineName()
	var fastQueue string
	if s.opts.FastPath {
		fastQueue = env.ARN("sqs", s.fastPathQueue())
	}
	return iampolicy.Resources{
		FastPathQueueARN:         fastQueue,
		BucketARN:                "arn:aws:s3:::" + s.Res.Bucket,
		TableARN:                 env.ARN("dynamodb", "table/"+s.Res.Table),
		KeyARN:                   s.keyARN(),
		DatastoreARN:             env.ARN("healthlake", "datastore/fhir/"+s.Res.DatastoreID),
		StartQueueARN:            env.ARN("sqs", s.opts.Name+"-start"),
		RecheckQueueARN:          env.ARN("sqs", s.opts.Name+"-recheck"),
		EventBusARN:              env.ARN("events", "event-bus/"+s.Res.Bus),
		StateMachineARN:          env.ARN("states", "stateMachine:"+sm),
		ExecutionsARN:            env.ARN("states", "execution:"+sm+":*"),
		MapRunExecutionsARN:      env.ARN("states", "execution:"+sm+"/*"),
		RunLockFunctionARN:       s.Lambdas.ARN(FnRunLock),
		PrepareChangeFunctionARN: s.Lambdas.ARN(FnPrepareChange),
		ExportRoleARN:            s.roleARN(iampolicy.HealthLakeExport),
		LogGroupARNs:             logs,

		ReconcileFunctionARN:         s.Lambdas.ARN(FnReconcile),
		ReconcileStateMachineARN:     env.ARN("states", "stateMachine:"+rsm),
		ReconcileExecutionsARN:       env.ARN("states", "execution:"+rsm+":*"),
		ReconcileMapRunExecutionsARN: env.ARN("states", "execution:"+rsm+"/*"),
		DatastoreKeyARN:              s.opts.DatastoreKey,
		Region:                       env.Region,
	}
}

// setupIAM gives every principal its own access key and statements and
// installs the authorizer on the gateway. The stack's own setup and the
// banner's credentials (localaws.AccessKeyID) are the admin.
func (s *Stack) setupIAM() error {
	res := s.PolicyResources()
	keys := map[string]string{}
	for _, arn := range []string{res.BucketARN, res.TableARN, res.StartQueueARN, res.RecheckQueueARN,
		s.Env.ARN("sqs", s.opts.Name+"-start-dlq"), s.Env.ARN("sqs", s.opts.Name+"-recheck-dlq"),
		s.Env.ARN("sqs", s.fastPathQueue()), s.Env.ARN("sqs", s.fastPathQueue()+"-dlq")} {
		keys[arn] = s.keyARN()
	}
	if k := s.opts.DatastoreKey; k != "" {
		keys[res.DatastoreARN] = k
	}
	mode := iam.Enforce
	if s.opts.IAMOff {
		mode = iam.Audit
	}
	s.IAM = iam.NewAuthorizer(&iam.Mapper{
		Region: s.Env.Region, Account: s.Env.AccountID, Keys: keys,
		Roles:             map[string]iampolicy.Principal{res.ExportRoleARN: iampolicy.HealthLakeExport},
		TaskTokenResource: res.StateMachineARN,
	}, mode)
	s.IAM.AddAdmin(localaws.AccessKeyID)
	s.IAM.AddAdmin(localaws.ConventionalAccessKeyID)
	for _, p := range iampolicy.All() {
		pres := res
		if slices.Contains(iampolicy.FastPathPrincipals(), p) && !res.HasFastPath() {
			// Not deployed without the fast path; the keys still sign
			// (documented in docs/LOCAL.md), for a queue that is not there.
			pres.FastPathQueueARN = s.Env.ARN("sqs", s.fastPathQueue())
		}
		stmts, err := iampolicy.Policy(p, pres)
		if err != nil {
			return err
		}
		s.IAM.AddIdentity(localaws.PrincipalAccessKeyID(string(p)), iam.Identity{
			Principal:  p,
			ARN:        "arn:aws:sts::" + s.Env.AccountID + ":assumed-role/" + s.opts.Name + "-" + string(p) + "/local",
			Statements: stmts,
		})
	}
	s.IAM.Install(s.Env.Gateway)
	return nil
}

// principalConfig is the SDK configuration a principal's calls are signed
// with: the stack's, with the principal's own access key.
func (s *Stack) principalConfig(p iampolicy.Principal) aws.Config {
	cfg := s.Config
	cfg.Credentials = s.Env.ConfigFor(localaws.PrincipalAccessKeyID(string(p))).Credentials
	return cfg
}
