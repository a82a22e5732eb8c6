// Package localaws serves every emulated AWS service on one HTTP listener and
// routes each request the way AWS endpoints do: by the service named in the
// request's SigV4 credential scope. S3 (gofakes3), SQS (goaws) and DynamoDB
// (minidyn) are built in; the project's own emulators are added with Handle.
package localaws

import (
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/sigv4"
)

// Service signing names, as they appear in a SigV4 credential scope.
const (
	ServiceS3          = "s3"
	ServiceSQS         = "sqs"
	ServiceDynamoDB    = "dynamodb"
	ServiceEventBridge = "events"
	ServiceSFN         = "states"
	ServiceHealthLake  = "healthlake"
	ServiceLambda      = "lambda"
)

// Gateway routes requests to per-service handlers and counts the calls each
// API served. Requests without a SigV4 scope go to S3, as an unsigned
// path-style URL would in AWS. With signature checks on (Start turns them
// on), every signed request's SigV4 signature is verified, with the secret
// of the access key that signed it, before anything else sees it.
type Gateway struct {
	mu       sync.RWMutex
	services map[string]http.Handler
	local    map[string]http.Handler
	// callsBy counts the calls of each access key by API (CallsBy; Calls
	// sums them).
	callsBy  map[string]map[string]int64
	faults   FaultInjector
	cuts     BodyCut
	cutsMade atomic.Int64
	// loss drops answers after serving their requests (answerloss.go).
	loss        AnswerLoss
	answersLost atomic.Int64
	auth        Authorizer
	answers     AnswerFilter
	latency     *LatencyModel
	verify      bool
	clock       func() time.Time
	// rates keeps each API's peak calls per second (rates.go).
	rates rateMeter

	keys     *keyStore
	verifier *sigv4.Verifier
	// dynamo enforces the DynamoDB limits minidyn does not (dynamolimits.go).
	dynamo *dynamoLimits
}

// Authorizer decides, before any fault or service sees it, whether a
// request may proceed; when it refuses it has written the answer (the
// service's AccessDenied) and returns true. local/iam provides one.
type Authorizer func(service string, w http.ResponseWriter, r *http.Request) (answered bool)

// AnswerFilter may wrap the writer a service answers a request through, to
// change an answer as AWS would for that caller (local/iam: S3's 403 for a
// missing key to a caller that may not list the bucket). It returns w when
// it changes nothing.
type AnswerFilter func(service string, w http.ResponseWriter, r *http.Request) http.ResponseWriter

// FaultInjector decides, per call, whether the gateway answers with an
// injected error instead of forwarding. It returns the HTTP status and body to
// send, or ok=false to forward the call.
type FaultInjector func(service, operation string) (status int, body string, ok bool)

// NewGateway returns a gateway with no services registered.
// It knows DefaultAccessKeys; signatures are not checked until
// SetVerifySignatures(true).
func NewGateway() *Gateway {
	g := &Gateway{services: map[string]http.Handler{}, local: map[string]http.Handler{}, callsBy: map[string]map[string]int64{}, keys: newKeyStore()}
	g.dynamo = newDynamoLimits(g.now)
	g.verifier = &sigv4.Verifier{Secret: g.keys.secret, Now: g.now}
	return g
}

// SetVerifySignatures turns the SigV4 check of every signed request on or
// off. A refused request gets the service's own error (InvalidAccessKeyId,
// SignatureDoesNotMatch, UnrecognizedClientException, …; sigerrors.go).
// Unsigned requests are not refused here: the authorizer decides.
func (g *Gateway) SetVerifySignatures(on bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.verify = on
}

// SetClock sets the clock signing times are checked against (a request
// more than 15 minutes off is refused); nil means time.Now, which inside a
// testing/synctest bubble is the bubble's clock, as the SDK clients' is.
func (g *Gateway) SetClock(now func() time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.clock = now
}

func (g *Gateway) now() time.Time {
	g.mu.RLock()
	c := g.clock
	g.mu.RUnlock()
	if c == nil {
		return time.Now()
	}
	return c()
}

// AddAccessKey makes an access key pair valid (or changes its secret).
func (g *Gateway) AddAccessKey(accessKeyID, secretAccessKey string) {
	g.keys.add(accessKeyID, secretAccessKey)
}

