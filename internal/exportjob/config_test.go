package exportjob_test

import (
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/exportjob"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnvDefaults(t *testing.T) {
	c, err := exportjob.ConfigFromEnv(env(map[string]string{
		"CDC_TABLE": "t", "CDC_BUCKET": "b", "CDC_DATASTORE_ID": "d", "CDC_RESOURCE_TYPES": " Patient, Observation ,",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
	}))
	if err != nil {
		t.Fatal(err)
	}
	// The re-check cap is 60 s (contract C7): job events notice the end of an
	// export, polling is the fallback.
	if c.FirstCheckDelay != 30*time.Second || c.MaxCheckDelay != 60*time.Second || c.MaxWait != 2*time.Hour ||
		c.ClaimLease != 2*time.Minute || c.LedgerTTL != 30*24*time.Hour || c.ExportPrefix != "exports/" ||
		c.ErrorsPolicy != exportjob.ErrorsLenient || c.BatchLimits.MaxFiles != 10 || c.BatchLimits.MaxBytes != 128<<20 ||
		c.PartBatches != 1000 ||
		strings.Join(c.ResourceTypes, "|") != "Patient|Observation" || c.HealthLakeEndpoint != "http://127.0.0.1:4566" {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigFromEnvParsesDurationsAndFlags(t *testing.T) {
	c, err := exportjob.ConfigFromEnv(env(map[string]string{
		"CDC_RECHECK_DELAY": "10", "CDC_RECHECK_MAX_DELAY": "5m", "CDC_EXPORT_MAX_WAIT": "90m",
		"CDC_EXPORT_CLAIM_LEASE": "45s", "CDC_EXPORT_ERRORS_POLICY": "Strict",
		"CDC_BATCH_MAX_FILES": "3", "CDC_BATCH_MAX_BYTES": "1048576", "CDC_MANIFEST_PART_BATCHES": "7",
		"CDC_HEALTHLAKE_ENDPOINT": "https://hl.example", "AWS_ENDPOINT_URL_HEALTHLAKE": "http://ignored",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.FirstCheckDelay != 10*time.Second || c.MaxCheckDelay != 5*time.Minute || c.MaxWait != 90*time.Minute ||
		c.ClaimLease != 45*time.Second || c.ErrorsPolicy != exportjob.ErrorsStrict || c.HealthLakeEndpoint != "https://hl.example" ||
		c.BatchLimits.MaxFiles != 3 || c.BatchLimits.MaxBytes != 1<<20 || c.PartBatches != 7 {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigFromEnvRejectsBadValues(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"delay above SQS max": {"CDC_RECHECK_MAX_DELAY": "901"},
		"not a duration":      {"CDC_EXPORT_MAX_WAIT": "soon"},
		"negative":            {"CDC_RECHECK_DELAY": "-5"},
		"unknown policy":      {"CDC_EXPORT_ERRORS_POLICY": "maybe"},
		"replaced setting":    {"CDC_ALLOW_COMPLETED_WITH_ERRORS": "true"},
		"zero batch files":    {"CDC_BATCH_MAX_FILES": "0"},
		"bad part batches":    {"CDC_MANIFEST_PART_BATCHES": "many"},
	} {
		if _, err := exportjob.ConfigFromEnv(env(vars)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			for k := range vars {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("%s: error %q does not name %s", name, err, k)
				}
			}
		}
	}
}
