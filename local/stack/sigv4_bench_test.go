package stack

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/sigv4"
)

// BenchmarkSignatureCheckEndToEnd measures what the gateway's SigV4 check
// costs a window: one stack of 100,000 resources (CDC_BENCH_RESOURCES
// overrides), windows run alternately with the check on and off (off: the
// HealthLake emulator is told the gateway checked, so nothing is checked at
// all), at us-east-1's PutEvents quota so that the pipeline's own work
// bounds the rate. Alternating keeps whatever else the machine runs from
// favouring either side.
func BenchmarkSignatureCheckEndToEnd(b *testing.B) {
	n := 100000
	if v := os.Getenv("CDC_BENCH_RESOURCES"); v != "" {
		if x, err := strconv.Atoi(v); err == nil && x > 0 {
			n = x
		}
	}
	st := startStack(b, func(o *Options) {
		o.SampleSize = n
		o.GenSeed = 42
		o.RecordEvents = false
		o.PutEventsQuota = 10000
	})
	g := st.Env.Gateway
	setCheck := func(on bool) {
		g.SetVerifySignatures(on)
		if on {
			g.Handle(localaws.ServiceHealthLake, st.HealthLake)
			return
		}
		g.Handle(localaws.ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			st.HealthLake.ServeHTTP(w, r.WithContext(sigv4.WithVerified(r.Context(), &sigv4.Auth{})))
		}))
	}
	defer setCheck(true)
	ctx := context.Background()
	store, err := st.runStore()
	if err != nil {
		b.Fatal(err)
	}
	start := st.initialCheckpoint()
	var took [2]time.Duration
	b.ResetTimer()
	for i := 0; i < 2*b.N; i++ {
		on := i%2 == 0
		b.StopTimer()
		if i > 0 {
			if _, err := store.Replay(ctx, runlockReplay(start)); err != nil {
				b.Fatalf("replay: %v", err)
			}
		}
		setCheck(on)
		b.StartTimer()
		t0 := time.Now()
		w, err := st.RunOnce(ctx)
		d := time.Since(t0)
		if err != nil || w.Status != "SUCCEEDED" {
			b.Fatalf("window %+v: %v", w, err)
		}
		if on {
			took[0] += d
		} else {
			took[1] += d
		}
	}
	b.StopTimer()
	onS, offS := took[0].Seconds()/float64(b.N), took[1].Seconds()/float64(b.N)
	b.ReportMetric(onS, "s/window-checked")
	b.ReportMetric(offS, "s/window-unchecked")
	b.ReportMetric((onS/offS-1)*100, "%overhead")
}
