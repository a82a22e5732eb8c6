package stack

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
)

// spanSink notes when the first and the last event of a window reached the
// bus: the span in which the Map (and the delete scan) published.
type spanSink struct {
	mu          sync.Mutex
	first, last time.Time
}

func (s *spanSink) Deliver(context.Context, string, fakeeventbridge.Event) error {
	now := time.Now()
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = now
	}
	s.last = now
	s.mu.Unlock()
	return nil
}

// take returns the span since the last take and starts a new one.
func (s *spanSink) take() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.last.Sub(s.first)
	s.first, s.last = time.Time{}, time.Time{}
	return d
}

// BenchmarkEndToEnd100k measures one window over a generated data store of
// 100,000 resources (CDC_BENCH_RESOURCES overrides the size): export to S3,
// manifest, Distributed Map of prepare-change, PutEvents to the bus and
// delivery to a sink, all through the real SDK clients on the local
// endpoint. Each iteration replays the checkpoint to the start so that the
// window holds every resource again. It reports resources/s and the calls
// each emulated API served per 1,000 resources, and the cost per million
// changes of what the emulators counted.
//
// It runs under two PutEvents quotas, as the local EventBridge enforces them:
// us-east-1's default (10,000 requests/s), where the pipeline's own work
// bounds the rate, and the lowest Regional default (400 requests/s, the
// stack's default PutEventsQuota), where the quota does.
func BenchmarkEndToEnd100k(b *testing.B) {
	for _, quota := range []int{10000, 2400, 400} {
		b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) { benchmarkEndToEnd(b, quota) })
	}
}

func benchmarkEndToEnd(b *testing.B, quota int) {
	n := 100000
	if v := os.Getenv("CDC_BENCH_RESOURCES"); v != "" {
		if x, err := strconv.Atoi(v); err == nil && x > 0 {
			n = x
		}
	}
	span := &spanSink{}
	st := startStack(b, func(o *Options) {
		o.SampleSize = n
		o.GenSeed = 42
		o.RecordEvents = false
		o.PutEventsQuota = float64(quota)
		o.Sink = span
		if os.Getenv("CDC_BENCH_LATENCY") != "" {
			l := localaws.DefaultLatency()
			o.Latency = &l
		}
	})
	ctx := context.Background()
	store, err := st.runStore()
	if err != nil {
		b.Fatal(err)
	}
	start := st.initialCheckpoint()
	var total, publishing time.Duration
	var calls map[string]int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 {
			if _, err := store.Replay(ctx, runlockReplay(start)); err != nil {
				b.Fatalf("replay: %v", err)
			}
		}
		before := st.Env.Gateway.Calls()
		lamBefore := st.Lambdas.Stats()
		delivered := st.Delivered.Len()
		span.take()
		b.StartTimer()
		t0 := time.Now()
		w, err := st.RunOnce(ctx)
		d := time.Since(t0)
		b.StopTimer()
		if err != nil || w.Status != "SUCCEEDED" {
			b.Fatalf("window %+v: %v", w, err)
		}
		if got := st.Delivered.Len() - delivered; got != st.Seeded() {
			b.Fatalf("window delivered %d events for %d resources", got, st.Seeded())
		}
		total += d
		publishing += span.take()
		after := st.Env.Gateway.Calls()
		calls = map[string]int64{}
		for k, v := range after {
			if v-before[k] > 0 {
				calls[k] = v - before[k]
			}
		}
		// In-process Lambda invocations do not cross the gateway.
		for fn, stt := range st.Lambdas.Stats() {
			if d := stt.Invocations - lamBefore[fn].Invocations; d > 0 {
				calls["lambda:Invoke "+fn] = d
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	perSec := float64(st.Seeded()) * float64(b.N) / total.Seconds()
	b.ReportMetric(perSec, "resources/s")
	// The pipeline's share of the PutEvents quota in events per second (10
	// entries a request): how much of it the whole window used, export and
	// commit included.
	cfg := stackconfig.Default()
	cfg.PutEventsQuota = float64(quota)
	b.ReportMetric(100*perSec/(cfg.PutEventsQuota*cfg.PutEventsShare*10), "%share")
	// The same while the window published: from its first event on the bus
	// to its last (the export, the manifest and the commit left out).
	if publishing > 0 {
		pubPerSec := float64(st.Seeded()) * float64(b.N) / publishing.Seconds()
		b.ReportMetric(100*pubPerSec/(cfg.PutEventsQuota*cfg.PutEventsShare*10), "%share-publishing")
	}
	// The cost of everything the stack counted (set-up included), at list
	// prices, per million changes delivered (docs/COST.md).
	c := st.Cost()
	b.ReportMetric(c.Bill.Total/float64(st.Seeded()*b.N)*1e6, "usd/M-changes")
	b.Logf("cost of %d windows: %s", b.N, c.Bill)
	per := report.PerThousand(calls, st.Seeded())
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.Logf("calls per 1,000 resources  %-40s %10.2f", k, per[k])
	}
	b.Logf("resources %d, window %s, maxConcurrentExports %d, since %s", st.Seeded(), total/time.Duration(b.N), st.HealthLake.MaxConcurrentExports(), envelope.FormatTime(start))
}
