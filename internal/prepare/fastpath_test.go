package prepare_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// fastPathTable creates the pipeline's table on the rig and returns its
// reader, the one prepare-change gets with CDC_TABLE.
func fastPathTable(t *testing.T, r *rig) *fastrecord.Reader {
	t.Helper()
	db := dynamodb.NewFromConfig(r.env.Config())
	if err := runlock.CreateTable(context.Background(), db, "cdc"); err != nil {
		t.Fatal(err)
	}
	return &fastrecord.Reader{DB: db, Table: "cdc"}
}

// fastPathRecord writes what one fast-path invocation (request id name)
// recorded at written, as internal/fastpath writes it.
func fastPathRecord(t *testing.T, rd *fastrecord.Reader, written time.Time, name string, versions ...delivered.Entry) {
	t.Helper()
	w := &fastrecord.Writer{DB: rd.DB.(*dynamodb.Client), Table: rd.Table}
	if _, err := w.Put(context.Background(), written, name, versions); err != nil {
		t.Fatal(err)
	}
}

// TestWindowSkipsWhatTheFastPathDelivered: with the fast path on, a
// window that continues the committed one publishes only the versions the
// fast path's record items do not hold — counted as fastPathMissed — and
// skips the rest (fastPathSkipped), recording them in its delivered index;
// a version the fast path delivered in an older version only is still
// published; after a replay (continues false) everything is published
// again on purpose and nothing counts as missed; with the fast path off the
// record is not read.
func TestWindowSkipsWhatTheFastPathDelivered(t *testing.T) {
	r := newRig(t, 0)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(5 * time.Minute)
	now := t1.Add(3 * time.Minute)
	at := func(t time.Time) string { return envelope.FormatTime(t) }
	rd := fastPathTable(t, r)
	on := func(c *prepare.Config) {
		c.FastPath, c.FastPathRecord, c.Now = true, rd, func() time.Time { return now }
	}

	// The fast path delivered a/2 and b/1 (in two 5-minute buckets), and
	// c/1 where the export now carries c/2.
	fastPathRecord(t, rd, t0.Add(2*time.Minute), "req-1",
		delivered.Entry{Type: "Patient", ID: "a", VersionID: "2", LastUpdated: at(t0.Add(time.Minute))},
		delivered.Entry{Type: "Patient", ID: "c", VersionID: "1", LastUpdated: at(t0.Add(time.Minute))})
	fastPathRecord(t, rd, t0.Add(5*time.Minute+time.Second), "req-2",
		delivered.Entry{Type: "Patient", ID: "b", VersionID: "1", LastUpdated: at(t0.Add(3 * time.Minute))})
	// An item written before the window's export since (less the slack),
	// in the same 5-minute bucket as one that is read: not read.
	fastPathRecord(t, rd, t0.Add(-3*time.Minute), "req-0",
		delivered.Entry{Type: "Patient", ID: "d", VersionID: "1", LastUpdated: at(t0.Add(2 * time.Minute))})

	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-fp.ndjson"
	body := patient("a", "2", at(t0.Add(time.Minute)), 0) + "\n" + patient("b", "1", at(t0.Add(3*time.Minute)), 0) + "\n" +
		patient("c", "2", at(t0.Add(4*time.Minute)), 0) + "\n" + patient("d", "1", at(t0.Add(2*time.Minute)), 0) + "\n"
	r.put(t, k, []byte(body))

	out, err := invoke(t, r.handler(t, on), windowInput("run-1", k, t0, t1, true))
	if err != nil {
		t.Fatal(err)
	}
	if got := eventIDs(t, r.sink); !slices.Equal(got, []string{"Patient/c/_history/2", "Patient/d/_history/1"}) {
		t.Errorf("published %v; want only the versions the fast path did not deliver", got)
	}
	if out.FastPathSkipped != 2 || out.FastPathMissed != 2 || out.Events != 2 || out.Lines != 4 {
		t.Errorf("summary %+v: want 4 lines = 2 events (both missed by the fast path) + 2 fastPathSkipped", out)
	}
	var recorded []string
	for _, key := range r.list(t, delivered.DeliveredPrefix) {
		_ = delivered.ReadAll(bytes.NewReader(r.get(t, key)), nil, func(e delivered.Entry) error {
			recorded = append(recorded, e.Type+"/"+e.ID+"/_history/"+e.VersionID)
			return nil
		})
	}
	slices.Sort(recorded)
	if want := []string{"Patient/a/_history/2", "Patient/b/_history/1", "Patient/c/_history/2", "Patient/d/_history/1"}; !slices.Equal(recorded, want) {
		t.Errorf("delivered index %v, want every version consumers have (the fast path's too): %v", recorded, want)
	}

	// After a replay: everything again, nothing missed.
	r.sink.Reset()
	out, err = invoke(t, r.handler(t, on), windowInput("run-2", k, t0, t1, false))
	if err != nil || out.Events != 4 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("after a replay: %+v, %v; want all 4 published, none skipped or missed", out, err)
	}

	// Fast path off: the record is not consulted.
	r.sink.Reset()
	out, err = invoke(t, r.handler(t, nil), windowInput("run-3", k, t0, t1, true))
	if err != nil || out.Events != 4 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("fast path off: %+v, %v", out, err)
	}
}

