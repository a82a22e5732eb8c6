package datastore

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	hltypes "github.com/aws/aws-sdk-go-v2/service/healthlake/types"
)

// TestMisfitsSayWhatToDo: a data store not ACTIVE, created before
// 2023-06-01 (no export status by GET), or on a customer-managed key the stack was not deployed for
// (none, another) is a misfit, each named with what to do; an ACTIVE newer
// store on an AWS owned key, or on the key deployed for (by ARN or id), is
// none — nor is a key configured for a store on an AWS owned key.
func TestMisfitsSayWhatToDo(t *testing.T) {
	const key = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	newStore := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		f          Facts
		configured string
		want       []string // each in its own misfit; none when empty
	}{
		{"fits", Facts{Status: "ACTIVE", CreatedAt: newStore}, "", nil},
		{"its key", Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, key, nil},
		{"its key by id", Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: "1234abcd-12ab-34cd-56ef-1234567890ab"}, key, nil},
		{"a key for an AWS owned one", Facts{Status: "ACTIVE", CreatedAt: newStore}, key, nil},
		{"creating", Facts{Status: "CREATING", CreatedAt: newStore}, "", []string{"CREATING, not ACTIVE"}},
		{"old and deleting", Facts{Status: "DELETING", CreatedAt: time.Date(2023, 5, 31, 23, 0, 0, 0, time.UTC)}, "",
			[]string{"DELETING, not ACTIVE", "created on 2023-05-31"}},
		{"no key configured", Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, "",
			[]string{"without the DatastoreKey setting: deploy with DatastoreKey=" + key}},
		{"another key", Facts{Status: "ACTIVE", CreatedAt: newStore, CustomerManagedKey: key}, "arn:aws:kms:us-east-1:111122223333:key/other",
			[]string{"the stack's DatastoreKey is arn:aws:kms:us-east-1:111122223333:key/other: deploy with DatastoreKey=" + key}},
	} {
		got := Misfits(c.f, c.configured)
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %d misfits", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: %q lacks %q", c.name, got[i], w)
			}
		}
	}
}

// TestFactsOfTheDescription: the status, creation time and, only for
// CUSTOMER_MANAGED_KMS_KEY, the key.
func TestFactsOfTheDescription(t *testing.T) {
	at := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	p := hltypes.DatastoreProperties{DatastoreStatus: hltypes.DatastoreStatusActive, CreatedAt: aws.Time(at),
		SseConfiguration: &hltypes.SseConfiguration{KmsEncryptionConfig: &hltypes.KmsEncryptionConfig{
			CmkType: hltypes.CmkTypeAoCmk, KmsKeyId: aws.String("aws-owned")}}}
	if f := FactsOf(p); f.Status != "ACTIVE" || !f.CreatedAt.Equal(at) || f.CustomerManagedKey != "" {
		t.Errorf("AWS owned: %+v", f)
	}
	p.SseConfiguration.KmsEncryptionConfig.CmkType, p.SseConfiguration.KmsEncryptionConfig.KmsKeyId = hltypes.CmkTypeCmCmk, aws.String("arn:k")
	if f := FactsOf(p); f.CustomerManagedKey != "arn:k" {
		t.Errorf("customer managed: %+v", f)
	}
}
