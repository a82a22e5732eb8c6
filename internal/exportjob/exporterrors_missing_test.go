package exportjob

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
)

// TestMissingErrorFileIsKnownUnderTheCheckExportRole: S3 answers check-export's
// role 403, not 404, for a missing key (it may list the export prefix only);
// an error file the job listed but S3 does not hold is still found missing
// (a listing of its key), while an object the role may not read is not taken
// for a missing one.
func TestMissingErrorFileIsKnownUnderTheCheckExportRole(t *testing.T) {
	env := localawstest.Start(t)
	ctx := context.Background()
	pathStyle := func(o *s3.Options) { o.UsePathStyle = true }
	admin := s3.NewFromConfig(env.Config(), pathStyle)
	const bucket = "artifacts"
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	present := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/OperationOutcome/OperationOutcome-1.ndjson"
	unreadable := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/Patient/Patient-1.ndjson"
	for _, k := range []string{present, unreadable} {
		if _, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("{}\n")}); err != nil {
			t.Fatal(err)
		}
	}
	stmts, err := iampolicy.Policy(iampolicy.CheckExport, iampolicy.Resources{BucketARN: "arn:aws:s3:::" + bucket, TableARN: "t", KeyARN: "k",
		DatastoreARN: "d", RecheckQueueARN: "q", StateMachineARN: "sm", LogGroupARNs: map[iampolicy.Principal]string{iampolicy.CheckExport: "lg"}})
	if err != nil {
		t.Fatal(err)
	}
	a := iam.NewAuthorizer(&iam.Mapper{Region: env.Region, Account: env.AccountID}, iam.Enforce)
	a.AddAdmin(localaws.AccessKeyID)
	keyID := localaws.PrincipalAccessKeyID(string(iampolicy.CheckExport))
	a.AddIdentity(keyID, iam.Identity{Principal: iampolicy.CheckExport, ARN: "arn:aws:sts::" + env.AccountID + ":assumed-role/check-export/t", Statements: stmts})
	a.Install(env.Gateway)
	role := s3.NewFromConfig(env.ConfigFor(keyID), pathStyle)

	read := func(key string) error {
		_, err := role.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	}
	if err := read(present); err != nil {
		t.Fatalf("the role reads an error file: %v", err)
	}
	gone := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/OperationOutcome/OperationOutcome-2.ndjson"
	err = read(gone)
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a missing key: %v, want S3's 403 to this role", err)
	}
	if !objectMissing(ctx, role, bucket, gone, err) {
		t.Errorf("a missing error file was not found missing")
	}
	err = read(unreadable)
	if err == nil || objectMissing(ctx, role, bucket, unreadable, err) {
		t.Errorf("an object the role may not read: %v, taken for a missing one", err)
	}
}
