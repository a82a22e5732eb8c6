package datastorecheck_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"

	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse"
	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse/cfntest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/iam"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
)

const dataStoreKey = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// store is how the emulated data store "ds1" is made.
type store struct {
	key     string    // its customer-managed key; "" AWS owned
	created time.Time // its CreatedAt; zero: now
}

// fixture is the check's Lambda handler signing as the check-datastore role,
// whose statements local IAM enforces, against the HealthLake emulator;
// CloudFormation's ResponseURL is a cfntest.Endpoint.
type fixture struct {
	h     *datastorecheck.CustomResource
	cfn   *cfntest.Endpoint
	authz *iam.Authorizer
	calls *atomic.Int64
	logs  *bytes.Buffer
}

// newFixture makes the fixture; the role's policy names the data store
// policyID (the stack builds the ARN from its DatastoreId parameter).
func newFixture(t *testing.T, s store, policyID string, statements func([]iampolicy.Statement) []iampolicy.Statement) *fixture {
	t.Helper()
	env := localawstest.Start(t)
	key := localaws.PrincipalAccessKeyID(string(iampolicy.CheckDatastore))
	secret := localaws.PrincipalSecretAccessKey(key)
	emu := fakehealthlake.New(fakehealthlake.Options{
		Datastores: []string{"ds1"}, Endpoint: env.URL, DatastoreKMSKeyID: s.key, DatastoreCreatedAt: s.created,
		MoreAccessKeys: map[string]string{key: secret},
	})
	calls := &atomic.Int64{}
	env.Gateway.Handle(localaws.ServiceHealthLake, countCalls{next: emu, n: calls})
	authz := iam.NewAuthorizer(&iam.Mapper{Region: env.Region, Account: env.AccountID}, iam.Enforce)
	stmts := iampolicy.MustPolicy(iampolicy.CheckDatastore, iampolicy.Resources{
		DatastoreARN: env.ARN("healthlake", "datastore/fhir/"+policyID),
		LogGroupARNs: map[iampolicy.Principal]string{iampolicy.CheckDatastore: env.ARN("logs", "log-group:/aws/lambda/check-datastore:*")},
	})
	if statements != nil {
		stmts = statements(stmts)
	}
	authz.AddIdentity(key, iam.Identity{Principal: iampolicy.CheckDatastore,
		ARN: "arn:aws:sts::" + env.AccountID + ":assumed-role/check-datastore/t", Statements: stmts})
	authz.Install(env.Gateway)
	api := hlsdk.New(hlsdk.Options{
		Region: env.Region, BaseEndpoint: aws.String(env.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, secret, ""),
	})
	logs := &bytes.Buffer{}
	h, err := datastorecheck.New(api, env.Region, datastorecheck.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Sender: cfnresponse.Sender{Sleep: func(context.Context, time.Duration) error { return nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{h: h, cfn: cfntest.New(t), authz: authz, calls: calls, logs: logs}
}

// countCalls counts the requests that reach HealthLake.
type countCalls struct {
	next http.Handler
	n    *atomic.Int64
}

func (c countCalls) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.next.ServeHTTP(w, r)
}

func props(id, key string) map[string]any {
	p := map[string]any{"ServiceToken": "arn:aws:lambda:us-east-1:000000000000:function:check-datastore", "DatastoreId": id}
	if key != "" {
		p["DatastoreKey"] = key
	}
	return p
}

func (f *fixture) handle(t *testing.T, kind cfn.RequestType, physicalID string, p map[string]any) cfn.Response {
	t.Helper()
	ev := cfn.Event{
		RequestType: kind, RequestID: "req-" + string(kind), ResponseURL: f.cfn.URL(),
		ResourceType: "Custom::HealthLakeDatastoreCheck", LogicalResourceID: "DatastoreCheck",
		StackID: "arn:aws:cloudformation:us-east-1:000000000000:stack/cdc/1", PhysicalResourceID: physicalID,
		ResourceProperties: p,
	}
	if err := f.h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("handle %s: %v", kind, err)
	}
	r := f.cfn.Last(t)
	if r.RequestID != ev.RequestID || r.LogicalResourceID != ev.LogicalResourceID || r.StackID != ev.StackID {
		t.Errorf("the response does not echo the event: %+v", r)
	}
	return r
}

// TestADataStoreThePipelineRunsOnPassesTheDeploy: Create on an ACTIVE data
// store on an AWS owned key with no DatastoreKey, or on a customer-managed
// key named by DatastoreKey (by ARN or by key id), answers SUCCESS with the
// id of its properties and the data store's status.
func TestADataStoreThePipelineRunsOnPassesTheDeploy(t *testing.T) {
	for name, c := range map[string]struct {
		s   store
		key string
	}{
		"AWS owned key":              {store{}, ""},
		"its key, by ARN":            {store{key: dataStoreKey}, dataStoreKey},
		"its key, the ARN by key id": {store{key: "1234abcd-12ab-34cd-56ef-1234567890ab"}, dataStoreKey},
		// A key HealthLake never asks for does no harm (RefusalHint agrees).
		"AWS owned key, a key configured": {store{}, dataStoreKey},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, c.s, "ds1", nil)
			r := f.handle(t, cfn.RequestCreate, "", props("ds1", c.key))
			want := datastorecheck.PhysicalID(datastorecheck.Properties{DatastoreID: "ds1", DatastoreKey: c.key})
			if r.Status != cfn.StatusSuccess || r.PhysicalResourceID != want || r.Data[datastorecheck.AttrStatus] != "ACTIVE" {
				t.Fatalf("response %+v, want SUCCESS as %s with Status ACTIVE", r, want)
			}
			if d := f.authz.Denials(); len(d) > 0 {
				t.Errorf("denied %+v", d)
			}
		})
	}
}

