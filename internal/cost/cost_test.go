package cost

import (
	"fmt"
	"math"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestPriceAppliesListPricesPerItem(t *testing.T) {
	p := ListPrices()
	b := Price(Usage{StateTransitions: 1000, EventChunks: 1e6, LambdaRequests: 1e6, LambdaGBSeconds: 1, SQSRequests: 1e6,
		DynamoWriteUnits: 1e6, DynamoReadUnits: 1e6, S3PutListRequests: 1e6, S3GetRequests: 1e6}, p)
	want := map[string]float64{
		"stepFunctionsStandard": 0.025,
		"eventBridge":           1.00,
		"lambda":                0.20 + 0.0000166667,
		"sqs":                   0.40,
		"dynamoDB":              0.625 + 0.125,
		"s3":                    5.00 + 0.40,
		"stepFunctionsExpress":  0,
	}
	for k, v := range want {
		if !near(b.Items[k], v) {
			t.Errorf("%s = %v, want %v", k, b.Items[k], v)
		}
	}
	sum := 0.0
	for _, v := range want {
		sum += v
	}
	if !near(b.Total, sum) {
		t.Errorf("total = %v, want %v", b.Total, sum)
	}
	arm := Price(Usage{LambdaGBSeconds: 1, LambdaArm64: true}, p)
	if !near(arm.Items["lambda"], 0.0000166667*0.8) {
		t.Errorf("arm64 GB-s = %v", arm.Items["lambda"])
	}
}

func TestPerMillionRefusesZeroChanges(t *testing.T) {
	if _, err := PerMillion(Bill{Total: 1}, 0); err == nil {
		t.Fatal("want an error for zero changes")
	}
	got, err := PerMillion(Bill{Total: 2.5}, 2e6)
	if err != nil || !near(got, 1.25) {
		t.Fatalf("per million = %v, %v; want 1.25", got, err)
	}
}

func TestFromCallsClassifiesGatewayCounts(t *testing.T) {
	u := FromCalls(map[string]int64{
		"sqs:SendMessage": 3, "sqs:ReceiveMessage": 5, "dynamodb:PutItem": 2, "dynamodb:UpdateItem": 1,
		"dynamodb:GetItem": 4, "dynamodb:CreateTable": 1, "s3:PUTObject": 6, "s3:GETObject": 7, "s3:ListObjects": 1,
		"events:PutEvents": 9, "states:StartExecution": 1,
	})
	if u.SQSRequests != 8 || u.DynamoWriteUnits != 3 || u.DynamoReadUnits != 4 || u.S3PutListRequests != 7 || u.S3GetRequests != 7 {
		t.Fatalf("usage = %+v", u)
	}
	if u.EventChunks != 0 || u.StateTransitions != 0 {
		t.Fatalf("event chunks and transitions are not HTTP calls; got %+v", u)
	}
}

func TestFilesPerWindow(t *testing.T) {
	d := ThisDesign()
	cases := []struct{ changes, files float64 }{{0, 0}, {1, 1}, {5, 5}, {100, 8}, {50000, 10}, {100001, 21}}
	for _, c := range cases {
		if got := d.Files(c.changes); got != c.files {
			t.Errorf("Files(%v) = %v, want %v", c.changes, got, c.files)
		}
	}
}

// The design meets its target of at most $1.30 per million changes at a
// million changes a day, and is an order of magnitude below the published
// design at every volume.
func TestThisDesignBeatsPublishedAndMeetsTargetAtVolume(t *testing.T) {
	for _, perDay := range []float64{1e4, 1e5, 1e6} {
		ours := Price(ThisDesign().Daily(perDay, 288), ListPrices())
		theirs := Price(PublishedDesign().Daily(perDay, 288), ListPrices())
		if ours.Total >= theirs.Total {
			t.Errorf("%v/day: ours $%.4f >= published $%.4f", perDay, ours.Total, theirs.Total)
		}
	}
	b := Price(ThisDesign().Daily(1e6, 288), ListPrices())
	perM, _ := PerMillion(b, 1e6)
	if perM > 1.30 || perM < 1.00 {
		t.Errorf("$%.4f per million at 1M/day; want within [1.00, 1.30]", perM)
	}
}

// Example prints the comparison table of docs/COST.md: 288 runs a day.
func Example() {
	fmt.Printf("%-10s %-14s %-14s %-14s %s\n", "changes/d", "ours $/day", "ours $/M", "published $/d", "published $/M")
	for _, perDay := range []float64{1e4, 1e5, 1e6} {
		ours := Price(ThisDesign().Daily(perDay, 288), ListPrices())
		theirs := Price(PublishedDesign().Daily(perDay, 288), ListPrices())
		om, _ := PerMillion(ours, perDay)
		tm, _ := PerMillion(theirs, perDay)
		fmt.Printf("%-10.0f %-14.4f %-14.2f %-14.4f %.2f\n", perDay, ours.Total, om, theirs.Total, tm)
	}
	// Output:
	// changes/d  ours $/day     ours $/M       published $/d  published $/M
	// 10000      0.1643         16.43          0.6309         63.09
	// 100000     0.2543         2.54           5.2581         52.58
	// 1000000    1.1543         1.15           51.5301        51.53
}
