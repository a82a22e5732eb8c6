package localaws

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The per-call latency model (docs/LOCAL.md, "Latency model"). Every
// emulator answers in microseconds, which hides how close a Lambda comes to
// its timeout; the model makes each call cost what it costs in AWS. The
// gateway sleeps a sampled latency before it answers a request (so every
// SDK call of every Lambda pays it); the stack applies the "lambda" Invoke
// and "states" transition entries outside the gateway. Under
// testing/synctest the sleep advances virtual time and costs no wall time.

// Latency model service keys that are not SigV4 signing names.
const (
	// LatencyAny is the service key whose "default" applies to a service
	// the table does not name.
	LatencyAny = "*"
	// LatencyDefault is the operation key of a service's default.
	LatencyDefault = "default"
	// OpInvoke is the "lambda" operation of an in-process invocation's
	// overhead (before the handler runs; not part of its duration).
	OpInvoke = "Invoke"
	// OpStateTransition and OpExpressStateTransition are the "states"
	// operations of one state transition of a STANDARD and an EXPRESS
	// execution in the interpreter.
	OpStateTransition        = "StateTransition"
	OpExpressStateTransition = "ExpressStateTransition"
)

// Distribution is one operation's latency: a fixed value, or a lognormal
// given by its median and 99th percentile, capped at Max (default 4 × P99).
//
// In JSON: "off" or "0s" (none), a duration string ("25ms", fixed),
// {"fixed": "25ms"}, or {"p50": "25ms", "p99": "150ms", "max": "1s"}.
type Distribution struct {
	Fixed time.Duration
	P50   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// Fixed returns a fixed distribution.
func Fixed(d time.Duration) Distribution { return Distribution{Fixed: d} }

// LogNormal returns a lognormal distribution with the given median and 99th
// percentile.
func LogNormal(p50, p99 time.Duration) Distribution { return Distribution{P50: p50, P99: p99} }

// Zero reports whether the distribution never delays.
func (d Distribution) Zero() bool { return d.Fixed <= 0 && d.P50 <= 0 }

// Check reports what is wrong with the distribution.
func (d Distribution) Check() error {
	switch {
	case d.Fixed < 0 || d.P50 < 0 || d.P99 < 0 || d.Max < 0:
		return errors.New("durations must not be negative")
	case d.Fixed > 0 && (d.P50 > 0 || d.P99 > 0):
		return errors.New("give either fixed or p50 and p99, not both")
	case d.P50 > 0 && d.P99 < d.P50:
		return fmt.Errorf("p99 %s is below p50 %s", d.P99, d.P50)
	case d.P50 == 0 && d.P99 > 0:
		return errors.New("p99 without p50")
	}
	return nil
}

// String renders the distribution as the docs' table does.
func (d Distribution) String() string {
	switch {
	case d.Zero():
		return "0"
	case d.Fixed > 0:
		return d.Fixed.String()
	}
	s := "p50 " + d.P50.String() + ", p99 " + d.P99.String()
	if d.Max > 0 {
		s += ", max " + d.Max.String()
	}
	return s
}

type distributionJSON struct {
	Fixed string `json:"fixed,omitempty"`
	P50   string `json:"p50,omitempty"`
	P99   string `json:"p99,omitempty"`
	Max   string `json:"max,omitempty"`
}

// MarshalJSON writes a duration string for a fixed value, else the object.
func (d Distribution) MarshalJSON() ([]byte, error) {
	switch {
	case d.Zero():
		return json.Marshal("0s")
	case d.Fixed > 0:
		return json.Marshal(d.Fixed.String())
	}
	j := distributionJSON{P50: d.P50.String(), P99: d.P99.String()}
	if d.Max > 0 {
		j.Max = d.Max.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads any of the forms Distribution documents.
func (d *Distribution) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if s == "off" {
			*d = Distribution{}
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("latency %q: %w", s, err)
		}
		*d = Distribution{Fixed: v}
		return d.Check()
	}
	var j distributionJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("latency %s: want a duration string or {fixed} or {p50, p99[, max]}: %w", b, err)
	}
	var out Distribution
	for _, f := range []struct {
		s   string
		dst *time.Duration
	}{{j.Fixed, &out.Fixed}, {j.P50, &out.P50}, {j.P99, &out.P99}, {j.Max, &out.Max}} {
		if f.s == "" {
			continue
		}
		v, err := time.ParseDuration(f.s)
		if err != nil {
			return fmt.Errorf("latency %s: %w", b, err)
		}
		*f.dst = v
	}
	if err := out.Check(); err != nil {
		return fmt.Errorf("latency %s: %w", b, err)
	}
	*d = out
	return nil
}

