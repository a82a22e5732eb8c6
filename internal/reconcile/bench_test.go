package reconcile

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
)

// benchLines is n export lines of small Patients (the index reads only the
// top-level fields, so the line size matters only for the read).
func benchLines(n int) []byte {
	var b bytes.Buffer
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"resourceType":"Patient","id":"%08x-5a1e-4c1b-9d7e-%012d","meta":{"versionId":"%d","lastUpdated":"%s"},"active":true,"name":[{"family":"Example","given":["Test"]}],"gender":"unknown","birthDate":"1970-01-01"}`+"\n",
			i, i, i%7+1, base.Add(time.Duration(i)*time.Second).Format("2006-01-02T15:04:05.000Z"))
	}
	return b.Bytes()
}

// BenchmarkIndexBuild: one index child's work per resource on one core:
// read the export line's top level, partition, sort, write the gzip store run.
func BenchmarkIndexBuild(b *testing.B) {
	const n = 100_000
	data := benchLines(n)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		parts := make([][]delivered.Entry, 16)
		rd := fhir.NewReader(bytes.NewReader(data), fhir.Options{Validation: fhir.ValidateNone})
		for {
			l, err := rd.Next()
			if err == io.EOF {
				break
			}
			e := delivered.Entry{Type: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Offset: l.Offset, Length: int64(len(l.Raw))}
			p := delivered.Partition(e.Type, e.ID, 16)
			parts[p] = append(parts[p], e)
		}
		for _, es := range parts {
			delivered.SortEntries(es)
			w := delivered.NewWriter(io.Discard, true)
			for _, e := range es {
				_ = w.Write(e)
			}
			_ = w.Close()
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "resources/s")
}

// benchIndex is a sorted, reduced partition of n entries and its gzip form.
func benchIndex(n int) ([]delivered.Entry, []byte) {
	es := make([]delivered.Entry, n)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range es {
		es[i] = delivered.Entry{Type: "Patient", ID: fmt.Sprintf("%08x-5a1e-4c1b-9d7e-%012d", i, i), VersionID: fmt.Sprint(i%7 + 1),
			LastUpdated: base.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000Z")}
	}
	delivered.SortEntries(es)
	var buf bytes.Buffer
	w := delivered.NewWriter(&buf, false)
	for _, e := range es {
		_ = w.Write(e)
	}
	_ = w.Close()
	return es, buf.Bytes()
}

// BenchmarkDiff: one compare child's work per resource on one core: read
// both sides from their gzip objects, sort, reduce, compare, write the next
// index (1 % of versions changed).
func BenchmarkDiff(b *testing.B) {
	const n = 100_000
	_, storeGz := benchIndex(n)
	known, _ := benchIndex(n)
	for i := 0; i < n; i += 100 {
		known[i].VersionID = "0"
		known[i].LastUpdated = "2025-01-01T00:00:00.000Z"
	}
	var kb bytes.Buffer
	kw := delivered.NewWriter(&kb, false)
	for _, e := range known {
		_ = kw.Write(e)
	}
	_ = kw.Close()
	checkpoint := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		store := readBench(storeGz)
		k := readBench(kb.Bytes())
		next := make([]delivered.Entry, 0, len(k))
		st, _ := Diff(store, k, checkpoint, func(d Decision) error {
			if d.Store != nil {
				next = append(next, *d.Store)
			}
			return nil
		})
		if st.Repairs != n/100 {
			b.Fatalf("repairs %d", st.Repairs)
		}
		w := delivered.NewWriter(io.Discard, false)
		for _, e := range next {
			_ = w.Write(e)
		}
		_ = w.Close()
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "resources/s")
}

func readBench(gz []byte) []delivered.Entry {
	var es []delivered.Entry
	_ = delivered.ReadAll(bytes.NewReader(gz), nil, func(e delivered.Entry) error { es = append(es, e); return nil })
	delivered.SortEntries(es)
	return delivered.Reduce(es)
}

// BenchmarkPartitionMemory: the heap a compare child holds for a partition
// of n resources (both sides loaded, reduced), per partition size.
func BenchmarkPartitionMemory(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			_, gz := benchIndex(n)
			for it := 0; it < b.N; it++ {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				store := readBench(gz)
				known := readBench(gz)
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(2*n), "B/entry")
				runtime.KeepAlive(store)
				runtime.KeepAlive(known)
			}
		})
	}
}