// TestAMisfitFailsTheDeployWithWhatToDo: Create answers FAILED, with the
// reason CloudFormation shows in the stack's events naming what to change,
// for a data store on a key the stack was not deployed for, one created
// before 2023-06-01 (whose exports the pipeline cannot follow), one
// HealthLake does not know, and one the role may not describe.
func TestAMisfitFailsTheDeployWithWhatToDo(t *testing.T) {
	const other = "arn:aws:kms:us-east-1:000000000000:key/other"
	withoutDescribe := func(s []iampolicy.Statement) []iampolicy.Statement { return iampolicy.Without(s, "DescribeDatastore") }
	for name, c := range map[string]struct {
		s          store
		id, key    string
		statements func([]iampolicy.Statement) []iampolicy.Statement
		want       []string
	}{
		"deployed without DatastoreKey": {store{key: dataStoreKey}, "ds1", "", nil,
			[]string{"data store ds1", "without the DatastoreKey setting", "DatastoreKey=" + dataStoreKey}},
		"another key": {store{key: dataStoreKey}, "ds1", other, nil,
			[]string{"but the stack's DatastoreKey is " + other, "DatastoreKey=" + dataStoreKey}},
		"before 2023-06-01": {store{created: time.Date(2023, 5, 2, 9, 0, 0, 0, time.UTC)}, "ds1", "", nil,
			[]string{"created on 2023-05-02", "answers no export status by GET"}},
		"unknown data store": {store{}, "0123456789abcdef0123456789abcdef", "", nil,
			[]string{"HealthLake has no data store 0123456789abcdef0123456789abcdef in this account and Region us-east-1", "DatastoreId parameter"}},
		"not allowed to describe": {store{}, "ds1", "", withoutDescribe,
			[]string{"may not describe data store ds1", "permissions boundary or service control policy"}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, c.s, c.id, c.statements)
			r := f.handle(t, cfn.RequestCreate, "", props(c.id, c.key))
			if r.Status != cfn.StatusFailed || r.PhysicalResourceID != datastorecheck.IDPrefix+"failed-req-Create" {
				t.Fatalf("response %+v, want FAILED as %sfailed-req-Create", r, datastorecheck.IDPrefix)
			}
			for _, w := range c.want {
				if !strings.Contains(r.Reason, w) {
					t.Errorf("reason %q lacks %q", r.Reason, w)
				}
			}
			if len(r.Reason) > cfnresponse.MaxReason {
				t.Errorf("reason of %d bytes", len(r.Reason))
			}
			// The rollback's Delete of the failed Create succeeds and
			// calls nothing.
			calls := f.calls.Load()
			if d := f.handle(t, cfn.RequestDelete, r.PhysicalResourceID, props(c.id, c.key)); d.Status != cfn.StatusSuccess || d.PhysicalResourceID != r.PhysicalResourceID {
				t.Errorf("Delete after the failed Create: %+v", d)
			}
			if f.calls.Load() != calls {
				t.Errorf("Delete called HealthLake")
			}
			f.authz.Reset()
		})
	}
}

