package change

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

var window = envelope.Window{
	Since: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC),
	Until: time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC),
}

func line(typ, id, version, lastUpdated string) string {
	meta := `"meta":{`
	if version != "" {
		meta += `"versionId":"` + version + `"`
		if lastUpdated != "" {
			meta += ","
		}
	}
	if lastUpdated != "" {
		meta += `"lastUpdated":"` + lastUpdated + `"`
	}
	return `{"resourceType":"` + typ + `","id":"` + id + `",` + meta + `}}`
}

// classifyAll reads ndjson with the real reader and classifies every line.
func classifyAll(t *testing.T, c Classifier, ndjson string, level fhir.Validation) ([]Kind, []string, Counts) {
	t.Helper()
	r := fhir.NewReader(strings.NewReader(ndjson), fhir.Options{File: "test.ndjson", Validation: level})
	var kinds []Kind
	var reasons []string
	var counts Counts
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		k, reason := c.Classify(l)
		kinds = append(kinds, k)
		reasons = append(reasons, reason)
		counts.Add(k)
	}
	counts.Blank = r.Stats().Blank
	return kinds, reasons, counts
}

func TestClassifyWindowEdges(t *testing.T) {
	c := Classifier{Window: window}
	cases := []struct {
		lastUpdated string
		want        Kind
	}{
		{"2026-11-21T10:00:00.000Z", KindOutsideWindow}, // == since: belongs to the previous window
		{"2026-11-21T10:00:00Z", KindOutsideWindow},
		{"2026-11-21T12:00:00.000+02:00", KindOutsideWindow}, // == since in another offset
		{"2026-11-21T10:00:00.001Z", KindEvent},
		{"2026-11-21T10:00:00.0001Z", KindEvent}, // sub-millisecond after since
		{"2026-11-21T10:05:00.000Z", KindEvent},  // == until: this window
		{"2026-11-21T05:05:00-05:00", KindEvent}, // == until in another offset
		{"2026-11-21T10:05:00.001Z", KindOutsideWindow},
		{"2026-11-21T10:05:00.0000001Z", KindOutsideWindow},
		{"2025-01-01T00:00:00Z", KindOutsideWindow},
	}
	var nd strings.Builder
	for i, tc := range cases {
		nd.WriteString(line("Patient", "p"+string(rune('a'+i)), "1", tc.lastUpdated) + "\n")
	}
	kinds, reasons, counts := classifyAll(t, c, nd.String(), fhir.ValidateJSON)
	if len(kinds) != len(cases) {
		t.Fatalf("got %d lines, want %d", len(kinds), len(cases))
	}
	for i, tc := range cases {
		if kinds[i] != tc.want || reasons[i] != "" {
			t.Errorf("lastUpdated %s: got %v %q, want %v", tc.lastUpdated, kinds[i], reasons[i], tc.want)
		}
	}
	if counts.Events != 4 || counts.OutsideWindow != 6 || counts.Lines != 10 || !counts.Balanced() {
		t.Errorf("counts = %+v", counts)
	}
}

func TestClassifyQuarantineReasons(t *testing.T) {
	c := Classifier{Window: window}
	in := strings.Join([]string{
		line("Patient", "p1", "1", ""),                                             // no lastUpdated
		line("Patient", "p2", "1", "yesterday"),                                    // not an instant
		line("Patient", "p3", "1", "2026-11-21"),                                   // a date, not an instant
		line("Patient", "p 4", "1", "2026-11-21T10:01:00Z"),                        // id with a space
		line("Patient", "p5", "1/2", "2026-11-21T10:01:00Z"),                       // versionId with a slash
		line("patient", "p6", "1", "2026-11-21T10:01:00Z"),                         // lower-case type
		`{"resourceType":"Patient","meta":{"lastUpdated":"2026-11-21T10:01:00Z"}}`, // reader: id missing
		`{"resourceType":"Patient","id":"p8",`,                                     // reader: broken JSON
		"",                                                                         // blank: not a line
		line("Patient", "p9", "", "2026-11-21T10:01:00Z"),                          // fine: content-hash version
	}, "\n")
	kinds, reasons, counts := classifyAll(t, c, in, fhir.ValidateJSON)
	want := []struct {
		kind   Kind
		reason string
	}{
		{KindQuarantined, ReasonLastUpdatedMissing},
		{KindQuarantined, ReasonLastUpdatedInvalid},
		{KindQuarantined, ReasonLastUpdatedInvalid},
		{KindQuarantined, ReasonIDInvalid},
		{KindQuarantined, ReasonVersionIDInvalid},
		{KindQuarantined, ReasonTypeInvalid},
		{KindQuarantined, "*"}, // the reader's own reason
		{KindQuarantined, "*"},
		{KindEvent, ""},
	}
	if len(kinds) != len(want) {
		t.Fatalf("got %d lines, want %d: %v %q", len(kinds), len(want), kinds, reasons)
	}
	for i, w := range want {
		if kinds[i] != w.kind {
			t.Errorf("line %d: kind %v, want %v (%q)", i+1, kinds[i], w.kind, reasons[i])
		}
		if w.reason == "*" {
			if reasons[i] == "" {
				t.Errorf("line %d: quarantined without a reason", i+1)
			}
		} else if reasons[i] != w.reason {
			t.Errorf("line %d: reason %q, want %q", i+1, reasons[i], w.reason)
		}
	}
	if counts.Quarantined != 8 || counts.Events != 1 || counts.Blank != 1 || counts.Lines != 9 || !counts.Balanced() {
		t.Errorf("counts = %+v", counts)
	}
	// Reasons never carry the line's values.
	for _, r := range reasons {
		if strings.Contains(r, "yesterday") || strings.Contains(r, "p 4") {
			t.Errorf("reason leaks a value: %q", r)
		}
	}
}

