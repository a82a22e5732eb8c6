package fakehealthlake_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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
