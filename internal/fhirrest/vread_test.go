package fhirrest_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
)

func TestVReadReturnsEachVersionsBytes(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ctx := context.Background()
	ds, _ := f.emu.Datastore("ds1")
	for _, body := range []string{`{"resourceType":"Patient","id":"p1"}`, `{"resourceType":"Patient","id":"p1","active":true}`} {
		if _, err := ds.Load("Patient", "p1", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := f.client.VRead(ctx, "ds1", "Patient", "p1", "1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := fhir.Peek(v1)
	if err != nil || p.ResourceType != "Patient" || p.ID != "p1" || p.VersionID != "1" || p.LastUpdated == "" {
		t.Fatalf("version 1 = %+v, %v (%s)", p, err, v1)
	}
	if bytes.Contains(v1, []byte(`"active"`)) {
		t.Errorf("version 1 holds version 2's content: %s", v1)
	}
	v2, err := f.client.VRead(ctx, "ds1", "Patient", "p1", "2")
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := ds.Read("Patient", "p1"); !bytes.Equal(v2, cur) {
		t.Errorf("version 2 = %s, want the stored bytes %s", v2, cur)
	}
	if got, want := fhirrest.VersionPath("ds1", "Patient", "p1", "2"), "/datastore/ds1/r4/Patient/p1/_history/2"; got != want {
		t.Errorf("VersionPath = %s, want %s", got, want)
	}
}

func TestVReadOfADeletionIsGone(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	del, _ := ds.Delete("Patient", "p1")
	_, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", del)
	var gone *fhirrest.VersionGoneError
	if !errors.Is(err, fhirrest.ErrVersionGone) || !errors.As(err, &gone) || !gone.Deleted() || gone.StatusCode != http.StatusGone {
		t.Fatalf("vread of the deletion: %v, want a 410 VersionGoneError", err)
	}
	if strings.Contains(err.Error(), "p1") {
		t.Errorf("error names the resource: %v", err)
	}
	// The version before the deletion is still readable.
	if _, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", "1"); err != nil {
		t.Errorf("vread of the version before the deletion: %v", err)
	}
}

func TestVReadOfAnUnknownVersionIsNotFound(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, vid string }{{"p1", "7"}, {"never", "1"}} {
		_, err := f.client.VRead(context.Background(), "ds1", "Patient", c.id, c.vid)
		var gone *fhirrest.VersionGoneError
		if !errors.Is(err, fhirrest.ErrVersionGone) || !errors.As(err, &gone) || gone.Deleted() || gone.StatusCode != http.StatusNotFound {
			t.Errorf("vread %s version %s: %v, want a 404 VersionGoneError", c.id, c.vid, err)
		}
	}
	// Erased: every version is gone.
	ds.HardDelete("Patient", "p1")
	if _, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", "1"); !errors.Is(err, fhirrest.ErrVersionGone) {
		t.Errorf("vread after an erase: %v", err)
	}
	if _, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", ""); err == nil || errors.Is(err, fhirrest.ErrVersionGone) {
		t.Errorf("vread without a version: %v, want an argument error", err)
	}
}

func TestVReadRetriesThrottlingAndServerErrors(t *testing.T) {
	f := newFixture(t, localaws.SecretAccessKey, 3)
	ds, _ := f.emu.Datastore("ds1")
	if _, err := ds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	f.emu.ThrottleNext(2)
	if _, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", "1"); err != nil {
		t.Fatalf("vread after throttling: %v", err)
	}
	if len(f.sleeps.d) != 2 {
		t.Errorf("sleeps = %v, want 2 (one per throttled attempt)", f.sleeps.d)
	}
	f.emu.FailNextCalls(10, http.StatusServiceUnavailable)
	_, err := f.client.VRead(context.Background(), "ds1", "Patient", "p1", "1")
	var api *fhirrest.APIError
	if !errors.As(err, &api) || api.StatusCode != http.StatusServiceUnavailable || errors.Is(err, fhirrest.ErrVersionGone) {
		t.Fatalf("vread through 503s: %v, want a 503 APIError", err)
	}
	if !fhirrest.IsRetryable(err) {
		t.Errorf("a 503 should be retryable")
	}
	bad := newFixture(t, "wrong-secret", 1)
	bds, _ := bad.emu.Datastore("ds1")
	if _, err := bds.Load("Patient", "p1", []byte(`{"resourceType":"Patient","id":"p1"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.client.VRead(context.Background(), "ds1", "Patient", "p1", "1"); err == nil || errors.Is(err, fhirrest.ErrVersionGone) {
		t.Fatalf("wrongly signed vread: %v", err)
	}
}
