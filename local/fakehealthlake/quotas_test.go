package fakehealthlake_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	hlsdk "github.com/aws/aws-sdk-go-v2/service/healthlake"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// served sends n requests at one instant of the emulator's clock and
// returns how many were served (not throttled); every refusal must be a
// ThrottlingException with status 429 or 400.
func served(t *testing.T, f *fx, n int, method, path string, body []byte, hdr map[string]string) int {
	t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		status, b := f.do(t, localaws.SecretAccessKey, method, path, body, hdr)
		switch {
		case status < 300:
			ok++
		case (status == http.StatusTooManyRequests || status == http.StatusBadRequest) && strings.Contains(string(b), `"throttled"`):
		default:
			t.Fatalf("%s %s: status %d %s", method, path, status, b)
		}
	}
	return ok
}

// TestQuotasThrottleEachRequestRate: with Options.Quotas on, each quota
// serves one second's worth of requests at an instant and refuses the
// rest with ThrottlingException; the clock earns them back; a data store
// created before 21 August 2023 has the legacy read and write rates; a
// write takes a unit per started KiB. Off, nothing is refused.
func TestQuotasThrottleEachRequestRate(t *testing.T) {
	t.Run("searches", func(t *testing.T) {
		f := setup(t, func(o *fakehealthlake.Options) { o.Quotas = true })
		if got := served(t, f, 110, http.MethodGet, "/datastore/ds1/r4/Patient", nil, nil); got != 100 {
			t.Fatalf("%d of 110 searches served at one instant, want the 100 of a second", got)
		}
		if got := f.emu.QuotaThrottles()["search requests (GET) per data store"]; got != 10 {
			t.Errorf("QuotaThrottles counts %d search refusals, want 10", got)
		}
		f.clk.Set(f.clk.Now().Add(50 * time.Millisecond))
		if got := served(t, f, 10, http.MethodGet, "/datastore/ds1/r4/Patient", nil, nil); got != 5 {
			t.Errorf("%d searches served 50 ms later at 100/s, want 5", got)
		}
	})
	t.Run("legacy reads", func(t *testing.T) {
		f := setup(t, func(o *fakehealthlake.Options) {
			o.Quotas = true
			o.DatastoreCreatedAt = fakehealthlake.LegacyBefore.Add(-time.Hour)
		})
		mustLoad(t, f.emu.CreateDatastore("ds1"), "Patient", "p1", `{"resourceType":"Patient","id":"p1"}`)
		if got := served(t, f, 120, http.MethodGet, "/datastore/ds1/r4/Patient/p1", nil, nil); got != 100 {
			t.Fatalf("%d of 120 reads served on a data store of July 2023, want its 100 a second", got)
		}
		// A history page and a version read count against the same quota.
		if got := served(t, f, 1, http.MethodGet, "/datastore/ds1/r4/Patient/p1/_history", nil, nil); got != 0 {
			t.Error("a history read was served with the GET quota spent")
		}
	})
	t.Run("current reads", func(t *testing.T) {
		f := setup(t, func(o *fakehealthlake.Options) { o.Quotas = true })
		mustLoad(t, f.emu.CreateDatastore("ds1"), "Patient", "p1", `{"resourceType":"Patient","id":"p1"}`)
		if got := served(t, f, 300, http.MethodGet, "/datastore/ds1/r4/Patient/p1", nil, nil); got != 300 {
			t.Fatalf("%d of 300 reads served on a data store created now, want all (3,000 a second)", got)
		}
	})
	t.Run("write units", func(t *testing.T) {
		f := setup(t, func(o *fakehealthlake.Options) {
			o.Quotas = true
			o.DatastoreCreatedAt = fakehealthlake.LegacyBefore.Add(-time.Hour)
		})
		// A Patient of 3 KiB and a little: 4 units; legacy writes: 300 a second.
		body := []byte(fmt.Sprintf(`{"resourceType":"Patient","id":"p1","name":[{"text":%q}]}`, strings.Repeat("x", 3*1024)))
		if got := served(t, f, 80, http.MethodPut, "/datastore/ds1/r4/Patient/p1", body, nil); got != 75 {
			t.Fatalf("%d writes of 4 units served of a legacy data store's 300 units, want 75", got)
		}
		f.clk.Set(f.clk.Now().Add(time.Second))
		strong := map[string]string{"x-amz-fhir-history-consistency-level": "strong"}
		if got := served(t, f, 40, http.MethodPut, "/datastore/ds1/r4/Patient/p1", body, strong); got != 37 {
			t.Fatalf("%d strong writes of 8 units served of 300 units, want 37", got)
		}
	})
	t.Run("JSON API", func(t *testing.T) {
		f := setup(t, func(o *fakehealthlake.Options) { o.Quotas = true })
		client := hlsdk.NewFromConfig(f.env.Config(), func(o *hlsdk.Options) { o.Retryer = aws.NopRetryer{} })
		var throttled int
		for i := 0; i < 12; i++ {
			_, err := client.DescribeFHIRDatastore(context.Background(), &hlsdk.DescribeFHIRDatastoreInput{DatastoreId: aws.String("ds1")})
			var api smithy.APIError
			var re interface{ HTTPStatusCode() int }
			switch {
			case err == nil:
			case errors.As(err, &api) && api.ErrorCode() == "ThrottlingException" && errors.As(err, &re) && re.HTTPStatusCode() == http.StatusBadRequest:
				throttled++
			default:
				t.Fatalf("describe: %v", err)
			}
		}
		if throttled != 2 {
			t.Errorf("%d of 12 DescribeFHIRDatastore calls throttled at one instant, want 2 (10 a second)", throttled)
		}
	})
	t.Run("export cancels", func(t *testing.T) {
		// One DELETE of an export job a second for the account (the second
		// export waits QUEUED behind the first: both can be cancelled).
		f := setup(t, func(o *fakehealthlake.Options) { o.Quotas = true })
		first := startExport(t, f, "", "cancel-1")
		f.clk.Set(f.clk.Now().Add(time.Second)) // StartFHIRExportJob: 1 a second
		second := startExport(t, f, "", "cancel-2")
		f.clk.Set(f.clk.Now().Add(time.Second))
		if got := served(t, f, 1, http.MethodDelete, "/datastore/ds1/r4/export/"+first, nil, nil); got != 1 {
			t.Fatal("the first cancel of the second was throttled")
		}
		if got := served(t, f, 1, http.MethodDelete, "/datastore/ds1/r4/export/"+second, nil, nil); got != 0 {
			t.Fatal("a second cancel in the same instant was served, want it throttled (1 a second)")
		}
		if got := f.emu.QuotaThrottles()["CancelFHIRExportJob"]; got != 1 {
			t.Errorf("QuotaThrottles counts %d cancel refusals, want 1", got)
		}
		f.clk.Set(f.clk.Now().Add(time.Second))
		if got := served(t, f, 1, http.MethodDelete, "/datastore/ds1/r4/export/"+second, nil, nil); got != 1 {
			t.Error("the cancel a second later was throttled")
		}
	})
	t.Run("off", func(t *testing.T) {
		f := setup(t, nil)
		if got := served(t, f, 150, http.MethodGet, "/datastore/ds1/r4/Patient", nil, nil); got != 150 {
			t.Fatalf("%d of 150 searches served with the quotas off", got)
		}
	})
}
