package envelope

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzBuild feeds arbitrary strings and JSON objects to AppendDetail: the
// output must be valid JSON that decodes into the same values, with the
// resource bytes unchanged.
func FuzzBuild(f *testing.F) {
	f.Add("Patient", "123", "2", "2026-11-21T10:00:00.000Z", []byte(`{"resourceType":"Patient","id":"123"}`), false)
	f.Add("Obs\"", "a\\b\n", "", "\x00\xff", []byte(` {"a":"<&>","b":[1,2.0e3,null]} `), true)
	f.Add("", "", "", "", []byte(`{}`), false)
	f.Add("\u2028", "\xed\xa0\x80", "v\t", "é", []byte(`{"x":"\u00e9\ud83d\ude00"}`), true)
	f.Fuzz(func(t *testing.T, typ, id, version, lastUpdated string, raw []byte, claimCheck bool) {
		trimmed := bytes.Trim(raw, " \t\r\n")
		if !json.Valid(raw) || len(trimmed) == 0 || trimmed[0] != '{' {
			t.Skip("resource must be one JSON object")
		}
		r := Resource{ResourceType: typ, ID: id, VersionID: version, LastUpdated: lastUpdated, Raw: raw}
		exp := ExportRef{DatastoreID: id, JobID: typ}
		var ref *ResourceRef
		if claimCheck {
			ref = &ResourceRef{Bucket: typ, Key: lastUpdated, Size: int64(len(raw)), SHA256: version}
		}
		out := AppendDetail([]byte("x"), r, testWindow, exp, ref)[1:]
		if !json.Valid(out) {
			t.Fatalf("invalid JSON: %q", out)
		}
		var d Detail
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatalf("decode %q: %v", out, err)
		}
		// encoding/json's view of each string is the reference, including its
		// replacement of invalid UTF-8.
		norm := func(s string) string {
			b, _ := json.Marshal(s)
			var back string
			_ = json.Unmarshal(b, &back)
			return back
		}
		wantVersion := norm(VersionOf(r))
		checks := []struct{ name, got, want string }{
			{"schemaVersion", d.SchemaVersion, SchemaVersion},
			{"operation", d.Operation, OperationUpsert},
			{"resourceType", d.ResourceType, norm(typ)},
			{"resourceId", d.ResourceID, norm(id)},
			{"versionId", d.VersionID, wantVersion},
			{"lastUpdated", d.LastUpdated, norm(lastUpdated)},
			{"eventId", d.EventID, norm(EventID(typ, id, VersionOf(r)))},
			{"datastoreId", d.Export.DatastoreID, norm(id)},
			{"jobId", d.Export.JobID, norm(typ)},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
			}
		}
		if !d.Window.Since.Equal(testWindow.Since) || !d.Window.Until.Equal(testWindow.Until) {
			t.Errorf("window = %v", d.Window)
		}
		if claimCheck {
			if d.Resource != nil || d.ResourceRef == nil {
				t.Fatalf("claim-checked detail: resource %q, ref %v", d.Resource, d.ResourceRef)
			}
			want := ResourceRef{Bucket: norm(typ), Key: norm(lastUpdated), Size: int64(len(raw)), SHA256: norm(version)}
			if *d.ResourceRef != want {
				t.Errorf("resourceRef = %+v, want %+v", *d.ResourceRef, want)
			}
			return
		}
		if d.ResourceRef != nil {
			t.Fatal("inline detail carries resourceRef")
		}
		if !bytes.Equal(d.Resource, trimmed) {
			t.Fatalf("resource bytes changed:\n got %q\nwant %q", d.Resource, trimmed)
		}
		if !bytes.Contains(out, raw) {
			t.Fatal("raw line not copied byte for byte")
		}
	})
}
