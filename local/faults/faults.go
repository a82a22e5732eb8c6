// Package faults is cdc-local's seeded fault plan (--fault-rate P
// --fault-seed N). One Plan feeds every injection point the local stack
// has:
//
//   - the gateway (localaws.FaultInjector): S3 errors (500 InternalError /
//     503 SlowDown), GetObject bodies cut part way (localaws.BodyCut),
//     DynamoDB writes whose answers are lost (localaws.AnswerLoss),
//     PutEvents throttling, lost SendTaskHeartbeat calls
//     (answered 200 but never reach Step Functions), and export-job faults
//     armed on the HealthLake emulator when an export starts;
//   - the EventBridge emulator (fakeeventbridge.EntryFault): per-entry
//     InternalFailure / ThrottlingException results;
//   - the SQS event-source mappings (esm.Faults): duplicate deliveries;
//   - the Lambda registry (lambdas.Faults): crashes before and after a
//     handler's side effects.
//
// Every decision is a pure function of (seed, kind, key, n), where n counts
// the questions asked so far about that kind and key: a seed fixes the
// sequence of outcomes at every injection point, whatever the goroutine
// interleaving between points. Each kind fires with probability P × its
// weight (Weights); the defaults keep a window at P = 0.2 likely enough to
// succeed that the pipeline makes progress while every fault still occurs
// often over a few dozen windows.
package faults

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"sort"
	"sync"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// Kind names one sort of fault.
type Kind string

// The kinds of fault a plan injects.
const (
	S3Error            Kind = "s3Error"            // an S3 call answers 500/503
	S3BodyCut          Kind = "s3BodyCut"          // a GetObject body ends part way (the connection closes)
	PutEventsThrottle  Kind = "putEventsThrottle"  // a PutEvents call answers ThrottlingException
	PutEventsEntry     Kind = "putEventsEntry"     // one PutEvents entry fails
	DuplicateDelivery  Kind = "duplicateDelivery"  // an SQS message is delivered twice
	CrashBefore        Kind = "crashBefore"        // a Lambda crashes before its handler runs
	CrashAfter         Kind = "crashAfter"         // a Lambda crashes after its handler's side effects
	ExportJobFailed    Kind = "exportJobFailed"    // an export job ends FAILED
	ExportJobErrors    Kind = "exportJobErrors"    // an export job ends COMPLETED_WITH_ERRORS
	LostHeartbeat      Kind = "lostHeartbeat"      // a SendTaskHeartbeat is lost
	HealthLakeAPIError Kind = "healthLakeAPIError" // a HealthLake call answers 429/500 (the emulator's own dice)
	HealthLakeBodyCut  Kind = "healthLakeBodyCut"  // a HealthLake FHIR read's answer ends part way (the connection closes)
	DynamoDBAnswerLost Kind = "dynamoDBAnswerLost" // a DynamoDB write takes effect and its answer is lost (the connection closes first)
)

// Kinds lists every kind in a stable order.
var Kinds = []Kind{S3Error, S3BodyCut, PutEventsThrottle, PutEventsEntry, DuplicateDelivery, CrashBefore, CrashAfter,
	ExportJobFailed, ExportJobErrors, LostHeartbeat, HealthLakeAPIError, HealthLakeBodyCut, DynamoDBAnswerLost}

// DefaultWeights scale the plan's rate per kind. Calls made many times per
// window (S3) weigh less than events that happen a few times per window.
var DefaultWeights = map[Kind]float64{
	S3Error:            0.1,
	S3BodyCut:          0.1,
	PutEventsThrottle:  0.25,
	PutEventsEntry:     0.25,
	DuplicateDelivery:  1,
	CrashBefore:        0.25,
	CrashAfter:         0.25,
	ExportJobFailed:    0.25,
	ExportJobErrors:    0.25,
	LostHeartbeat:      1,
	HealthLakeAPIError: 0.1,
	HealthLakeBodyCut:  0.1,
	DynamoDBAnswerLost: 0.1,
}

