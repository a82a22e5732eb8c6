package prepare_test

// Benchmarks of the whole prepare-change path: S3 object → fhir reader →
// change classifier → detail builder → publisher → an in-memory bus that
// keeps nothing but counts, one invocation per file or (the "-batch"
// corpora) all files in one batch. Run them on one core:
//
//	go test -run '^$' -bench 'BenchmarkHandler' -benchtime 3x -cpu 1 ./internal/prepare
//	go test -run '^$' -bench 'BenchmarkPeakHeap1GB' -benchtime 1x -cpu 1 ./internal/prepare
//
// Each throughput benchmark also times json.Valid over the same lines in the
// same run and reports pct-of-json.Valid (target ≥ 60).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/prepare"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
)

// countingBus is an in-memory bus: it accepts every entry and keeps counts only.
type countingBus struct {
	calls, entries, bytes atomic.Int64
	results               []types.PutEventsResultEntry
}

func newCountingBus() *countingBus {
	b := &countingBus{results: make([]types.PutEventsResultEntry, publish.MaxBatchEntries)}
	for i := range b.results {
		b.results[i].EventId = aws.String(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	return b
}

func (b *countingBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if len(in.Entries) > publish.MaxBatchEntries {
		return nil, fmt.Errorf("%d entries in one call", len(in.Entries))
	}
	b.calls.Add(1)
	b.entries.Add(int64(len(in.Entries)))
	n := 0
	for _, e := range in.Entries {
		n += len(*e.Source) + len(*e.DetailType) + len(*e.Detail)
	}
	b.bytes.Add(int64(n))
	return &eventbridge.PutEventsOutput{Entries: b.results[:len(in.Entries)]}, nil
}

// memS3 is an in-process S3: GetObject serves a byte slice or a generated
// stream; writes are drained and counted.
type memS3 struct {
	mu      sync.Mutex
	objects map[string]func() io.Reader
	written atomic.Int64
	puts    atomic.Int64
}

func (m *memS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	m.mu.Lock()
	open, ok := m.objects[*in.Key]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("NoSuchKey %s", *in.Key)
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(open())}, nil
}

// ListObjectsV2 lists nothing: a benchmark batch has no previous window.
func (m *memS3) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	return &s3.ListObjectsV2Output{}, nil
}

func (m *memS3) drain(r io.Reader) {
	n, _ := io.Copy(io.Discard, r)
	m.written.Add(n)
	m.puts.Add(1)
}

func (m *memS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	m.drain(in.Body)
	return &s3.PutObjectOutput{}, nil
}

func (m *memS3) CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	return &s3.CreateMultipartUploadOutput{UploadId: aws.String("u")}, nil
}

func (m *memS3) UploadPart(_ context.Context, in *s3.UploadPartInput, _ ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	m.drain(in.Body)
	return &s3.UploadPartOutput{ETag: aws.String("e")}, nil
}

func (m *memS3) CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	return &s3.CompleteMultipartUploadOutput{}, nil
}

func (m *memS3) AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	return &s3.AbortMultipartUploadOutput{}, nil
}

// benchWindow admits every generated and stamped line.
var benchWindow = envelope.Window{Since: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}

type benchFile struct {
	key, typ string
	body     []byte
}

// generatedFiles returns about size bytes of generated export lines per type
// in types, with one large (claim-checked) resource every 2,000 lines.
func generatedFiles(tb testing.TB, size int64, typs ...string) []benchFile {
	tb.Helper()
	var files []benchFile
	for i, typ := range typs {
		body, err := io.ReadAll(gen.NewStream(gen.StreamSpec{Seed: int64(i + 1), Bytes: size, Types: []string{typ}, LargeEvery: 2000, LargeSize: 300 << 10}))
		if err != nil {
			tb.Fatalf("generate %s: %v", typ, err)
		}
		files = append(files, benchFile{key: "exports/gen/" + typ + "/" + typ + "-1-1-0.ndjson", typ: typ, body: body})
	}
	return files
}

