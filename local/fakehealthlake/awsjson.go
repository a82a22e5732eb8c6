package fakehealthlake

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
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
		if in.MaxResults <= 0 || in.MaxResults > 500 {
			in.MaxResults = 500
		}
		start := 0
		if in.NextToken != "" {
			n, err := strconv.Atoi(in.NextToken)
			if err != nil || n < 0 {
				fail(http.StatusBadRequest, "ValidationException", "invalid NextToken")
				return
			}
			start = n
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
		}{ExportJobPropertiesList: []sdkJobProperties{}}
		if start < len(matched) {
			end := min(start+in.MaxResults, len(matched))
			out.ExportJobPropertiesList = matched[start:end]
			if end < len(matched) {
				out.NextToken = strconv.Itoa(end)
			}
		}
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
	default:
		fail(http.StatusBadRequest, "UnknownOperationException", "operation "+target+" is not emulated")
	}
}