// IssueAccessKey returns the secret of an access key id, making the key
// valid first, with PrincipalSecretAccessKey as its secret, if it is not.
func (g *Gateway) IssueAccessKey(accessKeyID string) string {
	if s, ok := g.keys.secret(accessKeyID); ok {
		return s
	}
	s := PrincipalSecretAccessKey(accessKeyID)
	g.keys.add(accessKeyID, s)
	return s
}

// SecretAccessKey returns the secret of a valid access key id.
func (g *Gateway) SecretAccessKey(accessKeyID string) (string, bool) {
	return g.keys.secret(accessKeyID)
}

// AccessKeyIDs returns the valid access key ids in order.
func (g *Gateway) AccessKeyIDs() []string { return g.keys.ids() }

// Handle registers h for the service with the given SigV4 signing name.
func (g *Gateway) Handle(service string, h http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.services[service] = h
}

// LocalPrefix starts the paths of the local runtime's own endpoints, which
// no AWS API uses and the gateway serves before routing by service.
const LocalPrefix = "/_local/"

// HandleLocal registers h for an unsigned path under LocalPrefix (for
// example the local runtime's metrics). These calls are not counted.
func (g *Gateway) HandleLocal(path string, h http.Handler) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.local[path] = h
}

// SetFaults installs (or, with nil, removes) a fault injector.
func (g *Gateway) SetFaults(f FaultInjector) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults = f
}

// SetAuthorizer installs (or, with nil, removes) the authorizer.
func (g *Gateway) SetAuthorizer(a Authorizer) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.auth = a
}

// SetAnswerFilter installs (or, with nil, removes) the answer filter.
func (g *Gateway) SetAnswerFilter(f AnswerFilter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answers = f
}

// SetLatency installs (or, with nil, removes) the per-call latency model:
// every request then waits its sampled latency before it is answered.
func (g *Gateway) SetLatency(m *LatencyModel) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.latency = m
}

// SetTTLDeleteAfter sets how long after its time to live the local
// DynamoDB deletes an expired item (DefaultTTLDeleteAfter; < 0: never).
func (g *Gateway) SetTTLDeleteAfter(d time.Duration) {
	g.dynamo.mu.Lock()
	defer g.dynamo.mu.Unlock()
	g.dynamo.deleteAfter = d
}

// ExpiredItems counts the items the local DynamoDB deleted for their time
// to live.
func (g *Gateway) ExpiredItems() int64 { return g.dynamo.expired.Load() }

// Latency returns the installed latency model, or nil.
func (g *Gateway) Latency() *LatencyModel {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.latency
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, LocalPrefix) && r.Header.Get("Authorization") == "" {
		g.mu.RLock()
		h := g.local[r.URL.Path]
		g.mu.RUnlock()
		if h != nil {
			h.ServeHTTP(w, r)
			return
		}
	}
	service := SigningService(r)
	if service == "" {
		service = ServiceS3
	}
	op := Operation(service, r)
	key, _ := Credential(r)
	g.mu.Lock()
	h := g.services[service]
	by := g.callsBy[key]
	if by == nil {
		by = map[string]int64{}
		g.callsBy[key] = by
	}
	by[service+":"+op]++
	faults := g.faults
	cuts := g.cuts
	loss := g.loss
	auth := g.auth
	answers := g.answers
	latency := g.latency
	verify := g.verify
	g.mu.Unlock()
	if h == nil {
		http.Error(w, "localaws: no emulator for service "+service, http.StatusNotImplemented)
		return
	}
	if service == ServiceDynamoDB {
		// A transaction is ongoing from its arrival (dynamoconflict.go).
		var release func()
		r, release = g.dynamo.arrive(r, h)
		defer release()
	}
	// The signature is checked on arrival (a modelled latency does not age
	// it), and refused after the call's latency like any other refusal.
	var sigErr error
	if verify {
		a, err := g.verifier.Verify(r)
		if err != nil {
			sigErr = err
		} else if a != nil {
			// The emulators behind (HealthLake) need not check it again.
			r = r.WithContext(sigv4.WithVerified(r.Context(), a))
		}
	}
	// Every call, refused or served, takes the time AWS would take (the
	// model's exempt callers aside), and counts toward its API's peak rate.
	if latency == nil || latency.Delays(key) {
		latOp := LatencyOperation(service, r)
		g.rates.add(service+":"+latOp, g.now())
		if latency != nil && !Sleep(r.Context().Done(), latency.Sample(service, latOp)) {
			return
		}
	}
	if sigErr != nil {
		writeSignatureError(w, r, service, sigErr, g.now())
		return
	}
	if auth != nil && auth(service, w, r) {
		return
	}
	if faults != nil {
		if status, body, ok := faults(service, op); ok {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
			return
		}
	}
	if answers != nil {
		w = answers(service, w, r)
	}
	if loss != nil && loss(service, op, r) {
		g.serve(&discardWriter{}, r, service, op, h)
		g.answersLost.Add(1)
		// net/http drops the connection without a log line and without
		// an answer.
		panic(http.ErrAbortHandler)
	}
	if cuts != nil {
		if fraction, ok := cuts(service, op, r); ok {
			w = newCutWriter(w, fraction, &g.cutsMade)
		}
	}
	g.serve(w, r, service, op, h)
}

