package fastpath_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fastpath"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// The shapes of /tmp/subs-facts.md §3 ("Example notification payloads",
// managing-fhir-subs-ex-notif-payload.html), with concrete ids.
const (
	subURL   = "https://healthlake.us-east-1.amazonaws.com/datastore/ds1/r4/Subscription/sub-1"
	topicURL = "https://healthlake.us-east-1.amazonaws.com/datastore/ds1/r4/SubscriptionTopic/topic-1"
	encID    = "c5ae898f-1b2c-4d5e-8f90-0123456789ab"
	encID2   = "82776529-aaaa-4bbb-8ccc-0123456789ab"
	ts1      = "2025-09-05T00:18:43.393775234Z"
	ts2      = "2025-09-05T00:18:44.100000000Z"
)

// message is an EventBridge event as the rule's SQS target receives it.
func message(bundle string) string {
	return messageFrom("healthlake", "FHIR Subscription Notification", subURL, bundle)
}

func messageFrom(source, detailType, subscriptionURL, bundle string) string {
	return `{"version":"0","id":"6f2c1c8e-0d3b-4a8e-9b1f-2f0e5c7d9a10","detail-type":"` + detailType + `","source":"` + source +
		`","account":"436845984719","time":"2025-09-04T23:43:50Z","region":"us-east-1","resources":[],` +
		`"detail":{"subscriptionUrl":"` + subscriptionURL + `","notificationBundlePayload":` + bundle + `}}`
}

// status is the bundle's entry[0]: a SubscriptionStatus of typ.
func status(typ string, events ...string) string {
	s := `{"fullUrl":"urn:uuid:11111111-2222-3333-4444-555555555555","resource":{"resourceType":"SubscriptionStatus",` +
		`"id":"11111111-2222-3333-4444-555555555555","status":"active","type":"` + typ + `","eventsSinceSubscriptionStart":"-1",`
	if len(events) > 0 {
		s += `"notificationEvent":[` + strings.Join(events, ",") + `],`
	}
	return s + `"subscription":{"reference":"` + subURL + `"},"topic":"` + topicURL + `"}}`
}

// bundle is a notification bundle of entries (status first).
func bundle(entries ...string) string {
	return `{"resourceType":"Bundle","id":"b-1","type":"history","timestamp":"2025-09-04T23:43:50.341791934Z","status":"requested","entry":[` +
		strings.Join(entries, ",") + `]}`
}

// event is a notificationEvent (additionalContext omitted when ctx is "").
func event(id, ts, focus, ctx string) string {
	s := `{"eventNumber":"0","timestamp":"` + ts + `","focus":"` + focus + `",`
	if ctx != "" {
		s += `"additionalContext":"` + ctx + `",`
	}
	return s + `"id":"` + id + `"}`
}

// resource is a stored Encounter version, as HealthLake writes it.
func resource(id, version, lastUpdated string) string {
	return `{"resourceType":"Encounter","id":"` + id + `","status":"finished", "class":{"code":"AMB"},"length":{"value":1.50},"text":{"div":"caf\u00e9 \"q\""},` +
		`"meta":{"lastUpdated":"` + lastUpdated + `","versionId":"` + version + `"}}`
}

// full is a full-resource entry.
func full(res, method, url string) string {
	return `{"fullUrl":"` + url + `","resource":` + res + `,"request":{"method":"` + method + `","url":"` + url + `"}}`
}

const handshake = `{"resourceType":"Bundle","id":"b-0","type":"history","timestamp":"2025-09-04T23:43:50.341791934Z","status":"requested",` +
	`"entry":[{"fullUrl":"urn:uuid:hs-1","resource":{"resourceType":"SubscriptionStatus","id":"hs-1","status":"requested",` +
	`"type":"handshake","eventsSinceSubscriptionStart":"0","subscription":{"reference":"` + subURL + `"},"topic":"` + topicURL + `"}}]}`

func mustParse(t *testing.T, msg string) fastpath.Notification {
	t.Helper()
	n, err := fastpath.Parse([]byte(msg))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return n
}

