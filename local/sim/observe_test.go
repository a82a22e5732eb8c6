package sim

import (
	"context"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
)

// TestReadHeadMatchesAFullDecode: the observer's partial read finds the
// same eventId, lastUpdated and window as decoding the whole detail, for
// details with the resource inline, by reference, and with the fields in
// another order; it refuses what is not an object.
func TestReadHeadMatchesAFullDecode(t *testing.T) {
	w := envelope.Window{Since: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Until: time.Date(2026, 1, 2, 3, 9, 5, 0, time.UTC)}
	r := envelope.Resource{ResourceType: "Observation", ID: "o-1", VersionID: "3", LastUpdated: "2026-01-02T03:05:00.000Z",
		Raw: []byte(`{"resourceType":"Observation","id":"o-1","eventId":"decoy","window":{"since":"x"}}`)}
	details := [][]byte{
		envelope.AppendDetail(nil, r, w, envelope.ExportRef{}, nil),
		envelope.AppendDetail(nil, r, w, envelope.ExportRef{}, &envelope.ResourceRef{Bucket: "b", Key: "k", Size: 10}),
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

// TestObserverClassifiesDuplicates: a second delivery of an eventId is a
// retry in the same window, a rerun in a window with the same start, replay
// after a replay, overlap otherwise; latency counts first deliveries only.
func TestObserverClassifiesDuplicates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		o := newObserver(start)
		at := func(min int) time.Time { return start.Add(time.Duration(min) * time.Minute) }
		deliver := func(id string, since, until int) {
			r := envelope.Resource{ResourceType: "Patient", ID: id, VersionID: "1", LastUpdated: envelope.FormatTime(start), Raw: []byte(`{"resourceType":"Patient"}`)}
			d := envelope.AppendDetail(nil, r, envelope.Window{Since: at(since), Until: at(until)}, envelope.ExportRef{}, nil)
			if err := o.Deliver(context.Background(), "bus", sink.Event{Detail: d}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		deliver("a", 0, 5)
		deliver("a", 0, 5)  // retry
		deliver("a", 0, 10) // rerun: same start, longer window
		deliver("a", 4, 10) // overlap
		o.replayed(time.Now())
		time.Sleep(time.Second)
		deliver("a", 0, 10) // replay
		deliver("b", 0, 5)
		del := envelope.AppendDeleteDetail(nil, envelope.Deletion{ResourceType: "Patient", ResourceID: "a", VersionID: "2",
			LastUpdated: envelope.FormatTime(start.Add(time.Second)), Window: envelope.Window{Since: at(0), Until: at(5)}})
		if err := o.Deliver(context.Background(), "bus", sink.Event{Detail: del}); err != nil {
			t.Fatal(err)
		}
		if dl := o.deleteLatency(); dl.Count != 1 || dl.Max != 6 {
			t.Errorf("delete latency %+v, want one delete at 6 s", dl)
		}
		lat, dup, distinct, total := o.summary()
		want := Duplicates{Total: 4, Retries: 1, Rerun: 1, Overlap: 1, Replay: 1}
		if dup != want || distinct != 3 || total != 7 {
			t.Errorf("duplicates %+v, distinct %d, total %d; want %+v, 3, 7", dup, distinct, total, want)
		}
		if lat.Count != 2 || lat.P50 != 0 || lat.Max != 6 {
			t.Errorf("latency %+v, want two first deliveries at 0 s and 6 s", lat)
		}
		if !o.delivered(envelope.EventID("Patient", "b", "1")) || o.delivered(envelope.EventID("Patient", "c", "1")) {
			t.Error("delivered() disagrees with what was delivered")
		}
	})
}
