package fakehealthlake

import (
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/tokenbucket"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

// LegacyBefore is the creation date before which a data store keeps
// HealthLake's lower request-rate quotas (Quota.LegacyRate): the quotas
// page gives them for "data stores created prior to 8/21/2023".
var LegacyBefore = time.Date(2023, 8, 21, 0, 0, 0, 0, time.UTC)

// Quota is one of HealthLake's request-rate quotas: Rate requests a second
// of the operations it names, per data store or, with PerAccount, for the
// account in its Region. A token bucket holds one second's worth; a request
// that finds too few tokens is answered ThrottlingException.
type Quota struct {
	// Name is the quota as the quotas page names it.
	Name string
	// Operations are the operations it counts, named as
	// localaws.HealthLakeOperation names a FHIR REST request and as the JSON
	// API's X-Amz-Target names its action.
	Operations []string
	// Rate is the requests (with WriteUnits, write units) per second.
	Rate float64
	// LegacyRate, when set, is the rate of a data store created before
	// LegacyBefore.
	LegacyRate float64
	// PerAccount counts the requests to every data store together.
	PerAccount bool
	// WriteUnits makes a request take one unit per started KiB of its body,
	// twice as many with `x-amz-fhir-history-consistency-level: strong`
	// (the quotas page: "each 1KB increment consuming additional capacity",
	// "strong doubles the write capacity consumption").
	WriteUnits bool
}

var (
	readOps  = []string{"ReadResource", "VReadResource", "ReadHistory"}
	writeOps = []string{"CreateResource", "UpdateResource", "PatchResource", "DeleteResource"}
)

// Quotas are the request-rate quotas Options.Quotas applies: the defaults
// of HealthLake's quotas page ("AWS HealthLake endpoints and quotas",
// https://docs.aws.amazon.com/healthlake/latest/devguide/reference-healthlake-endpoints-quotas.html),
// docs/LOCAL.md "HealthLake request-rate quotas" says which figure comes
// from where. Operations with no figure there (`$erase`, the status reads of
// `$erase` and `$bulk-delete` jobs) are not limited.
var Quotas = []Quota{
	{Name: "GET requests per data store", Operations: readOps, Rate: 3000, LegacyRate: 100},
	{Name: "GET requests per account", Operations: readOps, Rate: 6000, PerAccount: true},
	{Name: "write requests per data store", Operations: writeOps, Rate: 3000, LegacyRate: 300, WriteUnits: true},
	{Name: "write requests per account", Operations: writeOps, Rate: 6000, PerAccount: true, WriteUnits: true},
	{Name: "search requests (GET) per data store", Operations: []string{"SearchWithGet"}, Rate: 100},
	{Name: "search requests (GET) per account", Operations: []string{"SearchWithGet"}, Rate: 200, PerAccount: true},
	{Name: "search requests (POST) per data store", Operations: []string{"SearchWithPost"}, Rate: 100},
	{Name: "search requests (POST) per account", Operations: []string{"SearchWithPost"}, Rate: 200, PerAccount: true},
	{Name: "$everything requests per data store", Operations: []string{"SearchEverything"}, Rate: 10},
	{Name: "Bundle requests per data store", Operations: []string{"ProcessBundle"}, Rate: 10, LegacyRate: 1},
	{Name: "Bundle requests per account", Operations: []string{"ProcessBundle"}, Rate: 20, PerAccount: true},
	{Name: "StartFHIRBulkDeleteJob per data store", Operations: []string{"StartFHIRBulkDeleteJob"}, Rate: 10},
	{Name: "StartFHIRExportJob", Operations: []string{"StartFHIRExportJob"}, Rate: 1, PerAccount: true},
	// "CancelFHIRExportJob with DELETE request rate per account": 1, not
	// adjustable (the quotas page in AWS's translated copies).
	{Name: "CancelFHIRExportJob", Operations: []string{"CancelFHIRExportJob"}, Rate: 1, PerAccount: true},
	{Name: "DescribeFHIRExportJob", Operations: []string{"DescribeFHIRExportJob"}, Rate: 10, PerAccount: true},
	{Name: "ListFHIRExportJobs", Operations: []string{"ListFHIRExportJobs"}, Rate: 10, PerAccount: true},
	{Name: "DescribeFHIRDatastore", Operations: []string{"DescribeFHIRDatastore"}, Rate: 10, PerAccount: true},
	{Name: "ListFHIRDatastores", Operations: []string{"ListFHIRDatastores"}, Rate: 10, PerAccount: true},
	{Name: "GetCapabilities", Operations: []string{"GetCapabilities"}, Rate: 10, PerAccount: true},
}

// QuotaThrottles returns how many requests each quota refused, by
// Quota.Name.
func (e *Emulator) QuotaThrottles() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.quotaThrottles)
}

// overQuota answers the request ThrottlingException when Options.Quotas is
// on and a quota that counts it has too few tokens left; it reports whether
// it did. A refused request takes no token from the quotas after the one
// that refused it.
func (e *Emulator) overQuota(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !e.opts.Quotas {
		return false
	}
	jsonAPI := r.Header.Get("X-Amz-Target") != ""
	op := localaws.HealthLakeOperation(r)
	if jsonAPI {
		op = operationOf(r) // the action the target names
	}
	e.mu.Lock()
	refused := ""
	for i := range Quotas {
		q := &Quotas[i]
		if !slices.Contains(q.Operations, op) {
			continue
		}
		key, rate := q.Name, q.Rate
		if !q.PerAccount {
			id, _, isREST := splitDatastorePath(r.URL.Path)
			ds, ok := e.datastores[id]
			if !isREST || !ok {
				continue // the handler answers for an unknown data store
			}
			key += "/" + id
			if q.LegacyRate > 0 && ds.created.Before(LegacyBefore) {
				rate = q.LegacyRate
			}
		}
		b := e.quotaBuckets[key]
		if b == nil {
			b = tokenbucket.New(rate, int(math.Ceil(rate)), e.opts.Now)
			e.quotaBuckets[key] = b
		}
		n := 1.0
		if q.WriteUnits {
			// A write larger than a second's worth would never pass; it
			// takes the whole bucket instead (modelled).
			n = min(writeUnits(r, body), math.Ceil(rate))
		}
		if !b.Take(n) {
			refused = q.Name
			break
		}
	}
	status := 0
	if refused != "" {
		e.quotaThrottles[refused]++
		status = e.throttleStatus(jsonAPI, e.quotaTurn)
		if !jsonAPI {
			e.quotaTurn++
		}
		e.record(r, nil, status)
	}
	e.mu.Unlock()
	if refused == "" {
		return false
	}
	writeFault(w, jsonAPI, status, "ThrottlingException", "Rate exceeded")
	return true
}

// writeUnits is the write capacity a write takes: a unit per started KiB
// of its body (at least one), twice that with strong history consistency.
func writeUnits(r *http.Request, body []byte) float64 {
	n := max(1, math.Ceil(float64(len(body))/1024))
	if strings.EqualFold(r.Header.Get("x-amz-fhir-history-consistency-level"), "strong") {
		n *= 2
	}
	return n
}
