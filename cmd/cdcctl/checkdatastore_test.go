package main

import (
	"context"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// TestCheckDatastoreTellsBeforeADeploy: `cdcctl check-datastore` makes the
// deploy's data store check with the caller's credentials: on a data store
// on a customer-managed key it fails without --datastore-key, naming the
// key to deploy with, and passes with it; an unknown data store fails
// naming the DatastoreId parameter; --json gives the facts.
func TestCheckDatastoreTellsBeforeADeploy(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	st := statusStack(t, func(o *stack.Options) { o.DatastoreKey = key; o.SampleSize = 1 })
	ctl := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(context.Background(), append([]string{"check-datastore"}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, stderr := ctl("--datastore-id", st.Res.DatastoreID)
	if code != exitFailure || !strings.Contains(out, "status       ACTIVE") || !strings.Contains(out, "the customer-managed key "+key) ||
		!strings.Contains(stderr, "would fail") || !strings.Contains(stderr, "deploy with DatastoreKey="+key) {
		t.Errorf("without the key: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = ctl("--datastore-id", st.Res.DatastoreID, "--datastore-key", key)
	if code != exitOK || !strings.Contains(out, "the deploy's data store check passes") {
		t.Errorf("with the key: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = ctl("--datastore-id", st.Res.DatastoreID, "--datastore-key", key, "--json")
	var v checkDatastoreView
	decodeJSON(t, out, &v)
	if code != exitOK || !v.Passes || v.Status != "ACTIVE" || v.CustomerManagedKey != key || v.CreatedAt.IsZero() {
		t.Errorf("--json: exit %d %+v %s", code, v, stderr)
	}
	code, _, stderr = ctl("--datastore-id", "0123456789abcdef0123456789abcdef")
	if code != exitFailure || !strings.Contains(stderr, "HealthLake has no data store 0123456789abcdef0123456789abcdef") ||
		!strings.Contains(stderr, "DatastoreId parameter") {
		t.Errorf("unknown data store: exit %d %s", code, stderr)
	}
}
