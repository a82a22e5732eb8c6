package sar

import (
	"strings"
	"testing"
)

// TestReferenceIsComplete: every service names its page and the day it was
// read, and every action's resource types are defined by its service.
func TestReferenceIsComplete(t *testing.T) {
	ref, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Services) == 0 {
		t.Fatal("no services")
	}
	for p, s := range ref.Services {
		if !strings.HasPrefix(s.URL, "https://docs.aws.amazon.com/service-authorization/") {
			t.Errorf("%s: url %q is not a Service Authorization Reference page", p, s.URL)
		}
		if s.Read == "" || len(s.Actions) == 0 {
			t.Errorf("%s: no read date or no actions", p)
		}
		for n, a := range s.Actions {
			if a.Access == "" {
				t.Errorf("%s:%s: no access level", p, n)
			}
			for _, rt := range a.Resources {
				if _, ok := s.ResourceTypes[rt]; !ok {
					t.Errorf("%s:%s: resource type %q not defined", p, n, rt)
				}
			}
		}
	}
}

func TestLookup(t *testing.T) {
	ref, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		action string
		want   bool
	}{
		{"healthlake:GetHistoryByResourceId", true},
		{"healthlake:gethistorybyresourceid", true},
		{"HealthLake:ReadResource", true},
		{"healthlake:ReadHistory", false},
		{"dynamodb:TransactWriteItems", false},
		{"nosuch:Action", false},
		{"ReadResource", false},
	} {
		if got := ref.Has(c.action); got != c.want {
			t.Errorf("Has(%q) = %v, want %v", c.action, got, c.want)
		}
	}
	if a, _ := ref.Lookup("dynamodb:GetItem"); len(a.ConditionKeys) == 0 || a.ConditionKeys[0] != "dynamodb:LeadingKeys" {
		t.Errorf("dynamodb:GetItem condition keys = %v", a.ConditionKeys)
	}
}
