package fhirrest_test

import (
	"net/http"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
)

// TestThrottledAnswerReadsAnAnswerAsTheClientDoes: 429, an AWS throttle
// error type on any status (HealthLake's API reference gives
// ThrottlingException HTTP 400) and FHIR's "throttled" issue type are
// throttles; other refusals and successes are not.
func TestThrottledAnswerReadsAnAnswerAsTheClientDoes(t *testing.T) {
	hdr := func(errType string) http.Header {
		h := http.Header{}
		if errType != "" {
			h.Set("X-Amzn-ErrorType", errType)
		}
		return h
	}
	for name, c := range map[string]struct {
		status  int
		errType string
		body    string
		want    bool
	}{
		"429":                         {429, "", "", true},
		"400 ThrottlingException":     {400, "ThrottlingException:http://internal.amazon.com/coral/", `{"message":"Rate exceeded"}`, true},
		"400 FHIR throttled":          {400, "", `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"throttled"}]}`, true},
		"400 ValidationException":     {400, "ValidationException", `{"message":"bad"}`, false},
		"403 forbidden":               {403, "", `{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"forbidden"}]}`, false},
		"200 naming a throttle error": {200, "ThrottlingException", "", false},
	} {
		if got := fhirrest.ThrottledAnswer(c.status, hdr(c.errType), []byte(c.body)); got != c.want {
			t.Errorf("%s: ThrottledAnswer = %v, want %v", name, got, c.want)
		}
	}
}
