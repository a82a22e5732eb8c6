package cost

import (
	"fmt"
	"sort"
	"testing"
)

// syntheaVolume is a month of changes shaped like the Synthea sample: 1.46 KB
// per resource on average, one resource in 5,000 claim-checked at 300 KB, and
// the default 1-minute overlap re-delivering a fifth of the changes.
func syntheaVolume(perDay float64) Volume {
	return Volume{
		ChangesPerDay: perDay, RunsPerDay: 288, AvgResourceBytes: 1460, Redelivery: 1.2,
		ClaimCheckFraction: 1.0 / 5000, AvgClaimCheckBytes: 300 * 1024, QuarantineFraction: 1e-5,
	}
}

func TestMonthlyPricesEveryLineItem(t *testing.T) {
	b := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(1e6), ListPrices(), ListMonthlyPrices())
	for _, item := range []string{
		"cloudWatchMetrics", "cloudWatchAlarms", "cloudWatchDashboards", "kmsKeys", "kmsRequests",
		"logsIngestion", "logsStorage", "eventArchiveIngestion", "eventArchiveStorage", "s3Storage",
		"dynamoDBStorage", "dynamoDBBackups", "eventBridge", "stepFunctionsStandard", "lambda", "sqs",
	} {
		if _, ok := b.Items[item]; !ok {
			t.Errorf("item %s missing from the monthly bill", item)
		}
	}
	sum := 0.0
	for _, v := range b.Items {
		sum += v
	}
	if !near(sum, b.Total) {
		t.Fatalf("items add up to %v, total %v", sum, b.Total)
	}
	if got, want := b.Items["cloudWatchMetrics"], 16*0.30; !near(got, want) {
		t.Errorf("metrics = %v, want %v", got, want)
	}
	// Storage is steady state: a day's export bytes kept 7 days, among others.
	noArchive := ThisFootprint()
	noArchive.ArchiveRetentionDays = 0
	nb := Monthly(ThisDesign(), noArchive, syntheaVolume(1e6), ListPrices(), ListMonthlyPrices())
	if _, ok := nb.Items["eventArchiveStorage"]; ok || nb.Total >= b.Total {
		t.Errorf("without an archive the bill should lose its archive items: %v vs %v", nb.Total, b.Total)
	}
}

func TestMonthlyGrowsWithVolumeAndDimensions(t *testing.T) {
	low := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(1e4), ListPrices(), ListMonthlyPrices())
	high := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(1e7), ListPrices(), ListMonthlyPrices())
	if !(high.Total > low.Total) {
		t.Fatalf("10 M/day %v not above 10 k/day %v", high.Total, low.Total)
	}
	perType := ThisFootprint()
	perType.CustomMetrics += 146 // one ResourcesExported series per R4 resource type
	pt := Monthly(ThisDesign(), perType, syntheaVolume(1e4), ListPrices(), ListMonthlyPrices())
	if d := pt.Total - low.Total; !near(d, 146*0.30) {
		t.Fatalf("a per-type dimension adds %v a month, want %v", d, 146*0.30)
	}
}

// Example prints the monthly total at four volumes and its largest items
// (docs/COST.md, "A month, whole").
func Example_monthly() {
	fmt.Printf("%-10s %-10s %-10s %s\n", "changes/d", "$/month", "fixed", "largest items")
	for _, perDay := range []float64{1e4, 1e5, 1e6, 1e7} {
		b := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(perDay), ListPrices(), ListMonthlyPrices())
		keys := make([]string, 0, len(b.Items))
		for k := range b.Items {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return b.Items[keys[i]] > b.Items[keys[j]] })
		fmt.Printf("%-10.0f %-10.2f %-10.2f %s %.2f, %s %.2f, %s %.2f\n", perDay, b.Total,
			FixedMonthly(ThisFootprint(), ListMonthlyPrices()),
			keys[0], b.Items[keys[0]], keys[1], b.Items[keys[1]], keys[2], b.Items[keys[2]])
	}
	// Output:
	// changes/d  $/month    fixed      largest items
	// 10000      15.90      9.80       cloudWatchMetrics 4.80, cloudWatchDashboards 3.00, stepFunctionsStandard 2.19
	// 100000     19.87      9.80       cloudWatchMetrics 4.80, eventBridge 3.65, cloudWatchDashboards 3.00
	// 1000000    59.62      9.80       eventBridge 36.50, eventArchiveIngestion 6.97, cloudWatchMetrics 4.80
	// 10000000   457.30     9.80       eventBridge 365.00, eventArchiveIngestion 69.72, cloudWatchMetrics 4.80
}
