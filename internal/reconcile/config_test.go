package reconcile_test

import (
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/reconcile"
)

// The reconcile Lambda reads its read rate from CDC_HEALTHLAKE_READ_RATE
// (absent: 0, unpaced) and the children sharing it from
// CDC_MAP_MAX_CONCURRENCY, and refuses values that are not a rate or a count.
func TestConfigReadsTheHealthLakeReadRate(t *testing.T) {
	base := map[string]string{"CDC_BUCKET": "b", "CDC_TABLE": "t", "CDC_DATASTORE_ID": "ds", "CDC_EVENT_BUS": "bus"}
	env := func(extra map[string]string) func(string) string {
		return func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		}
	}
	cfg, err := reconcile.ConfigFromEnv(env(nil))
	if err != nil || cfg.ReadRate != 0 {
		t.Fatalf("without the variable: %+v, %v; want read rate 0", cfg.ReadRate, err)
	}
	cfg, err = reconcile.ConfigFromEnv(env(map[string]string{"CDC_HEALTHLAKE_READ_RATE": "12.5", "CDC_MAP_MAX_CONCURRENCY": "5"}))
	if err != nil || cfg.ReadRate != 12.5 || cfg.MapMaxConcurrency != 5 {
		t.Fatalf("12.5 among 5: %v among %d, %v", cfg.ReadRate, cfg.MapMaxConcurrency, err)
	}
	for name, bads := range map[string][]string{
		"CDC_HEALTHLAKE_READ_RATE": {"-1", "fast", "NaN", "+Inf"},
		"CDC_MAP_MAX_CONCURRENCY":  {"0", "ten"},
	} {
		for _, bad := range bads {
			if _, err := reconcile.ConfigFromEnv(env(map[string]string{name: bad})); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v; want an error naming the variable", name, bad, err)
			}
		}
	}
}
