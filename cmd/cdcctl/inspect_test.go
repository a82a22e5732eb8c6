package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
)

const syntheaDir = "../../../shared/fhir-samples/synthea-10-patients"

type inspectResult struct {
	code    int
	details []envelope.Detail
	raw     [][]byte
	summary map[string]int64
	records []quarantineRecord
	stderr  string
}

func runInspectTest(t *testing.T, args ...string) inspectResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"inspect"}, args...), strings.NewReader(""), &stdout, &stderr)
	res := inspectResult{code: code, stderr: stderr.String()}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var d envelope.Detail
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("stdout line is not a detail: %v", err)
		}
		res.details = append(res.details, d)
		res.raw = append(res.raw, slices.Clone(sc.Bytes()))
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if code == exitUsage {
		return res
	}
	if err := json.Unmarshal([]byte(lines[0]), &res.summary); err != nil {
		t.Fatalf("first stderr line is not the summary: %q", lines[0])
	}
	for _, k := range []string{"lines", "events", "outsideWindow", "quarantined"} {
		if _, ok := res.summary[k]; !ok {
			t.Fatalf("summary lacks %q: %s", k, lines[0])
		}
	}
	for _, l := range lines[1:] {
		var r quarantineRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.File == "" || r.Line == 0 || r.Reason == "" {
			if code == exitFailure {
				continue // error messages of unreadable files
			}
			t.Fatalf("stderr line is not a quarantine record: %q", l)
		}
		res.records = append(res.records, r)
	}
	return res
}

// countResourceLines counts the lines of the files that hold a resourceType,
// independently of the reader.
func countResourceLines(t *testing.T, files []string) (resources, other int) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) == 0 {
				continue
			}
			var m map[string]any
			if json.Unmarshal(l, &m) == nil && m["resourceType"] != nil {
				resources++
			} else {
				other++
			}
		}
	}
	return resources, other
}

func TestInspectSynthea(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(syntheaDir, "*.ndjson"))
	if len(files) == 0 {
		t.Skip("Synthea sample not present")
	}
	resources, other := countResourceLines(t, files)
	// Synthea output carries no meta.lastUpdated (HealthLake adds it on
	// import). Without a window, inspect makes every resource line an event as
	// of the file's time and says how many took it ...
	res := runInspectTest(t, append([]string{"--type-from-name"}, files...)...)
	if res.summary["events"] != int64(resources) || res.summary["assumedLastUpdated"] != int64(resources) || res.summary["quarantined"] != int64(other) {
		t.Fatalf("no window: exit %d, summary %v; want %d events, all with an assumed lastUpdated", res.code, res.summary, resources)
	}
	for _, d := range res.details {
		if _, err := envelope.ParseTime(d.LastUpdated); err != nil {
			t.Fatalf("assumed lastUpdated %q is not an instant", d.LastUpdated)
		}
	}
	// ... while with a window, as in prepare-change, every such line is quarantined ...
	res = runInspectTest(t, append([]string{"--type-from-name", "--since", "2026-01-01T00:00:00Z"}, files...)...)
	if res.code != exitQuarantined || res.summary["events"] != 0 || res.summary["quarantined"] != int64(resources+other) {
		t.Fatalf("with a window: exit %d, summary %v", res.code, res.summary)
	}
	for _, r := range res.records {
		if !strings.HasSuffix(r.File, "log.ndjson") && r.Reason != change.ReasonLastUpdatedMissing {
			t.Fatalf("unexpected reason %+v", r)
		}
	}
	// ... and with an assumed lastUpdated every resource line becomes an event.
	res = runInspectTest(t, append([]string{"--type-from-name", "--default-last-updated", "2026-11-21T10:00:00Z", "--validate", "json"}, files...)...)
	if res.summary["lines"] != int64(resources+other) || res.summary["events"] != int64(resources) || len(res.details) != resources {
		t.Fatalf("summary %v, %d details; want %d events of %d lines", res.summary, len(res.details), resources, resources+other)
	}
	// Only the export log (no resourceType) is quarantined.
	if int64(other) != res.summary["quarantined"] || len(res.records) != other {
		t.Fatalf("quarantined %v, records %d, want %d", res.summary["quarantined"], len(res.records), other)
	}
	for _, r := range res.records {
		if !strings.HasSuffix(r.File, "log.ndjson") {
			t.Errorf("resource line quarantined: %+v", r)
		}
	}
	if other > 0 && res.code != exitQuarantined {
		t.Errorf("exit %d, want %d", res.code, exitQuarantined)
	}
	ids := map[string]bool{}
	for _, d := range res.details {
		if d.SchemaVersion != "1" || d.Export.DatastoreID != "local" || d.Export.JobID != "inspect" || d.LastUpdated != "2026-11-21T10:00:00.000Z" {
			t.Fatalf("detail %+v", d)
		}
		if !strings.HasPrefix(d.VersionID, "h-") || d.EventID != envelope.EventID(d.ResourceType, d.ResourceID, d.VersionID) {
			t.Fatalf("Synthea resources have no versionId; want content-hash versions, got %q / %q", d.VersionID, d.EventID)
		}
		if ids[d.EventID] {
			t.Fatalf("duplicate eventId %s", d.EventID)
		}
		ids[d.EventID] = true
	}
}

