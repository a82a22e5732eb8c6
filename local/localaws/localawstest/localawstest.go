// Package localawstest starts the local AWS endpoint for tests (the way
// net/http/httptest serves net/http), so that packages built into
// cdc-local do not link the testing package.
package localawstest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Start starts a localaws.Env on a free loopback port and closes it when
// the test ends.
func Start(t testing.TB) *localaws.Env {
	t.Helper()
	env, err := localaws.Start(localaws.Options{})
	if err != nil {
		t.Fatalf("start local AWS: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// Bucket creates bucket in env's S3 and returns a path-style S3 client
// signed with the local administrator's key.
func Bucket(t testing.TB, env *localaws.Env, bucket string) *s3.Client {
	t.Helper()
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	return c
}