// LatencyConfig is the latency table: service → operation → distribution,
// each service's "default" applying to its operations not named, and the
// "*" service's "default" to services not named. Seed fixes the samples.
//
// In JSON the whole config may also be the string "off".
type LatencyConfig struct {
	Off      bool                               `json:"off,omitempty"`
	Seed     uint64                             `json:"seed,omitempty"`
	Services map[string]map[string]Distribution `json:"services,omitempty"`
}

// UnmarshalJSON reads "off" or the object (unknown fields refused).
func (c *LatencyConfig) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == `"off"` {
		*c = LatencyConfig{Off: true}
		return nil
	}
	type plain LatencyConfig
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("latency model: %w", err)
	}
	*c = LatencyConfig(p)
	return nil
}

// Lookup returns the distribution of an operation: its own entry, else its
// service's default, else the "*" default.
func (c LatencyConfig) Lookup(service, op string) Distribution {
	if ops, ok := c.Services[service]; ok {
		if d, ok := ops[op]; ok {
			return d
		}
		if d, ok := ops[LatencyDefault]; ok {
			return d
		}
	}
	return c.Services[LatencyAny][LatencyDefault]
}

// Merge returns c with every entry of o replacing c's (o's Off and a
// non-zero Seed win).
func (c LatencyConfig) Merge(o LatencyConfig) LatencyConfig {
	out := LatencyConfig{Off: c.Off || o.Off, Seed: c.Seed, Services: map[string]map[string]Distribution{}}
	if o.Seed != 0 {
		out.Seed = o.Seed
	}
	for _, src := range []LatencyConfig{c, o} {
		for svc, ops := range src.Services {
			if out.Services[svc] == nil {
				out.Services[svc] = map[string]Distribution{}
			}
			for op, d := range ops {
				out.Services[svc][op] = d
			}
		}
	}
	return out
}

// Check reports the first invalid distribution.
func (c LatencyConfig) Check() error {
	for _, svc := range sortedKeys(c.Services) {
		for _, op := range sortedKeys(c.Services[svc]) {
			if err := c.Services[svc][op].Check(); err != nil {
				return fmt.Errorf("latency %s %s: %w", svc, op, err)
			}
		}
	}
	return nil
}

// Rows lists the table as (service, operation, distribution), sorted.
func (c LatencyConfig) Rows() [][3]string {
	var rows [][3]string
	for _, svc := range sortedKeys(c.Services) {
		for _, op := range sortedKeys(c.Services[svc]) {
			rows = append(rows, [3]string{svc, op, c.Services[svc][op].String()})
		}
	}
	return rows
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// LoadLatency reads a latency file: "off", or a LatencyConfig whose
// entries replace DefaultLatency's (docs/LOCAL.md). spec "off" needs no
// file; "" is the defaults.
func LoadLatency(spec string) (LatencyConfig, error) {
	switch spec {
	case "":
		return DefaultLatency(), nil
	case "off":
		return LatencyConfig{Off: true}, nil
	}
	b, err := os.ReadFile(spec)
	if err != nil {
		return LatencyConfig{}, fmt.Errorf("latency model: %w", err)
	}
	var c LatencyConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return LatencyConfig{}, fmt.Errorf("latency model %s: %w", spec, err)
	}
	if err := c.Check(); err != nil {
		return LatencyConfig{}, fmt.Errorf("latency model %s: %w", spec, err)
	}
	return DefaultLatency().Merge(c), nil
}

