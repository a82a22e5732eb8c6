package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// An export that ends COMPLETED_WITH_ERRORS (two resources not exported)
// no longer blocks the checkpoint: by default the window publishes the good
// files, quarantines the two error entries under the run, counts them in
// ExportErrors (the alarm's metric) and commits.
//
// IAM is relaxed here: check-export's grants to read the error files
// (s3:GetObject on exports/) and write their quarantine (s3:PutObject on
// quarantine/) belong to internal/iampolicy.
func TestCompletedWithErrorsPublishesTheGoodFilesAndCommits(t *testing.T) {
	st := startStack(t, func(o *Options) { o.IAMOff = true })
	st.HealthLake.CompleteNextJobWithErrorsLosing("2 resources could not be exported", 2)
	w := runWindow(t, st)
	if w.Outcome != report.OutcomeCommitted || w.Events != int64(st.Seeded()-2) {
		t.Fatalf("window = %+v, want committed with %d events", w, st.Seeded()-2)
	}
	if n := st.Metrics.Totals()["ExportErrors"]; n != 2 {
		t.Errorf("ExportErrors = %v, want 2", n)
	}
	out, err := st.s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(st.Res.Bucket), Prefix: aws.String("quarantine/" + w.RunID + "/"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Contents) != 1 || !strings.Contains(aws.ToString(out.Contents[0].Key), "OperationOutcome") {
		t.Errorf("quarantine objects = %d, want the error file's", len(out.Contents))
	}
}
