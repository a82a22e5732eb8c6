package fastrecord_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastrecord"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"
)

var t0 = time.Date(2026, 11, 27, 10, 3, 0, 0, time.UTC)

// TestKeysSortByWriteTimeAndPartitionsCoverTheSpan: a bucket holds an hour
// of writes in two shards; sort keys order by write time; the partitions of
// a span are every shard of every bucket it touches.
func TestKeysSortByWriteTimeAndPartitionsCoverTheSpan(t *testing.T) {
	if got := fastrecord.PK(t0.Add(90*time.Second), 1); got != "FASTPATH#2026-11-27T10#1" {
		t.Errorf("PK = %s", got)
	}
	a := fastrecord.SK(t0.Add(100*time.Millisecond), "req-z", 0)
	b := fastrecord.SK(t0.Add(200*time.Millisecond), "req-a", 0)
	if a >= b || !strings.HasPrefix(a, envelope.FormatTime(t0.Add(100*time.Millisecond))+"#") {
		t.Errorf("sort keys %s, %s: want write-time order", a, b)
	}
	if s := fastrecord.Shard("req-a"); s < 0 || s >= fastrecord.Shards || s != fastrecord.Shard("req-a") {
		t.Errorf("shard %d", s)
	}
	if got := fastrecord.Partitions(t0, t0.Add(8*time.Minute)); len(got) != fastrecord.Shards || got[0] != "FASTPATH#2026-11-27T10#0" {
		t.Errorf("partitions of 10:03–10:11: %v", got)
	}
	got := fastrecord.Partitions(t0.Add(55*time.Minute), t0.Add(63*time.Minute)) // 10:58–11:06
	if len(got) != 2*fastrecord.Shards || got[0] != "FASTPATH#2026-11-27T10#0" || got[len(got)-1] != "FASTPATH#2026-11-27T11#1" {
		t.Errorf("partitions of 10:58–11:06: %v", got)
	}
	if got := fastrecord.Partitions(t0, t0.Add(-time.Minute)); len(got) != fastrecord.Shards {
		t.Errorf("an empty span reads its start's bucket: %v", got)
	}
}