func TestParseHandshakeAndHeartbeat(t *testing.T) {
	n := mustParse(t, message(handshake))
	if n.Type != fastpath.TypeHandshake || len(n.Changes) != 0 || len(n.Unrecognized) != 0 {
		t.Fatalf("handshake = %+v", n)
	}
	if n.SubscriptionURL != subURL || n.SubscriptionID != "sub-1" || n.DatastoreID != "ds1" {
		t.Errorf("subscription = %q %q %q", n.SubscriptionURL, n.SubscriptionID, n.DatastoreID)
	}
	n = mustParse(t, message(bundle(status("heartbeat"))))
	if n.Type != fastpath.TypeHeartbeat || len(n.Changes) != 0 {
		t.Fatalf("heartbeat = %+v", n)
	}
}

func TestParseIDOnlyEvent(t *testing.T) {
	n := mustParse(t, message(bundle(status("event-notification", event("8f4e9c1a-2b3d-4e5f-6a7b-8c9d0e1f2a3b", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")))))
	if n.Type != fastpath.TypeEventNotification || len(n.Changes) != 1 || len(n.Unrecognized) != 0 {
		t.Fatalf("id-only = %+v", n)
	}
	c := n.Changes[0]
	want := fastpath.Change{NotificationID: "8f4e9c1a-2b3d-4e5f-6a7b-8c9d0e1f2a3b", ResourceType: "Encounter", ID: encID, VersionID: "1",
		Operation: fastpath.OperationUpsert, Timestamp: ts1}
	if c.Resource != nil || c.NotificationID != want.NotificationID || c.ResourceType != want.ResourceType || c.ID != want.ID ||
		c.VersionID != want.VersionID || c.Operation != want.Operation || c.Timestamp != want.Timestamp || c.LastUpdated != "" {
		t.Fatalf("change = %+v, want %+v", c, want)
	}
	if !c.NeedsRead() || c.EventID() != "Encounter/"+encID+"/_history/1" {
		t.Errorf("NeedsRead %v, EventID %s", c.NeedsRead(), c.EventID())
	}
}

func TestParseFullResourceKeepsTheResourceBytes(t *testing.T) {
	res := resource(encID2, "1", "2025-09-05T00:18:43.219652906Z")
	msg := message(bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/1")),
		full(res, "CREATE", "Encounter/"+encID2)))
	n := mustParse(t, msg)
	if len(n.Changes) != 1 || len(n.Unrecognized) != 0 {
		t.Fatalf("full-resource = %+v", n)
	}
	c := n.Changes[0]
	if !bytes.Equal(c.Resource, []byte(res)) {
		t.Errorf("resource = %s, want the bytes as received %s", c.Resource, res)
	}
	if c.NeedsRead() || c.Operation != fastpath.OperationUpsert || c.VersionID != "1" || c.LastUpdated != "2025-09-05T00:18:43.219652906Z" || c.Timestamp != ts1 {
		t.Errorf("change = %+v", c)
	}
	// Without additionalContext the single entry gives the version.
	n = mustParse(t, message(bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID2, "")), full(res, "UPDATE", "Encounter/"+encID2))))
	if len(n.Changes) != 1 || n.Changes[0].VersionID != "1" || len(n.Unrecognized) != 0 {
		t.Errorf("full-resource without additionalContext = %+v", n)
	}
}

func TestParseSeveralEventsInOneBundle(t *testing.T) {
	v1, v2 := resource(encID2, "1", "2025-09-05T00:18:43.219Z"), resource(encID2, "2", "2025-09-05T00:18:44.001Z")
	msg := message(bundle(
		status("event-notification",
			event("n-1", ts1, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/1"),
			event("n-2", ts2, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/2"),
			event("n-3", ts2, "Encounter/"+encID, "Encounter/"+encID+"/_history/4"),   // over 256 KB: id-only
			event("n-2", ts2, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/2"), // delivered twice
		),
		full(v2, "UPDATE", "Encounter/"+encID2),
		full(v1, "CREATE", "Encounter/"+encID2),
		full(v2, "UPDATE", "Encounter/"+encID2+"/_history/2"), // a duplicate entry
	))
	n := mustParse(t, msg)
	if len(n.Unrecognized) != 0 {
		t.Errorf("unrecognized: %v", n.Unrecognized)
	}
	var got []string
	for _, c := range n.Changes {
		got = append(got, c.EventID())
	}
	want := []string{"Encounter/" + encID2 + "/_history/1", "Encounter/" + encID2 + "/_history/2", "Encounter/" + encID + "/_history/4"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if !bytes.Equal(n.Changes[0].Resource, []byte(v1)) || !bytes.Equal(n.Changes[1].Resource, []byte(v2)) || !n.Changes[2].NeedsRead() {
		t.Errorf("resources: %s / %s / %v", n.Changes[0].Resource, n.Changes[1].Resource, n.Changes[2].NeedsRead())
	}
}

func TestParseDeleteModelled(t *testing.T) {
	// full-resource: request.method DELETE and no resource (an inferred
	// shape, /tmp/subs-facts.md §3d); the version is additionalContext's.
	msg := message(bundle(status("event-notification", event("n-9", ts2, "Encounter/"+encID, "Encounter/"+encID+"/_history/3")),
		`{"fullUrl":"Encounter/`+encID+`","request":{"method":"DELETE","url":"Encounter/`+encID+`"}}`))
	n := mustParse(t, msg)
	if len(n.Changes) != 1 || len(n.Unrecognized) != 0 {
		t.Fatalf("delete = %+v", n)
	}
	c := n.Changes[0]
	if c.Operation != fastpath.OperationDelete || c.Resource != nil || c.VersionID != "3" || c.Timestamp != ts2 || c.NeedsRead() {
		t.Errorf("delete change = %+v", c)
	}
	// id-only: a deletion looks like any change, the read tells.
	n = mustParse(t, message(bundle(status("event-notification", event("n-9", ts2, "Encounter/"+encID, "Encounter/"+encID+"/_history/3")))))
	if len(n.Changes) != 1 || !n.Changes[0].NeedsRead() {
		t.Errorf("id-only delete = %+v", n)
	}
}

// Whole messages the fast path does not recognise: an *UnrecognizedError
// whose reason names no value.
func TestParseRefusesUnrecognizedMessages(t *testing.T) {
	ok := bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")))
	cases := map[string]struct{ msg, reason string }{
		"not JSON":                   {`{"source":`, fastpath.ReasonNotJSON},
		"an array":                   {`[` + message(ok) + `]`, fastpath.ReasonNotJSON},
		"empty":                      {``, fastpath.ReasonNotJSON},
		"HealthLake's job event":     {messageFrom("aws.healthlake", "FHIR Subscription Notification", subURL, ok), fastpath.ReasonSource},
		"no source":                  {strings.Replace(message(ok), `"source":"healthlake",`, ``, 1), fastpath.ReasonSource},
		"other detail-type":          {messageFrom("healthlake", "Data Store Creating", subURL, ok), fastpath.ReasonDetailType},
		"detail is a string":         {`{"source":"healthlake","detail-type":"FHIR Subscription Notification","detail":"x"}`, fastpath.ReasonDetail},
		"no subscriptionUrl":         {strings.Replace(message(ok), `"subscriptionUrl":"`+subURL+`",`, ``, 1), fastpath.ReasonDetail},
		"bundle is a string":         {messageFrom("healthlake", "FHIR Subscription Notification", subURL, `"{}"`), fastpath.ReasonDetail},
		"subscriptionUrl of a topic": {messageFrom("healthlake", "FHIR Subscription Notification", topicURL, ok), fastpath.ReasonSubscriptionURL},
		"subscriptionUrl without data store": {messageFrom("healthlake", "FHIR Subscription Notification", "https://example.org/r4/Subscription/sub-1", ok),
			fastpath.ReasonSubscriptionURL},
		"searchset bundle":                  {message(strings.Replace(ok, `"type":"history"`, `"type":"searchset"`, 1)), fastpath.ReasonBundle},
		"not a bundle":                      {message(`{"resourceType":"Parameters"}`), fastpath.ReasonBundle},
		"no entries":                        {message(bundle()), fastpath.ReasonStatus},
		"IG R4 Parameters form":             {message(bundle(`{"resource":{"resourceType":"Parameters","parameter":[]}}`)), fastpath.ReasonStatus},
		"query-status":                      {message(bundle(status("query-status"))), fastpath.ReasonNotificationType},
		"no type":                           {message(bundle(strings.Replace(status("event-notification"), `"type":"event-notification",`, ``, 1))), fastpath.ReasonNotificationType},
		"event-notification without events": {message(bundle(status("event-notification"))), fastpath.ReasonNoEvents},
	}
	for name, c := range cases {
		n, err := fastpath.Parse([]byte(c.msg))
		var ue *fastpath.UnrecognizedError
		if !errors.As(err, &ue) || ue.Reason != c.reason {
			t.Errorf("%s: Parse = %+v, %v; want reason %q", name, n, err, c.reason)
		}
	}
}

// Events and entries the fast path does not recognise: no change, a
// reason each; the recognised rest of the bundle still counts.
func TestParseSkipsUnrecognizedEventsAndEntries(t *testing.T) {
	encID3 := "0e0e0e0e-1111-4222-8333-444455556666"
	long := strings.Repeat("a", 65)
	cases := map[string]struct {
		events, entries []string
		reasons         []string
	}{
		"focus as an R4B Reference": {[]string{`{"timestamp":"` + ts1 + `","focus":{"reference":"Encounter/` + encID + `"},"id":"n-1"}`}, nil,
			[]string{fastpath.ReasonFocus}},
		"additionalContext as an array": {[]string{`{"timestamp":"` + ts1 + `","focus":"Encounter/` + encID +
			`","additionalContext":[{"reference":"Encounter/` + encID + `/_history/1"}],"id":"n-1"}`}, nil, []string{fastpath.ReasonAdditionalContext}},
		"focus and additionalContext disagree": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID3+"/_history/1")}, nil,
			[]string{fastpath.ReasonContextMismatch}},
		"id outside the pattern":   {[]string{event("n-1", ts1, "Encounter/"+long, "Encounter/"+long+"/_history/1")}, nil, []string{fastpath.ReasonFocus}},
		"type outside the pattern": {[]string{event("n-1", ts1, "encounter/"+encID, "encounter/"+encID+"/_history/1")}, nil, []string{fastpath.ReasonFocus}},
		"absolute focus":           {[]string{event("n-1", ts1, "https://x/r4/Encounter/"+encID, "")}, nil, []string{fastpath.ReasonFocus}},
		"version outside the pattern": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1_2")}, nil,
			[]string{fastpath.ReasonAdditionalContext}},
		"no timestamp": {[]string{`{"focus":"Encounter/` + encID + `","additionalContext":"Encounter/` + encID + `/_history/1","id":"n-1"}`}, nil,
			[]string{fastpath.ReasonTimestamp}},
		"timestamp not an instant": {[]string{event("n-1", "2025-09-05", "Encounter/"+encID, "Encounter/"+encID+"/_history/1")}, nil,
			[]string{fastpath.ReasonTimestamp}},
		"no id": {[]string{`{"timestamp":"` + ts1 + `","focus":"Encounter/` + encID + `","additionalContext":"Encounter/` + encID + `/_history/1"}`}, nil,
			[]string{fastpath.ReasonEventID}},
		"id-only without version":   {[]string{event("n-1", ts1, "Encounter/"+encID, "")}, nil, []string{fastpath.ReasonNoVersion}},
		"an event that is a string": {[]string{`"Encounter/x"`}, nil, []string{fastpath.ReasonEventShape}},
		"resource of another id": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(resource(encID3, "1", ts1), "CREATE", "Encounter/"+encID3)}, []string{fastpath.ReasonUnmatchedEntry, fastpath.ReasonEntryMismatch}},
		"resource of another version": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/2")},
			[]string{full(resource(encID, "1", ts1), "CREATE", "Encounter/"+encID)}, []string{fastpath.ReasonEntryMismatch, fastpath.ReasonUnmatchedEntry}},
		"resource without meta.lastUpdated": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(`{"resourceType":"Encounter","id":"`+encID+`","meta":{"versionId":"1"}}`, "CREATE", "Encounter/"+encID)},
			[]string{fastpath.ReasonEntryFields, fastpath.ReasonEntryMismatch}},
		"resource without meta.versionId": {[]string{event("n-1", ts1, "Encounter/"+encID, "")},
			[]string{full(`{"resourceType":"Encounter","id":"`+encID+`","meta":{"lastUpdated":"`+ts1+`"}}`, "CREATE", "Encounter/"+encID)},
			[]string{fastpath.ReasonEntryFields, fastpath.ReasonNoVersion}},
		"fullUrl of another resource": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(resource(encID, "1", ts1), "CREATE", "Encounter/"+encID3)}, []string{fastpath.ReasonEntryURL, fastpath.ReasonEntryMismatch}},
		"resource with a DELETE": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(resource(encID, "1", ts1), "DELETE", "Encounter/"+encID)}, []string{fastpath.ReasonEntryMethod, fastpath.ReasonEntryMismatch}},
		"resource with duplicate keys": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(`{"resourceType":"Encounter","id":"`+encID+`","id":"x","meta":{"versionId":"1","lastUpdated":"`+ts1+`"}}`, "CREATE", "Encounter/"+encID)},
			[]string{fastpath.ReasonEntryResource, fastpath.ReasonEntryMismatch}},
		"entry without resource nor DELETE": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{`{"fullUrl":"Encounter/` + encID + `","request":{"method":"PUT","url":"Encounter/` + encID + `"}}`},
			[]string{fastpath.ReasonEntryShape, fastpath.ReasonEntryMismatch}},
		"an entry that is a string": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")}, []string{`"x"`},
			[]string{fastpath.ReasonEntryShape, fastpath.ReasonEntryMismatch}},
		"two deletions announced once": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/3")},
			[]string{`{"request":{"method":"DELETE","url":"Encounter/` + encID + `"}}`, `{"request":{"method":"DELETE","url":"Encounter/` + encID + `"}}`},
			[]string{fastpath.ReasonUnmatchedEntry, fastpath.ReasonEntryMismatch}},
		"a deletion of another resource": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/3")},
			[]string{`{"fullUrl":"Encounter/` + encID + `","request":{"method":"DELETE","url":"Encounter/` + encID3 + `"}}`},
			[]string{fastpath.ReasonEntryURL, fastpath.ReasonEntryMismatch}},
		"two entries of one version with other bytes": {[]string{event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")},
			[]string{full(resource(encID, "1", ts1), "CREATE", "Encounter/"+encID), full(strings.Replace(resource(encID, "1", ts1), "finished", "cancelled", 1), "CREATE", "Encounter/"+encID)},
			[]string{fastpath.ReasonUnmatchedEntry, fastpath.ReasonEntryMismatch}},
		"two version-less events of one resource": {[]string{event("n-1", ts1, "Encounter/"+encID, ""), event("n-2", ts2, "Encounter/"+encID, "")},
			[]string{full(resource(encID, "1", ts1), "CREATE", "Encounter/"+encID)},
			[]string{fastpath.ReasonNoVersion, fastpath.ReasonNoVersion, fastpath.ReasonUnmatchedEntry}},
	}
	goodRes := resource(encID2, "1", ts1)
	for name, c := range cases {
		// Each case also carries one good full-resource event of another resource.
		evs := append([]string{event("n-ok", ts1, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/1")}, c.events...)
		entries := append([]string{status("event-notification", evs...)}, c.entries...)
		entries = append(entries, full(goodRes, "CREATE", "Encounter/"+encID2))
		n, err := fastpath.Parse([]byte(message(bundle(entries...))))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(n.Changes) != 1 || n.Changes[0].ID != encID2 || !bytes.Equal(n.Changes[0].Resource, []byte(goodRes)) {
			t.Errorf("%s: changes = %d (%+v), want the good event's only", name, len(n.Changes), n.Changes)
		}
		if strings.Join(n.Unrecognized, "|") != strings.Join(c.reasons, "|") {
			t.Errorf("%s: unrecognized = %q, want %q", name, n.Unrecognized, c.reasons)
		}
		for _, r := range n.Unrecognized {
			if strings.Contains(r, encID) || strings.Contains(r, long) {
				t.Errorf("%s: a reason names a value: %s", name, r)
			}
		}
	}
}

var eventIDPattern = regexp.MustCompile(`^[A-Z][A-Za-z]{0,63}/[A-Za-z0-9.-]{1,64}/_history/[A-Za-z0-9.-]{1,64}$`)

// FuzzParse: Parse never panics, and every change it returns is one the
// handler may publish as is.
func FuzzParse(f *testing.F) {
	res := resource(encID2, "1", "2025-09-05T00:18:43.219652906Z")
	for _, seed := range []string{
		message(handshake),
		message(bundle(status("heartbeat"))),
		message(bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID, "Encounter/"+encID+"/_history/1")))),
		message(bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/1")), full(res, "CREATE", "Encounter/"+encID2))),
		message(bundle(status("event-notification", event("n-1", ts1, "Encounter/"+encID2, "")), full(res, "UPDATE", "Encounter/"+encID2))),
		message(bundle(status("event-notification",
			event("n-1", ts1, "Encounter/"+encID2, "Encounter/"+encID2+"/_history/1"), event("n-3", ts2, "Encounter/"+encID, "Encounter/"+encID+"/_history/4")),
			full(res, "CREATE", "Encounter/"+encID2))),
		message(bundle(status("event-notification", event("n-9", ts2, "Encounter/"+encID, "Encounter/"+encID+"/_history/3")),
			`{"fullUrl":"Encounter/`+encID+`","request":{"method":"DELETE","url":"Encounter/`+encID+`"}}`)),
		message(bundle(status("event-notification", `{"timestamp":"`+ts1+`","focus":{"reference":"Encounter/x"},"id":"n-1"}`))),
		message(bundle(status("query-status"))),
		messageFrom("aws.healthlake", "FHIR Subscription Notification", subURL, handshake),
		`{}`, `null`, `[]`, `{"source":"healthlake","detail-type":"FHIR Subscription Notification","detail":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		n, err := fastpath.Parse(msg)
		if err != nil {
			var ue *fastpath.UnrecognizedError
			if !errors.As(err, &ue) || ue.Reason == "" {
				t.Fatalf("error %v is not an UnrecognizedError with a reason", err)
			}
			return
		}
		switch n.Type {
		case fastpath.TypeHandshake, fastpath.TypeHeartbeat, fastpath.TypeEventNotification:
		default:
			t.Fatalf("type %q", n.Type)
		}
		if n.SubscriptionID == "" || n.DatastoreID == "" {
			t.Fatalf("subscription %q of data store %q", n.SubscriptionID, n.DatastoreID)
		}
		seen := map[string]bool{}
		for _, c := range n.Changes {
			id := c.EventID()
			if !eventIDPattern.MatchString(id) || seen[id] {
				t.Fatalf("eventId %q (repeated: %v)", id, seen[id])
			}
			seen[id] = true
			if _, err := envelope.ParseTime(c.Timestamp); err != nil || c.NotificationID == "" {
				t.Fatalf("timestamp %q, notification id %q", c.Timestamp, c.NotificationID)
			}
			switch {
			case c.Operation == fastpath.OperationDelete:
				if c.Resource != nil {
					t.Fatal("a delete with a resource")
				}
			case c.Operation != fastpath.OperationUpsert:
				t.Fatalf("operation %q", c.Operation)
			case c.Resource != nil:
				p, err := fhir.Peek(c.Resource)
				if err != nil || p.ResourceType != c.ResourceType || p.ID != c.ID || p.VersionID != c.VersionID || p.LastUpdated != c.LastUpdated || !json.Valid(c.Resource) {
					t.Fatalf("resource %+v, %v disagrees with change %+v", p, err, c)
				}
				if !bytes.Contains(msg, c.Resource) {
					t.Fatal("the resource's bytes are not those received")
				}
			}
		}
	})
}
