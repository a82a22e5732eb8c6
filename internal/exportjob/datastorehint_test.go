package exportjob

import (
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/datastore"
)

// TestRefusalHintNamesWhatToFix: a refused export start is explained by the
// data store's status, its age (no export status by GET before 2023-06-01) and its
// customer-managed key compared with the DatastoreKey the stack was
// deployed for — each with what to do — and by nothing on a data store that
// explains nothing.
func TestRefusalHintNamesWhatToFix(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	newStore := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		facts      datastore.Facts
		configured string
		denied     bool
		want       []string // all present; none when empty
	}{
		{"explains nothing", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore}, "", true, nil},
		{"AWS owned key, a key configured", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore}, key, true, nil},
		{"key not configured", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, "", false,
			[]string{"customer-managed key " + key, "without the DatastoreKey setting", "DatastoreKey=" + key}},
		{"another key configured", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key},
			"arn:aws:kms:us-east-1:111122223333:key/other", false, []string{"but the stack's DatastoreKey is arn:aws:kms:us-east-1:111122223333:key/other", "DatastoreKey=" + key}},
		{"the same key, denied", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, key, true,
			[]string{"is the stack's DatastoreKey", "key policy"}},
		{"the same key, another refusal", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, key, false, nil},
		{"the same key by id", datastore.Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: "1234abcd-12ab-34cd-56ef-1234567890ab"}, key, true,
			[]string{"is the stack's DatastoreKey"}},
		{"not active", datastore.Facts{Status: "DELETING", CreatedAt: newStore}, "", false, []string{"DELETING, not ACTIVE"}},
		{"before 2023-06-01", datastore.Facts{Status: "ACTIVE", CreatedAt: time.Date(2023, 5, 31, 23, 0, 0, 0, time.UTC)}, "", false,
			[]string{"created on 2023-05-31", "export status"}},
	} {
		got := RefusalHint(c.facts, c.configured, c.denied)
		if len(c.want) == 0 && got != "" {
			t.Errorf("%s: %q, want nothing", c.name, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
}