// serve hands a checked request to its service's handler h, through what
// the gateway adds in front of it (DynamoDB's limits, S3's If-Match).
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, service, op string, h http.Handler) {
	if service == ServiceDynamoDB {
		g.dynamo.serve(w, r, h)
		return
	}
	if service == ServiceS3 && (op == "GETObject" || op == "HEADObject") && s3IfMatch(h, w, r) {
		return
	}
	h.ServeHTTP(w, r)
}

// Calls returns a copy of the per-API call counts, keyed "service:Operation".
func (g *Gateway) Calls() map[string]int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := map[string]int64{}
	for _, by := range g.callsBy {
		for k, v := range by {
			out[k] += v
		}
	}
	return out
}

// CallsBy returns a copy of the per-API call counts of the requests signed
// with accessKeyID (a principal's key, PrincipalAccessKeyID): what one
// role's calls cost, as the simulation's fast-path cost counts them.
func (g *Gateway) CallsBy(accessKeyID string) map[string]int64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make(map[string]int64, len(g.callsBy[accessKeyID]))
	for k, v := range g.callsBy[accessKeyID] {
		out[k] = v
	}
	return out
}

// CallNames returns the keys of Calls in sorted order.
func (g *Gateway) CallNames() []string {
	calls := g.Calls()
	names := make([]string, 0, len(calls))
	for k := range calls {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// SigningService returns the service name from the request's SigV4
// credential scope (Authorization header or presigned query), or "".
func SigningService(r *http.Request) string {
	_, service := Credential(r)
	return service
}

// Credential returns the access key id and the service of the request's
// SigV4 credential scope ("AKID/date/region/service/aws4_request", from the
// Authorization header or a presigned query), or "" for what is absent.
func Credential(r *http.Request) (accessKeyID, service string) {
	cred := ""
	if auth := r.Header.Get("Authorization"); auth != "" {
		if i := strings.Index(auth, "Credential="); i >= 0 {
			cred = auth[i+len("Credential="):]
			if j := strings.IndexAny(cred, ", "); j >= 0 {
				cred = cred[:j]
			}
		}
	} else {
		cred = r.URL.Query().Get("X-Amz-Credential")
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return parts[0], ""
	}
	return parts[0], parts[3]
}

// Operation names the API a request calls: the X-Amz-Target operation for
// JSON protocols, otherwise the HTTP method and the first path segment shape.
func Operation(service string, r *http.Request) string {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			return t[i+1:]
		}
		return t
	}
	switch service {
	case ServiceS3:
		path := strings.Trim(r.URL.Path, "/")
		switch {
		case path == "":
			return r.Method + "Service"
		case !strings.Contains(path, "/"):
			if r.Method == http.MethodGet {
				return "ListObjects"
			}
			return r.Method + "Bucket"
		default:
			return r.Method + "Object"
		}
	case ServiceHealthLake:
		switch {
		case strings.Contains(r.URL.Path, "$export"):
			return "StartExport"
		case strings.Contains(r.URL.Path, "/r4/export/"):
			return r.Method + "Export"
		default:
			return "FHIR" + r.Method
		}
	}
	return r.Method
}
