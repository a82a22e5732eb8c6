package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/local/localaws/localawstest"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

func TestFHIRSubcommandDeletes(t *testing.T) {
	env := localawstest.Start(t)
	env.Gateway.Handle(localaws.ServiceHealthLake, fakehealthlake.New(fakehealthlake.Options{Datastores: []string{"local"}}))
	ctx := context.Background()
	if code := run(ctx, []string{"fhir", "PUT", "Patient/p1", "--endpoint", env.URL}, strings.NewReader(`{"resourceType":"Patient","id":"p1"}`), io.Discard, io.Discard); code != exitOK {
		t.Fatalf("PUT exit %d", code)
	}
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"fhir", "delete", "Patient/p1", "--endpoint", env.URL}, nil, &out, &errb); code != exitOK {
		t.Fatalf("DELETE exit %d: %s", code, errb.String())
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "deleted (HTTP 204)") {
		t.Errorf("DELETE printed %q / %q", out.String(), errb.String())
	}
	if code := run(ctx, []string{"fhir", "GET", "Patient/p1", "--endpoint", env.URL}, nil, io.Discard, &errb); code != exitFailed || !strings.Contains(errb.String(), "HTTP 410") {
		t.Errorf("GET after delete exit %d: %s", code, errb.String())
	}
	out.Reset()
	if code := run(ctx, []string{"fhir", "GET", "Patient/p1/_history", "--endpoint", env.URL}, nil, &out, io.Discard); code != exitOK {
		t.Fatalf("history exit %d", code)
	}
	var h struct {
		Entry []struct {
			Request struct{ Method string } `json:"request"`
		} `json:"entry"`
	}
	if err := json.Unmarshal(out.Bytes(), &h); err != nil || len(h.Entry) != 2 || h.Entry[0].Request.Method != "DELETE" {
		t.Errorf("history %s (%v)", out.String(), err)
	}
	errb.Reset()
	if code := run(ctx, []string{"fhir", "PATCH", "Patient/p1", "--endpoint", env.URL}, nil, io.Discard, &errb); code != exitUsage || !strings.Contains(errb.String(), "use GET, PUT, POST or DELETE") {
		t.Errorf("PATCH exit %d: %s", code, errb.String())
	}
}

// Through cdc-local's own endpoint (the whole stack: SigV4, IAM, the
// gateway), `PUT {type}` without an id and `POST {type}/{id}` are refused
// with 405 and an OperationOutcome, as docs/LOCAL.md says, and store
// nothing.
func TestFHIRUpdateWithoutIDAndCreateWithIDAreRefusedByTheStack(t *testing.T) {
	ctx := context.Background()
	st, err := stack.Start(ctx, stack.Options{Addr: "127.0.0.1:0", Name: fmt.Sprintf("fhir405-%d", time.Now().UnixNano()%1e9), SampleSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "Patient", "GET, POST"},
		{"POST", "Patient/p405", "GET, PUT, DELETE"},
	} {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"fhir", c.method, c.path, "--endpoint", st.Env.URL}, strings.NewReader(`{"resourceType":"Patient","id":"p405"}`), &out, &errb)
		var oo struct {
			ResourceType string `json:"resourceType"`
			Issue        []struct {
				Code string `json:"code"`
			} `json:"issue"`
		}
		_ = json.Unmarshal(out.Bytes(), &oo)
		if code != exitFailed || !strings.Contains(errb.String(), "HTTP 405") || oo.ResourceType != "OperationOutcome" || len(oo.Issue) != 1 || oo.Issue[0].Code != "not-supported" {
			t.Errorf("%s %s: exit %d, stderr %q, body %s; want exit 1, HTTP 405 and an OperationOutcome not-supported", c.method, c.path, code, errb.String(), out.String())
		}
		status, _, err := signedFHIR(ctx, c.method, st.Env.URL+"/datastore/"+st.Res.DatastoreID+"/r4/"+c.path, st.Env.Region, []byte(`{"resourceType":"Patient","id":"p405"}`))
		if err != nil || status != 405 {
			t.Errorf("%s %s: HTTP %d, %v", c.method, c.path, status, err)
		}
	}
	if code := run(ctx, []string{"fhir", "GET", "Patient/p405", "--endpoint", st.Env.URL}, nil, io.Discard, io.Discard); code != exitFailed {
		t.Errorf("GET Patient/p405 after the refused writes: exit %d, want 1 (nothing stored)", code)
	}
}
