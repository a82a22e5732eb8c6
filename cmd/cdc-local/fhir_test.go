package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestFHIRSubcommandDeletes(t *testing.T) {
	env := localaws.StartTest(t)
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
