package cost

import (
	"fmt"
	"math"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
)

// TestFastPathUsageFollowsTheBatching: the queue's requests are at least one
// send per notification; at a high rate the mapping's batching bounds the
// invocations, so their cost per change falls; the record is one item per
// invocation, one write unit while the item stays under 1 KB, and nothing
// else of the fast path is stored in S3.
func TestFastPathUsageFollowsTheBatching(t *testing.T) {
	m := DeployedFastPath()
	m.BatchingWindowSeconds = 1
	low, _, _ := FastPathDaily(10_000, m)
	high, _, n := FastPathDaily(10_000_000, m)
	if high.SQSRequests < n || n != 10_000_000 {
		t.Fatalf("%v SQS requests for %v notifications", high.SQSRequests, n)
	}
	// At 1 M a day a poller gathering its batch gets about one message per
	// receive: a send and a receive per notification.
	if mid, _, n := FastPathDaily(1_000_000, m); mid.SQSRequests < 2*n {
		t.Errorf("%v SQS requests for %v notifications: want a send and a receive each", mid.SQSRequests, n)
	}
	if low.LambdaRequests != 10_000 || high.LambdaRequests != 5*86400 {
		t.Errorf("invocations %v and %v: want one per message at 10 k, the pollers' bound at 10 M", low.LambdaRequests, high.LambdaRequests)
	}
	if low.DynamoWriteUnits != low.LambdaRequests {
		t.Errorf("%v write units for %v invocations of one notification: want one each", low.DynamoWriteUnits, low.LambdaRequests)
	}
	if high.DynamoWriteUnits <= high.LambdaRequests {
		t.Errorf("%v write units for %v invocations of about 23 notifications: their items pass 1 KB", high.DynamoWriteUnits, high.LambdaRequests)
	}
	if low.DynamoReadUnits < 288*2*fastrecord.Shards {
		t.Errorf("%v read units: every reader queries every shard of the span's buckets", low.DynamoReadUnits)
	}
	if high.S3PutListRequests != 0 || high.S3GetRequests != 0 {
		t.Errorf("S3 requests %v/%v: the record is in DynamoDB", high.S3PutListRequests, high.S3GetRequests)
	}
	p := ListPrices()
	perM := func(c float64) float64 { u, _, _ := FastPathDaily(c, m); return Price(u, p).Total / c * 1e6 }
	if perM(10_000_000) >= perM(1_000_000) {
		t.Errorf("per million changes: %.3f at 10 M, %.3f at 1 M; batching must make the larger cheaper", perM(10_000_000), perM(1_000_000))
	}
}

