package fakehealthlake_test

import (
	"net/http"
	"strings"
	"testing"
)

// The stored bytes: compact JSON with resourceType, id and meta (the
// emulator's versionId and lastUpdated, then the other members of a given
// meta) first, the other members in their order; member names written as
// json.Marshal writes them, values as given.
func TestStoredBytes(t *testing.T) { eachStore(t, testStoredBytes) }

func testStoredBytes(t *testing.T) {
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	const m = `"meta":{"versionId":"1","lastUpdated":"2026-11-21T10:00:00.000Z"`
	for _, c := range []struct{ id, in, want string }{
		{"e0", ` { "resourceType" : "Patient" , "id":"e0", "active" : true } `,
			`{"resourceType":"Patient","id":"e0",` + m + `},"active":true}`},
		{"e1", `{"resourceType":"Patient","id":"e1","meta":{"versionId":"9","source":"s","lastUpdated":"x","versionId":"8","tag":[ {"code":"a"} ]},"a<b":1,"x\u0041":"\u00e9<>&","name":[{"text":"A <b> & \u00e9 é"}]}`,
			`{"resourceType":"Patient","id":"e1",` + m + `,"source":"s","tag":[{"code":"a"}]},"a\u003cb":1,"xA":"\u00e9<>&","name":[{"text":"A <b> & \u00e9 é"}]}`},
		{"e2", `{"resource\u0054ype":"Patient","i\u0064":"e2","z":null,"y":[1,2.5e3,-0,"]}"],"q":{"a":{"b":[]}}}`,
			`{"resourceType":"Patient","id":"e2",` + m + `},"z":null,"y":[1,2.5e3,-0,"]}"],"q":{"a":{"b":[]}}}`},
		{"e3", `{"resourceType":"Patient","meta":{},"é":1,"\u2028":2}`,
			`{"resourceType":"Patient","id":"e3",` + m + `},"é":1,"\u2028":2}`},
	} {
		mustLoad(t, ds, "Patient", c.id, c.in)
		if got, _ := ds.Read("Patient", c.id); string(got) != c.want {
			t.Errorf("%s stored\n%s\nwant\n%s", c.id, got, c.want)
		}
	}
}

// A refused write leaves nothing behind: no resource, no version. (Of
// repeated members the first counts.)
func TestRefusedWritesStoreNothing(t *testing.T) {
	f := setup(t, nil)
	ds, _ := f.emu.Datastore("ds1")
	for _, body := range []string{
		`{"resourceType":"Patient","id":"p1","meta":"x"}`,
		`{"resourceType":"Patient","id":"p1","meta":[]}`,
		`{"resourceType":"Patient","id":"p1"} {}`,
		`{"resourceType":"Patient","id":"p1",}`,
		`[{"resourceType":"Patient"}]`,
		`{"resourceType":"Observation","resourceType":"Patient","id":"p1"}`,
		`{"resourceType":"Patient","id":"p2","id":"p1"}`,
		`{"resourceType":"Patient","id":5}`,
		``,
	} {
		if st, out := f.raw(t, http.MethodPut, "Patient/p1", body); st != http.StatusBadRequest || !strings.Contains(out, "OperationOutcome") {
			t.Errorf("PUT %s = %d %s, want 400", body, st, out)
		}
	}
	// Load does not validate with golang-fhir-models: its own checks refuse.
	for _, body := range []string{`{"resourceType":"Patient","meta":"x"}`, `{"resourceType":"Patient","id":"p1"} {}`} {
		if _, err := ds.Load("Patient", "p1", []byte(body)); err == nil {
			t.Errorf("Load %s succeeded", body)
		}
	}
	if st, _ := f.raw(t, http.MethodGet, "Patient/p1", ""); st != http.StatusNotFound || ds.Count() != 0 {
		t.Errorf("after refused writes: GET = %d, count %d", st, ds.Count())
	}
	if st, _ := f.raw(t, http.MethodGet, "Patient/p1/_history", ""); st != http.StatusNotFound {
		t.Errorf("history after refused writes = %d", st)
	}
}