func syntheaFilesForBench(tb testing.TB) []benchFile {
	exp := syntheaExport(tb)
	var files []benchFile
	for typ, body := range exp {
		files = append(files, benchFile{key: "exports/synthea/" + typ + "/" + typ + "-1-1-0.ndjson", typ: typ, body: body})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].key < files[j].key })
	return files
}

// jsonValidSeconds times json.Valid over every line of files, n times.
func jsonValidSeconds(tb testing.TB, files []benchFile, n int) float64 {
	start := time.Now()
	for i := 0; i < n; i++ {
		for _, f := range files {
			rest := f.body
			for len(rest) > 0 {
				line := rest
				if j := bytes.IndexByte(rest, '\n'); j >= 0 {
					line, rest = rest[:j], rest[j+1:]
				} else {
					rest = nil
				}
				if len(line) > 0 && !json.Valid(line) {
					tb.Fatalf("%s: a line is not valid JSON", f.key)
				}
			}
		}
	}
	return time.Since(start).Seconds()
}

// benchHandler runs files through the handler, one invocation per file or,
// batched, all files in one invocation (one manifest batch).
func benchHandler(b *testing.B, files []benchFile, overHTTP, batched bool) {
	ctx := context.Background()
	bus := newCountingBus()
	var s3c prepare.S3API
	if overHTTP {
		env := localawstest.Start(b)
		c := s3.NewFromConfig(env.Config(), func(o *s3.Options) { o.UsePathStyle = true })
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(f.key), Body: bytes.NewReader(f.body)}); err != nil {
				b.Fatal(err)
			}
		}
		s3c = c
	} else {
		m := &memS3{objects: map[string]func() io.Reader{}}
		for _, f := range files {
			body := f.body
			m.objects[f.key] = func() io.Reader { return bytes.NewReader(body) }
		}
		s3c = m
	}
	h, err := prepare.New(s3c, bus, prepare.Config{Bucket: bucket, Validation: fhir.ValidateJSON, Publish: publish.Config{EventBus: "bench-bus"}})
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, f := range files {
		total += int64(len(f.body))
	}
	b.SetBytes(total)
	var nEvents, claims, minCalls int64
	var handlerSec, validSec, handlerCPU, validCPU float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The handler and json.Valid alternate, so background load on the
		// shared machine weighs on both alike.
		start, cpu0 := time.Now(), cpuSeconds()
		var inputs []prepare.Input
		if batched {
			in := prepare.Input{Window: benchWindow, Export: benchExport, RunID: "bench"}
			for _, f := range files {
				in.Files = append(in.Files, manifest.File{Bucket: bucket, Key: f.key, ResourceType: f.typ})
			}
			inputs = append(inputs, in)
		} else {
			for _, f := range files {
				inputs = append(inputs, prepare.Input{Files: []manifest.File{{Bucket: bucket, Key: f.key, ResourceType: f.typ}}, Window: benchWindow,
					Export: benchExport, RunID: "bench"})
			}
		}
		for _, in := range inputs {
			out, err := h.Handle(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			if out.Quarantined != 0 || out.Events != out.Lines {
				b.Fatalf("%+v", out)
			}
			nEvents += out.Events
			claims += out.ClaimChecked
			minCalls += (out.Events + 9) / 10
		}
		handlerSec += time.Since(start).Seconds()
		handlerCPU += cpuSeconds() - cpu0
		b.StopTimer()
		cpu0 = cpuSeconds()
		validSec += jsonValidSeconds(b, files, 1)
		validCPU += cpuSeconds() - cpu0
		b.StartTimer()
	}
	b.StopTimer()
	mb := float64(total) * float64(b.N) / 1e6
	b.ReportMetric(mb/validSec, "json.Valid-MB/s")
	b.ReportMetric(100*validSec/handlerSec, "pct-of-json.Valid")
	b.ReportMetric(mb/handlerCPU, "cpu-MB/s")
	b.ReportMetric(mb/validCPU, "json.Valid-cpu-MB/s")
	b.ReportMetric(100*validCPU/handlerCPU, "pct-of-json.Valid-cpu")
	b.ReportMetric(float64(bus.calls.Load())*1000/float64(nEvents), "PutEvents-per-1000")
	b.ReportMetric(float64(bus.calls.Load()-minCalls)/float64(b.N), "PutEvents-over-minimum")
	b.ReportMetric(float64(nEvents)/float64(b.N), "events/op")
	b.ReportMetric(float64(claims)/float64(b.N), "claim-checks/op")
}

