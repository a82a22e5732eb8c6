// Package datastore says what in the pipeline's HealthLake data store stops
// the pipeline as deployed: a status other than ACTIVE, a creation before
// 2023-06-01 (no export status by GET), a customer-managed key the stack was
// not deployed for. The deploy's check (internal/datastorecheck) refuses such a
// data store; start-export explains a refused export start with the same
// reasons (exportjob.RefusalHint). It names data store properties only,
// never resource content.
package datastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	hltypes "github.com/aws/aws-sdk-go-v2/service/healthlake/types"
)

// Facts are what DescribeFHIRDatastore says of a data store that decides
// whether the pipeline can run on it.
type Facts struct {
	// Status is the data store's status (ACTIVE, CREATING, DELETING, …).
	Status string
	// CreatedAt is when the data store was created.
	CreatedAt time.Time
	// CustomerManagedKey is the ARN (or id) of the customer-managed KMS key
	// the data store is encrypted with; empty for an AWS owned key.
	CustomerManagedKey string
}

// NewClient is the HealthLake SDK client of the pipeline's functions and
// tools: endpoint, when not empty, replaces the SDK's endpoint for the
// configuration's Region (CDC_HEALTHLAKE_ENDPOINT: in AWS the Regional or,
// with the FIPSEndpoints setting, the FIPS host; locally the emulator).
// An endpoint given is used as it is: the SDK's own FIPS resolution
// (AWS_USE_FIPS_ENDPOINT) is off for it, as the SDK refuses a FIPS
// resolution of a custom endpoint ("FIPS and custom endpoint are not
// supported").
func NewClient(cfg aws.Config, endpoint string) *hlsdk.Client {
	return hlsdk.NewFromConfig(cfg, func(o *hlsdk.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.EndpointOptions.UseFIPSEndpoint = aws.FIPSEndpointStateDisabled
		}
	})
}

// ExportStatusFrom is the first creation date of a data store whose exports
// the pipeline can follow: HealthLake's data stores created before
// 2023-06-01 support only system-wide REST exports and answer no export
// status to a GET on the data store's endpoint (HealthLake Developer Guide,
// "Exporting data from your HealthLake data store using $export"), the
// request with which the pipeline follows every export (docs/DEPLOY.md,
// "Prerequisites").
var ExportStatusFrom = time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)

// Describer is the HealthLake call Describe makes.
type Describer interface {
	DescribeFHIRDatastore(ctx context.Context, in *hlsdk.DescribeFHIRDatastoreInput, optFns ...func(*hlsdk.Options)) (*hlsdk.DescribeFHIRDatastoreOutput, error)
}

// ErrNotFound is Describe's error for a data store HealthLake does not know
// (in the client's Region).
var ErrNotFound = errors.New("no such HealthLake data store")

// Describe returns the facts of data store id. A data store HealthLake does
// not know is ErrNotFound (wrapped); other errors are HealthLake's, wrapped.
func Describe(ctx context.Context, api Describer, id string) (Facts, error) {
	out, err := api.DescribeFHIRDatastore(ctx, &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String(id)})
	if err != nil {
		var nf *hltypes.ResourceNotFoundException
		if errors.As(err, &nf) {
			return Facts{}, fmt.Errorf("describe data store %s: %w", id, ErrNotFound)
		}
		return Facts{}, fmt.Errorf("describe data store %s: %w", id, err)
	}
	if out.DatastoreProperties == nil {
		return Facts{}, fmt.Errorf("describe data store %s: HealthLake answered no properties", id)
	}
	return FactsOf(*out.DatastoreProperties), nil
}

// FactsOf returns the facts in a data store's properties.
func FactsOf(p hltypes.DatastoreProperties) Facts {
	f := Facts{Status: string(p.DatastoreStatus), CreatedAt: aws.ToTime(p.CreatedAt)}
	if sse := p.SseConfiguration; sse != nil && sse.KmsEncryptionConfig != nil &&
		sse.KmsEncryptionConfig.CmkType == hltypes.CmkTypeCmCmk {
		f.CustomerManagedKey = aws.ToString(sse.KmsEncryptionConfig.KmsKeyId)
	}
	return f
}

// Misfits returns what in the data store's facts stops a pipeline deployed
// with configuredKey (the DatastoreKey setting: "" for none), each with what
// to do; none for a data store the pipeline runs on. A key configured for a
// data store on an AWS owned key is no misfit: HealthLake never asks for it.
func Misfits(f Facts, configuredKey string) []string {
	var out []string
	if f.Status != "" && f.Status != string(hltypes.DatastoreStatusActive) {
		out = append(out, "the data store is "+f.Status+", not ACTIVE")
	}
	if !f.CreatedAt.IsZero() && f.CreatedAt.Before(ExportStatusFrom) {
		out = append(out, "the data store was created on "+f.CreatedAt.UTC().Format("2006-01-02")+
			", before 2023-06-01: HealthLake answers no export status by GET on such a data store's endpoint, which the pipeline follows its exports with: use a data store created since")
	}
	switch key := f.CustomerManagedKey; {
	case key == "":
	case configuredKey == "":
		out = append(out, "the data store is encrypted with the customer-managed key "+key+
			" and the stack was deployed without the DatastoreKey setting: deploy with DatastoreKey="+key+" (docs/DEPLOY.md, \"Prerequisites\")")
	case !SameKey(key, configuredKey):
		out = append(out, "the data store is encrypted with the customer-managed key "+key+
			" but the stack's DatastoreKey is "+configuredKey+": deploy with DatastoreKey="+key+" (docs/DEPLOY.md, \"Prerequisites\")")
	}
	return out
}

// SameKey reports whether two key references name the same key: equal, or
// one an ARN ending in the other's key id.
func SameKey(a, b string) bool {
	return a == b || strings.HasSuffix(a, ":key/"+b) || strings.HasSuffix(b, ":key/"+a)
}
