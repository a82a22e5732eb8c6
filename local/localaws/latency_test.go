package localaws

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestDistributionJSONForms(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Distribution
		ok   bool
	}{
		{`"25ms"`, Fixed(25 * time.Millisecond), true},
		{`"off"`, Distribution{}, true},
		{`"0s"`, Distribution{}, true},
		{`{"fixed":"1s"}`, Fixed(time.Second), true},
		{`{"p50":"10ms","p99":"90ms"}`, LogNormal(10*time.Millisecond, 90*time.Millisecond), true},
		{`{"p50":"10ms","p99":"90ms","max":"1s"}`, Distribution{P50: 10 * time.Millisecond, P99: 90 * time.Millisecond, Max: time.Second}, true},
		{`{"p50":"90ms","p99":"10ms"}`, Distribution{}, false},
		{`{"p99":"10ms"}`, Distribution{}, false},
		{`{"fixed":"1s","p50":"1ms","p99":"2ms"}`, Distribution{}, false},
		{`{"median":"1s"}`, Distribution{}, false},
		{`"-1s"`, Distribution{}, false},
		{`"soon"`, Distribution{}, false},
	} {
		var d Distribution
		err := json.Unmarshal([]byte(c.in), &d)
		if (err == nil) != c.ok || (c.ok && d != c.want) {
			t.Errorf("%s: %+v, %v; want %+v (ok %v)", c.in, d, err, c.want, c.ok)
			continue
		}
		if c.ok {
			b, _ := json.Marshal(d)
			var back Distribution
			if err := json.Unmarshal(b, &back); err != nil || back != d {
				t.Errorf("%s: round trip through %s gives %+v, %v", c.in, b, back, err)
			}
		}
	}
}

// A lognormal from p50 and p99 gives about those percentiles, never more
// than its cap, and the same sequence for the same seed.
func TestLogNormalSamplesMatchTheirPercentilesAndSeed(t *testing.T) {
	cfg := LatencyConfig{Seed: 7, Services: map[string]map[string]Distribution{
		"s3": {"GetObject": LogNormal(20*time.Millisecond, 100*time.Millisecond)},
	}}
	sample := func(seed uint64) []time.Duration {
		c := cfg
		c.Seed = seed
		m, err := NewLatencyModel(c)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]time.Duration, 20000)
		for i := range out {
			out[i] = m.Sample("s3", "GetObject")
		}
		return out
	}
	xs := sample(7)
	again := sample(7)
	other := sample(8)
	same, differ := true, false
	for i := range xs {
		same = same && xs[i] == again[i]
		differ = differ || xs[i] != other[i]
	}
	if !same || !differ {
		t.Errorf("seed 7 twice gives the same sequence: %v; seed 8 another: %v", same, differ)
	}
	sorted := append([]time.Duration(nil), xs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	p50, p99, top := sorted[len(sorted)/2], sorted[len(sorted)*99/100], sorted[len(sorted)-1]
	if p50 < 18*time.Millisecond || p50 > 22*time.Millisecond || p99 < 85*time.Millisecond || p99 > 115*time.Millisecond {
		t.Errorf("p50 %v, p99 %v; want about 20ms and 100ms", p50, p99)
	}
	if top > 400*time.Millisecond {
		t.Errorf("max %v exceeds the default cap 4 × p99", top)
	}
}

// The n-th sample of an operation does not depend on the other operations'
// samples or the goroutine interleaving.
func TestSamplesArePerOperationSequences(t *testing.T) {
	m1, _ := NewLatencyModel(DefaultLatency())
	m2, _ := NewLatencyModel(DefaultLatency())
	var a []time.Duration
	for range 100 {
		a = append(a, m1.Sample("dynamodb", "GetItem"))
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				m2.Sample("s3", "PutObject")
			}
		}()
	}
	var b []time.Duration
	for range 100 {
		b = append(b, m2.Sample("dynamodb", "GetItem"))
	}
	wg.Wait()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("GetItem sample %d: %v alone, %v beside other operations", i, a[i], b[i])
		}
	}
}