// TestAnUpdateIsCheckedAndItsRollbackIsNot: an Update to properties the
// data store does not fit fails and keeps the resource's id; CloudFormation's
// rollback then updates back to the properties checked before (the id
// says so) and succeeds without describing, even though the data store no
// longer fits them. An Update that fits answers the id of its properties, a
// new one: CloudFormation takes that for a replacement, so when a later
// resource of the same update fails, its rollback keeps the old id and
// sends a Delete for the new one — which succeeds without describing —
// instead of an Update that would check the old properties again (as it
// does once the update succeeded, for the old id).
func TestAnUpdateIsCheckedAndItsRollbackIsNot(t *testing.T) {
	f := newFixture(t, store{key: dataStoreKey}, "ds1", nil)
	checked := datastorecheck.PhysicalID(datastorecheck.Properties{DatastoreID: "ds1"}) // deployed before the key was
	r := f.handle(t, cfn.RequestUpdate, checked, props("ds1", "arn:aws:kms:us-east-1:000000000000:key/other"))
	if r.Status != cfn.StatusFailed || r.PhysicalResourceID != checked {
		t.Fatalf("misfit update: %+v, want FAILED keeping %s", r, checked)
	}
	calls := f.calls.Load()
	if r := f.handle(t, cfn.RequestUpdate, checked, props("ds1", "")); r.Status != cfn.StatusSuccess || r.PhysicalResourceID != checked {
		t.Fatalf("rollback update: %+v, want SUCCESS keeping %s", r, checked)
	}
	if f.calls.Load() != calls {
		t.Errorf("the rollback described the data store")
	}
	r = f.handle(t, cfn.RequestUpdate, checked, props("ds1", dataStoreKey))
	want := datastorecheck.PhysicalID(datastorecheck.Properties{DatastoreID: "ds1", DatastoreKey: dataStoreKey})
	if r.Status != cfn.StatusSuccess || r.PhysicalResourceID != want || want == checked {
		t.Fatalf("fitting update: %+v, want SUCCESS as %s", r, want)
	}
	if f.calls.Load() == calls {
		t.Errorf("the update was not checked")
	}
	calls = f.calls.Load()
	for _, id := range []string{want, checked} {
		if r := f.handle(t, cfn.RequestDelete, id, props("ds1", "")); r.Status != cfn.StatusSuccess || r.PhysicalResourceID != id {
			t.Fatalf("delete of %s: %+v, want SUCCESS keeping the id", id, r)
		}
	}
	if f.calls.Load() != calls {
		t.Errorf("a delete described the data store")
	}
}

// TestBadPropertiesFailTheDeploy: a Create without a DatastoreId, or with a
// DatastoreKey that is not a string, fails naming the property.
func TestBadPropertiesFailTheDeploy(t *testing.T) {
	f := newFixture(t, store{}, "ds1", nil)
	for _, p := range []map[string]any{{"ServiceToken": "x"}, {"DatastoreId": "ds1", "DatastoreKey": []any{"a"}}} {
		r := f.handle(t, cfn.RequestCreate, "", p)
		if r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, "custom resource properties") {
			t.Errorf("properties %v: %+v", p, r)
		}
	}
	if f.calls.Load() != 0 {
		t.Errorf("bad properties called HealthLake")
	}
}

// TestNoAnswerIsAnError: when CloudFormation's URL cannot take the
// answer, Handle returns the error (Lambda retries the invocation), which
// does not carry the pre-signed URL.
func TestNoAnswerIsAnError(t *testing.T) {
	f := newFixture(t, store{}, "ds1", nil)
	f.cfn.SetFailFirst(100)
	err := f.h.Handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, RequestID: "r", ResponseURL: f.cfn.URL(),
		ResourceProperties: props("ds1", "")})
	if err == nil || !strings.Contains(err.Error(), "after 5 attempts") || strings.Contains(err.Error(), "X-Amz-Signature") {
		t.Fatalf("undeliverable answer: %v", err)
	}
	if strings.Contains(f.logs.String(), "X-Amz-Signature") {
		t.Errorf("the logs carry the pre-signed URL")
	}
}

