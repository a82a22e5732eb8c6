package change

// Issue-2 benchmarks: the per-line work of prepare-change without AWS —
// fhir.Reader → Classify → envelope.AppendDetail into a reused buffer — against
// json.Valid over the same lines (the floor) and against the published
// design's decode-into-map + json.Marshal. Run with -cpu 1 for MB/s per core;
// docs/BENCHMARKS.md records the figures.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
)

const syntheaDir = "../../../shared/fhir-samples/synthea-10-patients"

// benchLastUpdated stands in for meta.lastUpdated on Synthea lines, which
// have none (HealthLake adds it on import); without it every line would be
// quarantined and no envelope built.
const benchLastUpdated = "2026-11-21T10:01:00.000Z"

var benchWindow = envelope.Window{
	Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
	Until: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
}

var benchExport = envelope.ExportRef{DatastoreID: "0123456789abcdef0123456789abcdef", JobID: "fedcba9876543210fedcba9876543210"}

// corpora loads the benchmark inputs. It is called per benchmark and never
// cached, so that no corpus stays live into BenchmarkStream1GB's heap figure.
func corpora() (map[string][]byte, error) {
	out := map[string][]byte{}
	files, _ := filepath.Glob(filepath.Join(syntheaDir, "*.000.ndjson"))
	var syn []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		syn = append(syn, b...)
	}
	if len(syn) > 0 {
		out["synthea"] = syn
	}
	// 16 MB of generated resources of every type, one in 500 lines at 100 KB.
	g, err := io.ReadAll(gen.NewStream(gen.StreamSpec{Seed: 1, Bytes: 16 << 20, LargeEvery: 500, LargeSize: 100_000}))
	if err != nil {
		return nil, err
	}
	out["generated"] = g
	return out, nil
}

func benchCorpora(b *testing.B, f func(b *testing.B, data []byte)) {
	cs, err := corpora()
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"synthea", "generated"} {
		data, ok := cs[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			f(b, data)
		})
	}
}

// pipeline runs reader → classify → envelope over data and returns the event count.
func pipeline(data []byte, level fhir.Validation, buf []byte) (int64, []byte, error) {
	r := fhir.NewReader(bytes.NewReader(data), fhir.Options{Validation: level})
	c := Classifier{Window: benchWindow}
	var n int64
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, buf, nil
		}
		if err != nil {
			return n, buf, err
		}
		if l.Problem == "" && l.LastUpdated == "" {
			l.LastUpdated = benchLastUpdated
		}
		if k, _ := c.Classify(l); k != KindEvent {
			continue
		}
		buf = envelope.AppendDetail(buf[:0], envelope.Resource{ResourceType: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Raw: l.Raw}, benchWindow, benchExport, nil)
		n++
	}
}

func benchPipeline(b *testing.B, level fhir.Validation) {
	benchCorpora(b, func(b *testing.B, data []byte) {
		buf := make([]byte, 0, 1<<20)
		want := int64(bytes.Count(data, []byte("\n")))
		for b.Loop() {
			n, nb, err := pipeline(data, level, buf)
			if err != nil {
				b.Fatal(err)
			}
			if n != want {
				b.Fatalf("%d events from %d lines", n, want)
			}
			buf = nb
		}
	})
}

// BenchmarkEnvelopeJSON: reader at level json → Classify → AppendDetail.
func BenchmarkEnvelopeJSON(b *testing.B) { benchPipeline(b, fhir.ValidateJSON) }

// BenchmarkEnvelopeR4: the same at level r4 (golang-fhir-models decode per line).
func BenchmarkEnvelopeR4(b *testing.B) { benchPipeline(b, fhir.ValidateR4) }

// BenchmarkEnvelopeNone: the same at level none (peek only).
func BenchmarkEnvelopeNone(b *testing.B) { benchPipeline(b, fhir.ValidateNone) }

// BenchmarkJSONValid is the floor: json.Valid over the same lines.
func BenchmarkJSONValid(b *testing.B) {
	benchCorpora(b, func(b *testing.B, data []byte) {
		for b.Loop() {
			rest := data
			for len(rest) > 0 {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					i = len(rest)
				}
				if !json.Valid(rest[:i]) {
					b.Fatal("invalid line")
				}
				rest = rest[min(i+1, len(rest)):]
			}
		}
	})
}

// BenchmarkMapMarshal is the published design's approach: decode each line
// into map[string]any and json.Marshal an envelope map around it.
func BenchmarkMapMarshal(b *testing.B) {
	benchCorpora(b, func(b *testing.B, data []byte) {
		w := map[string]any{"since": envelope.FormatTime(benchWindow.Since), "until": envelope.FormatTime(benchWindow.Until)}
		exp := map[string]any{"datastoreId": benchExport.DatastoreID, "jobId": benchExport.JobID}
		for b.Loop() {
			rest := data
			for len(rest) > 0 {
				i := bytes.IndexByte(rest, '\n')
				if i < 0 {
					i = len(rest)
				}
				var res map[string]any
				if err := json.Unmarshal(rest[:i], &res); err != nil {
					b.Fatal(err)
				}
				typ, _ := res["resourceType"].(string)
				id, _ := res["id"].(string)
				meta, _ := res["meta"].(map[string]any)
				version, _ := meta["versionId"].(string)
				lu, _ := meta["lastUpdated"].(string)
				if lu == "" {
					lu = benchLastUpdated
				}
				if version == "" {
					version = envelope.ContentVersion(rest[:i])
				}
				if _, err := json.Marshal(map[string]any{
					"schemaVersion": envelope.SchemaVersion, "eventId": envelope.EventID(typ, id, version),
					"operation": envelope.OperationUpsert, "resourceType": typ, "resourceId": id,
					"versionId": version, "lastUpdated": lu, "window": w, "export": exp, "resource": res,
				}); err != nil {
					b.Fatal(err)
				}
				rest = rest[min(i+1, len(rest)):]
			}
		}
	})
}

