package s3objects

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestOpenReadsTheObjectAndNamesMissingOnes(t *testing.T) {
	env := localawstest.Start(t)
	c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("map-results/m.json"), Body: strings.NewReader(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	o := Opener{Client: c}
	rc, err := o.Open(ctx, "bkt", "map-results/m.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(body) != `{"x":1}` {
		t.Fatalf("body = %q", body)
	}
	if _, err := o.Open(ctx, "bkt", "map-results/missing.json"); err == nil || !strings.Contains(err.Error(), "s3://bkt/map-results/missing.json") {
		t.Fatalf("missing object: err = %v, want one naming the object", err)
	}
}
