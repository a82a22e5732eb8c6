package fakeeventbridge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	sdk "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
)

// The PutEvents quota is a token bucket per account and Region: past the
// burst, requests beyond the rate get ThrottlingException in the AWS JSON
// wire format (the SDK decodes it as that API error), and the bucket refills
// with time. Another Region's bucket is its own.
func TestPutEventsQuotaThrottlesPerAccountAndRegion(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c, em, env := setup(t, fakeeventbridge.Options{Buses: []string{"b"}, PutEventsQuota: 4, PutEventsBurst: 2, Now: clock})
	ctx := context.Background()
	put := func(c *sdk.Client) error {
		_, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("b", `{"a":1}`)}})
		return err
	}
	for i := 0; i < 2; i++ {
		if err := put(c); err != nil {
			t.Fatalf("request %d within the burst: %v", i, err)
		}
	}
	err := put(c)
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ThrottlingException" || ae.ErrorMessage() != "Rate exceeded" {
		t.Fatalf("over the quota: %v", err)
	}
	// Another Region of the account has its own bucket.
	cfg := env.Config()
	cfg.RetryMaxAttempts = 1
	cfg.Region = "us-west-2"
	if err := put(sdk.NewFromConfig(cfg)); err != nil {
		t.Fatalf("other region: %v", err)
	}
	advance(250 * time.Millisecond) // one token at 4/s
	if err := put(c); err != nil {
		t.Fatalf("after a refill: %v", err)
	}
	if err := put(c); err == nil {
		t.Fatal("a second request after one token's refill was accepted")
	}
	advance(time.Hour) // the bucket holds at most the burst
	for i := 0; i < 3; i++ {
		err = put(c)
	}
	if err == nil {
		t.Fatal("the bucket grew past its burst")
	}
	if st := em.Stats(); st.QuotaThrottledCalls != 3 || st.ThrottledCalls != 3 || st.EntriesAccepted != 6 {
		t.Fatalf("stats %+v", st)
	}
	if fakeeventbridge.RegionPutEventsQuota("us-east-1") != 10000 || fakeeventbridge.RegionPutEventsQuota("us-east-2") != 2400 {
		t.Fatal("documented default quotas")
	}
}