// TestReadFindsWhatWasPutInItsSpan: what invocations put is read back from
// every bucket and shard of the span (strongly consistent), an invocation
// of more than MaxEntriesPerItem versions in several items; what was
// written before the span is not.
func TestReadFindsWhatWasPutInItsSpan(t *testing.T) {
	_, db := recordTable(t)
	ctx := context.Background()
	w := &fastrecord.Writer{DB: db, Table: "cdc"}
	entry := func(id string) delivered.Entry {
		return delivered.Entry{Type: "Observation", ID: id, VersionID: "1", LastUpdated: envelope.FormatTime(t0)}
	}
	var many []delivered.Entry
	for i := range fastrecord.MaxEntriesPerItem + 5 {
		many = append(many, entry(fmt.Sprintf("m%d", i)))
	}
	puts := []struct {
		at      time.Time
		unique  string
		entries []delivered.Entry
	}{
		{t0.Add(-2 * time.Minute), "before", []delivered.Entry{entry("old")}},
		{t0.Add(time.Second), "r1", []delivered.Entry{entry("a"), {Type: "Patient", ID: "b", VersionID: "3", LastUpdated: envelope.FormatTime(t0), Deleted: true}}},
		{t0.Add(3 * time.Minute), "r2", many},
		{t0.Add(7 * time.Minute), "r3", []delivered.Entry{entry("c")}},
		{t0.Add(8 * time.Minute), "r4", nil}, // nothing published: nothing written
	}
	for _, p := range puts {
		key, err := w.Put(ctx, p.at, p.unique, p.entries)
		if err != nil {
			t.Fatal(err)
		}
		if (key == "") != (len(p.entries) == 0) {
			t.Errorf("%s: key %q for %d entries", p.unique, key, len(p.entries))
		}
	}
	set, err := (&fastrecord.Reader{DB: db, Table: "cdc"}).Read(ctx, t0, t0.Add(9*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 3+len(many) {
		t.Errorf("read %d versions, want %d", set.Len(), 3+len(many))
	}
	v := func(typ, id, version string) delivered.Version {
		return delivered.Version{Type: typ, ID: id, VersionID: version}
	}
	for _, v := range []delivered.Version{v("Observation", "a", "1"), v("Patient", "b", "3"), v("Observation", "c", "1"), v("Observation", fmt.Sprintf("m%d", len(many)-1), "1")} {
		if !set.Has(v) {
			t.Errorf("%v not read", v)
		}
	}
	if set.Has(delivered.Version{Type: "Observation", ID: "old", VersionID: "1"}) {
		t.Errorf("a version written before the span was read")
	}
	if _, err := (&fastrecord.Reader{DB: db, Table: "missing"}).Read(ctx, t0, t0.Add(time.Minute)); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("read of a missing table: %v", err)
	}
}

// TestReadPagesPastOneMegabyte: an hour's shard holding more than the 1 MB
// a Query answers at once (the local gateway enforces DynamoDB's page
// limit) is read to its end, every version once.
func TestReadPagesPastOneMegabyte(t *testing.T) {
	env, db := recordTable(t)
	ctx := context.Background()
	w := &fastrecord.Writer{DB: db, Table: "cdc"}
	rng := rand.New(rand.NewPCG(1, 2))
	const invocations = 150
	for i := range invocations {
		entries := make([]delivered.Entry, fastrecord.MaxEntriesPerItem)
		for j := range entries {
			entries[j] = delivered.Entry{Type: "Observation", ID: fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()), VersionID: "1", LastUpdated: envelope.FormatTime(t0)}
		}
		if _, err := w.Put(ctx, t0.Add(time.Duration(i)*time.Second), fmt.Sprintf("r%d", i), entries); err != nil {
			t.Fatal(err)
		}
	}
	queries := env.Gateway.Calls()["dynamodb:Query"]
	set, err := (&fastrecord.Reader{DB: db, Table: "cdc"}).Read(ctx, t0, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != invocations*fastrecord.MaxEntriesPerItem {
		t.Errorf("read %d versions, want %d", set.Len(), invocations*fastrecord.MaxEntriesPerItem)
	}
	if n := env.Gateway.Calls()["dynamodb:Query"] - queries; n <= fastrecord.Shards {
		t.Errorf("%d queries for %d shards of one hour: the record did not span pages, the test proves nothing", n, fastrecord.Shards)
	}
}

// recordTable is the pipeline's table, "cdc", on a local DynamoDB.
func recordTable(t *testing.T) (*localaws.Env, *dynamodb.Client) {
	t.Helper()
	env := localawstest.Start(t)
	db := dynamodb.NewFromConfig(env.Config())
	if err := runlock.CreateTable(context.Background(), db, "cdc"); err != nil {
		t.Fatal(err)
	}
	return env, db
}

// TestLargestItemFitsDynamoDB: an item of MaxEntriesPerItem versions at
// their longest — 64-character ids and version ids of random characters,
// the longest R4 type name, a time with milliseconds — stays under
// DynamoDB's 400 KB item limit, which the local gateway enforces (about
// 103 KB compressed: some 3,900 such versions would reach it).
func TestLargestItemFitsDynamoDB(t *testing.T) {
	_, db := recordTable(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-."
	id := func() string {
		b := make([]byte, 64)
		for i := range b {
			b[i] = idChars[rng.IntN(len(idChars))]
		}
		return string(b)
	}
	entries := make([]delivered.Entry, fastrecord.MaxEntriesPerItem)
	for i := range entries {
		entries[i] = delivered.Entry{Type: "MedicinalProductAuthorization", ID: id(), VersionID: id(), LastUpdated: "2026-11-27T10:03:00.123Z", Deleted: i%2 == 0}
	}
	w := &fastrecord.Writer{DB: db, Table: "cdc"}
	if _, err := w.Put(context.Background(), t0, "largest", entries); err != nil {
		t.Fatalf("the largest record item: %v", err)
	}
}