func TestClassifyProblemWins(t *testing.T) {
	c := Classifier{Window: window}
	l := &fhir.Line{ResourceType: "Patient", ID: "p", LastUpdated: "2026-11-21T10:01:00Z", Problem: "resourceType is Observation but the file holds Patient"}
	if k, r := c.Classify(l); k != KindQuarantined || r != l.Problem {
		t.Fatalf("got %v %q", k, r)
	}
}

func TestClassifyFilter(t *testing.T) {
	in := line("Patient", "p1", "1", "2026-11-21T10:01:00Z") + "\n" +
		line("Observation", "o1", "1", "2026-11-21T10:01:00Z") + "\n" +
		line("Condition", "c1", "1", "2026-11-21T10:01:00Z") + "\n" +
		line("Observation", "o2", "1", "2026-11-21T11:00:00Z") + "\n" // outside wins over filtered
	cases := []struct {
		name   string
		filter Filter
		want   []Kind
	}{
		{"all", Filter{}, []Kind{KindEvent, KindEvent, KindEvent, KindOutsideWindow}},
		{"include", Filter{Include: []string{"Patient", "Condition"}}, []Kind{KindEvent, KindFiltered, KindEvent, KindOutsideWindow}},
		{"exclude", Filter{Exclude: []string{"Observation"}}, []Kind{KindEvent, KindFiltered, KindEvent, KindOutsideWindow}},
		{"exclude wins", Filter{Include: []string{"Patient"}, Exclude: []string{"Patient"}}, []Kind{KindFiltered, KindFiltered, KindFiltered, KindOutsideWindow}},
	}
	for _, tc := range cases {
		kinds, _, counts := classifyAll(t, Classifier{Window: window, Filter: tc.filter}, in, fhir.ValidateJSON)
		if !reflect.DeepEqual(kinds, tc.want) {
			t.Errorf("%s: kinds %v, want %v", tc.name, kinds, tc.want)
		}
		if !counts.Balanced() {
			t.Errorf("%s: counts unbalanced %+v", tc.name, counts)
		}
	}
}

func TestParseTypeList(t *testing.T) {
	cases := map[string][]string{
		"":                                   nil,
		" , ,":                               nil,
		"Patient":                            {"Patient"},
		"Patient, Observation":               {"Patient", "Observation"},
		" Observation ,Patient,Observation,": {"Observation", "Patient"},
	}
	for in, want := range cases {
		if got := ParseTypeList(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseTypeList(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindEvent: "event", KindOutsideWindow: "outsideWindow", KindFiltered: "filtered", KindQuarantined: "quarantined", Kind(42): "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}

func TestCountsUnknownKindUnbalances(t *testing.T) {
	var c Counts
	c.Add(KindEvent)
	c.Add(KindQuarantined)
	if !c.Balanced() || c.Lines != 2 {
		t.Fatalf("%+v", c)
	}
	c.Add(Kind(99))
	if c.Balanced() {
		t.Fatal("unknown kind counted as an outcome")
	}
}

func TestTrailingDataIsQuarantined(t *testing.T) {
	c := Classifier{Window: envelope.Window{Since: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}}
	l := &fhir.Line{ResourceType: "Patient", ID: "p1", LastUpdated: "2026-11-21T09:30:00Z", TrailingData: true}
	if kind, reason := c.Classify(l); kind != KindQuarantined || reason != ReasonTrailingData {
		t.Fatalf("Classify = %v, %q", kind, reason)
	}
}

func TestRepeatsBalanceTheCounts(t *testing.T) {
	var c Counts
	for _, k := range []Kind{KindEvent, KindRepeat, KindRepeat, KindOutsideWindow} {
		c.Add(k)
	}
	if c.OverlapSkipped != 2 || c.Events != 1 || c.Lines != 4 || !c.Balanced() {
		t.Errorf("counts %+v: want 2 overlap-skipped of 4 lines, balanced", c)
	}
	if KindRepeat.String() != "overlapSkipped" {
		t.Errorf("KindRepeat.String() = %q", KindRepeat.String())
	}
}

func TestFastPathSkipsBalanceTheCounts(t *testing.T) {
	var c Counts
	for _, k := range []Kind{KindFastPath, KindEvent, KindFastPath, KindRepeat, KindFastPath} {
		c.Add(k)
	}
	if c.FastPathSkipped != 3 || c.OverlapSkipped != 1 || c.Events != 1 || c.Lines != 5 || !c.Balanced() {
		t.Errorf("counts %+v: want 3 fast-path-skipped, 1 overlap-skipped of 5 lines, balanced", c)
	}
	if KindFastPath.String() != "fastPathSkipped" {
		t.Errorf("KindFastPath.String() = %q", KindFastPath.String())
	}
}
