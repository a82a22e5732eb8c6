package runlock

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

const syntheaPatients = "../../../shared/fhir-samples/synthea-10-patients/Patient.000.ndjson"

// syntheaIdentifiers returns the ids and identifier values of the sample
// patients (UUIDs, MRNs, SSNs, licence numbers), or made-up ones of the
// same shapes when the samples are absent.
func syntheaIdentifiers(t *testing.T) []string {
	t.Helper()
	ids := []string{"4e8d1c0a-77b2-93f1-0c5e-2a6b9d3f8e17", "999-41-7723", "S99954123", "X41230988X"}
	f, err := os.Open(syntheaPatients)
	if err != nil {
		return ids
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var p struct {
			ID         string `json:"id"`
			Identifier []struct {
				Value string `json:"value"`
			} `json:"identifier"`
		}
		if json.Unmarshal(sc.Bytes(), &p) != nil {
			continue
		}
		ids = append(ids, p.ID)
		for _, v := range p.Identifier {
			ids = append(ids, v.Value)
		}
	}
	return ids
}

func TestRedactHidesIdentifiersAndKeepsTheRest(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, id := range syntheaIdentifiers(t) {
		for _, text := range []string{
			"PublishFailed: entry Patient/" + id + "/_history/3 rejected",
			"ReadFailed: resource " + id + ": unexpected EOF.",
			`{"eventId":"Observation/` + id + `/_history/1"}`,
			"Patient/" + id,
		} {
			got := Redact(key, text)
			if strings.Contains(got, id) {
				t.Errorf("Redact(%q) = %q still holds the identifier", text, got)
			}
			if !strings.Contains(got, "[id:") {
				t.Errorf("Redact(%q) = %q has no keyed hash", text, got)
			}
		}
	}
	keep := "States.TaskFailed: BatchDeadlineExceeded: 3 of 10 files done at 2026-11-21T10:00:00.000Z " +
		"(arn:aws:states:us-east-1:123456789012:execution:cdc:run-1); status 429"
	if got := Redact(key, keep); got != keep {
		t.Errorf("Redact changed text without identifiers:\n got %q\nwant %q", got, keep)
	}
	a := Redact(key, "Patient/abc-123456")
	if a != Redact(key, "Patient/abc-123456") || a == Redact(key, "Patient/abc-123457") {
		t.Error("the keyed hash must be stable and tell ids apart")
	}
	if a == Redact([]byte("another key of thirty-two bytes!"), "Patient/abc-123456") {
		t.Error("the hash does not depend on the key")
	}
	if got := Redact(nil, "Patient/abc-123456 failed"); got != "[id] failed" {
		t.Errorf("without a key: %q", got)
	}
}

// Issue 11.10: a failed run's cause carrying resource ids (for example the
// Cause of a failed Map) reaches neither lastReason nor the history.
func TestFailReasonStoresNoResourceIdentifiers(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	ids := syntheaIdentifiers(t)
	reason := "States.TaskFailed: PublishFailed: 2 entries failed: Patient/" + ids[0] + "/_history/1, Patient/" + ids[len(ids)-1]
	f.start(t, "run-1")
	if _, err := f.store.Fail(ctx, FailRequest{Owner: arn("run-1"), RunID: "run-1", Reason: reason}); err != nil {
		t.Fatal(err)
	}
	st := f.status(t)
	stored := []string{st.LastRun.Reason, st.History[0].Reason}
	for _, r := range stored {
		if strings.Contains(r, ids[0]) || strings.Contains(r, ids[len(ids)-1]) || !strings.Contains(r, "[id:") ||
			!strings.HasPrefix(r, "States.TaskFailed: PublishFailed: 2 entries failed") {
			t.Fatalf("stored reason %q", r)
		}
	}
	raw, err := f.store.getState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.redactKey) != redactKeyBytes {
		t.Fatalf("redaction key of %d bytes stored, want %d", len(raw.redactKey), redactKeyBytes)
	}
	// The key is per deployment: another table hashes the same id differently.
	g := newFixture(t, nil)
	g.start(t, "run-1")
	if _, err := g.store.Fail(ctx, FailRequest{Owner: arn("run-1"), RunID: "run-1", Reason: reason}); err != nil {
		t.Fatal(err)
	}
	if other := g.status(t).LastRun.Reason; other == st.LastRun.Reason {
		t.Fatal("two deployments share the hash of an id")
	}
	// A second failure on the same table hashes the same id alike.
	f.start(t, "run-2")
	if _, err := f.store.Fail(ctx, FailRequest{Owner: arn("run-2"), RunID: "run-2", Reason: reason}); err != nil {
		t.Fatal(err)
	}
	if again := f.status(t).LastRun.Reason; again != st.LastRun.Reason {
		t.Fatalf("the same id hashed differently across runs: %q vs %q", again, st.LastRun.Reason)
	}
}