func TestLookupFallsBackToServiceThenAnyDefault(t *testing.T) {
	c := DefaultLatency()
	if d := c.Lookup("s3", "GetObject"); d != LogNormal(25*time.Millisecond, 150*time.Millisecond) {
		t.Errorf("s3 GetObject = %v", d)
	}
	if d := c.Lookup("s3", "GetBucketLocation"); d != c.Services["s3"][LatencyDefault] {
		t.Errorf("s3 GetBucketLocation = %v, want the s3 default", d)
	}
	if d := c.Lookup("kms", "Decrypt"); d != c.Services[LatencyAny][LatencyDefault] {
		t.Errorf("kms Decrypt = %v, want the * default", d)
	}
	m := c.Merge(LatencyConfig{Seed: 9, Services: map[string]map[string]Distribution{"s3": {"GetObject": Fixed(time.Second)}}})
	if m.Seed != 9 || m.Lookup("s3", "GetObject") != Fixed(time.Second) || m.Lookup("s3", "PutObject") != c.Lookup("s3", "PutObject") {
		t.Errorf("merge: seed %d, GetObject %v, PutObject %v", m.Seed, m.Lookup("s3", "GetObject"), m.Lookup("s3", "PutObject"))
	}
	if c.Services["s3"]["GetObject"] != LogNormal(25*time.Millisecond, 150*time.Millisecond) {
		t.Error("Merge changed its receiver")
	}
	if err := c.Check(); err != nil {
		t.Errorf("the defaults do not check: %v", err)
	}
}