// peakSampler samples the heap every millisecond and keeps the maximum.
type peakSampler struct {
	heap, inuse atomic.Uint64
	stop        chan struct{}
	done        chan struct{}
}

const (
	heapMetric   = "/memory/classes/heap/objects:bytes" // live and not-yet-swept objects
	unusedMetric = "/memory/classes/heap/unused:bytes"  // heap spans in use but not holding objects
)

func startPeakSampler() *peakSampler {
	p := &peakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s := []metrics.Sample{{Name: heapMetric}, {Name: unusedMetric}}
	sample := func() {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > p.heap.Load() {
			p.heap.Store(v)
		}
		if v := s[0].Value.Uint64() + s[1].Value.Uint64(); v > p.inuse.Load() {
			p.inuse.Store(v)
		}
	}
	go func() {
		defer close(p.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return p
}

// Stop ends sampling and returns the peak bytes of heap objects and the peak
// bytes of heap spans in use (runtime.MemStats.HeapInuse).
func (p *peakSampler) Stop() (heap, inuse uint64) {
	close(p.stop)
	<-p.done
	return p.heap.Load(), p.inuse.Load()
}

// BenchmarkStream1GB streams 1 GiB of generated export lines (made on the
// fly, no disk; one line in 2000 is a 300 KB DocumentReference-sized line)
// through reader (json) → Classify → AppendDetail and reports the peak heap
// against the budget of 64 MB + the largest line, sampled every millisecond
// with runtime/metrics. The MB/s figure includes generating the data.
func BenchmarkStream1GB(b *testing.B) {
	const total = 1 << 30
	b.SetBytes(total)
	var peak, peakInuse uint64
	var largest int
	var lines int64
	for b.Loop() {
		runtime.GC()
		s := gen.NewStream(gen.StreamSpec{Seed: 2, Bytes: total, LargeEvery: 2000, LargeSize: 300_000})
		sampler := startPeakSampler()
		r := fhir.NewReader(s, fhir.Options{Validation: fhir.ValidateJSON})
		c := Classifier{Window: envelope.Window{Since: time.Time{}, Until: benchWindow.Until}}
		var buf []byte
		var n int64
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if k, reason := c.Classify(l); k != KindEvent {
				b.Fatalf("line %d: %v %s", l.Number, k, reason)
			}
			buf = envelope.AppendDetail(buf[:0], envelope.Resource{ResourceType: l.ResourceType, ID: l.ID, VersionID: l.VersionID, LastUpdated: l.LastUpdated, Raw: l.Raw}, benchWindow, benchExport, nil)
			n++
		}
		h, inuse := sampler.Stop()
		peak, peakInuse = max(peak, h), max(peakInuse, inuse)
		largest = max(largest, r.Stats().LargestLine)
		if n != s.Lines() {
			b.Fatalf("%d events from %d lines", n, s.Lines())
		}
		lines = n
	}
	const mb = 1 << 20
	b.ReportMetric(float64(peak)/mb, "peak-heap-MiB")
	b.ReportMetric(float64(peakInuse)/mb, "peak-heap-inuse-MiB")
	b.ReportMetric(float64(largest)/mb, "largest-line-MiB")
	b.ReportMetric((64e6+float64(largest))/mb, "budget-MiB") // 64 MB + the largest line
	b.ReportMetric(float64(lines), "lines")
}

// validPass runs json.Valid over every line of data.
func validPass(data []byte) bool {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			i = len(data)
		}
		if !json.Valid(data[:i]) {
			return false
		}
		data = data[min(i+1, len(data)):]
	}
	return true
}

// BenchmarkEnvelopeVsValid alternates a json.Valid pass and a pipeline pass
// (reader at level json → Classify → AppendDetail) over the same lines in each
// iteration, so that both see the same machine load, and reports the best
// pass of each as MB/s and the pipeline's speed as a percentage of
// json.Valid's (target ≥ 80). Run with -cpu 1 and -benchtime ≥ 10x.
func BenchmarkEnvelopeVsValid(b *testing.B) {
	benchCorpora(b, func(b *testing.B, data []byte) {
		buf := make([]byte, 0, 1<<20)
		bestValid, bestPipe := time.Duration(1<<62), time.Duration(1<<62)
		for b.Loop() {
			t0 := time.Now()
			if !validPass(data) {
				b.Fatal("invalid line")
			}
			t1 := time.Now()
			var err error
			if _, buf, err = pipeline(data, fhir.ValidateJSON, buf); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			bestValid, bestPipe = min(bestValid, t1.Sub(t0)), min(bestPipe, t2.Sub(t1))
		}
		mbps := func(d time.Duration) float64 { return float64(len(data)) / 1e6 / d.Seconds() }
		b.ReportMetric(mbps(bestValid), "valid-MB/s")
		b.ReportMetric(mbps(bestPipe), "envelope-MB/s")
		b.ReportMetric(100*bestValid.Seconds()/bestPipe.Seconds(), "pct-of-valid")
	})
}
