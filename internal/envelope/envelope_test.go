package envelope

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := ParseTime(s)
	if err != nil {
		t.Fatalf("ParseTime(%q): %v", s, err)
	}
	return tm
}

func TestFormatTimeIsUTCWithMilliseconds(t *testing.T) {
	loc := time.FixedZone("x", -4*3600)
	tm := time.Date(2026, 11, 21, 6, 0, 0, 123456789, loc)
	if got, want := FormatTime(tm), "2026-11-21T10:00:00.123Z"; got != want {
		t.Fatalf("FormatTime = %q, want %q", got, want)
	}
	if got, want := FormatTime(time.Time{}), "0001-01-01T00:00:00.000Z"; got != want {
		t.Fatalf("FormatTime(zero) = %q, want %q", got, want)
	}
}

func TestParseTimeAcceptsFHIRInstants(t *testing.T) {
	want := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{
		"2026-11-21T10:00:00Z",
		"2026-11-21T10:00:00.000Z",
		"2026-11-21T10:00:00.000000000Z",
		"2026-11-21T12:00:00+02:00",
		"2026-11-21T05:30:00.0-04:30",
		"2026-11-22T00:00:00+14:00",
	} {
		got, err := ParseTime(s)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", s, err)
			continue
		}
		if !got.Equal(want) || got.Location() != time.UTC {
			t.Errorf("ParseTime(%q) = %v, want %v in UTC", s, got, want)
		}
	}
	got := mustTime(t, "2026-11-21T10:00:00.1234567Z")
	if got.Nanosecond() != 123456700 {
		t.Errorf("fraction digits lost: %d ns", got.Nanosecond())
	}
	for _, s := range []string{"", "2026-11-21", "2026-11-21T10:00Z", "2026-11-21T10:00:00", "yesterday", "2026-13-01T00:00:00Z",
		"2026-11-21t10:00:00z", "2026-11-21T10:00:00.Z", "2026-11-21T10:00:00.1234567890Z", "2026-11-21T10:00:00+15:00",
		"2026-11-21T10:00:00+14:30", "2026-11-21 10:00:00Z", "2026-11-21T10:00:00+0200", "2026-11-21T10:00:00Z "} {
		if _, err := ParseTime(s); err == nil {
			t.Errorf("ParseTime(%q) accepted", s)
		}
	}
}

func TestWindowEdgesAreHalfOpen(t *testing.T) {
	w := Window{Since: mustTime(t, "2026-11-21T10:00:00.000Z"), Until: mustTime(t, "2026-11-21T10:05:00.000Z")}
	cases := map[string]bool{
		"2026-11-21T10:00:00.000Z":  false, // == since
		"2026-11-21T10:00:00.001Z":  true,
		"2026-11-21T10:05:00.000Z":  true, // == until
		"2026-11-21T10:05:00.001Z":  false,
		"2026-11-21T09:00:00.000Z":  false,
		"2026-11-21T12:04:00+02:00": true,
	}
	for s, want := range cases {
		if got := w.Contains(mustTime(t, s)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", s, got, want)
		}
	}
	if w.Empty() {
		t.Error("5-minute window reported empty")
	}
	if !(Window{Since: w.Until, Until: w.Until}).Empty() || !(Window{Since: w.Until, Until: w.Since}).Empty() {
		t.Error("zero-length or inverted window not empty")
	}
	if got, want := w.String(), "(2026-11-21T10:00:00.000Z, 2026-11-21T10:05:00.000Z]"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestWindowJSONRoundTrip(t *testing.T) {
	w := Window{Since: mustTime(t, "2026-11-21T10:00:00.250Z"), Until: mustTime(t, "2026-11-21T10:05:00Z")}
	b, err := json.Marshal(struct {
		W Window `json:"window"`
	}{w})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"window":{"since":"2026-11-21T10:00:00.250Z","until":"2026-11-21T10:05:00.000Z"}}`; string(b) != want {
		t.Fatalf("marshal = %s, want %s", b, want)
	}
	var back struct {
		W Window `json:"window"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.W.Since.Equal(w.Since) || !back.W.Until.Equal(w.Until) {
		t.Fatalf("round trip = %v, want %v", back.W, w)
	}
	for _, bad := range []string{`{"since":"2026-11-21T10:00:00Z"}`, `{"since":"x","until":"2026-11-21T10:00:00Z"}`, `[]`} {
		var w2 Window
		if err := json.Unmarshal([]byte(bad), &w2); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

func TestEventIDAndVersions(t *testing.T) {
	if got := EventID("Patient", "123", "2"); got != "Patient/123/_history/2" {
		t.Fatalf("EventID = %q", got)
	}
	line := []byte(`{"resourceType":"Patient","id":"123"}`)
	if got := ContentVersion(line); len(got) != 18 || !strings.HasPrefix(got, "h-") || strings.Trim(got[2:], "0123456789abcdef") != "" {
		t.Fatalf("ContentVersion = %q, want h- and 16 lowercase hex digits", got)
	}
	if ContentVersion(line) != ContentVersion(append([]byte(nil), line...)) {
		t.Fatal("ContentVersion not deterministic")
	}
	if ContentVersion(line) == ContentVersion([]byte(`{"resourceType":"Patient","id":"124"}`)) {
		t.Fatal("different lines, same content version")
	}
	if got := VersionOf(Resource{VersionID: "7", Raw: line}); got != "7" {
		t.Fatalf("VersionOf with versionId = %q", got)
	}
	if got := VersionOf(Resource{Raw: line}); got != ContentVersion(line) {
		t.Fatalf("VersionOf without versionId = %q", got)
	}
}

func TestContentVersionMatchesSHA256Prefix(t *testing.T) {
	// echo -n 'abc' | sha256sum → ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
	if got, want := ContentVersion([]byte("abc")), "h-ba7816bf8f01cfea"; got != want {
		t.Fatalf("ContentVersion(abc) = %q, want %q", got, want)
	}
}

var testWindow = Window{
	Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	Until: time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC),
}

func TestAppendDetailCopiesLineByteForByte(t *testing.T) {
	// Unknown fields, primitive extensions, HTML characters, non-compact spacing
	// and escapes: all must survive untouched.
	line := []byte(`{"resourceType":"Patient", "id":"p1","meta":{"versionId":"3","lastUpdated":"2026-11-21T10:01:00.000Z"},` +
		`"_birthDate":{"extension":[{"url":"x","valueString":"<a&b>"}]},"unknownField":  [1, 2.50, "\u00e9\/"]}`)
	r := Resource{ResourceType: "Patient", ID: "p1", VersionID: "3", LastUpdated: "2026-11-21T10:01:00.000Z", Raw: line}
	prefix := []byte("KEEP")
	out := AppendDetail(prefix, r, testWindow, ExportRef{DatastoreID: "ds1", JobID: "job1"}, nil)
	if !bytes.HasPrefix(out, []byte("KEEP")) {
		t.Fatal("dst prefix lost")
	}
	out = out[4:]
	want := `{"schemaVersion":"1","eventId":"Patient/p1/_history/3","operation":"upsert","resourceType":"Patient",` +
		`"resourceId":"p1","versionId":"3","lastUpdated":"2026-11-21T10:01:00.000Z",` +
		`"window":{"since":"2026-11-21T10:00:00.000Z","until":"2026-11-21T10:05:00.000Z"},` +
		`"export":{"datastoreId":"ds1","jobId":"job1"},"resource":` + string(line) + `}`
	if string(out) != want {
		t.Fatalf("detail =\n%s\nwant\n%s", out, want)
	}
	var d Detail
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.Resource, line) || d.ResourceRef != nil {
		t.Fatalf("decoded resource differs: %s", d.Resource)
	}
}

