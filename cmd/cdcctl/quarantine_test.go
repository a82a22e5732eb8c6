package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

func TestQuarantineListsWhereAndWhyNeverTheLine(t *testing.T) {
	s := newCtlStack(t)
	ctx := context.Background()
	bucket := fmt.Sprintf("quarantine-test-%d", ctlTableSeq.Add(1))
	c := awsclient.NewS3(s.env.Config())
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	arn, a := s.acquire(t, "run-1")
	if _, err := s.store.Commit(ctx, runlock.CommitRequest{Owner: arn, RunID: "run-1", Counts: runlock.Counts{Quarantined: 2}}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	file := "exports/ds-FHIR_EXPORT-job/Patient/Patient-1.ndjson"
	put(prepare.QuarantineKey("run-1", file),
		`{"file":"`+file+`","line":7,"offset":900,"length":40,"reason":"duplicate top-level key \"gender\" at byte 52","raw":"{\"name\":\"Secretname\"}"}`+"\n"+
			`{"file":"`+file+`","line":9,"offset":1200,"reason":"invalid JSON at byte 3: unexpected '}'","rawBase64":"U2VjcmV0bmFtZQ=="}`+"\n"+
			`not json Secretname`+"\n")
	put(prepare.QuarantineKey("run-2", "exports/x/Observation/Observation-1.ndjson"),
		`{"file":"exports/x/Observation/Observation-1.ndjson","line":1,"offset":0,"reason":"id is missing"}`+"\n")
	big := "exports/x/Observation/Observation-2.ndjson"
	put(prepare.QuarantineKey("run-2", big+"@2147483648"),
		`{"file":"`+big+`","line":3,"lineFrom":2147483648,"offset":2147489000,"reason":"id is missing"}`+"\n")
	put("quarantine/stray-object", "{}\n")

	code, out, stderr := s.cdcctl(t, "quarantine", "--bucket", bucket)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"run-1", file, "7", "duplicate top-level key", "run-2", "id is missing", big, "3 after byte 2147483648",
		"cdcctl replay --since " + envelope.FormatTime(a.Window.Since), "not JSON (not shown)"} {
		if !strings.Contains(out, want) {
			t.Errorf("listing lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Secretname") || strings.Contains(out, "U2VjcmV0bmFtZQ") {
		t.Fatalf("the listing shows a quarantined line:\n%s", out)
	}

	code, out, _ = s.cdcctl(t, "quarantine", "--bucket", bucket, "--run", "run-1", "--json")
	var v quarantineView
	decodeJSON(t, out, &v)
	if code != exitOK || len(v.Records) != 3 || v.Records[0].Line != 7 || v.Records[0].Offset != 900 || v.Records[1].Line != 9 ||
		len(v.Runs) != 1 || v.Runs[0].Records != 3 || v.Runs[0].Outcome != "SUCCEEDED" || v.Runs[0].WindowSince != envelope.FormatTime(a.Window.Since) {
		t.Fatalf("--run run-1 --json = %+v", v)
	}
	if strings.Contains(out, "Secretname") || strings.Contains(out, "raw") {
		t.Fatalf("the JSON shows a quarantined line:\n%s", out)
	}

	code, out, _ = s.cdcctl(t, "quarantine", "--bucket", bucket, "--max", "1", "--json")
	decodeJSON(t, out, &v)
	if code != exitOK || len(v.Records) != 1 || !v.Truncated {
		t.Fatalf("--max 1 = %+v", v)
	}
	future := envelope.FormatTime(time.Now().Add(time.Hour))
	code, out, _ = s.cdcctl(t, "quarantine", "--bucket", bucket, "--since", future)
	if code != exitOK || !strings.Contains(out, "no quarantined records") {
		t.Fatalf("--since in the future: exit %d\n%s", code, out)
	}
}

func TestQuarantineUsage(t *testing.T) {
	s := newCtlStack(t)
	t.Setenv(envBucket, "")
	for _, args := range [][]string{
		{"quarantine"},
		{"quarantine", "--bucket", "b", "--run", "a/b"},
		{"quarantine", "--bucket", "b", "--since", "yesterday"},
	} {
		if code, _, stderr := s.cdcctl(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
