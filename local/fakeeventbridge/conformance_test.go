package fakeeventbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/healthlake-cdc/healthlake-cdc/local/fakeeventbridge"
)

// conformanceFile is internal/eventpattern's conformance suite (cases written
// from the EventBridge user guide); here each case goes through the
// emulator's TestEventPattern with the real SDK client.
const conformanceFile = "../../internal/eventpattern/testdata/conformance.json"

type conformanceCase struct {
	Name     string          `json:"name"`
	Doc      string          `json:"doc"`
	Pattern  json.RawMessage `json:"pattern"`
	Event    json.RawMessage `json:"event"`
	EventRef string          `json:"eventRef"`
	Match    *bool           `json:"match"`
	Error    string          `json:"error"`
}

func TestConformanceThroughTestEventPattern(t *testing.T) {
	b, err := os.ReadFile(conformanceFile)
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		EnvelopeDefaults map[string]any             `json:"envelopeDefaults"`
		Events           map[string]json.RawMessage `json:"events"`
		Cases            []conformanceCase          `json:"cases"`
	}
	if err := json.Unmarshal(b, &suite); err != nil {
		t.Fatal(err)
	}
	c, _, _ := setup(t, fakeeventbridge.Options{})
	ctx := context.Background()
	passed := 0
	for _, cs := range suite.Cases {
		ok := t.Run(cs.Name, func(t *testing.T) {
			pattern := string(cs.Pattern)
			if bytes.HasPrefix(bytes.TrimSpace(cs.Pattern), []byte(`"`)) {
				if err := json.Unmarshal(cs.Pattern, &pattern); err != nil {
					t.Fatal(err)
				}
			}
			raw := cs.Event
			if cs.EventRef != "" {
				raw = suite.Events[cs.EventRef]
			}
			ev := map[string]any{}
			if len(raw) > 0 {
				d := json.NewDecoder(bytes.NewReader(raw))
				d.UseNumber()
				if err := d.Decode(&ev); err != nil {
					t.Fatalf("event: %v", err)
				}
			}
			for k, v := range suite.EnvelopeDefaults {
				if _, ok := ev[k]; !ok {
					ev[k] = v
				}
			}
			evText, _ := json.Marshal(ev)
			out, err := c.TestEventPattern(ctx, &sdk.TestEventPatternInput{EventPattern: aws.String(pattern), Event: aws.String(string(evText))})
			if cs.Error != "" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidEventPatternException" || !strings.Contains(ae.ErrorMessage(), cs.Error) {
					t.Fatalf("[%s] TestEventPattern(%s) = %v, want InvalidEventPatternException containing %q", cs.Doc, pattern, err, cs.Error)
				}
				return
			}
			if err != nil {
				t.Fatalf("[%s] TestEventPattern(%s): %v", cs.Doc, pattern, err)
			}
			if out.Result != *cs.Match {
				t.Errorf("[%s] TestEventPattern(%s, %s) = %v, want %v", cs.Doc, pattern, evText, out.Result, *cs.Match)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("conformance through TestEventPattern: %d of %d cases pass", passed, len(suite.Cases))
}

// TestEventsWithoutResources: AWS takes an event without resources in
// TestEventPattern and an entry without Resources in PutEvents, and rules
// with dotted keys and anything-but prefix lists match it.
func TestEventsWithoutResources(t *testing.T) {
	c, em, _ := setup(t, fakeeventbridge.Options{Buses: []string{"cdc"}})
	ctx := context.Background()
	ev := `{"id":"1","account":"123456789012","source":"healthlake.cdc","time":"2026-01-01T00:00:00Z","region":"us-east-1","detail-type":"FHIR Resource Changed","detail":{"resourceType":"Patient","operation":"delete"}}`
	out, err := c.TestEventPattern(ctx, &sdk.TestEventPatternInput{EventPattern: aws.String(`{"detail.operation":["delete"]}`), Event: aws.String(ev)})
	if err != nil || !out.Result {
		t.Fatalf("TestEventPattern without resources = %+v, %v", out, err)
	}
	for name, p := range map[string]string{
		"dotted":              `{"detail.operation":["delete"]}`,
		"anything-but-prefix": `{"detail":{"resourceType":[{"anything-but":{"prefix":["Obs","Enc"]}}]}}`,
	} {
		if _, err := c.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String(name), EventBusName: aws.String("cdc"), EventPattern: aws.String(p)}); err != nil {
			t.Fatalf("PutRule(%s): %v", p, err)
		}
	}
	put, err := c.PutEvents(ctx, &sdk.PutEventsInput{Entries: []types.PutEventsRequestEntry{entry("cdc", `{"resourceType":"Patient","operation":"delete"}`)}})
	if err != nil || put.FailedEntryCount != 0 {
		t.Fatalf("PutEvents without Resources = %+v, %v", put, err)
	}
	if st := em.Stats(); st.MatchedEvents != 2 {
		t.Fatalf("MatchedEvents = %d, want 2", st.MatchedEvents)
	}
	_, err = c.PutRule(ctx, &sdk.PutRuleInput{Name: aws.String("complex"), EventBusName: aws.String("cdc"),
		EventPattern: aws.String(`{"detail":{"stack":[{"wildcard":"*:stack/A/*"},{"wildcard":"*:stack/B/*"},{"wildcard":"*:stack/C/*"},{"wildcard":"*:stack/D/*"}]}}`)})
	if apiCode(err) != "InvalidEventPatternException" || !strings.Contains(err.Error(), "Rule is too complex") || !strings.Contains(err.Error(), "detail.stack") {
		t.Fatalf("PutRule of a too complex pattern: %v", err)
	}
}