func TestAppendDetailClaimCheck(t *testing.T) {
	line := []byte(`{"resourceType":"Observation","id":"o1"}`)
	r := Resource{ResourceType: "Observation", ID: "o1", LastUpdated: "2026-11-21T10:01:00Z", Raw: line}
	ref := &ResourceRef{Bucket: "b", Key: "claim-check/Observation/o1/_history/" + ContentVersion(line) + ".json", Size: int64(len(line)), SHA256: strings.Repeat("ab", 32)}
	out := AppendDetail(nil, r, testWindow, ExportRef{DatastoreID: "ds", JobID: "j"}, ref)
	var d Detail
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("invalid JSON %s: %v", out, err)
	}
	if d.Resource != nil {
		t.Fatalf("claim-checked detail also carries resource: %s", out)
	}
	if d.ResourceRef == nil || *d.ResourceRef != *ref {
		t.Fatalf("resourceRef = %+v, want %+v", d.ResourceRef, ref)
	}
	if d.VersionID != ContentVersion(line) || d.EventID != "Observation/o1/_history/"+ContentVersion(line) {
		t.Fatalf("content version not used: %s / %s", d.VersionID, d.EventID)
	}
	if !bytes.Contains(out, []byte(`"resourceRef":{"bucket":"b","key":`)) {
		t.Fatalf("field order: %s", out)
	}
}

func TestAppendDetailEscapesUntrustedStrings(t *testing.T) {
	r := Resource{
		ResourceType: "Pa\"tient\\",
		ID:           "id\n\x01\t\r\u2028<>&é",
		VersionID:    "v\xff",
		LastUpdated:  "\x00",
		Raw:          []byte(`{}`),
	}
	out := AppendDetail(nil, r, testWindow, ExportRef{DatastoreID: "d\"", JobID: "j\\"}, nil)
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %q", out)
	}
	var d Detail
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatal(err)
	}
	if d.ResourceType != r.ResourceType || d.ResourceID != r.ID || d.LastUpdated != r.LastUpdated ||
		d.Export.DatastoreID != "d\"" || d.Export.JobID != "j\\" {
		t.Fatalf("decoded %+v", d)
	}
	if d.VersionID != "v\uFFFD" {
		t.Fatalf("invalid UTF-8 not replaced: %q", d.VersionID)
	}
	if d.EventID != EventID(r.ResourceType, r.ID, "v\uFFFD") {
		t.Fatalf("eventId = %q", d.EventID)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\"\\/", "\x00\x1f\x7f", "é€𝄞", "\xff\xfe", "a\u2028b\u2029c", "\xed\xa0\x80"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("AppendString(%q) = %s: %v", s, got, err)
			continue
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Errorf("AppendString(%q) decodes to %q, encoding/json gives %q", s, back, wantBack)
		}
	}
}

