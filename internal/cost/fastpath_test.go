package cost

import (
	"fmt"
	"testing"
)

// TestFastPathUsageFollowsTheBatching: the queue's requests are at least one
// send per notification; at a high rate the mapping's batching bounds the
// invocations, so their cost per change falls; the record objects are
// bounded by the environments' flush interval, not by the invocations.
func TestFastPathUsageFollowsTheBatching(t *testing.T) {
	m := DeployedFastPath()
	low, _, _ := FastPathDaily(10_000, m)
	high, _, n := FastPathDaily(10_000_000, m)
	if high.SQSRequests < n || n != 10_000_000 {
		t.Fatalf("%v SQS requests for %v notifications", high.SQSRequests, n)
	}
	if low.LambdaRequests != 10_000 || high.LambdaRequests != 5*86400 {
		t.Errorf("invocations %v and %v: want one per message at 10 k, the pollers' bound at 10 M", low.LambdaRequests, high.LambdaRequests)
	}
	if high.S3PutListRequests > 5*8640+288*2 {
		t.Errorf("%v PUT/LIST requests: the records must be bounded by the flush interval", high.S3PutListRequests)
	}
	p := ListPrices()
	perM := func(c float64) float64 { u, _, _ := FastPathDaily(c, m); return Price(u, p).Total / c * 1e6 }
	if perM(10_000_000) >= perM(1_000_000) {
		t.Errorf("per million changes: %.3f at 10 M, %.3f at 1 M; batching must make the larger cheaper", perM(10_000_000), perM(1_000_000))
	}
}

// Example_fastPath prints what the fast path adds per million changes at four
// volumes (docs/COST.md, "The fast path").
func Example_fastPath() {
	p := ListPrices()
	for _, c := range []float64{10_000, 100_000, 1_000_000, 10_000_000} {
		u, vreads, n := FastPathDaily(c, DeployedFastPath())
		b := Price(u, p)
		fmt.Printf("%8.0f/day: $%.3f per M changes (SQS %.3f, Lambda %.3f, S3 %.3f, logs %.3f); %.0f vreads, %.0f notifications a day\n",
			c, b.Total/c*1e6, b.Items["sqs"]/c*1e6, b.Items["lambda"]/c*1e6, b.Items["s3"]/c*1e6, b.Items["logs"]/c*1e6, vreads, n)
	}
	// The logs with a report per invocation and Lambda's START, END and
	// REPORT lines (the system log level at INFO), at 1 M a day.
	before := DeployedFastPath()
	before.ReportEveryInvocation, before.PlatformLogBytes = true, 255
	u, _, _ := FastPathDaily(1_000_000, before)
	b := Price(u, p)
	fmt.Printf("before: $%.3f per M changes at 1 M a day (logs %.3f)\n", b.Total, b.Items["logs"])
	// Output:
	// 10000/day: $9.145 per M changes (SQS 2.064, Lambda 0.567, S3 5.928, logs 0.587); 2 vreads, 10000 notifications a day
	//   100000/day: $4.572 per M changes (SQS 1.286, Lambda 0.567, S3 2.465, logs 0.253); 20 vreads, 100000 notifications a day
	//  1000000/day: $1.290 per M changes (SQS 0.754, Lambda 0.264, S3 0.247, logs 0.025); 200 vreads, 1000000 notifications a day
	// 10000000/day: $0.588 per M changes (SQS 0.505, Lambda 0.056, S3 0.025, logs 0.003); 2000 vreads, 10000000 notifications a day
	// before: $1.569 per M changes at 1 M a day (logs 0.305)
}