// JobFaulter is the part of the HealthLake emulator that arms export-job
// outcomes (*healthlake.Emulator satisfies it).
type JobFaulter interface {
	FailNextJob(message string)
	CompleteNextJobWithErrors(message string)
}

// Plan is a seeded fault plan. The zero rate injects nothing. Safe for
// concurrent use.
type Plan struct {
	rate    float64
	seed    uint64
	weights map[Kind]float64

	mu       sync.Mutex
	asked    map[string]uint64
	injected map[Kind]int64
	jobs     JobFaulter
}

// New returns a plan firing each kind with probability rate × weight.
func New(rate float64, seed uint64) (*Plan, error) {
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return nil, fmt.Errorf("fault rate %v: want a probability in [0, 1]", rate)
	}
	w := make(map[Kind]float64, len(DefaultWeights))
	for k, v := range DefaultWeights {
		w[k] = v
	}
	return &Plan{rate: rate, seed: seed, weights: w, asked: map[string]uint64{}, injected: map[Kind]int64{}}, nil
}

// SetWeight changes one kind's weight (0 turns it off).
func (p *Plan) SetWeight(k Kind, w float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.weights[k] = w
}

// Rate returns the plan's base rate; Probability the effective probability
// of one kind.
func (p *Plan) Rate() float64 { return p.rate }

// Seed returns the plan's seed.
func (p *Plan) Seed() uint64 { return p.seed }

// Probability returns rate × weight of kind k, capped at 1.
func (p *Plan) Probability(k Kind) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return math.Min(1, p.rate*p.weights[k])
}

// Roll decides whether the next occurrence of kind k at key fails, and
// counts it when it does.
func (p *Plan) Roll(k Kind, key string) bool {
	hit, _ := p.roll(k, key)
	return hit
}

// roll is Roll plus a second uniform number, for choosing among variants of
// an injected fault.
func (p *Plan) roll(k Kind, key string) (bool, float64) {
	if p == nil || p.rate == 0 {
		return false, 0
	}
	id := string(k) + "\x00" + key
	p.mu.Lock()
	n := p.asked[id]
	p.asked[id] = n + 1
	prob := math.Min(1, p.rate*p.weights[k])
	p.mu.Unlock()
	if prob <= 0 || uniform(p.seed, id, n) >= prob {
		return false, 0
	}
	p.mu.Lock()
	p.injected[k]++
	p.mu.Unlock()
	return true, uniform(p.seed^0x5bd1e995, id, n)
}

// uniform maps (seed, id, n) to [0, 1).
func uniform(seed uint64, id string, n uint64) float64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(id))
	binary.LittleEndian.PutUint64(b[:], n)
	_, _ = h.Write(b[:])
	// splitmix64 finaliser spreads FNV's low-entropy high bits.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
}

// Injected returns how many faults of each kind were injected.
func (p *Plan) Injected() map[Kind]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Kind]int64, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// InjectedSummary returns Injected keyed by string, sorted keys implied by
// encoding/json; convenient for reports.
func (p *Plan) InjectedSummary() map[string]int64 {
	out := map[string]int64{}
	for k, v := range p.Injected() {
		out[string(k)] = v
	}
	return out
}

// SetJobFaulter connects the HealthLake emulator whose export jobs the
// gateway injector arms when an export starts.
func (p *Plan) SetJobFaulter(j JobFaulter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs = j
}