func BenchmarkAppendDetail(b *testing.B) {
	line := bytes.Repeat([]byte(" "), 2000)
	line = append(append([]byte(`{"resourceType":"Observation","id":"0023b3a7-2ded-840c-ee5b-6b123fdcfb0b","x":"`), line...), `"}`...)
	r := Resource{ResourceType: "Observation", ID: "0023b3a7-2ded-840c-ee5b-6b123fdcfb0b", LastUpdated: "2026-11-21T10:01:00.000Z", Raw: line}
	exp := ExportRef{DatastoreID: "0123456789abcdef0123456789abcdef", JobID: "fedcba9876543210fedcba9876543210"}
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendDetail(buf[:0], r, testWindow, exp, nil)
	}
}

func TestParseTimeErrorHidesValue(t *testing.T) {
	_, err := ParseTime("Jane Doe 1970")
	if err == nil || strings.Contains(err.Error(), "Jane") {
		t.Fatalf("error %v", err)
	}
}

func TestAppendDeleteDetailIsByteExact(t *testing.T) {
	d := Deletion{ResourceType: "Patient", ResourceID: "p1", VersionID: "4", LastUpdated: "2026-11-21T10:02:00.500Z",
		Window: testWindow, Export: ExportRef{DatastoreID: "ds1", JobID: "job1"}}
	out := AppendDeleteDetail([]byte("KEEP"), d)
	if !bytes.HasPrefix(out, []byte("KEEP")) {
		t.Fatal("dst prefix lost")
	}
	out = out[4:]
	want := `{"schemaVersion":"1","eventId":"Patient/p1/_history/4","operation":"delete","resourceType":"Patient",` +
		`"resourceId":"p1","versionId":"4","lastUpdated":"2026-11-21T10:02:00.500Z",` +
		`"window":{"since":"2026-11-21T10:00:00.000Z","until":"2026-11-21T10:05:00.000Z"},` +
		`"export":{"datastoreId":"ds1","jobId":"job1"}}`
	if string(out) != want {
		t.Fatalf("detail =\n%s\nwant\n%s", out, want)
	}
	var got Detail
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Operation != OperationDelete || got.Resource != nil || got.ResourceRef != nil || got.EventID != EventID("Patient", "p1", "4") {
		t.Fatalf("decoded %+v", got)
	}
	// The upsert of the same version has the same prefix up to the operation.
	up := AppendDetail(nil, Resource{ResourceType: "Patient", ID: "p1", VersionID: "4", LastUpdated: d.LastUpdated, Raw: []byte(`{}`)}, testWindow, d.Export, nil)
	if i := bytes.Index(up, []byte(`"operation"`)); !bytes.Equal(up[:i], out[:i]) {
		t.Fatalf("delete and upsert envelopes differ before operation:\n%s\n%s", up, out)
	}
}

func TestAppendDeleteDetailEscapesUntrustedStrings(t *testing.T) {
	d := Deletion{ResourceType: "Pa\"t", ResourceID: "id\n\u2028", VersionID: "v\xff", LastUpdated: "\x00",
		Window: testWindow, Export: ExportRef{DatastoreID: "d\"", JobID: "j\\"}}
	out := AppendDeleteDetail(nil, d)
	var got Detail
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("invalid JSON %q: %v", out, err)
	}
	if got.ResourceType != d.ResourceType || got.ResourceID != d.ResourceID || got.VersionID != "v\uFFFD" ||
		got.EventID != EventID(d.ResourceType, d.ResourceID, "v\uFFFD") || got.Export.JobID != "j\\" {
		t.Fatalf("decoded %+v", got)
	}
}

func TestHardDeleteVersion(t *testing.T) {
	if got := HardDeleteVersion("7"); got != "7-deleted" {
		t.Fatalf("HardDeleteVersion = %q", got)
	}
	if HardDeleteVersion("h-0123456789abcdef") == HardDeleteVersion("h-0123456789abcdee") {
		t.Fatal("different versions, same hard-delete version")
	}
}

func TestSnapshotSince(t *testing.T) {
	if got := FormatTime(SnapshotSince); got != "0001-01-01T00:00:00.000Z" {
		t.Fatalf("SnapshotSince = %s", got)
	}
	if !IsSnapshotSince(SnapshotSince) || IsSnapshotSince(SnapshotSince.Add(time.Millisecond)) {
		t.Fatal("IsSnapshotSince")
	}
	w := Window{Since: SnapshotSince, Until: testWindow.Until}
	if !w.Contains(mustTime(t, "1970-01-01T00:00:00Z")) || !w.Contains(testWindow.Until) {
		t.Fatal("snapshot window does not contain the past")
	}
}