func TestInspectBytesAreVerbatim(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "generated", "*.ndjson"))
	if len(files) == 0 {
		t.Skip("testdata/generated not present")
	}
	resources, _ := countResourceLines(t, files)
	res := runInspectTest(t, append([]string{"--type-from-name", "--validate", "r4", "--datastore-id", "ds1", "--job-id", "j9"}, files...)...)
	if res.code != exitOK || res.summary["events"] != int64(resources) || len(res.details) != resources {
		t.Fatalf("exit %d, summary %v, %d details, want %d", res.code, res.summary, len(res.details), resources)
	}
	// Every inline resource equals a line of the input byte for byte.
	lines := map[string]bool{}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, l := range bytes.Split(b, []byte("\n")) {
			lines[string(l)] = true
		}
	}
	claimChecked := 0
	for _, d := range res.details {
		if d.Export.DatastoreID != "ds1" || d.Export.JobID != "j9" {
			t.Fatalf("export = %+v", d.Export)
		}
		if d.ResourceRef != nil {
			claimChecked++
			// The key prepare-change would write: inspect drives the same emitter.
			if d.ResourceRef.Key != publish.ClaimCheckKey(d.ResourceType, d.ResourceRef.SHA256) || d.ResourceRef.Size <= 256_000 {
				t.Errorf("claim check %+v", d.ResourceRef)
			}
			continue
		}
		if !lines[string(d.Resource)] {
			t.Fatalf("resource of %s is not an input line", d.EventID)
		}
	}
	// The generated set holds one DocumentReference over 256 KB.
	if claimChecked != 1 || res.summary["claimChecked"] != 1 {
		t.Errorf("claim-checked %d (summary %v), want 1", claimChecked, res.summary)
	}
}

func TestInspectWindowFlags(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "Patient.ndjson")
	in := `{"resourceType":"Patient","id":"a","meta":{"versionId":"1","lastUpdated":"2026-11-21T10:00:00.000Z"}}
{"resourceType":"Patient","id":"b","meta":{"versionId":"1","lastUpdated":"2026-11-21T10:02:00.000Z"}}

{"resourceType":"Patient","id":"c","meta":{"versionId":"1","lastUpdated":"2026-11-21T10:05:00.000Z"}}
{"resourceType":"Patient","id":"d","meta":{"versionId":"2","lastUpdated":"2026-11-21T10:05:00.001Z"}}
`
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runInspectTest(t, "--since", "2026-11-21T10:00:00Z", "--until", "2026-11-21T10:05:00.000Z", f)
	if res.code != exitOK {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var got []string
	for _, d := range res.details {
		got = append(got, d.ResourceID)
		if d.Window.Since.Format("15:04:05") != "10:00:00" || d.Window.Until.Format("15:04:05") != "10:05:00" {
			t.Errorf("window %v", d.Window)
		}
	}
	if strings.Join(got, ",") != "b,c" {
		t.Errorf("events for %v, want b,c (since exclusive, until inclusive)", got)
	}
	if res.summary["lines"] != 4 || res.summary["outsideWindow"] != 2 || res.summary["events"] != 2 || res.summary["blank"] != 1 {
		t.Errorf("summary %v", res.summary)
	}
	// Default window: everything.
	if res := runInspectTest(t, f); res.summary["events"] != 4 || res.code != exitOK {
		t.Errorf("default window: %v", res.summary)
	}
	// Only --since.
	if res := runInspectTest(t, "--since", "2026-11-21T10:04:00Z", f); res.summary["events"] != 2 || res.summary["outsideWindow"] != 2 {
		t.Errorf("--since only: %v", res.summary)
	}
	// Type filter.
	if res := runInspectTest(t, "--exclude", "Patient", f); res.summary["events"] != 0 || res.summary["filtered"] != 4 {
		t.Errorf("--exclude: %v", res.summary)
	}
	// stdin.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect", "-"}, strings.NewReader(in), &stdout, &stderr); code != exitOK || strings.Count(stdout.String(), "\n") != 4 {
		t.Errorf("stdin: exit %d, %q", code, stderr.String())
	}
}

