// Package datastorecheck is the deploy's check of the HealthLake data store:
// the CloudFormation custom resource (Custom::HealthLakeDatastoreCheck) that
// describes the data store named by the stack's DatastoreId and fails the
// deploy, before any run starts, when the pipeline as deployed cannot run on
// it (datastore.Misfits: not ACTIVE, created before 2023-06-01, a
// customer-managed key the stack was not deployed for), when HealthLake
// does not know it in the stack's Region, or when the stack's roles may not
// describe it. docs/DEPLOY.md, "Prerequisites".
package datastorecheck

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse"
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// The custom resource's properties. CloudFormation passes them as strings.
const (
	// PropDatastoreID is the data store id (the DatastoreId parameter).
	PropDatastoreID = "DatastoreId"
	// PropDatastoreKey is the key the stack was deployed for (the
	// DatastoreKey setting); empty or absent for none.
	PropDatastoreKey = "DatastoreKey"
)

// AttrStatus is the custom resource's Data attribute holding the data
// store's status.
const AttrStatus = "Status"

// IDPrefix starts the custom resource's PhysicalResourceId.
const IDPrefix = "datastore-check:"

// Properties are what the check compares.
type Properties struct {
	DatastoreID  string
	DatastoreKey string
}

// PropertiesOf reads the custom resource's properties.
func PropertiesOf(props map[string]any) (Properties, error) {
	var p Properties
	id, _ := props[PropDatastoreID].(string)
	p.DatastoreID = strings.TrimSpace(id)
	if p.DatastoreID == "" {
		return Properties{}, fmt.Errorf("custom resource properties: %s is required", PropDatastoreID)
	}
	if v, ok := props[PropDatastoreKey]; ok && v != nil {
		key, isString := v.(string)
		if !isString {
			return Properties{}, fmt.Errorf("custom resource properties: %s is not a string", PropDatastoreKey)
		}
		p.DatastoreKey = strings.TrimSpace(key)
	}
	return p, nil
}

// PhysicalID is the PhysicalResourceId of a check that passed with p:
// IDPrefix, the data store id and a digest of the key ("none" without one).
// An Update whose resource already carries the id of its properties was
// checked with them (see Handle).
func PhysicalID(p Properties) string {
	key := "none"
	if p.DatastoreKey != "" {
		sum := sha256.Sum256([]byte(p.DatastoreKey))
		key = hex.EncodeToString(sum[:6])
	}
	return IDPrefix + p.DatastoreID + ":" + key
}

// ErrMisfit is wrapped by Check's error for a data store the pipeline as
// deployed cannot run on.
var ErrMisfit = errors.New("the pipeline cannot run on this data store")

// Check describes the data store of p and returns its facts, and an error
// naming what stops the pipeline on it: every misfit (ErrMisfit), a data
// store HealthLake does not know in region (datastore.ErrNotFound), a
// Region without a HealthLake endpoint (or, when api calls the FIPS host,
// without HealthLake's FIPS endpoint), no answer in time (in a VPC: no
// HealthLake endpoint on its subnets; for the FIPS host, no NAT gateway), a
// description refused, HealthLake's other errors.
func Check(ctx context.Context, api datastore.Describer, region string, p Properties) (datastore.Facts, error) {
	f, err := datastore.Describe(ctx, api, p.DatastoreID)
	var dns *net.DNSError
	fips := callsFIPS(api)
	switch {
	case fips && errors.As(err, &dns) && dns.IsNotFound:
		return f, fmt.Errorf("HealthLake has no FIPS endpoint in Region %s (%s is not a host), only in %s: deploy the stack to one of those, or without the FIPSEndpoints setting: %w",
			region, dns.Name, strings.Join(stackconfig.HealthLakeFIPSRegions, ", "), err)
	case fips && (errors.Is(err, context.DeadlineExceeded) || isTimeout(err)):
		return f, fmt.Errorf("HealthLake's FIPS endpoint did not answer the description of data store %s in time: HealthLake documents no FIPS interface endpoint (only com.amazonaws.%s.healthlake, which serves the Regional host), so a function in a VPC reaches %s.%s.amazonaws.com only through a NAT gateway (docs/DEPLOY.md, \"FIPS endpoints\"): %w",
			p.DatastoreID, region, stackconfig.HealthLakeHost(true), region, err)
	case errors.As(err, &dns) && dns.IsNotFound:
		return f, fmt.Errorf("HealthLake has no endpoint in Region %s (%s is not a host): deploy the stack to a Region HealthLake is offered in, the data store's: %w",
			region, dns.Name, err)
	case errors.Is(err, datastore.ErrNotFound):
		return f, fmt.Errorf("HealthLake has no data store %s in this account and Region %s: check the DatastoreId parameter (and the Region deployed to): %w",
			p.DatastoreID, region, err)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return f, fmt.Errorf("HealthLake did not answer the description of data store %s in time: a function in a VPC reaches HealthLake only through the interface endpoint com.amazonaws.%s.healthlake on its subnets, with its security groups allowing HTTPS to it (docs/DEPLOY.md, \"Functions in a VPC\"): %w",
			p.DatastoreID, region, err)
	case isAccessDenied(err):
		return f, fmt.Errorf("the check's role may not describe data store %s (healthlake:DescribeFHIRDatastore: a permissions boundary or service control policy refuses what the stack grants; docs/DEPLOY.md, \"Accounts with guardrails\"): %w",
			p.DatastoreID, err)
	case err != nil:
		return f, err
	}
	if m := datastore.Misfits(f, p.DatastoreKey); len(m) > 0 {
		return f, fmt.Errorf("data store %s: %s: %w", p.DatastoreID, strings.Join(m, "; "), ErrMisfit)
	}
	return f, nil
}

