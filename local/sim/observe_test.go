package sim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
)

// TestReadHeadMatchesAFullDecode: the observer's partial read finds the
// same eventId, lastUpdated and window as decoding the whole detail, for
// details with the resource inline, by reference, and with the fields in
// another order; it refuses what is not an object.
func TestReadHeadMatchesAFullDecode(t *testing.T) {
	w := events.Window{Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Until: time.Date(2026, 1, 2, 3, 9, 5, 0, time.UTC)}
	r := events.Resource{ResourceType: "Observation", ID: "o-1", VersionID: "3", LastUpdated: "2026-01-02T03:05:00.000Z",
		Raw: []byte(`{"resourceType":"Observation","id":"o-1","eventId":"decoy","window":{"since":"x"}}`)}
	details := [][]byte{
		events.AppendDetail(nil, r, w, events.ExportRef{}, nil),
		events.AppendDetail(nil, r, w, events.ExportRef{}, &events.ResourceRef{Bucket: "b", Key: "k", Size: 10}),
		[]byte(`{"resource":{"eventId":"decoy"},"window":{"since":"a","until":"b"},"lastUpdated":"c","eventId":"Patient/p/_history/1"}`),
	}
	for i, d := range details {
		var want detailHead
		if err := json.Unmarshal(d, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := readHead(d)
		if !ok || got != want {
			t.Errorf("detail %d: readHead = %+v, %v; want %+v", i, got, ok, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"eventId":3}`, `{"window":"x"}`, `{"operation":"upsert"}`} {
		if h, ok := readHead([]byte(bad)); ok {
			t.Errorf("readHead(%q) = %+v, accepted", bad, h)
		}
	}
}