// TestInspectBadCorpus runs every file of testdata/bad with the reader options
// recorded in its expected.json and checks line by line: lines with a reader
// problem are quarantined with that reason, lines the reader accepts become
// events or are quarantined only for meta.lastUpdated.
func TestInspectBadCorpus(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "bad")
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Skip("testdata/bad/expected.json not present")
	}
	var exp struct {
		Files []struct {
			File         string `json:"file"`
			DeclaredType string `json:"declaredType"`
			MaxLineBytes int    `json:"maxLineBytes"`
			Validation   string `json:"validation"`
			Blank        int64  `json:"blank"`
			Lines        []struct {
				Line    int64  `json:"line"`
				OK      bool   `json:"ok"`
				ID      string `json:"id"`
				Problem string `json:"problem"`
			} `json:"lines"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &exp); err != nil {
		t.Fatal(err)
	}
	ownReasons := []string{change.ReasonLastUpdatedMissing, change.ReasonLastUpdatedInvalid, change.ReasonIDInvalid, change.ReasonVersionIDInvalid, change.ReasonTypeInvalid}
	total := 0
	for _, f := range exp.Files {
		// An explicit window: lines without meta.lastUpdated are quarantined, as in prepare-change.
		args := []string{"--validate", f.Validation, "--max-line-bytes", itoa(f.MaxLineBytes), "--until", "9999-12-31T23:59:59Z"}
		if f.DeclaredType != "" {
			args = append(args, "--type", f.DeclaredType)
		}
		path := filepath.Join(dir, f.File)
		res := runInspectTest(t, append(args, path)...)
		byLine := map[int64]string{}
		for _, r := range res.records {
			if r.File != path {
				t.Errorf("%s: record names file %q", f.File, r.File)
			}
			byLine[r.Line] = r.Reason
		}
		events := map[string]bool{}
		for _, d := range res.details {
			events[d.ResourceID] = true
		}
		problems := 0
		for _, l := range f.Lines {
			reason, quarantined := byLine[l.Line]
			switch {
			case !l.OK:
				problems++
				if !quarantined || !strings.Contains(reason, l.Problem) {
					t.Errorf("%s line %d: reason %q, want one containing %q", f.File, l.Line, reason, l.Problem)
				}
			case quarantined:
				if !slices.Contains(ownReasons, reason) {
					t.Errorf("%s line %d: reader-accepted line quarantined for %q", f.File, l.Line, reason)
				}
			case l.ID != "" && !events[l.ID]:
				t.Errorf("%s line %d: no event for id %q", f.File, l.Line, l.ID)
			}
		}
		if res.summary["lines"] != int64(len(f.Lines)) || res.summary["blank"] != f.Blank ||
			res.summary["lines"] != res.summary["events"]+res.summary["quarantined"]+res.summary["outsideWindow"] {
			t.Errorf("%s: summary %v for %d lines, %d blank", f.File, res.summary, len(f.Lines), f.Blank)
		}
		if problems > 0 && res.code != exitQuarantined {
			t.Errorf("%s: exit %d, want %d", f.File, res.code, exitQuarantined)
		}
		total += len(f.Lines)
	}
	if total < 100 {
		t.Errorf("corpus checked only %d lines", total)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestInspectUsageAndFailures(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.ndjson")
	os.WriteFile(f, []byte(`{"resourceType":"Patient","id":"a","meta":{"lastUpdated":"2026-11-21T10:00:00Z"}}`+"\n"), 0o644)
	for _, args := range [][]string{
		{},                           // no files
		{"--bogus", f},               // unknown flag
		{"--validate", "strict", f},  // bad level
		{"--since", "yesterday", f},  // bad time
		{"--until", "2026-11-21", f}, // a date is not an instant
		{"--since", "2026-11-21T10:00:00Z", "--until", "2026-11-21T09:00:00Z", f}, // empty window
		{"--type", "Patient", "--type-from-name", f},
		{"--default-last-updated", "soon", f},
	} {
		if res := runInspectTest(t, args...); res.code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, res.code, exitUsage)
		}
	}
	res := runInspectTest(t, filepath.Join(dir, "missing.ndjson"), f)
	if res.code != exitFailure || res.summary["events"] != 1 {
		t.Errorf("unreadable file: exit %d, summary %v", res.code, res.summary)
	}
}

func TestDeclaredTypeFromName(t *testing.T) {
	cases := map[string]string{
		"Patient.000.ndjson":                                "Patient",
		"/x/y/Observation.ndjson":                           "Observation",
		"AllergyIntolerance-2139805480920260259-3-0.ndjson": "AllergyIntolerance",
		"log.ndjson":                                        "",
		"01-bad.ndjson":                                     "",
		"Patient.json":                                      "",
		"Patient.abc.ndjson":                                "",
	}
	for in, want := range cases {
		if got := declaredTypeFromName(in); got != want {
			t.Errorf("declaredTypeFromName(%q) = %q, want %q", in, got, want)
		}
	}
}