// TestARegionWithoutHealthLakeFailsTheDeploy: where the Region has no
// HealthLake endpoint (its host name does not resolve), the deploy fails
// saying so rather than with the SDK's connection error alone.
func TestARegionWithoutHealthLakeFailsTheDeploy(t *testing.T) {
	noHost := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		return nil, &net.DNSError{Err: "no such host", Name: r.URL.Hostname(), IsNotFound: true}
	})}
	api := hlsdk.New(hlsdk.Options{Region: "xx-nowhere-1", HTTPClient: noHost, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	_, err := datastorecheck.Check(context.Background(), api, "xx-nowhere-1", datastorecheck.Properties{DatastoreID: "ds1"})
	if err == nil || !strings.Contains(err.Error(), "HealthLake has no endpoint in Region xx-nowhere-1 (healthlake.xx-nowhere-1.amazonaws.com is not a host)") {
		t.Fatalf("check in a Region without HealthLake: %v", err)
	}
}

// roundTrip is an http.RoundTripper made of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNoAnswerInTimeNamesTheVPCEndpoint: where HealthLake never answers —
// a function in a VPC whose subnets have no HealthLake interface endpoint —
// the check fails when its time is up, naming the endpoint to add, rather
// than with a bare deadline.
func TestNoAnswerInTimeNamesTheVPCEndpoint(t *testing.T) {
	silent := &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})}
	api := hlsdk.New(hlsdk.Options{Region: "us-east-1", HTTPClient: silent,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := datastorecheck.Check(ctx, api, "us-east-1", datastorecheck.Properties{DatastoreID: "ds1"})
	if err == nil || !strings.Contains(err.Error(), "interface endpoint com.amazonaws.us-east-1.healthlake") {
		t.Fatalf("check without an answer: %v", err)
	}
}

// TestFIPSWhereHealthLakeHasNoneFailsTheDeploy: with the FIPSEndpoints
// setting (the SDK's AWS_USE_FIPS_ENDPOINT) the check calls HealthLake's
// FIPS host: in a Region without one (its name does not resolve) the
// deploy fails naming the Regions that have one and the setting; where the
// FIPS host never answers — a function in a VPC, whose HealthLake
// interface endpoint serves only the Regional host — it names the NAT
// gateway the subnets need.
func TestFIPSWhereHealthLakeHasNoneFailsTheDeploy(t *testing.T) {
	fipsClient := func(region string, rt roundTrip) *hlsdk.Client {
		return hlsdk.New(hlsdk.Options{Region: region, HTTPClient: &http.Client{Transport: rt}, RetryMaxAttempts: 1,
			EndpointOptions: hlsdk.EndpointResolverOptions{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled},
			Credentials:     credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	}
	noHost := func(r *http.Request) (*http.Response, error) {
		return nil, &net.DNSError{Err: "no such host", Name: r.URL.Hostname(), IsNotFound: true}
	}
	_, err := datastorecheck.Check(context.Background(), fipsClient("eu-west-1", noHost), "eu-west-1", datastorecheck.Properties{DatastoreID: "ds1"})
	if err == nil || !strings.Contains(err.Error(), "HealthLake has no FIPS endpoint in Region eu-west-1 (healthlake-fips.eu-west-1.amazonaws.com is not a host), only in us-east-1, us-east-2, us-west-2") ||
		!strings.Contains(err.Error(), "without the FIPSEndpoints setting") {
		t.Fatalf("FIPS check in a Region without HealthLake's FIPS endpoint: %v", err)
	}
	silent := func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = datastorecheck.Check(ctx, fipsClient("us-east-1", silent), "us-east-1", datastorecheck.Properties{DatastoreID: "ds1"})
	if err == nil || !strings.Contains(err.Error(), "reaches healthlake-fips.us-east-1.amazonaws.com only through a NAT gateway") {
		t.Fatalf("FIPS check without an answer: %v", err)
	}
}
