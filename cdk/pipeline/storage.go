// The pipeline's state: its KMS key, artifact bucket, run table and queues.

package pipeline

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// S3 prefixes of the artifact bucket (docs/ARCHITECTURE.md, "S3 layout"):
// the ones the roles are granted (internal/iampolicy).
const (
	PrefixExports    = iampolicy.PrefixExports
	PrefixManifests  = iampolicy.PrefixManifests
	PrefixMapResults = iampolicy.PrefixMapResults
	PrefixClaimCheck = iampolicy.PrefixClaimCheck
	PrefixQuarantine = iampolicy.PrefixQuarantine
	// PrefixDelivered holds what was published (the reconciliation's
	// delivered index); PrefixReconcile the reconciliation's own objects;
	// PrefixOverlap what each window published in its last overlap.
	PrefixDelivered = iampolicy.PrefixDelivered
	PrefixReconcile = iampolicy.PrefixReconcile
	PrefixOverlap   = iampolicy.PrefixOverlap
	// LegacyPrefixFastPath is where the fast path wrote its record objects
	// before its record moved to the table: expired (with FastPath), read
	// by nothing.
	LegacyPrefixFastPath = "fastpath/"
)

// newKey creates the one customer-managed key, with the statements that let
// CloudWatch Logs and CloudWatch alarms use it.
func (b *builder) newKey() {
	b.key = awskms.NewKey(b.stack, b.s("Key"), &awskms.KeyProps{
		Description:       b.s("healthlake-cdc: bucket, table, queues, topic and log groups of " + b.cfg.Name),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	// CloudWatch Logs encrypts this stack's log groups with the key.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("CloudWatchLogsEncryption"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(awscdk.Fn_Sub(b.s("logs.${AWS::Region}.amazonaws.com"), nil), nil)},
		Actions:    jsii.Strings("kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnLike": map[string]any{
			"kms:EncryptionContext:aws:logs:arn": awscdk.Fn_Sub(b.s("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:*"), nil),
		}},
	}), nil)
	// CloudWatch alarms publish to the encrypted alarm topic.
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("CloudWatchAlarmsToEncryptedTopic"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(b.s("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
	}), nil)
}

// artifactBucket creates the artifact bucket (with its access-log bucket):
// versioned, KMS, TLS only, each prefix expiring.
func (b *builder) artifactBucket() {
	p := b.p
	expire := func(id, prefix string, days *float64) *awss3.LifecycleRule {
		return &awss3.LifecycleRule{
			Id:                                  b.s(id),
			Prefix:                              b.s(prefix),
			Expiration:                          awscdk.Duration_Days(days),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			// The bucket is versioned: an expired or overwritten object's
			// previous version is kept one day, then removed.
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(1)),
		}
	}
	accessLogs := b.accessLogBucket()
	b.accessLogs = accessLogs
	rules := []*awss3.LifecycleRule{
		expire("expire-exports", PrefixExports, p.ExportsExpiryDays),
		expire("expire-manifests", PrefixManifests, p.ManifestsExpiryDays),
		expire("expire-map-results", PrefixMapResults, p.MapResultsExpiryDays),
		expire("expire-claim-checks", PrefixClaimCheck, p.ClaimChecksExpiryDays),
		expire("expire-quarantine", PrefixQuarantine, p.QuarantineExpiryDays),
		// Read by the next window only; kept as long as manifests.
		expire("expire-overlap", PrefixOverlap, p.ManifestsExpiryDays),
		// Settings, not parameters: Validate holds them to the
		// reconciliation's interval (what the next one reads back).
		expire("expire-delivered", PrefixDelivered, jsii.Number(b.set.DeliveredExpiryDays)),
		expire("expire-reconcile", PrefixReconcile, jsii.Number(b.set.ReconcileExpiryDays)),
	}
	if b.set.FastPath {
		// Until stop 29 the fast path wrote its record as objects under
		// fastpath/; it now writes items of the table. The objects an
		// earlier version left (resource ids, under the stack's key) are
		// read by nothing: they expire a day after they were written.
		rules = append(rules, expire("expire-fastpath-objects", LegacyPrefixFastPath, jsii.Number(1)))
	}
	b.bucket = awss3.NewBucket(b.stack, b.s("ArtifactBucket"), &awss3.BucketProps{
		// Server access logs of the PHI bucket (exports, claim-checks,
		// quarantine); object keys in them carry no resource ids.
		ServerAccessLogsBucket: accessLogs,
		ServerAccessLogsPrefix: b.s("artifact-bucket/"),
		Versioned:              jsii.Bool(true),
		Encryption:             awss3.BucketEncryption_KMS,
		EncryptionKey:          b.key,
		BucketKeyEnabled:       jsii.Bool(true),
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		MinimumTLSVersion:      jsii.Number(1.2),
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN,
		LifecycleRules:         &rules,
	})
	suppressArtifactBucketFindings(b.bucket)
	b.claimCheckReaders()
}

