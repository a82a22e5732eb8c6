package iam

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
)

// TestABodyCutReachesARoleWithoutListBucket: for a role without
// s3:ListBucket the authorizer wraps the response writer (a missing key's
// 404 becomes 403); a body cut of a small object must still send the
// headers and its share before the connection ends — a cut read, not a
// request that got no answer, which the SDK would retry whole.
func TestABodyCutReachesARoleWithoutListBucket(t *testing.T) {
	env := localawstest.Start(t)
	ctx := context.Background()
	admin := localawstest.Bucket(t, env, "bkt")
	body := strings.Repeat("0123456789", 100) // 1,000 bytes: inside the server's write buffer
	if _, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/small"), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(&Mapper{Region: env.Region, Account: env.AccountID}, Enforce)
	a.AddAdmin(localaws.AccessKeyID)
	key := localaws.PrincipalAccessKeyID("reader")
	a.AddIdentity(key, Identity{Principal: "reader", ARN: "arn:aws:sts::" + env.AccountID + ":assumed-role/reader/t",
		Statements: []iampolicy.Statement{{Sid: "Get", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:aws:s3:::bkt/*"}}}})
	a.Install(env.Gateway)
	env.Gateway.SetBodyCuts(func(service, op string, _ *http.Request) (float64, bool) {
		return 0.5, service == localaws.ServiceS3 && op == "GETObject"
	})
	defer env.Gateway.SetBodyCuts(nil)

	c := s3.NewFromConfig(env.ConfigFor(key), func(o *s3.Options) { o.UsePathStyle = true; o.RetryMaxAttempts = 1 })
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/small")})
	if err != nil {
		t.Fatalf("get: %v (the headers should arrive)", err)
	}
	got, err := io.ReadAll(out.Body)
	_ = out.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != body[:500] {
		t.Fatalf("read %d bytes, err %v; want the first 500 and unexpected EOF", len(got), err)
	}
}