func TestLoadLatencyFileOffAndDefaults(t *testing.T) {
	if c, err := LoadLatency(""); err != nil || c.Off || len(c.Services) == 0 {
		t.Errorf(`"" = %+v, %v; want the defaults`, c.Off, err)
	}
	if c, err := LoadLatency("off"); err != nil || !c.Off {
		t.Errorf(`"off" = %+v, %v`, c, err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "l.json")
	if err := os.WriteFile(f, []byte(`{"seed": 3, "services": {"dynamodb": {"default": "50ms"}, "healthlake": {"ReadHistory": {"p50": "1s", "p99": "5s"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadLatency(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 3 || c.Lookup("dynamodb", "GetItem") != Fixed(50*time.Millisecond) || c.Lookup("dynamodb", "Query") != DefaultLatency().Lookup("dynamodb", "Query") ||
		c.Lookup("healthlake", "ReadHistory") != LogNormal(time.Second, 5*time.Second) || c.Lookup("s3", "GetObject") != DefaultLatency().Lookup("s3", "GetObject") {
		t.Errorf("merged file: %+v", c.Rows())
	}
	if err := os.WriteFile(f, []byte(`"off"`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err := LoadLatency(f); err != nil || !c.Off {
		t.Errorf(`file "off" = %v, %v`, c.Off, err)
	}
	for _, bad := range []string{`{"services": {"s3": {"GetObject": {"p50": "2s", "p99": "1s"}}}}`, `{"service": {}}`, `[`} {
		if err := os.WriteFile(f, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadLatency(f); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if _, err := LoadLatency(filepath.Join(dir, "none.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

func TestLatencyOperationNamesTheAPI(t *testing.T) {
	req := func(method, target string, hdr ...string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Set(hdr[i], hdr[i+1])
		}
		return r
	}
	for _, c := range []struct {
		service string
		r       *http.Request
		want    string
	}{
		{ServiceDynamoDB, req("POST", "/", "X-Amz-Target", "DynamoDB_20120810.TransactWriteItems"), "TransactWriteItems"},
		{ServiceSQS, req("POST", "/", "X-Amz-Target", "AmazonSQS.ReceiveMessage"), "ReceiveMessage"},
		{ServiceEventBridge, req("POST", "/", "X-Amz-Target", "AWSEvents.PutEvents"), "PutEvents"},
		{ServiceSFN, req("POST", "/", "X-Amz-Target", "AWSStepFunctions.SendTaskSuccess"), "SendTaskSuccess"},
		{ServiceS3, req("GET", "/"), "ListBuckets"},
		{ServiceS3, req("GET", "/b?list-type=2&prefix=x"), "ListObjectsV2"},
		{ServiceS3, req("GET", "/b"), "ListObjects"},
		{ServiceS3, req("HEAD", "/b"), "HeadBucket"},
		{ServiceS3, req("POST", "/b?delete"), "DeleteObjects"},
		{ServiceS3, req("GET", "/b/k/1.ndjson"), "GetObject"},
		{ServiceS3, req("HEAD", "/b/k"), "HeadObject"},
		{ServiceS3, req("PUT", "/b/k"), "PutObject"},
		{ServiceS3, req("PUT", "/b/k", "X-Amz-Copy-Source", "/b/j"), "CopyObject"},
		{ServiceS3, req("POST", "/b/k?uploads"), "CreateMultipartUpload"},
		{ServiceS3, req("PUT", "/b/k?partNumber=1&uploadId=u"), "UploadPart"},
		{ServiceS3, req("POST", "/b/k?uploadId=u"), "CompleteMultipartUpload"},
		{ServiceS3, req("DELETE", "/b/k?uploadId=u"), "AbortMultipartUpload"},
		{ServiceS3, req("DELETE", "/b/k"), "DeleteObject"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/$export"), "StartFHIRExportJob"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/export/j1"), "DescribeFHIRExportJob"},
		{ServiceHealthLake, req("DELETE", "/datastore/ds/r4/export/j1"), "CancelFHIRExportJob"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient/p1"), "ReadResource"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient/p1/_history?_count=50"), "ReadHistory"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient/p1/_history/3"), "VReadResource"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient?_count=100"), "SearchWithGet"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/Patient/_search"), "SearchWithPost"},
		{ServiceHealthLake, req("PUT", "/datastore/ds/r4/Patient/p1"), "UpdateResource"},
		{ServiceHealthLake, req("DELETE", "/datastore/ds/r4/Patient/p1"), "DeleteResource"},
		{ServiceHealthLake, req("POST", "/", "X-Amz-Target", "HealthLake.DescribeFHIRExportJob"), "DescribeFHIRExportJob"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/_history?_since=x"), "ReadHistory"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient/_history"), "ReadHistory"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/metadata"), "GetCapabilities"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/"), "ProcessBundle"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/Patient/$bulk-delete"), "StartFHIRBulkDeleteJob"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/$bulk-delete/j2"), "DescribeFHIRBulkDeleteJob"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/Patient/p1/$erase"), "Erase"},
		{ServiceHealthLake, req("POST", "/datastore/ds/r4/Patient/p1/_history/2/$erase"), "Erase"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/$erase/j3"), "DescribeErase"},
		{ServiceHealthLake, req("GET", "/datastore/ds/r4/Patient/p1/$everything"), "SearchEverything"},
		{ServiceHealthLake, req("PATCH", "/datastore/ds/r4/Patient/p1"), "PatchResource"},
	} {
		if got := LatencyOperation(c.service, c.r); got != c.want {
			t.Errorf("%s %s %s: %q, want %q", c.service, c.r.Method, c.r.URL, got, c.want)
		}
	}
	// The SQS query protocol names its action in the form; the body is kept.
	r := httptest.NewRequest("POST", "/", strings.NewReader("Action=SendMessage&QueueUrl=q&MessageBody=hi"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if got := LatencyOperation(ServiceSQS, r); got != "SendMessage" {
		t.Errorf("query protocol: %q", got)
	}
	if b, _ := io.ReadAll(r.Body); string(b) != "Action=SendMessage&QueueUrl=q&MessageBody=hi" {
		t.Errorf("body after: %q", b)
	}
}

// Behind the gateway every call waits its sampled latency before it is
// answered: inside a bubble the virtual clock shows exactly the fixed
// latency, and no wall time passes.
func TestGatewayDelaysEveryCallByItsModelledLatency(t *testing.T) {
	began := time.Now()
	synctest.Test(t, func(t *testing.T) {
		g := NewGateway()
		g.Handle(ServiceSQS, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
		m, err := NewLatencyModel(LatencyConfig{Services: map[string]map[string]Distribution{
			ServiceSQS: {LatencyDefault: Fixed(time.Second), "SendMessage": Fixed(3 * time.Hour)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		call := func(op string) time.Duration {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=x")
			r.Header.Set("X-Amz-Target", "AmazonSQS."+op)
			w := httptest.NewRecorder()
			start := time.Now()
			g.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%s answered %d", op, w.Code)
			}
			return time.Since(start)
		}
		if d := call("ReceiveMessage"); d != 0 {
			t.Errorf("without a model ReceiveMessage took %v", d)
		}
		g.SetLatency(m)
		if d := call("ReceiveMessage"); d != time.Second {
			t.Errorf("ReceiveMessage took %v, want the sqs default 1s", d)
		}
		if d := call("SendMessage"); d != 3*time.Hour {
			t.Errorf("SendMessage took %v, want 3h", d)
		}
		if n, total := g.Latency().Totals(); n != 2 || total != 3*time.Hour+time.Second {
			t.Errorf("totals %d, %v", n, total)
		}
	})
	if wall := time.Since(began); wall > 10*time.Second {
		t.Errorf("a bubble's 3 h of latency took %v of wall time", wall)
	}
}