// Example_fastPath prints what the fast path adds per million changes at four
// volumes, as deployed (no batching window) and with a 1-second window
// (docs/COST.md, "The fast path").
func Example_fastPath() {
	p := ListPrices()
	for _, window := range []float64{0, 1} {
		fmt.Printf("window %.0f s:\n", window)
		for _, c := range []float64{10_000, 100_000, 1_000_000, 10_000_000} {
			m := DeployedFastPath()
			m.BatchingWindowSeconds = window
			u, vreads, n := FastPathDaily(c, m)
			b := Price(u, p)
			fmt.Printf("%8.0f/day: $%.3f per M changes (SQS %.3f, Lambda %.3f, DynamoDB %.3f, logs %.3f); %.0f vreads, %.0f notifications a day\n",
				c, b.Total/c*1e6, b.Items["sqs"]/c*1e6, b.Items["lambda"]/c*1e6, b.Items["dynamoDB"]/c*1e6, b.Items["logs"]/c*1e6, vreads, n)
		}
	}
	// The logs with a report per invocation and Lambda's START, END and
	// REPORT lines (the system log level at INFO), at 1 M a day, 1 s.
	before := DeployedFastPath()
	before.BatchingWindowSeconds = 1
	before.ReportEveryInvocation, before.PlatformLogBytes = true, 255
	u, _, _ := FastPathDaily(1_000_000, before)
	b := Price(u, p)
	fmt.Printf("before: $%.3f per M changes at 1 M a day (logs %.3f)\n", b.Total, b.Items["logs"])
	// Output:
	// window 0 s:
	//    10000/day: $3.893 per M changes (SQS 2.064, Lambda 0.567, DynamoDB 0.675, logs 0.587); 2 vreads, 10000 notifications a day
	//   100000/day: $2.752 per M changes (SQS 1.286, Lambda 0.567, DynamoDB 0.645, logs 0.253); 20 vreads, 100000 notifications a day
	//  1000000/day: $2.443 per M changes (SQS 1.209, Lambda 0.567, DynamoDB 0.642, logs 0.025); 200 vreads, 1000000 notifications a day
	// 10000000/day: $2.412 per M changes (SQS 1.201, Lambda 0.567, DynamoDB 0.642, logs 0.003); 2000 vreads, 10000000 notifications a day
	// window 1 s:
	//    10000/day: $3.893 per M changes (SQS 2.064, Lambda 0.567, DynamoDB 0.675, logs 0.587); 2 vreads, 10000 notifications a day
	//   100000/day: $2.752 per M changes (SQS 1.286, Lambda 0.567, DynamoDB 0.645, logs 0.253); 20 vreads, 100000 notifications a day
	//  1000000/day: $1.550 per M changes (SQS 0.981, Lambda 0.264, DynamoDB 0.280, logs 0.025); 200 vreads, 1000000 notifications a day
	// 10000000/day: $0.970 per M changes (SQS 0.853, Lambda 0.056, DynamoDB 0.058, logs 0.003); 2000 vreads, 10000000 notifications a day
	// before: $1.830 per M changes at 1 M a day (logs 0.305)
}

// TestFastPathWindowTradesLatencyForCost: a longer batching window (the
// FastPathBatchingWindow setting) makes fewer invocations and record items
// at 1 M changes a day, so the fast path costs less, down to the sends and
// receives, which no window changes (one SQS request each per
// notification).
func TestFastPathWindowTradesLatencyForCost(t *testing.T) {
	p := ListPrices()
	perM := func(w float64) float64 {
		m := DeployedFastPath()
		m.BatchingWindowSeconds = w
		u, _, _ := FastPathDaily(1_000_000, m)
		return Price(u, p).Total
	}
	prev := perM(1)
	for _, w := range []float64{2, 3, 10} {
		c := perM(w)
		if c >= prev {
			t.Errorf("window %v s: $%.3f per M, not below $%.3f at a shorter window", w, c, prev)
		}
		prev = c
	}
	if floor := 0.80; prev < floor {
		t.Errorf("$%.3f per M at 10 s: below the sends and receives alone ($%.2f)", prev, floor)
	}
	if got := fmt.Sprintf("%.2f %.2f", perM(1), perM(3)); got != "1.55 1.10" {
		t.Errorf("per M at 1 s and 3 s: %s, want the docs/COST.md table's 1.55 1.10", got)
	}
}

// TestFastPathWithoutWindowCostsNothingMoreAtLowTraffic: with no batching
// window (FastPathBatchingWindow 0s, batches of up to 10 invoked as
// received) each receive is an invocation; at 10,000 changes a day a
// 1-second window already makes an invocation per message, so dropping the
// window — and with it Lambda's low-traffic wait — costs nothing there,
// and more at high traffic.
func TestFastPathWithoutWindowCostsNothingMoreAtLowTraffic(t *testing.T) {
	p := ListPrices()
	perM := func(w, c float64) float64 {
		m := DeployedFastPath()
		m.BatchingWindowSeconds = w
		u, _, _ := FastPathDaily(c, m)
		return Price(u, p).Total / c * 1e6
	}
	if a, b := perM(0, 10_000), perM(1, 10_000); math.Abs(a-b) > 1e-9*b {
		t.Errorf("10,000 a day: $%.3f per M without a window, $%.3f with 1 s: want the same", a, b)
	}
	if a, b := perM(0, 1_000_000), perM(1, 1_000_000); a <= b {
		t.Errorf("1 M a day: $%.3f per M without a window, $%.3f with 1 s: want more without", a, b)
	}
}
