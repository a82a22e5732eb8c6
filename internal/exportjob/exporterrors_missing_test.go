package exportjob

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
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
	ctx := context.Background()
	present := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/OperationOutcome/OperationOutcome-1.ndjson"
	unreadable := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/Patient/Patient-1.ndjson"
	admin, role := checkExportRole(t)
	for _, k := range []string{present, unreadable} {
		putObject(t, admin, k, "{}\n")
	}

	read := func(key string) error {
		_, err := role.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	}
	if err := read(present); err != nil {
		t.Fatalf("the role reads an error file: %v", err)
	}
	gone := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/OperationOutcome/OperationOutcome-2.ndjson"
	err := read(gone)
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

const bucket = "artifacts"

// checkExportRole starts local AWS with the bucket, IAM enforced, and
// returns an administrator's S3 client and one signed as check-export.
func checkExportRole(t *testing.T) (admin, role *s3.Client) {
	t.Helper()
	env := localawstest.Start(t)
	admin = localawstest.Bucket(t, env, bucket)
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
	return admin, s3.NewFromConfig(env.ConfigFor(keyID), func(o *s3.Options) { o.UsePathStyle = true })
}

func putObject(t *testing.T, c *s3.Client, key, body string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// TestAnOutputFileOutsideTheListingIsSizedByItsKey: under check-export's own
// role, an output file the job's folder listing does not hold is sized by
// a listing of its key (the role may not read, nor HEAD, a resource file),
// so a large one is still cut into ranges; one S3 does not hold, or one
// outside the prefix the role may list, fails the manifest.
func TestAnOutputFileOutsideTheListingIsSizedByItsKey(t *testing.T) {
	ctx := context.Background()
	admin, role := checkExportRole(t)
	inside := iampolicy.PrefixExports + "ds-FHIR_EXPORT-j1/Patient/Patient-1-1-0.ndjson"
	outside := iampolicy.PrefixExports + "moved/Observation/Observation-1-1-0.ndjson"
	putObject(t, admin, inside, "{}\n")
	putObject(t, admin, outside, strings.Repeat("{}\n", 20_000))
	job := &fhirrest.ExportJob{JobID: "j1", DatastoreID: "ds", S3URI: "s3://" + bucket + "/" + iampolicy.PrefixExports, Output: []fhirrest.OutputFile{
		{Type: "Patient", URL: "s3://" + bucket + "/" + inside},
		{Type: "Observation", URL: "s3://" + bucket + "/" + outside},
	}}
	files, err := BuildManifest(ctx, role, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Bytes != 3 || files[1].Bytes != 60_000 {
		t.Fatalf("files %+v, want sizes 3 and 60000", files)
	}
	for name, key := range map[string]string{
		"a file S3 does not hold":           iampolicy.PrefixExports + "moved/Observation/Observation-2-1-0.ndjson",
		"a file outside the listing prefix": "elsewhere/Observation/Observation-1-1-0.ndjson",
	} {
		job.Output = []fhirrest.OutputFile{{Type: "Observation", URL: "s3://" + bucket + "/" + key}}
		_, err := BuildManifest(ctx, role, job, 0)
		var me *ManifestError
		if !errors.As(err, &me) {
			t.Errorf("%s: err = %v, want a ManifestError", name, err)
		}
	}
}
