package fakehealthlake

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sdkJobProperties is ExportJobProperties in the AWS JSON 1.0 protocol
// (upper-camel keys, epoch-second timestamps, OutputDataConfig as a union).
type sdkJobProperties struct {
	DatastoreId       string  `json:"DatastoreId"`
	JobId             string  `json:"JobId"`
	JobName           string  `json:"JobName,omitempty"`
	JobStatus         string  `json:"JobStatus"`
	SubmitTime        float64 `json:"SubmitTime"`
	EndTime           float64 `json:"EndTime,omitempty"`
	Message           string  `json:"Message,omitempty"`
	DataAccessRoleArn string  `json:"DataAccessRoleArn"`
	OutputDataConfig  struct {
		S3Configuration struct {
			S3Uri    string `json:"S3Uri"`
			KmsKeyId string `json:"KmsKeyId"`
		} `json:"S3Configuration"`
	} `json:"OutputDataConfig"`
}

func epoch(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return math.Round(float64(t.UnixMilli())) / 1000
}

func (j *job) sdk() sdkJobProperties {
	p := sdkJobProperties{
		DatastoreId: j.datastoreID, JobId: j.id, JobName: j.name, JobStatus: j.status,
		SubmitTime: epoch(j.submitTime), EndTime: epoch(j.endTime), Message: j.message, DataAccessRoleArn: j.role,
	}
	p.OutputDataConfig.S3Configuration.S3Uri = j.s3URI
	p.OutputDataConfig.S3Configuration.KmsKeyId = j.kmsKeyID
	return p
}

// serveJSON handles the AWS JSON 1.0 operations of service/healthlake.
func (e *Emulator) serveJSON(w http.ResponseWriter, r *http.Request, target string, body []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(r.Context())
	fail := func(status int, code, msg string) {
		e.record(r, body, status)
		writeJSONError(w, status, code, msg)
	}
	switch target {
	case "HealthLake.ListFHIRExportJobs":
		var in struct {
			DatastoreId     string
			JobName         string
			JobStatus       string
			MaxResults      int
			NextToken       string
			SubmittedAfter  *float64
			SubmittedBefore *float64
		}
		if err := json.Unmarshal(body, &in); err != nil {
			fail(http.StatusBadRequest, "ValidationException", "request body is not valid JSON")
			return
		}
		if _, ok := e.datastores[in.DatastoreId]; !ok {
			fail(http.StatusBadRequest, "ResourceNotFoundException", "data store "+in.DatastoreId+" not found")
			return
		}
		pg, ok := listPage(in.MaxResults, in.NextToken)
		if !ok {
			fail(http.StatusBadRequest, "ValidationException", "invalid NextToken")
			return
		}
		var matched []sdkJobProperties
		for i := len(e.jobs) - 1; i >= 0; i-- { // newest first
			j := e.jobs[i]
			if j.datastoreID != in.DatastoreId ||
				(in.JobName != "" && j.name != in.JobName) ||
				(in.JobStatus != "" && j.status != in.JobStatus) ||
				(in.SubmittedAfter != nil && epoch(j.submitTime) < *in.SubmittedAfter) ||
				(in.SubmittedBefore != nil && epoch(j.submitTime) > *in.SubmittedBefore) {
				continue
			}
			matched = append(matched, j.sdk())
		}
		out := struct {
			ExportJobPropertiesList []sdkJobProperties
			NextToken               string `json:",omitempty"`
		}{}
		out.ExportJobPropertiesList, out.NextToken = pageOf(matched, pg)
		e.record(r, body, http.StatusOK)
		writeJSON(w, http.StatusOK, "application/x-amz-json-1.0", out)
	case "HealthLake.DescribeFHIRExportJob":
		var in struct{ DatastoreId, JobId string }
		if err := json.Unmarshal(body, &in); err != nil {
			fail(http.StatusBadRequest, "ValidationException", "request body is not valid JSON")
			return
		}
		j, ok := e.jobByID[in.JobId]
		if !ok || j.datastoreID != in.DatastoreId {
			fail(http.StatusBadRequest, "ResourceNotFoundException", "export job "+in.JobId+" not found")
			return
		}
		e.record(r, body, http.StatusOK)
		writeJSON(w, http.StatusOK, "application/x-amz-json-1.0", map[string]any{"ExportJobProperties": j.sdk()})
	case "HealthLake.DescribeFHIRDatastore":
		var in struct{ DatastoreId string }
		if err := json.Unmarshal(body, &in); err != nil {
			fail(http.StatusBadRequest, "ValidationException", "request body is not valid JSON")
			return
		}
		ds, ok := e.datastores[in.DatastoreId]
		if !ok {
			fail(http.StatusBadRequest, "ResourceNotFoundException", "data store "+in.DatastoreId+" not found")
			return
		}
		e.record(r, body, http.StatusOK)
		writeJSON(w, http.StatusOK, "application/x-amz-json-1.0", map[string]any{"DatastoreProperties": e.datastoreProperties(ds)})
	case "HealthLake.ListFHIRDatastores":
		e.listDatastores(w, r, body, fail)
	default:
		fail(http.StatusBadRequest, "UnknownOperationException", "operation "+target+" is not emulated")
	}
}

