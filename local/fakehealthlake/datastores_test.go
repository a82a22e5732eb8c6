package fakehealthlake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	hltypes "github.com/aws/aws-sdk-go-v2/service/healthlake/types"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// ListFHIRDatastores and DescribeFHIRDatastore through the SDK client.
func TestSDKListAndDescribeDatastores(t *testing.T) {
	ctx := context.Background()
	f := setup(t, func(o *fakehealthlake.Options) {
		o.DatastoreNames = map[string]string{"ds1": "healthlake-cdc"}
		o.DatastoreKMSKeyID = "arn:aws:kms:us-east-1:000000000000:key/k1"
		o.Endpoint = "http://127.0.0.1:4566"
	})
	f.clk.Set(f.clk.Now().Add(time.Hour))
	f.emu.CreateDatastore("ds2")
	client := hlsdk.NewFromConfig(f.env.Config())

	d, err := client.DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
	if err != nil {
		t.Fatal(err)
	}
	p := d.DatastoreProperties
	if aws.ToString(p.DatastoreId) != "ds1" || aws.ToString(p.DatastoreName) != "healthlake-cdc" ||
		aws.ToString(p.DatastoreArn) != "arn:aws:healthlake:"+f.env.Region+":"+f.env.AccountID+":datastore/fhir/ds1" ||
		p.DatastoreStatus != hltypes.DatastoreStatusActive || p.DatastoreTypeVersion != hltypes.FHIRVersionR4 ||
		!aws.ToTime(p.CreatedAt).Equal(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)) ||
		aws.ToString(p.DatastoreEndpoint) != "http://127.0.0.1:4566/datastore/ds1/r4/" ||
		p.SseConfiguration == nil || p.SseConfiguration.KmsEncryptionConfig.CmkType != hltypes.CmkTypeCmCmk ||
		aws.ToString(p.SseConfiguration.KmsEncryptionConfig.KmsKeyId) != "arn:aws:kms:us-east-1:000000000000:key/k1" ||
		p.IdentityProviderConfiguration == nil || p.IdentityProviderConfiguration.AuthorizationStrategy != hltypes.AuthorizationStrategyAwsAuth {
		t.Errorf("described %+v", p)
	}

	l, err := client.ListFHIRDatastores(ctx, &hlsdk.ListFHIRDatastoresInput{})
	if err != nil || len(l.DatastorePropertiesList) != 2 || aws.ToString(l.DatastorePropertiesList[1].DatastoreId) != "ds2" ||
		aws.ToString(l.DatastorePropertiesList[1].DatastoreName) != "ds2" || l.NextToken != nil {
		t.Fatalf("list: %v %+v", err, l)
	}
	page, err := client.ListFHIRDatastores(ctx, &hlsdk.ListFHIRDatastoresInput{MaxResults: aws.Int32(1)})
	if err != nil || len(page.DatastorePropertiesList) != 1 || page.NextToken == nil {
		t.Fatalf("page 1: %v %+v", err, page)
	}
	page, err = client.ListFHIRDatastores(ctx, &hlsdk.ListFHIRDatastoresInput{MaxResults: aws.Int32(1), NextToken: page.NextToken})
	if err != nil || len(page.DatastorePropertiesList) != 1 || aws.ToString(page.DatastorePropertiesList[0].DatastoreId) != "ds2" {
		t.Fatalf("page 2: %v %+v", err, page)
	}
	for name, filter := range map[string]*hltypes.DatastoreFilter{
		"name":   {DatastoreName: aws.String("healthlake-cdc")},
		"before": {CreatedBefore: aws.Time(time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC))},
	} {
		l, err := client.ListFHIRDatastores(ctx, &hlsdk.ListFHIRDatastoresInput{Filter: filter})
		if err != nil || len(l.DatastorePropertiesList) != 1 || aws.ToString(l.DatastorePropertiesList[0].DatastoreId) != "ds1" {
			t.Errorf("filter %s: %v %+v", name, err, l)
		}
	}
	if l, err := client.ListFHIRDatastores(ctx, &hlsdk.ListFHIRDatastoresInput{Filter: &hltypes.DatastoreFilter{DatastoreStatus: hltypes.DatastoreStatusDeleted}}); err != nil || len(l.DatastorePropertiesList) != 0 {
		t.Errorf("filter DELETED: %v %+v", err, l)
	}

	_, err = client.DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("nope")})
	var nf *hltypes.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("describe unknown: %v", err)
	}
	// Without Options.DatastoreKMSKeyID the key is AWS owned.
	g := setup(t, nil)
	d, err = hlsdk.NewFromConfig(g.env.Config()).DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
	if err != nil || d.DatastoreProperties.SseConfiguration.KmsEncryptionConfig.CmkType != hltypes.CmkTypeAoCmk ||
		aws.ToString(d.DatastoreProperties.DatastoreEndpoint) != "https://healthlake."+g.env.Region+".amazonaws.com/datastore/ds1/r4/" {
		t.Errorf("default describe: %v %+v", err, d)
	}
}

// A throttled call of the JSON API is answered 400 ThrottlingException, as
// the API reference documents ("HTTP Status Code: 400"); the SDK knows it by
// its name.
func TestJSONAPIThrottleIs400(t *testing.T) {
	f := setup(t, nil)
	client := hlsdk.NewFromConfig(f.env.Config(), func(o *hlsdk.Options) { o.RetryMaxAttempts = 1 })
	f.emu.ThrottleNext(1)
	_, err := client.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
	var te *hltypes.ThrottlingException
	var re *awshttp.ResponseError
	if !errors.As(err, &te) || !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Fatalf("err = %v, want ThrottlingException with HTTP 400", err)
	}
	if _, err := client.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")}); err != nil {
		t.Errorf("next call: %v", err)
	}
}