var benchExport = envelope.ExportRef{DatastoreID: "bench-ds", JobID: "bench-job"}

func BenchmarkHandler(b *testing.B) {
	synthea := syntheaFilesForBench(b)
	generated := generatedFiles(b, 16<<20, "Observation", "Patient", "DocumentReference")
	for _, data := range []struct {
		name    string
		files   []benchFile
		batched bool
	}{{"synthea", synthea, false}, {"synthea-batch", synthea, true}, {"generated", generated, false}, {"generated-batch", generated, true}} {
		for _, src := range []struct {
			name string
			http bool
		}{{"s3-http", true}, {"in-process", false}} {
			b.Run(data.name+"/"+src.name, func(b *testing.B) { benchHandler(b, data.files, src.http, data.batched) })
		}
	}
}

// cpuSeconds returns the user and system CPU time of the process so far:
// on a shared, loaded machine it measures work per core better than the wall clock.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// heapSampler records the peak of live heap objects while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func startHeapSampler() *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) Stop() uint64 {
	close(s.stop)
	<-s.done
	return s.peak.Load()
}

// BenchmarkPeakHeap1GB streams a generated 1 GB export file (generated while
// it is read, through an in-process S3 getter) through the handler and
// reports the peak heap, the largest line and the budget 64 MB + largest line.
func BenchmarkPeakHeap1GB(b *testing.B) {
	ctx := context.Background()
	size := int64(1 << 30)
	if s := os.Getenv("CDC_BENCH_STREAM_BYTES"); s != "" {
		size, _ = strconv.ParseInt(s, 10, 64)
	}
	for i := 0; i < b.N; i++ {
		bus := newCountingBus()
		var stream *gen.Stream
		m := &memS3{objects: map[string]func() io.Reader{
			"exports/gen/Observation-1-1-0.ndjson": func() io.Reader {
				stream = gen.NewStream(gen.StreamSpec{Seed: 7, Bytes: size, Types: []string{"Observation"}, LargeEvery: 5000, LargeSize: 2 << 20})
				return stream
			},
		}}
		h, err := prepare.New(m, bus, prepare.Config{Bucket: bucket, Validation: fhir.ValidateJSON, Publish: publish.Config{EventBus: "bench-bus"}})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		sampler := startHeapSampler()
		start, cpu0 := time.Now(), cpuSeconds()
		out, err := h.Handle(ctx, prepare.Input{Files: []manifest.File{{Bucket: bucket, Key: "exports/gen/Observation-1-1-0.ndjson", ResourceType: "Observation"}},
			Window: benchWindow, Export: benchExport, RunID: "bench"})
		elapsed, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
		peak := sampler.Stop()
		if err != nil {
			b.Fatal(err)
		}
		if out.Events != out.Lines || out.Bytes < size {
			b.Fatalf("summary %+v", out)
		}
		maxLine := float64(stream.MaxLine()) / 1e6
		b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
		b.ReportMetric(maxLine, "largest-line-MB")
		b.ReportMetric(64*1.048576+maxLine, "budget-MB")
		b.ReportMetric(float64(out.Bytes)/1e6/elapsed, "MB/s")
		b.ReportMetric(float64(out.Bytes)/1e6/cpu, "cpu-MB/s")
		b.ReportMetric(float64(bus.calls.Load())*1000/float64(out.Events), "PutEvents-per-1000")
		b.ReportMetric(float64(out.ClaimChecked), "claim-checks")
		if float64(peak)/1e6 > 64*1.048576+maxLine {
			b.Errorf("peak heap %.1f MB over the budget of 64 MiB + largest line (%.1f MB)", float64(peak)/1e6, maxLine)
		}
	}
}