// TestLongWindowDoesNotReadTheFastPath: a window longer than
// FastPathMaxSpan (a catch-up) publishes what it exports without reading
// the fast path's record: duplicates with the same eventIds, never a loss.
func TestLongWindowDoesNotReadTheFastPath(t *testing.T) {
	r := newRig(t, 0)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(prepare.FastPathMaxSpan + time.Hour)
	at := envelope.FormatTime
	rd := fastPathTable(t, r)
	fastPathRecord(t, rd, t1.Add(-time.Minute), "req-1", delivered.Entry{Type: "Patient", ID: "a", VersionID: "1", LastUpdated: at(t1.Add(-2 * time.Minute))})
	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-long.ndjson"
	r.put(t, k, []byte(patient("a", "1", at(t1.Add(-2*time.Minute)), 0)+"\n"))
	h := r.handler(t, func(c *prepare.Config) {
		c.FastPath, c.FastPathRecord, c.Now = true, rd, func() time.Time { return t1.Add(3 * time.Minute) }
	})
	out, err := invoke(t, h, windowInput("run-1", k, t0, t1, true))
	if err != nil || out.Events != 1 || out.FastPathSkipped != 0 || out.FastPathMissed != 0 {
		t.Fatalf("%+v, %v; want the version published and the fast path not consulted", out, err)
	}
}

// TestFastPathRecordUnreadableFailsTheBatch: a window that cannot read the
// fast path's record fails its batch (retried) instead of publishing the
// fast path's versions again unannounced; a fast path configured without a
// record is refused when the handler is built.
func TestFastPathRecordUnreadableFailsTheBatch(t *testing.T) {
	r := newRig(t, 0)
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(5 * time.Minute)
	k := "exports/ds1-FHIR_EXPORT-job1/Patient/Patient-nt.ndjson"
	r.put(t, k, []byte(patient("a", "1", envelope.FormatTime(t0.Add(time.Minute)), 0)+"\n"))
	missing := &fastrecord.Reader{DB: dynamodb.NewFromConfig(r.env.Config()), Table: "no-such-table"}
	h := r.handler(t, func(c *prepare.Config) {
		c.FastPath, c.FastPathRecord, c.Now = true, missing, func() time.Time { return t1.Add(3 * time.Minute) }
	})
	_, err := invoke(t, h, windowInput("run-1", k, t0, t1, true))
	if err == nil || !strings.Contains(err.Error(), "fast path") {
		t.Fatalf("err = %v, want the batch failed on the fast path's record", err)
	}
	if n := len(r.sink.Events()); n != 0 {
		t.Errorf("%d events published without the record", n)
	}
	if _, err := prepare.New(r.s3, r.eb, prepare.Config{Bucket: "b", FastPath: true, Publish: publish.Config{EventBus: "bus"}}); err == nil {
		t.Errorf("a fast path without its record was accepted")
	}
}
