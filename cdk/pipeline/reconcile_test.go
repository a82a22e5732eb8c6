package pipeline

import (
	"testing"
	"time"
)

func TestRateExpression(t *testing.T) {
	for d, want := range map[time.Duration]string{
		24 * time.Hour: "rate(1 day)", 48 * time.Hour: "rate(2 days)", time.Hour: "rate(1 hour)",
		6 * time.Hour: "rate(6 hours)", 90 * time.Minute: "rate(90 minutes)", 25 * time.Hour: "rate(25 hours)",
	} {
		if got := rateExpression(d); got != want {
			t.Errorf("rateExpression(%s) = %s, want %s", d, got, want)
		}
	}
}