// sdkDatastoreProperties is DatastoreProperties in the AWS JSON 1.0
// protocol (HealthLake API reference, DescribeFHIRDatastore).
type sdkDatastoreProperties struct {
	DatastoreId                   string
	DatastoreArn                  string
	DatastoreName                 string
	DatastoreStatus               string
	CreatedAt                     float64
	DatastoreTypeVersion          string
	DatastoreEndpoint             string
	SseConfiguration              sdkSseConfiguration
	IdentityProviderConfiguration struct {
		AuthorizationStrategy           string
		FineGrainedAuthorizationEnabled bool
	}
}

type sdkSseConfiguration struct {
	KmsEncryptionConfig struct {
		CmkType  string
		KmsKeyId string `json:",omitempty"`
	}
}

// datastoreARN is a data store's ARN.
func (e *Emulator) datastoreARN(id string) string {
	return "arn:aws:healthlake:" + e.opts.Region + ":" + e.opts.AccountID + ":datastore/fhir/" + id
}

// datastoreProperties describes a data store: ACTIVE, FHIR R4, SigV4
// (AWS_AUTH), its name from Options.DatastoreNames (default the id), its
// key from Options.DatastoreKMSKeyID (default AWS owned), its endpoint
// under Options.Endpoint. The caller holds e.mu.
func (e *Emulator) datastoreProperties(ds *Datastore) sdkDatastoreProperties {
	p := sdkDatastoreProperties{
		DatastoreId: ds.id, DatastoreArn: e.datastoreARN(ds.id), DatastoreName: ds.id,
		DatastoreStatus: "ACTIVE", CreatedAt: epoch(ds.created), DatastoreTypeVersion: "R4",
		DatastoreEndpoint: strings.TrimSuffix(e.opts.Endpoint, "/") + "/datastore/" + ds.id + "/r4/",
	}
	if name, ok := e.opts.DatastoreNames[ds.id]; ok && name != "" {
		p.DatastoreName = name
	}
	p.SseConfiguration.KmsEncryptionConfig.CmkType = "AWS_OWNED_KMS_KEY"
	if k := e.opts.DatastoreKMSKeyID; k != "" {
		p.SseConfiguration.KmsEncryptionConfig.CmkType = "CUSTOMER_MANAGED_KMS_KEY"
		p.SseConfiguration.KmsEncryptionConfig.KmsKeyId = k
	}
	p.IdentityProviderConfiguration.AuthorizationStrategy = "AWS_AUTH"
	return p
}

// listDatastores serves ListFHIRDatastores: the data stores oldest first,
// filtered by Filter's name, status and creation bounds, MaxResults (at
// most 500) a page. The caller holds e.mu.
func (e *Emulator) listDatastores(w http.ResponseWriter, r *http.Request, body []byte, fail func(int, string, string)) {
	var in struct {
		Filter struct {
			DatastoreName   string
			DatastoreStatus string
			CreatedAfter    *float64
			CreatedBefore   *float64
		}
		MaxResults int
		NextToken  string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		fail(http.StatusBadRequest, "ValidationException", "request body is not valid JSON")
		return
	}
	pg, ok := listPage(in.MaxResults, in.NextToken)
	if !ok {
		fail(http.StatusBadRequest, "ValidationException", "invalid NextToken")
		return
	}
	all := make([]*Datastore, 0, len(e.datastores))
	for _, ds := range e.datastores {
		all = append(all, ds)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].created.Equal(all[j].created) {
			return all[i].created.Before(all[j].created)
		}
		return all[i].id < all[j].id
	})
	f := in.Filter
	var matched []sdkDatastoreProperties
	for _, ds := range all {
		p := e.datastoreProperties(ds)
		if (f.DatastoreName != "" && p.DatastoreName != f.DatastoreName) ||
			(f.DatastoreStatus != "" && p.DatastoreStatus != f.DatastoreStatus) ||
			(f.CreatedAfter != nil && p.CreatedAt < *f.CreatedAfter) ||
			(f.CreatedBefore != nil && p.CreatedAt > *f.CreatedBefore) {
			continue
		}
		matched = append(matched, p)
	}
	out := struct {
		DatastorePropertiesList []sdkDatastoreProperties
		NextToken               string `json:",omitempty"`
	}{}
	out.DatastorePropertiesList, out.NextToken = pageOf(matched, pg)
	e.record(r, body, http.StatusOK)
	writeJSON(w, http.StatusOK, "application/x-amz-json-1.0", out)
}

// page is the part of a list the JSON API's list calls answer: size items
// from start.
type page struct{ start, size int }

// listPage reads a list call's MaxResults (1–500; 500 when absent or out of
// range) and NextToken (the offset a previous page ended at); ok is false
// for a NextToken this emulator did not give.
func listPage(maxResults int, nextToken string) (p page, ok bool) {
	p.size = maxResults
	if p.size <= 0 || p.size > 500 {
		p.size = 500
	}
	if nextToken != "" {
		n, err := strconv.Atoi(nextToken)
		if err != nil || n < 0 {
			return page{}, false
		}
		p.start = n
	}
	return p, true
}

// pageOf returns p's items of all (never nil: the API answers an empty
// list as []) and the NextToken of the page after it, "" at the end.
func pageOf[T any](all []T, p page) ([]T, string) {
	if p.start >= len(all) {
		return []T{}, ""
	}
	end := min(p.start+p.size, len(all))
	if end < len(all) {
		return all[p.start:end], strconv.Itoa(end)
	}
	return all[p.start:end], ""
}