// claimCheckReaders lets the accounts of the ClaimCheckReaders prop read the
// claim-check objects — consumers in those accounts resolving
// `resourceRef` (docs/CONSUMERS.md, "A consumer in another account"):
// s3:GetObject on claim-check/* in the bucket policy, and kms:Decrypt of the
// stack's key in its policy, only through S3 in the stack's Region. The
// artifact bucket is the only S3 data under the key, and the bucket policy
// admits claim-check/* only (an encryption-context condition naming the
// bucket would make the key and the bucket depend on each other). Each
// account's IAM policies must still grant its own principals both
// ("Allowing users in other accounts to use a KMS key", KMS Developer
// Guide). None by default.
func (b *builder) claimCheckReaders() {
	accounts := b.cfg.ClaimCheckReaders
	if len(accounts) == 0 {
		return
	}
	var principals []awsiam.IPrincipal
	for _, a := range accounts {
		principals = append(principals, awsiam.NewAccountPrincipal(b.s(a)))
	}
	b.bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("ClaimCheckReaders"),
		Principals: &principals,
		Actions:    jsii.Strings("s3:GetObject"),
		Resources:  &[]*string{b.bucket.ArnForObjects(b.s(PrefixClaimCheck + "*"))},
	}))
	b.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        b.s("ClaimCheckReaders"),
		Principals: &principals,
		Actions:    jsii.Strings("kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"kms:ViaService": awscdk.Fn_Sub(b.s("s3.${AWS::Region}.amazonaws.com"), nil),
		}},
	}), nil)
}

// newTable creates the table of the RUN record, history and export ledger.
func (b *builder) newTable() {
	b.table = awsdynamodb.NewTable(b.stack, b.s("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: b.s("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: b.s("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       b.key,
		TimeToLiveAttribute: b.s(stackconfig.TableTTLAttribute),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	suppress(b.table, nagRule{id: "HIPAA.Security-DynamoDBInBackupPlan", reason: "Point-in-time recovery keeps continuous backups of the table for 35 days and deletion protection is on; the table holds the pipeline's coordination state (run lock, checkpoint, run history, export ledger) and, with the fast path, a day of what it published (resource types, ids and versions: no resource content), under the stack's key, and an AWS Backup plan would add a second copy of that state without a recovery it does not already have."})
}

// queues creates the start and re-check queues, each with its dead-letter
// queue. Visibility timeouts (6 × the consumer's timeout) and
// maxReceiveCount come from the settings cdc-local runs with too.
func (b *builder) queues() {
	queue := func(id string, consumer stackconfig.Function) (awssqs.Queue, awssqs.Queue) {
		dlq := awssqs.NewQueue(b.stack, b.s(id+"DeadLetterQueue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		})
		q := awssqs.NewQueue(b.stack, b.s(id+"Queue"), &awssqs.QueueProps{
			Encryption:          awssqs.QueueEncryption_KMS,
			EncryptionMasterKey: b.key,
			EnforceSSL:          jsii.Bool(true),
			VisibilityTimeout:   seconds(stackconfig.VisibilityTimeout(consumer)),
			RetentionPeriod:     awscdk.Duration_Days(jsii.Number(4)),
			DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(b.set.MaxReceiveCount)},
		})
		return q, dlq
	}
	b.startQ, b.startDLQ = queue("Start", b.set.StartExport)
	b.recheckQ, b.recheckDLQ = queue("Recheck", b.set.CheckExport)
}
