package fakehealthlake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
)

// discardS3 accepts every PutObject and keeps nothing.
type discardS3 struct{ puts int }

func (d *discardS3) PutObject(_ context.Context, _ *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	d.puts++
	return &s3.PutObjectOutput{}, nil
}

// benchEmulator is an emulator without SigV4 or S3, on a settable clock.
func benchEmulator(b testing.TB, mutate func(*fakehealthlake.Options)) (*fakehealthlake.Emulator, *fakehealthlake.Datastore, *clock) {
	b.Helper()
	clk := &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	opts := fakehealthlake.Options{SkipAuth: true, S3: &discardS3{}, Datastores: []string{"ds1"}, Now: clk.Now}
	if mutate != nil {
		mutate(&opts)
	}
	e := fakehealthlake.New(opts)
	ds, _ := e.Datastore("ds1")
	return e, ds, clk
}

// benchStart starts an export through the REST API and returns its job id.
func benchStart(b testing.TB, e *fakehealthlake.Emulator, query string) string {
	b.Helper()
	body := `{"JobName":"j","OutputDataConfig":{"S3Configuration":{"S3Uri":"s3://bucket/out"}},"DataAccessRoleArn":"arn:aws:iam::1:role/r"}`
	req := httptest.NewRequest(http.MethodPost, "/datastore/ds1/r4/$export"+query, strings.NewReader(body))
	req.Header.Set("Prefer", "respond-async")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		b.Fatalf("start export = %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// BenchmarkTick is one Tick with nothing due, after 300 finished jobs.
func BenchmarkTick(b *testing.B) {
	e, _, _ := benchEmulator(b, nil)
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		benchStart(b, e, "")
		if err := e.RunJobs(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.Tick(ctx)
	}
}

// BenchmarkSinceExport is one `_since` export (start, duration model, files)
// of a data store of 100,000 resources, 1 % of which changed since.
func BenchmarkSinceExport(b *testing.B) {
	const n = 100_000
	e, ds, clk := benchEmulator(b, func(o *fakehealthlake.Options) {
		o.ExportStartup, o.ExportPerMB = time.Millisecond, time.Millisecond
	})
	var since time.Time
	for i := 0; i < n; i++ {
		if i == n-n/100 {
			since = clk.Now()
		}
		id := "p" + strconv.Itoa(i)
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`","active":true}`)); err != nil {
			b.Fatal(err)
		}
		clk.Set(clk.Now().Add(time.Millisecond))
	}
	q := "?_since=" + since.Format(fakehealthlake.InstantLayout)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchStart(b, e, q)
		if err := e.RunJobs(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad is Datastore.Load of generated resources (one new resource
// per op, cycling through the generator's types), without and with
// ValidateOnLoad.
func BenchmarkLoad(b *testing.B) {
	for _, validate := range []bool{false, true} {
		b.Run("validate="+strconv.FormatBool(validate), func(b *testing.B) {
			g := gen.New(1)
			types := gen.Types()
			const pool = 1024
			bodies := make([][]byte, pool)
			for i := range bodies {
				body, err := g.AppendResource(nil, types[i%len(types)], gen.Options{ID: "x"})
				if err != nil {
					b.Fatal(err)
				}
				bodies[i] = body
			}
			_, ds, _ := benchEmulator(b, func(o *fakehealthlake.Options) { o.ValidateOnLoad = validate })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The same id "x" in every body: each op is an update of one
				// resource per type (a new version), so the store stays small.
				if _, err := ds.Load(types[i%pool%len(types)], "x", bodies[i%pool]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchGet serves GET path (relative to the data store base) and returns
// the answer's body.
func benchGet(b testing.TB, e *fakehealthlake.Emulator, path string, hdr map[string]string) []byte {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, "/datastore/ds1/r4/"+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s = %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// benchNext is the next link of a searchset Bundle.
func benchNext(b testing.TB, body []byte) string {
	b.Helper()
	var bundle struct {
		Link []struct{ Relation, URL string }
	}
	if err := json.Unmarshal(body, &bundle); err != nil {
		b.Fatal(err)
	}
	for _, l := range bundle.Link {
		if l.Relation == "next" {
			return l.URL
		}
	}
	b.Fatal("no next link")
	return ""
}

// BenchmarkSearch is search over 1,000,000 Patients (ten a millisecond,
// every tenth updated once, every hundredth deleted): counts of the whole
// type and of a range, pages at the start and in the middle of a range,
// an eventual count with a 250 ms lag (2,500 versions in the lag).
// FAKEHEALTHLAKE_SEARCH_BENCH_N changes the number of resources.
func BenchmarkSearch(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("FAKEHEALTHLAKE_SEARCH_BENCH_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			b.Fatalf("FAKEHEALTHLAKE_SEARCH_BENCH_N=%q: want a number of at least 1000", s)
		}
	}
	e, ds, clk := benchEmulator(b, nil)
	t0 := clk.Now()
	began := time.Now()
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			clk.Set(clk.Now().Add(time.Millisecond))
		}
		id := "p" + strconv.Itoa(i)
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`","active":true}`)); err != nil {
			b.Fatal(err)
		}
		switch {
		case i%100 == 50:
			ds.Delete("Patient", "p"+strconv.Itoa(i/2))
		case i%10 == 5:
			old := "p" + strconv.Itoa(i/2)
			if _, err := ds.Load("Patient", old, []byte(`{"resourceType":"Patient","id":"`+old+`"}`)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("loaded %d resources (+ updates and deletions) in %v", n, time.Since(began))
	at := func(ms int) string {
		return t0.Add(time.Duration(ms) * time.Millisecond).Format(fakehealthlake.InstantLayout)
	}
	rng := "_lastUpdated=ge" + at(n/40) + "&_lastUpdated=lt" + at(n/40*3)
	strong := map[string]string{fakehealthlake.HistoryConsistencyHeader: "strong"}
	mid := benchNext(b, benchGet(b, e, "Patient?_count=100&"+rng, nil))
	for _, c := range []struct {
		name, path string
		hdr        map[string]string
	}{
		{"count-all", "Patient?_summary=count", nil},
		{"count-range", "Patient?_summary=count&" + rng, nil},
		{"page100-first", "Patient?_count=100&" + rng, nil},
		{"page100-next", mid, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				benchGet(b, e, c.path, c.hdr)
			}
		})
	}
	e.SetHistoryLag(250 * time.Millisecond)
	b.Run("count-all-eventual-250ms-lag", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			benchGet(b, e, "Patient?_summary=count", nil)
		}
	})
	b.Run("count-all-strong", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			benchGet(b, e, "Patient?_summary=count", strong)
		}
	})
}

// BenchmarkSearchOneMillisecond is the worst case of the id order: 1,000,000
// Patients written in one millisecond (a frozen clock). Each op writes one
// more into that millisecond and reads a page from its middle, which merges
// the new resource into the millisecond's cached id order.
func BenchmarkSearchOneMillisecond(b *testing.B) {
	const n = 1_000_000
	e, ds, _ := benchEmulator(b, nil)
	load := func(id string) {
		if _, err := ds.Load("Patient", id, []byte(`{"resourceType":"Patient","id":"`+id+`"}`)); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		load("p" + strconv.Itoa(i))
	}
	began := time.Now()
	mid := benchNext(b, benchGet(b, e, "Patient?_count=100", nil))
	b.Logf("first page (sorts the millisecond): %v", time.Since(began))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		load("q" + strconv.Itoa(i))
		benchGet(b, e, mid, nil)
	}
}