// callsFIPS reports whether api is an SDK client that calls HealthLake's
// FIPS host: resolved by the SDK (AWS_USE_FIPS_ENDPOINT) or given as its
// endpoint (datastore.NewClient).
func callsFIPS(api datastore.Describer) bool {
	c, ok := api.(interface{ Options() hlsdk.Options })
	if !ok {
		return false
	}
	o := c.Options()
	if o.BaseEndpoint != nil {
		u, err := url.Parse(*o.BaseEndpoint)
		if err != nil {
			return false
		}
		_, fips := stackconfig.RegionalHealthLakeHost(u.Hostname())
		return fips
	}
	return o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled
}

// isTimeout reports whether err is a network timeout (a connection that
// never opened, an answer that never came).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isAccessDenied reports whether err is HealthLake's (or IAM's) access
// denial.
func isAccessDenied(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && (api.ErrorCode() == "AccessDeniedException" || api.ErrorCode() == "AccessDenied")
}

// CustomResource is the check-datastore Lambda: Create and Update run Check
// and answer FAILED with its error (CloudFormation then rolls the stack
// operation back and shows the reason); Delete answers SUCCESS at once (the
// check made nothing). An Update whose PhysicalResourceId is already the
// PhysicalID of its properties answers SUCCESS without describing:
// CloudFormation rolls a failed update back with an Update to the
// properties checked before, and that rollback must not fail on a data
// store that changed since. An Update that passes answers the PhysicalID of
// its new properties, another id: CloudFormation takes it for a
// replacement, so the rollback of an update that fails later, at another
// resource, deletes the new id (nothing to do) and checks nothing again
// (CloudFormation User Guide, "Replacing a custom resource during an
// update"). Responses and logs carry ids, statuses, key ARNs and error
// texts, never a resource.
type CustomResource struct {
	api    datastore.Describer
	region string
	opts   Options
}

// Options configure a CustomResource.
type Options struct {
	// Logger receives one line per event; default slog.Default().
	Logger *slog.Logger
	// Sender answers CloudFormation.
	Sender cfnresponse.Sender
	// Margin is kept before the invocation's deadline for the answer;
	// default 5 s.
	Margin time.Duration
}

// New returns the handler for data stores in region.
func New(api datastore.Describer, region string, opts Options) (*CustomResource, error) {
	if api == nil {
		return nil, errors.New("check-datastore: a HealthLake client is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Margin <= 0 {
		opts.Margin = 5 * time.Second
	}
	return &CustomResource{api: api, region: region, opts: opts}, nil
}

// NewFromEnv is the check-datastore Lambda built from its environment
// (CDC_HEALTHLAKE_ENDPOINT, else the SDK's endpoint of the runtime's
// Region) and the host's runtime. getenv is os.Getenv when nil.
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*CustomResource, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint := strings.TrimSpace(getenv(stackconfig.EnvHealthLakeEndpoint))
	return New(datastore.NewClient(rt.AWS, endpoint), rt.AWS.Region, Options{Logger: rt.Logger})
}

// Handle serves one custom resource event and answers it at its
// ResponseURL. It returns an error only when the answer could not be
// delivered (Lambda's asynchronous retries then run it again).
func (h *CustomResource) Handle(ctx context.Context, ev cfn.Event) error {
	work := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, deadline.Add(-h.opts.Margin))
		defer cancel()
	}
	resp := cfn.Response{Status: cfn.StatusSuccess, RequestID: ev.RequestID, LogicalResourceID: ev.LogicalResourceID,
		StackID: ev.StackID, PhysicalResourceID: ev.PhysicalResourceID}
	log := h.opts.Logger.With("requestType", string(ev.RequestType), "logicalResourceId", ev.LogicalResourceID)
	note, err := h.apply(work, ev, &resp)
	if err != nil {
		resp.Status, resp.Reason = cfn.StatusFailed, cfnresponse.Reason(err)
		log.Error("check-datastore: the deploy cannot use the data store", "physicalResourceId", resp.PhysicalResourceID, "error", err.Error())
	} else {
		log.Info("check-datastore done", "physicalResourceId", resp.PhysicalResourceID, "note", note)
	}
	if err := h.opts.Sender.Send(ctx, ev.ResponseURL, resp); err != nil {
		log.Error("check-datastore could not answer CloudFormation", "error", err.Error())
		return err
	}
	return nil
}

// apply does what ev asks and sets resp's id and data; it returns a note
// for the log, or the check's error.
func (h *CustomResource) apply(ctx context.Context, ev cfn.Event, resp *cfn.Response) (string, error) {
	if ev.RequestType == cfn.RequestDelete {
		return "nothing to delete", nil
	}
	if resp.PhysicalResourceID == "" {
		resp.PhysicalResourceID = IDPrefix + "failed-" + ev.RequestID
	}
	if ev.RequestType != cfn.RequestCreate && ev.RequestType != cfn.RequestUpdate {
		return "", fmt.Errorf("check-datastore: unknown request type %q", ev.RequestType)
	}
	p, err := PropertiesOf(ev.ResourceProperties)
	if err != nil {
		return "", err
	}
	if ev.RequestType == cfn.RequestUpdate && ev.PhysicalResourceID == PhysicalID(p) {
		return "checked with these properties before (a rollback, or a new function)", nil
	}
	f, err := Check(ctx, h.api, h.region, p)
	if err != nil {
		return "", err
	}
	resp.PhysicalResourceID = PhysicalID(p)
	resp.Data = map[string]any{AttrStatus: f.Status}
	return "data store " + p.DatastoreID + " is " + f.Status, nil
}