// GatewayInjector returns the localaws.FaultInjector of the plan.
func (p *Plan) GatewayInjector() localaws.FaultInjector {
	return func(service, operation string) (int, string, bool) {
		switch service {
		case localaws.ServiceS3:
			if hit, pick := p.roll(S3Error, operation); hit {
				if pick < 0.5 {
					return 503, s3Error("SlowDown", "Please reduce your request rate."), true
				}
				return 500, s3Error("InternalError", "We encountered an internal error. Please try again."), true
			}
		case localaws.ServiceEventBridge:
			if operation == "PutEvents" && p.Roll(PutEventsThrottle, operation) {
				return 400, `{"__type":"ThrottlingException","message":"Rate exceeded"}`, true
			}
		case localaws.ServiceSFN:
			if operation == "SendTaskHeartbeat" && p.Roll(LostHeartbeat, operation) {
				// The caller sees success; the heartbeat never arrives.
				return 200, `{}`, true
			}
		case localaws.ServiceHealthLake:
			if operation == "StartExport" {
				p.mu.Lock()
				jobs := p.jobs
				p.mu.Unlock()
				if jobs != nil {
					switch {
					case p.Roll(ExportJobFailed, "job"):
						jobs.FailNextJob("injected fault: export job failed")
					case p.Roll(ExportJobErrors, "job"):
						jobs.CompleteNextJobWithErrors("injected fault: export completed with errors")
					}
				}
			}
		}
		return 0, "", false
	}
}

// BodyCuts returns the gateway's body cuts of the plan: a GetObject body,
// or the answer to a HealthLake FHIR read (a GET: history pages, version
// reads, searches), read by one of the stack's principals (not an
// administrator: cdcctl, the reports) ends after a uniformly drawn share of
// its bytes.
func (p *Plan) BodyCuts() localaws.BodyCut {
	return func(service, operation string, r *http.Request) (float64, bool) {
		key, _ := localaws.Credential(r)
		if !localaws.IsPrincipalAccessKeyID(key) {
			return 0, false
		}
		var kind Kind
		switch {
		case service == localaws.ServiceS3 && operation == "GETObject":
			kind = S3BodyCut
		case service == localaws.ServiceHealthLake && r.Method == http.MethodGet:
			kind = HealthLakeBodyCut
		default:
			return 0, false
		}
		hit, at := p.roll(kind, operation)
		return at, hit
	}
}

// AnswerLosses returns the gateway's answer losses of the plan: a DynamoDB
// write by one of the stack's principals (not an administrator: cdcctl,
// the reports) takes effect and its answer is lost, so the SDK sends it
// again.
func (p *Plan) AnswerLosses() localaws.AnswerLoss {
	return func(service, operation string, r *http.Request) bool {
		if service != localaws.ServiceDynamoDB || !localaws.IsDynamoDBWrite(operation) {
			return false
		}
		if key, _ := localaws.Credential(r); !localaws.IsPrincipalAccessKeyID(key) {
			return false
		}
		return p.Roll(DynamoDBAnswerLost, operation)
	}
}

func s3Error(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>` + msg + `</Message><RequestId>fault</RequestId></Error>`
}

// EntryFault returns the EventBridge emulator's per-entry fault function.
func (p *Plan) EntryFault() fakeeventbridge.EntryFault {
	return func(_, _ int, e fakeeventbridge.Entry) (string, string) {
		hit, pick := p.roll(PutEventsEntry, e.EventBusName)
		if !hit {
			return "", ""
		}
		if pick < 0.5 {
			return "ThrottlingException", "Rate exceeded"
		}
		return "InternalFailure", "Internal Service Failure"
	}
}

// DuplicateDelivery implements esm.Faults.
func (p *Plan) DuplicateDelivery(queue, _ string) bool { return p.Roll(DuplicateDelivery, queue) }

// CrashBefore implements lambdas.Faults.
func (p *Plan) CrashBefore(function string) bool { return p.Roll(CrashBefore, function) }

// CrashAfter implements lambdas.Faults.
func (p *Plan) CrashAfter(function string) bool { return p.Roll(CrashAfter, function) }

// String describes the plan without its counters.
func (p *Plan) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ks := make([]string, 0, len(p.weights))
	for k, w := range p.weights {
		ks = append(ks, fmt.Sprintf("%s=%.3g", k, math.Min(1, p.rate*w)))
	}
	sort.Strings(ks)
	return fmt.Sprintf("rate %.3g seed %d %v", p.rate, p.seed, ks)
}
