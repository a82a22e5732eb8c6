package localaws

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// PeakRates counts the most calls of an API within any one second of the
// clock — a burst across a second's boundary whole — and leaves out the
// callers the latency model exempts.
func TestGatewayPeakRatesCountASlidingSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGateway()
		g.Handle(ServiceHealthLake, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
		m, err := NewLatencyModel(LatencyConfig{Services: map[string]map[string]Distribution{
			ServiceHealthLake: {LatencyDefault: Fixed(time.Millisecond)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		m.Exempt("OBSERVER")
		g.SetLatency(m)
		call := func(key, method, path string) {
			r := httptest.NewRequest(method, path, nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20260101/us-east-1/healthlake/aws4_request, SignedHeaders=host, Signature=x")
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%s %s answered %d", method, path, w.Code)
			}
		}
		search := func(key string) { call(key, http.MethodGet, "/datastore/ds/r4/Patient?_count=100") }
		// Half a second in, 30 searches; 600 ms later 50 more: 80 within one
		// second, though no whole second of the clock holds more than 50.
		time.Sleep(500 * time.Millisecond)
		for range 30 {
			search("PIPELINE")
		}
		time.Sleep(600 * time.Millisecond)
		for range 50 {
			search("PIPELINE")
		}
		// A second later: 20, which does not raise the peak.
		time.Sleep(2 * time.Second)
		for range 20 {
			search("PIPELINE")
		}
		// An exempt caller's burst does not count.
		for range 500 {
			search("OBSERVER")
		}
		call("PIPELINE", http.MethodGet, "/datastore/ds/r4/Patient/p1/_history/2")
		p := g.PeakRates()
		if got := p["healthlake:SearchWithGet"]; got != 80 {
			t.Errorf("SearchWithGet peak %d, want 80 (30 + 50 within one second)", got)
		}
		if got := p["healthlake:VReadResource"]; got != 1 {
			t.Errorf("VReadResource peak %d, want 1", got)
		}
	})
}
