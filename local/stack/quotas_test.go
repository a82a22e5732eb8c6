package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// TestHealthLakeQuotasOption: "current" applies HealthLake's request-rate
// quotas of a data store of today's quotas, even on a simulation's clock
// (which starts in 2000); "legacy" dates the data store before 21 August
// 2023, with 100 reads a second; "off", and the zero value stack tests
// leave, apply none. On the bubble's clock the requests arrive at one
// instant.
func TestHealthLakeQuotasOption(t *testing.T) {
	for _, c := range []struct {
		quotas          string
		legacy          bool
		reads, searches int // served of 120 at one instant
	}{
		{QuotasCurrent, false, 120, 100},
		{QuotasLegacy, true, 100, 100},
		{QuotasOff, false, 120, 120},
		{"", false, 120, 120},
	} {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			st, err := Start(ctx, Options{
				InMemory: true, Name: fmt.Sprintf("quota%d", stackSeq.Add(1)),
				SampleSize: -1, Every: time.Hour, HealthLakeQuotas: c.quotas,
			})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			defer st.Close()
			ds, _ := st.HealthLake.Datastore(st.Res.DatastoreID)
			if got := ds.CreatedAt().Before(fakehealthlake.LegacyBefore); got != c.legacy && (c.quotas == QuotasCurrent || c.quotas == QuotasLegacy) {
				t.Errorf("%q: data store created %v; legacy %v, want %v", c.quotas, ds.CreatedAt(), got, c.legacy)
			}
			if _, err := st.PutResource(ctx, "Patient", "q1", []byte(`{"resourceType":"Patient","id":"q1"}`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second) // the buckets fill again
			served := func(path string) int {
				n := 0
				for i := 0; i < 120; i++ {
					resp, err := st.fhirOnce(ctx, http.MethodGet, path, nil)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode == http.StatusOK:
						n++
					case !fhirrest.ThrottledAnswer(resp.StatusCode, resp.Header, b):
						t.Fatalf("GET %s: HTTP %d", path, resp.StatusCode)
					}
				}
				return n
			}
			if got := served("Patient/q1"); got != c.reads {
				t.Errorf("%q: %d of 120 reads served at one instant, want %d", c.quotas, got, c.reads)
			}
			if got := served("Patient"); got != c.searches {
				t.Errorf("%q: %d of 120 searches served at one instant, want %d", c.quotas, got, c.searches)
			}
		})
	}
}
