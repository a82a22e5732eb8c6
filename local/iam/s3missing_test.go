package iam

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
)

// TestMissingKeyIs403WithoutListBucket: S3 answers a missing object 404
// NoSuchKey to a caller that may list the bucket and 403 AccessDenied to one
// that may not — also to one that may list only some prefixes (modelled);
// an object that exists is read by all of them, and HeadObject follows
// the same rule.
func TestMissingKeyIs403WithoutListBucket(t *testing.T) {
	env := localawstest.Start(t)
	ctx := context.Background()
	pathStyle := func(o *s3.Options) { o.UsePathStyle = true }
	admin := s3.NewFromConfig(env.Config(), pathStyle)
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/there"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	a := NewAuthorizer(&Mapper{Region: env.Region, Account: env.AccountID}, Enforce)
	a.AddAdmin(localaws.AccessKeyID)
	get := iampolicy.Statement{Sid: "Get", Actions: []string{"s3:GetObject"}, Resources: []string{"arn:aws:s3:::bkt/*"}}
	list := iampolicy.Statement{Sid: "List", Actions: []string{"s3:ListBucket"}, Resources: []string{"arn:aws:s3:::bkt"}}
	prefixed := list
	prefixed.Conditions = iampolicy.Conditions{"StringLike": {"s3:prefix": {"r/*"}}}
	callers := map[string]struct {
		stmts    []iampolicy.Statement
		notFound bool // 404 for a missing key
	}{
		"lister":   {[]iampolicy.Statement{get, list}, true},
		"prefixed": {[]iampolicy.Statement{get, prefixed}, false},
		"reader":   {[]iampolicy.Statement{get}, false},
	}
	for name, c := range callers {
		a.AddIdentity(localaws.PrincipalAccessKeyID(name), Identity{Principal: iampolicy.Principal(name), ARN: "arn:aws:sts::" + env.AccountID + ":assumed-role/" + name + "/t", Statements: c.stmts})
	}
	a.Install(env.Gateway)

	status := func(err error) (int, string) {
		var re *awshttp.ResponseError
		var ae smithy.APIError
		code := ""
		if errors.As(err, &ae) {
			code = ae.ErrorCode()
		}
		if errors.As(err, &re) {
			return re.HTTPStatusCode(), code
		}
		return 0, code
	}
	for name, c := range callers {
		cl := s3.NewFromConfig(env.ConfigFor(localaws.PrincipalAccessKeyID(name)), pathStyle)
		if _, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/there")}); err != nil {
			t.Errorf("%s: GetObject of an object that exists: %v", name, err)
		}
		_, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/missing")})
		st, code := status(err)
		var nsk *s3types.NoSuchKey
		switch {
		case c.notFound && (st != http.StatusNotFound || !errors.As(err, &nsk)):
			t.Errorf("%s: GetObject of a missing key: %d %s, want 404 NoSuchKey", name, st, code)
		case !c.notFound && (st != http.StatusForbidden || code != "AccessDenied"):
			t.Errorf("%s: GetObject of a missing key: %d %s (%v), want 403 AccessDenied", name, st, code, err)
		}
		_, err = cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/missing")})
		if st, _ := status(err); (c.notFound && st != http.StatusNotFound) || (!c.notFound && st != http.StatusForbidden) {
			t.Errorf("%s: HeadObject of a missing key: %d (%v)", name, st, err)
		}
	}
	if _, err := admin.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("r/missing")}); err == nil {
		t.Error("admin: a missing key was read")
	} else if st, _ := status(err); st != http.StatusNotFound {
		t.Errorf("admin: %d, want S3's 404", st)
	}
}
