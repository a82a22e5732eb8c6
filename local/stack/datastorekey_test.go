package stack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastorecheck"
	"github.com/healthlake-cdc/healthlake-cdc/internal/iampolicy"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// A data store on a customer-managed key whose use start-export is denied
// (the key's policy not delegating to IAM, or a stack deployed without
// DatastoreKey): HealthLake refuses the export, and the run's failure reason
// says what to fix — the key to deploy with, or the key policy — from the
// data store's own description (start-export's DescribeDatastore).
func TestARefusedExportStartNamesTheDataStoresKey(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		configured string
		want       []string
	}{
		"deployed without DatastoreKey": {"", []string{"deployed without the DatastoreKey setting", "DatastoreKey=" + testDatastoreKey}},
		"the key policy":                {testDatastoreKey, []string{"is the stack's DatastoreKey", "key policy"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := startStack(t, func(o *Options) {
				o.DatastoreKey = testDatastoreKey
				o.SampleSize = 2
				o.LambdaEnv = map[string]string{stackconfig.EnvDatastoreKey: c.configured}
			})
			// The key's use denied to start-export, as a key policy that
			// does not delegate to IAM (or no UseDatastoreKey) leaves it.
			st.IAM.SetStatements(iampolicy.StartExport, iampolicy.Without(st.IAM.Statements(iampolicy.StartExport), "UseDatastoreKey"))
			w := runWindow(t, st)
			if w.Status != "FAILED" || w.Error != "ExportStartFailed" {
				t.Fatalf("window %+v, want FAILED with ExportStartFailed", w)
			}
			for _, s := range c.want {
				if !strings.Contains(w.Cause, s) {
					t.Errorf("cause %q lacks %q", w.Cause, s)
				}
			}
			if n := st.IAM.Allowed()["start-export/DescribeDatastore"]; n == 0 {
				t.Error("start-export did not describe the data store")
			}
		})
	}
}

// TestTheDeploysDataStoreCheckRunsAtStart: the stack makes the deploy's
// data store check at start as the check-datastore role (a data store on a
// customer-managed key, the stack deployed with it: it passes); the same
// check for a stack deployed without the key, or with another, names the
// key to deploy with, as CloudFormation's failed deploy would.
func TestTheDeploysDataStoreCheckRunsAtStart(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(o *Options) {
		o.DatastoreKey = testDatastoreKey
		o.SampleSize = 1
	})
	if n := st.IAM.Allowed()["check-datastore/DescribeDatastore"]; n == 0 {
		t.Error("the stack started without the data store check")
	}
	ctx := context.Background()
	if f, err := st.CheckDatastore(ctx, testDatastoreKey); err != nil || f.CustomerManagedKey != testDatastoreKey || f.Status != "ACTIVE" {
		t.Errorf("check with the data store's key: %+v, %v", f, err)
	}
	for _, configured := range []string{"", "arn:aws:kms:us-east-1:000000000000:key/another"} {
		_, err := st.CheckDatastore(ctx, configured)
		if !errors.Is(err, datastorecheck.ErrMisfit) || !strings.Contains(err.Error(), "DatastoreKey="+testDatastoreKey) {
			t.Errorf("check deployed with key %q: %v, want a misfit naming DatastoreKey=%s", configured, err, testDatastoreKey)
		}
	}
	if d := st.IAM.Denials(); len(d) > 0 {
		t.Errorf("denied %+v", d)
	}
}