// DefaultLatency is the model cdc-local and the simulator run with; the
// table and each value's source are in docs/LOCAL.md ("Latency model").
// Values AWS does not publish are modelled.
func DefaultLatency() LatencyConfig {
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	ln := func(p50, p99 float64) Distribution { return LogNormal(ms(p50), ms(p99)) }
	return LatencyConfig{Seed: 1, Services: map[string]map[string]Distribution{
		LatencyAny: {LatencyDefault: ln(20, 100)},
		// S3 Standard: small requests' medians are "in the tens of
		// milliseconds" (S3 performance whitepaper); S3 Express One Zone's
		// single-digit milliseconds are "up to 10x faster than S3 Standard".
		ServiceS3: {
			LatencyDefault: ln(30, 200), "GetObject": ln(25, 150), "HeadObject": ln(15, 100),
			"PutObject": ln(40, 250), "CopyObject": ln(60, 400), "DeleteObject": ln(20, 120),
			"ListObjectsV2": ln(35, 250), "ListObjects": ln(35, 250),
			"CreateMultipartUpload": ln(30, 150), "UploadPart": ln(60, 400),
			"CompleteMultipartUpload": ln(80, 500), "AbortMultipartUpload": ln(25, 150),
		},
		// DynamoDB: "single-digit millisecond performance at any scale";
		// a transaction does two underlying reads or writes per item.
		ServiceDynamoDB: {
			LatencyDefault: ln(5, 20), "Query": ln(6, 25), "Scan": ln(10, 50),
			"TransactWriteItems": ln(12, 45), "TransactGetItems": ln(8, 30),
			"BatchWriteItem": ln(10, 40), "BatchGetItem": ln(8, 30),
		},
		// SQS: modelled (tens of milliseconds; AWS publishes no figure).
		ServiceSQS: {
			LatencyDefault: ln(15, 80), "SendMessage": ln(15, 80), "SendMessageBatch": ln(20, 100),
			"ReceiveMessage": ln(15, 80), "DeleteMessage": ln(12, 60), "DeleteMessageBatch": ln(15, 80),
		},
		// EventBridge: modelled; an AWS case study reports 80 ms p90 end to
		// end (PutEvents to target) for a production bus.
		ServiceEventBridge: {LatencyDefault: ln(20, 100), "PutEvents": ln(25, 120)},
		// Step Functions: API calls and per-state overhead, modelled.
		ServiceSFN: {
			LatencyDefault: ln(25, 120), "StartExecution": ln(30, 150),
			OpStateTransition: ln(20, 80), OpExpressStateTransition: ln(5, 25),
		},
		// Lambda: warm synchronous invoke overhead, modelled (cold starts
		// are not modelled).
		ServiceLambda: {LatencyDefault: ln(15, 80), OpInvoke: ln(10, 60)},
		// HealthLake: modelled (AWS publishes no latency).
		ServiceHealthLake: {
			LatencyDefault: ln(100, 500),
			"ReadResource": ln(60, 300), "VReadResource": ln(60, 300),
			"ReadHistory":   ln(150, 800),
			"SearchWithGet": ln(200, 1200), "SearchWithPost": ln(200, 1200),
			"CreateResource": ln(100, 500), "UpdateResource": ln(100, 500), "DeleteResource": ln(100, 500),
			"StartFHIRExportJob": ln(400, 2000), "DescribeFHIRExportJob": ln(100, 500),
			"CancelFHIRExportJob": ln(150, 700), "StartFHIRBulkDeleteJob": ln(400, 2000),
			"DescribeFHIRBulkDeleteJob": ln(100, 500), "Erase": ln(150, 700),
		},
	}}
}

// LatencyModel samples the configured latencies. The n-th sample of an
// operation is a pure function of (seed, service, operation, n), so a seed
// fixes each operation's sequence of latencies whatever the goroutine
// interleaving (as local/faults fixes its decisions). Safe for concurrent
// use.
type LatencyModel struct {
	cfg    LatencyConfig
	exempt map[string]bool // access key ids whose calls are not delayed
	mu     sync.RWMutex
	ops    map[string]*opLatency
	total  atomic.Int64 // nanoseconds sampled
	calls  atomic.Int64
}

