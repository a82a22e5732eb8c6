package faults

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func sequence(p *Plan, k Kind, key string, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = p.Roll(k, key)
	}
	return out
}

func TestSameSeedSameSequenceWhateverTheInterleaving(t *testing.T) {
	a, _ := New(0.3, 42)
	b, _ := New(0.3, 42)
	// b is asked about another key in between, from other goroutines:
	// a key's sequence must not change.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sequence(b, CrashAfter, "other", 100)
		}()
	}
	sa := sequence(a, CrashBefore, "fn", 500)
	sb := sequence(b, CrashBefore, "fn", 500)
	wg.Wait()
	for i := range sa {
		if sa[i] != sb[i] {
			t.Fatalf("sequences differ at %d", i)
		}
	}
	c, _ := New(0.3, 43)
	sc := sequence(c, CrashBefore, "fn", 500)
	same := 0
	for i := range sa {
		if sa[i] == sc[i] {
			same++
		}
	}
	if same == len(sa) {
		t.Error("another seed gave the same sequence")
	}
}

func TestRateTimesWeightIsTheObservedFrequency(t *testing.T) {
	p, _ := New(0.2, 7)
	const n = 20000
	hits := 0
	for _, h := range sequence(p, DuplicateDelivery, "q", n) {
		if h {
			hits++
		}
	}
	if got := float64(hits) / n; math.Abs(got-0.2) > 0.02 {
		t.Errorf("frequency %.3f, want about 0.2", got)
	}
	if p.Injected()[DuplicateDelivery] != int64(hits) {
		t.Errorf("injected = %v, hits %d", p.Injected(), hits)
	}
	p.SetWeight(DuplicateDelivery, 0)
	for _, h := range sequence(p, DuplicateDelivery, "q", 1000) {
		if h {
			t.Fatal("weight 0 still injects")
		}
	}
	zero, _ := New(0, 1)
	if zero.Roll(CrashBefore, "f") || zero.GatewayInjector() == nil {
		t.Error("rate 0 injected")
	}
}

func TestNewRejectsBadRates(t *testing.T) {
	for _, r := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := New(r, 1); err == nil {
			t.Errorf("rate %v accepted", r)
		}
	}
}

type jobs struct{ failed, errs int }

func (j *jobs) FailNextJob(string)               { j.failed++ }
func (j *jobs) CompleteNextJobWithErrors(string) { j.errs++ }

func TestGatewayInjectorAnswersLikeTheServices(t *testing.T) {
	p, _ := New(1, 3) // every weight-1 kind always fires
	for _, k := range Kinds {
		p.SetWeight(k, 1)
	}
	j := &jobs{}
	p.SetJobFaulter(j)
	inj := p.GatewayInjector()

	status, body, ok := inj(localaws.ServiceS3, "GETObject")
	if !ok || (status != 500 && status != 503) || !strings.Contains(body, "<Error><Code>") {
		t.Errorf("s3 fault = %d %q %v", status, body, ok)
	}
	get := func(key string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/b/k", nil)
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+key+"/20261128/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=x")
		return r
	}
	prepare := localaws.PrincipalAccessKeyID("prepare-change")
	if at, ok := p.BodyCuts()(localaws.ServiceS3, "GETObject", get(prepare)); !ok || at < 0 || at >= 1 {
		t.Errorf("body cut = %v %v, want a share in [0, 1)", at, ok)
	}
	if _, ok := p.BodyCuts()(localaws.ServiceS3, "PUTObject", get(prepare)); ok {
		t.Error("a PutObject body was cut")
	}
	if _, ok := p.BodyCuts()(localaws.ServiceS3, "GETObject", get(localaws.AccessKeyID)); ok {
		t.Error("an administrator's read was cut")
	}
	if at, ok := p.BodyCuts()(localaws.ServiceHealthLake, "ReadHistory", get(prepare)); !ok || at < 0 || at >= 1 {
		t.Errorf("HealthLake read cut = %v %v, want a share in [0, 1)", at, ok)
	}
	put := get(prepare)
	put.Method = http.MethodPut
	if _, ok := p.BodyCuts()(localaws.ServiceHealthLake, "UpdateResource", put); ok {
		t.Error("the answer to a HealthLake write was cut")
	}
	lose := p.AnswerLosses()
	if !lose(localaws.ServiceDynamoDB, "UpdateItem", get(prepare)) || !lose(localaws.ServiceDynamoDB, "TransactWriteItems", get(prepare)) {
		t.Error("a principal's DynamoDB write kept its answer")
	}
	for _, op := range []string{"GetItem", "Query"} {
		if lose(localaws.ServiceDynamoDB, op, get(prepare)) {
			t.Errorf("the answer to a DynamoDB %s was lost", op)
		}
	}
	if lose(localaws.ServiceDynamoDB, "PutItem", get(localaws.AccessKeyID)) || lose(localaws.ServiceSQS, "SendMessage", get(prepare)) {
		t.Error("an administrator's write, or another service's, lost its answer")
	}
	status, body, ok = inj(localaws.ServiceEventBridge, "PutEvents")
	if !ok || status != 400 || !strings.Contains(body, "ThrottlingException") {
		t.Errorf("events fault = %d %q %v", status, body, ok)
	}
	status, _, ok = inj(localaws.ServiceSFN, "SendTaskHeartbeat")
	if !ok || status != 200 {
		t.Errorf("lost heartbeat = %d %v, want a 200 that never arrives", status, ok)
	}
	if _, _, ok = inj(localaws.ServiceSFN, "SendTaskSuccess"); ok {
		t.Error("SendTaskSuccess was faulted")
	}
	if _, _, ok = inj(localaws.ServiceHealthLake, "StartExport"); ok {
		t.Error("StartExport must be forwarded")
	}
	if j.failed != 1 || j.errs != 0 {
		t.Errorf("job faults armed: %+v", j)
	}
	if _, _, ok = inj(localaws.ServiceDynamoDB, "PutItem"); ok {
		t.Error("DynamoDB was faulted")
	}

	code, _ := p.EntryFault()(1, 0, fakeeventbridge.Entry{EventBusName: "b", Detail: "{}"})
	if code != "InternalFailure" && code != "ThrottlingException" {
		t.Errorf("entry fault code = %q", code)
	}
	if !p.DuplicateDelivery("q", "m") || !p.CrashBefore("f") || !p.CrashAfter("f") {
		t.Error("hooks did not fire at rate 1")
	}
	inj2 := p.InjectedSummary()
	for _, k := range []Kind{S3Error, PutEventsThrottle, LostHeartbeat, ExportJobFailed, PutEventsEntry, DuplicateDelivery, CrashBefore, CrashAfter} {
		if inj2[string(k)] == 0 {
			t.Errorf("%s not counted: %v", k, inj2)
		}
	}
}
