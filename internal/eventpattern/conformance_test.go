package eventpattern

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// conformanceFile is the conformance suite: cases written from the
// EventBridge user guide, shared with local/fakeeventbridge, which runs them
// through TestEventPattern.
const conformanceFile = "testdata/conformance.json"

type conformanceSuite struct {
	EnvelopeDefaults map[string]any             `json:"envelopeDefaults"`
	Events           map[string]json.RawMessage `json:"events"`
	Cases            []conformanceCase          `json:"cases"`
}

type conformanceCase struct {
	Name     string          `json:"name"`
	Doc      string          `json:"doc"`
	Pattern  json.RawMessage `json:"pattern"`
	Event    json.RawMessage `json:"event"`
	EventRef string          `json:"eventRef"`
	Match    *bool           `json:"match"`
	Error    string          `json:"error"`
}

// patternText is the pattern as sent: a JSON string holds the exact text.
func (c conformanceCase) patternText(t *testing.T) string {
	t.Helper()
	if bytes.HasPrefix(bytes.TrimSpace(c.Pattern), []byte(`"`)) {
		var s string
		if err := json.Unmarshal(c.Pattern, &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return string(c.Pattern)
}

// eventText is the case's event with the missing envelope fields added.
func (s *conformanceSuite) eventText(t *testing.T, c conformanceCase) string {
	t.Helper()
	raw := c.Event
	if c.EventRef != "" {
		var ok bool
		if raw, ok = s.Events[c.EventRef]; !ok {
			t.Fatalf("unknown eventRef %q", c.EventRef)
		}
	}
	var ev map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	for k, v := range s.EnvelopeDefaults {
		if _, ok := ev[k]; !ok {
			ev[k] = v
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadConformance(t *testing.T) *conformanceSuite {
	t.Helper()
	b, err := os.ReadFile(conformanceFile)
	if err != nil {
		t.Fatal(err)
	}
	var s conformanceSuite
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", conformanceFile, err)
	}
	for i, c := range s.Cases {
		if c.Name == "" || (c.Match == nil) == (c.Error == "") || (c.Error == "" && len(c.Event) == 0 && c.EventRef == "") {
			t.Fatalf("%s: case %d (%q) needs a name, an event unless it expects an error, and exactly one of match and error", conformanceFile, i, c.Name)
		}
	}
	return &s
}

// TestConformance runs the conformance suite through Parse and Matches.
func TestConformance(t *testing.T) {
	s := loadConformance(t)
	passed := 0
	for _, c := range s.Cases {
		ok := t.Run(c.Name, func(t *testing.T) {
			src := c.patternText(t)
			p, err := Parse(src)
			if c.Error != "" {
				var ie *InvalidError
				if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.Error) {
					t.Fatalf("[%s] Parse(%s) = %v, want an InvalidError containing %q", c.Doc, src, err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("[%s] Parse(%s): %v", c.Doc, src, err)
			}
			ev := s.eventText(t, c)
			got, err := p.Matches([]byte(ev))
			if err != nil {
				t.Fatalf("Matches: %v", err)
			}
			if got != *c.Match {
				t.Errorf("[%s] pattern %s on event %s = %v, want %v", c.Doc, src, ev, got, *c.Match)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("conformance: %d of %d cases pass", passed, len(s.Cases))
}
