package cost

import (
	"fmt"
	"sort"
	"testing"
)

// syntheaVolume is a month of changes shaped like the Synthea sample: 1.46 KB
// per resource on average, one resource in 5,000 claim-checked at 300 KB, and
// the default 1-minute overlap exporting a fifth of the changes again (its
// repeats skipped, not delivered).
func syntheaVolume(perDay float64) Volume {
	return Volume{
		ChangesPerDay: perDay, RunsPerDay: 288, AvgResourceBytes: 1460, Redelivery: 1, ExportedPerChange: 1.2,
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
	if got, want := b.Items["cloudWatchMetrics"], 17*0.30; !near(got, want) {
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
	// 10000      16.26      10.10      cloudWatchMetrics 5.10, cloudWatchDashboards 3.00, stepFunctionsStandard 2.19
	// 100000     19.58      10.10      cloudWatchMetrics 5.10, eventBridge 3.04, cloudWatchDashboards 3.00
	// 1000000    52.75      10.10      eventBridge 30.42, eventArchiveIngestion 5.81, cloudWatchMetrics 5.10
	// 10000000   384.47     10.10      eventBridge 304.17, eventArchiveIngestion 58.10, cloudWatchMetrics 5.10
}

// TestMonthAtAMillionIsWithinFifteenPercentOfItsFloor: with the overlap's
// repeats skipped, a month at 1 M changes a day costs at most 15 % above
// its floor (issue 24.4); re-publishing the overlap (1.2 deliveries a
// change) did not.
func TestMonthAtAMillionIsWithinFifteenPercentOfItsFloor(t *testing.T) {
	for _, c := range []struct {
		redelivery float64
		within     bool
	}{{1, true}, {1.2, false}} {
		v := syntheaVolume(1e6)
		v.Redelivery = c.redelivery
		b := Monthly(ThisDesign(), ThisFootprint(), v, ListPrices(), ListMonthlyPrices())
		once := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(1e6), ListPrices(), ListMonthlyPrices())
		floor := Floor(once, ThisFootprint(), ListMonthlyPrices())
		if got := b.Total <= 1.15*floor; got != c.within {
			t.Errorf("redelivery %.1f: $%.2f a month against a floor of $%.2f (+%.1f %%)", c.redelivery, b.Total, floor, 100*(b.Total/floor-1))
		}
	}
}

// Example_lineItems prints every line item of a month at four volumes, with
// the overlap's repeats published (before, 1.2 events a change) and skipped
// (after), and the floor (docs/COST.md, "A month, line by line").
func Example_lineItems() {
	mp := ListMonthlyPrices()
	for _, perDay := range []float64{1e4, 1e5, 1e6, 1e7} {
		after := Monthly(ThisDesign(), ThisFootprint(), syntheaVolume(perDay), ListPrices(), mp)
		v := syntheaVolume(perDay)
		v.Redelivery = 1.2
		before := Monthly(ThisDesign(), ThisFootprint(), v, ListPrices(), mp)
		keys := make([]string, 0, len(after.Items))
		for k := range after.Items {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Printf("%.0f changes/day\n", perDay)
		for _, k := range keys {
			if before.Items[k] != after.Items[k] {
				fmt.Printf("  %-22s %8.2f -> %8.2f\n", k, before.Items[k], after.Items[k])
			} else {
				fmt.Printf("  %-22s %8.2f\n", k, after.Items[k])
			}
		}
		floor := Floor(after, ThisFootprint(), mp)
		fmt.Printf("  %-22s %8.2f -> %8.2f (floor %.2f: +%.1f %% -> +%.1f %%)\n", "total", before.Total, after.Total, floor,
			100*(before.Total/floor-1), 100*(after.Total/floor-1))
	}
	// Output:
	// 10000 changes/day
	//   cloudWatchAlarms           1.00
	//   cloudWatchDashboards       3.00
	//   cloudWatchMetrics          5.10
	//   dynamoDB                   0.04
	//   dynamoDBBackups            0.00
	//   dynamoDBStorage            0.00
	//   eventArchiveIngestion      0.07 ->     0.06
	//   eventArchiveStorage        0.00 ->     0.00
	//   eventBridge                0.36 ->     0.30
	//   kmsKeys                    1.00
	//   kmsRequests                0.74
	//   lambda                     1.05
	//   logsIngestion              0.34
	//   logsStorage                0.02
	//   s3                         0.66
	//   s3Storage                  0.00
	//   sqs                        0.55
	//   stepFunctionsExpress       0.22
	//   stepFunctionsStandard      2.19
	//   total                     16.33 ->    16.26 (floor 10.47: +56.1 % -> +55.4 %)
	// 100000 changes/day
	//   cloudWatchAlarms           1.00
	//   cloudWatchDashboards       3.00
	//   cloudWatchMetrics          5.10
	//   dynamoDB                   0.04
	//   dynamoDBBackups            0.00
	//   dynamoDBStorage            0.00
	//   eventArchiveIngestion      0.70 ->     0.58
	//   eventArchiveStorage        0.04 ->     0.03
	//   eventBridge                3.65 ->     3.04
	//   kmsKeys                    1.00
	//   kmsRequests                0.74
	//   lambda                     1.05
	//   logsIngestion              0.34
	//   logsStorage                0.02
	//   s3                         0.66
	//   s3Storage                  0.03
	//   sqs                        0.55
	//   stepFunctionsExpress       0.22
	//   stepFunctionsStandard      2.19
	//   total                     20.31 ->    19.58 (floor 13.75: +47.7 % -> +42.3 %)
	// 1000000 changes/day
	//   cloudWatchAlarms           1.00
	//   cloudWatchDashboards       3.00
	//   cloudWatchMetrics          5.10
	//   dynamoDB                   0.04
	//   dynamoDBBackups            0.00
	//   dynamoDBStorage            0.00
	//   eventArchiveIngestion      6.97 ->     5.81
	//   eventArchiveStorage        0.37 ->     0.31
	//   eventBridge               36.50 ->    30.42
	//   kmsKeys                    1.00
	//   kmsRequests                0.74
	//   lambda                     1.05
	//   logsIngestion              0.34
	//   logsStorage                0.02
	//   s3                         0.66
	//   s3Storage                  0.33
	//   sqs                        0.55
	//   stepFunctionsExpress       0.22
	//   stepFunctionsStandard      2.19
	//   total                     60.06 ->    52.75 (floor 46.63: +28.8 % -> +13.1 %)
	// 10000000 changes/day
	//   cloudWatchAlarms           1.00
	//   cloudWatchDashboards       3.00
	//   cloudWatchMetrics          5.10
	//   dynamoDB                   0.04
	//   dynamoDBBackups            0.00
	//   dynamoDBStorage            0.00
	//   eventArchiveIngestion     69.72 ->    58.10
	//   eventArchiveStorage        3.69 ->     3.08
	//   eventBridge              365.00 ->   304.17
	//   kmsKeys                    1.00
	//   kmsRequests                0.74
	//   lambda                     1.17 ->     1.05
	//   logsIngestion              0.34
	//   logsStorage                0.02
	//   s3                         0.70 ->     0.66
	//   s3Storage                  3.25
	//   sqs                        0.55
	//   stepFunctionsExpress       0.24 ->     0.22
	//   stepFunctionsStandard      2.19
	//   total                    457.73 ->   384.47 (floor 375.44: +21.9 % -> +2.4 %)
}