type opLatency struct {
	dist      Distribution
	mu, sigma float64 // lognormal parameters, in nanoseconds
	max       float64
	key       uint64
	n         atomic.Uint64
}

// NewLatencyModel checks cfg and returns its model; nil when cfg is Off.
func NewLatencyModel(cfg LatencyConfig) (*LatencyModel, error) {
	if cfg.Off {
		return nil, nil
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	return &LatencyModel{cfg: cfg, ops: map[string]*opLatency{}}, nil
}

// Exempt makes the gateway answer calls signed with these access key ids
// at once: the emulators' own calls as AWS services (HealthLake writing an
// export, whose time its export model gives; EventBridge delivering to a
// queue) and the local stack's setup and observers. Call it before the
// model is installed.
func (m *LatencyModel) Exempt(accessKeyIDs ...string) {
	if m.exempt == nil {
		m.exempt = map[string]bool{}
	}
	for _, k := range accessKeyIDs {
		m.exempt[k] = true
	}
}

// Delays reports whether the gateway delays a call signed with accessKeyID.
func (m *LatencyModel) Delays(accessKeyID string) bool { return m != nil && !m.exempt[accessKeyID] }

// Config returns the model's table.
func (m *LatencyModel) Config() LatencyConfig { return m.cfg }

// z99 is the standard normal quantile of 0.99.
const z99 = 2.3263478740408408

func (m *LatencyModel) op(service, op string) *opLatency {
	key := service + ":" + op
	m.mu.RLock()
	o := m.ops[key]
	m.mu.RUnlock()
	if o != nil {
		return o
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if o = m.ops[key]; o != nil {
		return o
	}
	d := m.cfg.Lookup(service, op)
	h := fnv.New64a()
	_, _ = io.WriteString(h, key)
	o = &opLatency{dist: d, key: h.Sum64() ^ splitmix(m.cfg.Seed)}
	if d.Fixed <= 0 && d.P50 > 0 {
		o.mu = math.Log(float64(d.P50))
		o.sigma = math.Log(float64(d.P99)/float64(d.P50)) / z99
		o.max = float64(d.Max)
		if o.max <= 0 {
			o.max = 4 * float64(d.P99)
		}
	}
	m.ops[key] = o
	return o
}

// Sample returns the latency of the next call of service's operation.
func (m *LatencyModel) Sample(service, op string) time.Duration {
	if m == nil {
		return 0
	}
	o := m.op(service, op)
	var d time.Duration
	switch {
	case o.dist.Zero():
		return 0
	case o.dist.Fixed > 0:
		d = o.dist.Fixed
	default:
		n := o.n.Add(1)
		u1 := unit(splitmix(o.key + n*0x9e3779b97f4a7c15))
		u2 := unit(splitmix(o.key ^ (n * 0xbf58476d1ce4e5b9)))
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		d = time.Duration(math.Min(math.Exp(o.mu+o.sigma*z), o.max))
	}
	m.calls.Add(1)
	m.total.Add(int64(d))
	return d
}

// Totals returns how many delays the model sampled and their sum.
func (m *LatencyModel) Totals() (calls int64, total time.Duration) {
	if m == nil {
		return 0, 0
	}
	return m.calls.Load(), time.Duration(m.total.Load())
}

// splitmix is SplitMix64's output function.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unit maps x to (0, 1).
func unit(x uint64) float64 { return (float64(x>>11) + 0.5) / (1 << 53) }

// Sleep waits d, or until done is closed (false then).
func Sleep(done <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// LatencyOperation names the API a request calls as the latency table does
// (the AWS API names): the X-Amz-Target operation for JSON protocols, the
// query protocol's Action for SQS, S3's REST shapes (GetObject, PutObject,
// UploadPart, ListObjectsV2, …) and HealthLake's FHIR REST (ReadResource,
// VReadResource, ReadHistory, SearchWithGet, StartFHIRExportJob,
// DescribeFHIRExportJob, …).
func LatencyOperation(service string, r *http.Request) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	switch service {
	case ServiceS3:
		return s3Operation(r)
	case ServiceHealthLake:
		return HealthLakeOperation(r)
	case ServiceSQS:
		if a := r.URL.Query().Get("Action"); a != "" {
			return a
		}
		if r.Body != nil && strings.Contains(r.Header.Get("Content-Type"), "x-www-form-urlencoded") {
			body, err := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if err == nil {
				if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") != "" {
					return form.Get("Action")
				}
			}
		}
	}
	return r.Method
}

// s3Operation maps a path-style S3 request to its API name.
func s3Operation(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if path == "" {
		return "ListBuckets"
	}
	q := r.URL.Query()
	has := func(name string) bool { _, ok := q[name]; return ok }
	_, key, hasKey := strings.Cut(path, "/")
	if !hasKey || key == "" {
		switch r.Method {
		case http.MethodGet:
			switch {
			case has("uploads"):
				return "ListMultipartUploads"
			case has("versions"):
				return "ListObjectVersions"
			case has("location"):
				return "GetBucketLocation"
			case q.Get("list-type") == "2":
				return "ListObjectsV2"
			}
			return "ListObjects"
		case http.MethodHead:
			return "HeadBucket"
		case http.MethodPut:
			return "CreateBucket"
		case http.MethodDelete:
			return "DeleteBucket"
		case http.MethodPost:
			if has("delete") {
				return "DeleteObjects"
			}
		}
		return r.Method + "Bucket"
	}
	copySrc := r.Header.Get("X-Amz-Copy-Source") != ""
	switch r.Method {
	case http.MethodGet:
		if has("uploadId") {
			return "ListParts"
		}
		return "GetObject"
	case http.MethodHead:
		return "HeadObject"
	case http.MethodPut:
		switch {
		case has("uploadId") && copySrc:
			return "UploadPartCopy"
		case has("uploadId"):
			return "UploadPart"
		case copySrc:
			return "CopyObject"
		}
		return "PutObject"
	case http.MethodPost:
		if has("uploadId") {
			return "CompleteMultipartUpload"
		}
		return "CreateMultipartUpload"
	case http.MethodDelete:
		if has("uploadId") {
			return "AbortMultipartUpload"
		}
		return "DeleteObject"
	}
	return r.Method + "Object"
}

// HealthLakeOperation maps HealthLake's FHIR REST paths,
// /datastore/{id}/r4/…, to the operations of the latency table (the
// routes local/iam lists): a read, a history page (system, type or
// instance), a search page, a write, an export, bulk-delete or $erase job.
func HealthLakeOperation(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 3 || parts[0] != "datastore" {
		return "FHIR" + r.Method
	}
	rest := parts[3:]
	n := len(rest)
	last := ""
	if n > 0 {
		last = rest[n-1]
	}
	get, post := r.Method == http.MethodGet, r.Method == http.MethodPost
	switch {
	case last == "$export":
		return "StartFHIRExportJob"
	case n == 2 && rest[0] == "export":
		if r.Method == http.MethodDelete {
			return "CancelFHIRExportJob"
		}
		return "DescribeFHIRExportJob"
	case last == "$bulk-delete" && post:
		return "StartFHIRBulkDeleteJob"
	case n == 2 && rest[0] == "$bulk-delete":
		return "DescribeFHIRBulkDeleteJob"
	case last == "$erase" && post:
		return "Erase"
	case n == 2 && rest[0] == "$erase":
		return "DescribeErase"
	case last == "$everything":
		return "SearchEverything"
	case n == 1 && rest[0] == "metadata":
		return "GetCapabilities"
	case last == "_history" && get:
		return "ReadHistory"
	case n == 0 && post:
		return "ProcessBundle"
	case n <= 1 && get:
		return "SearchWithGet"
	case n == 2 && last == "_search" && post:
		return "SearchWithPost"
	case n == 1 && post:
		return "CreateResource"
	case n == 2 && get:
		return "ReadResource"
	case n == 2 && r.Method == http.MethodPut:
		return "UpdateResource"
	case n == 2 && r.Method == http.MethodPatch:
		return "PatchResource"
	case n == 2 && r.Method == http.MethodDelete:
		return "DeleteResource"
	case n == 4 && rest[2] == "_history" && get:
		return "VReadResource"
	}
	return "FHIR" + r.Method
}
