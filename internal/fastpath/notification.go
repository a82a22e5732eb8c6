package fastpath

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
)

// The EventBridge envelope of a HealthLake Subscription notification.
const (
	// EventSource is the source HealthLake puts notifications with (not
	// "aws.healthlake", the source of its data-store and job events).
	EventSource = "healthlake"
	// EventDetailType is the detail-type of every notification.
	EventDetailType = "FHIR Subscription Notification"
)

// Notification types (SubscriptionStatus.type) the fast path recognises.
const (
	TypeHandshake         = "handshake"
	TypeHeartbeat         = "heartbeat"
	TypeEventNotification = "event-notification"
)

// Operations of a Change (the values of the v1 detail's operation).
const (
	OperationUpsert = envelope.OperationUpsert
	OperationDelete = envelope.OperationDelete
)

// Notification is one HealthLake Subscription notification as the fast
// path understands it: which Subscription sent it, its type, and for an
// event notification the resource versions it announces.
type Notification struct {
	// SubscriptionURL is detail.subscriptionUrl as received.
	SubscriptionURL string
	// SubscriptionID is the Subscription's id, the last segment of
	// SubscriptionURL.
	SubscriptionID string
	// DatastoreID is the data store SubscriptionURL names
	// (…/datastore/{id}/r4/Subscription/{subscriptionId}).
	DatastoreID string
	// Type is TypeHandshake, TypeHeartbeat or TypeEventNotification.
	Type string
	// Changes are the versions an event notification announces, in the
	// order of its notificationEvents, each version once.
	Changes []Change
	// Unrecognized holds one reason per notification event or bundle
	// entry of an event notification that the fast path does not
	// recognise exactly and leaves to the export path (Reason* constants:
	// field names, never values).
	Unrecognized []string
}

// Change is one resource version a notification announces.
type Change struct {
	// NotificationID is notificationEvent.id (unique per matched version).
	NotificationID string
	// ResourceType, ID and VersionID name the version: from
	// additionalContext (Type/id/_history/v) or from the full-resource
	// entry's resource (meta.versionId), which agree when both are there.
	ResourceType, ID, VersionID string
	// Operation is OperationUpsert or OperationDelete. An upsert without
	// Resource is an id-only notification (NeedsRead): only reading the
	// version tells whether it is an update or a deletion.
	Operation string
	// Timestamp is notificationEvent.timestamp as received (a FHIR instant).
	Timestamp string
	// LastUpdated is the full-resource entry's meta.lastUpdated as
	// received; "" without Resource.
	LastUpdated string
	// Resource is the full-resource entry's resource, its bytes exactly as
	// received; nil for an id-only notification and for a delete.
	Resource json.RawMessage
}

// EventID is the v1 eventId of the change's version:
// {resourceType}/{id}/_history/{versionId}, the id the export path gives it.
func (c Change) EventID() string { return envelope.EventID(c.ResourceType, c.ID, c.VersionID) }

// NeedsRead reports whether the change is id-only: an announced version
// whose content (or deletion) must be read from HealthLake.
func (c Change) NeedsRead() bool { return c.Operation == OperationUpsert && c.Resource == nil }

// Reasons a notification, one of its events or one of its entries is not
// recognised. They name fields, never values (no PHI).
const (
	ReasonNotJSON           = "the message is not one JSON object"
	ReasonSource            = "source is not healthlake"
	ReasonDetailType        = "detail-type is not FHIR Subscription Notification"
	ReasonDetail            = "detail is not an object with subscriptionUrl and notificationBundlePayload"
	ReasonSubscriptionURL   = "subscriptionUrl does not name a Subscription of a data store"
	ReasonBundle            = "notificationBundlePayload is not a history Bundle"
	ReasonStatus            = "the first bundle entry is not a SubscriptionStatus"
	ReasonNotificationType  = "SubscriptionStatus.type is not handshake, heartbeat or event-notification"
	ReasonNoEvents          = "an event notification without notificationEvent"
	ReasonEventShape        = "a notificationEvent is not an object"
	ReasonEventID           = "notificationEvent.id is missing"
	ReasonTimestamp         = "notificationEvent.timestamp is missing or not an instant"
	ReasonFocus             = "notificationEvent.focus is not a Type/id reference in the v1 patterns"
	ReasonAdditionalContext = "notificationEvent.additionalContext is not a Type/id/_history/version reference in the v1 patterns"
	ReasonContextMismatch   = "notificationEvent.additionalContext names another resource than focus"
	ReasonNoVersion         = "notificationEvent names no version (no additionalContext, no single matching entry)"
	ReasonEntryShape        = "a bundle entry is not an object with resource or request"
	ReasonEntryResource     = "an entry's resource is not one JSON object"
	ReasonEntryFields       = "an entry's resourceType, id, meta.versionId or meta.lastUpdated is missing or outside the v1 patterns"
	ReasonEntryURL          = "an entry's fullUrl or request.url names another resource or version than its resource"
	ReasonEntryMethod       = "an entry's request.method is not one the fast path recognises"
	ReasonEntryMismatch     = "an entry disagrees with its notification event's version"
	ReasonUnmatchedEntry    = "a bundle entry matches no notification event"
)

// UnrecognizedError is Parse's error: the message is not a notification
// the fast path recognises exactly. Reason is one of the Reason* constants.
type UnrecognizedError struct{ Reason string }

// Error implements error.
func (e *UnrecognizedError) Error() string {
	return "fast path: unrecognized notification: " + e.Reason
}

func unrecognized(reason string) error { return &UnrecognizedError{Reason: reason} }

// Parse reads one message of the fast path's queue: an EventBridge event
// whose detail is a HealthLake Subscription notification
// ({"subscriptionUrl", "notificationBundlePayload": Bundle}). It returns an
// *UnrecognizedError for a message it does not recognise as a whole; an
// event notification's events and entries it does not recognise are listed
// in Notification.Unrecognized and give no Change. It never decodes a
// resource: a full-resource entry's bytes are kept exactly as received.
func Parse(event []byte) (Notification, error) {
	var env struct {
		Source     *string         `json:"source"`
		DetailType *string         `json:"detail-type"`
		Detail     json.RawMessage `json:"detail"`
	}
	if err := json.Unmarshal(event, &env); err != nil || !isObject(event) {
		return Notification{}, unrecognized(ReasonNotJSON)
	}
	if env.Source == nil || *env.Source != EventSource {
		return Notification{}, unrecognized(ReasonSource)
	}
	if env.DetailType == nil || *env.DetailType != EventDetailType {
		return Notification{}, unrecognized(ReasonDetailType)
	}
	var det struct {
		SubscriptionURL *string         `json:"subscriptionUrl"`
		Bundle          json.RawMessage `json:"notificationBundlePayload"`
	}
	if !isObject(env.Detail) || json.Unmarshal(env.Detail, &det) != nil || det.SubscriptionURL == nil || !isObject(det.Bundle) {
		return Notification{}, unrecognized(ReasonDetail)
	}
	n := Notification{SubscriptionURL: *det.SubscriptionURL}
	var ok bool
	if n.DatastoreID, n.SubscriptionID, ok = subscriptionOf(n.SubscriptionURL); !ok {
		return Notification{}, unrecognized(ReasonSubscriptionURL)
	}
	var b struct {
		ResourceType string            `json:"resourceType"`
		Type         string            `json:"type"`
		Entry        []json.RawMessage `json:"entry"`
	}
	if json.Unmarshal(det.Bundle, &b) != nil || b.ResourceType != "Bundle" || b.Type != "history" {
		return Notification{}, unrecognized(ReasonBundle)
	}
	if len(b.Entry) == 0 {
		return Notification{}, unrecognized(ReasonStatus)
	}
	var e0 struct {
		Resource json.RawMessage `json:"resource"`
	}
	var st struct {
		ResourceType string            `json:"resourceType"`
		Type         string            `json:"type"`
		Events       []json.RawMessage `json:"notificationEvent"`
	}
	if json.Unmarshal(b.Entry[0], &e0) != nil || !isObject(e0.Resource) || json.Unmarshal(e0.Resource, &st) != nil || st.ResourceType != "SubscriptionStatus" {
		return Notification{}, unrecognized(ReasonStatus)
	}
	n.Type = st.Type
	switch st.Type {
	case TypeHandshake, TypeHeartbeat:
		return n, nil
	case TypeEventNotification:
	default:
		return Notification{}, unrecognized(ReasonNotificationType)
	}
	if len(st.Events) == 0 {
		return Notification{}, unrecognized(ReasonNoEvents)
	}
	p := &pairing{n: &n, entries: map[string][]*entry{}, events: map[string]int{}}
	for _, raw := range b.Entry[1:] {
		p.addEntry(raw)
	}
	var evs []notificationEvent
	seen := map[string]bool{}
	for _, raw := range st.Events {
		ev, ok := p.event(raw)
		if !ok {
			continue
		}
		// At-least-once delivery: the same event may come twice in a bundle.
		k := ev.key() + "/_history/" + ev.version
		if ev.version == "" {
			k = "#" + ev.id
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		p.events[ev.key()]++
		evs = append(evs, ev)
	}
	type paired struct {
		c      Change
		idOnly bool
	}
	var ps []paired
	for _, ev := range evs {
		if c, idOnly, ok := p.pair(ev); ok {
			ps = append(ps, paired{c, idOnly})
		}
	}
	// Every entry must pair with an event of its resource: a resource with
	// an entry left over or not recognised publishes nothing, and a bundle
	// with any such entry has no id-only fallback either (the event without
	// an entry may be the one the odd entry was meant for).
	badKey := map[string]bool{}
	for _, e := range p.all {
		if !e.used && !e.invalid {
			n.Unrecognized = append(n.Unrecognized, ReasonUnmatchedEntry)
		}
		if !e.used || e.invalid {
			badKey[e.typ+"/"+e.id] = true
		}
	}
	badBundle := p.badEntries > 0 || len(badKey) > 0
	seen = map[string]bool{}
	for _, x := range ps {
		if x.idOnly && badBundle || badKey[x.c.ResourceType+"/"+x.c.ID] {
			n.Unrecognized = append(n.Unrecognized, ReasonEntryMismatch)
			continue
		}
		if id := x.c.EventID(); !seen[id] { // a version-less event may repeat a versioned one
			seen[id] = true
			n.Changes = append(n.Changes, x.c)
		}
	}
	return n, nil
}

// notificationEvent is one recognised notificationEvent.
type notificationEvent struct {
	id, timestamp string
	typ, rid      string
	version       string // from additionalContext; "" without it
}

func (e notificationEvent) key() string { return e.typ + "/" + e.rid }

// entry is one recognised bundle entry after the SubscriptionStatus: a
// full resource, or a deletion (request.method DELETE, no resource).
type entry struct {
	typ, id, version, lastUpdated string
	resource                      json.RawMessage
	deleted                       bool
	used                          bool
	// invalid: the entry names this resource but was not recognised (its
	// reason is counted): the resource's events are left to the export
	// path, not read instead.
	invalid bool
}

// pairing matches a bundle's notification events with its entries.
type pairing struct {
	n       *Notification
	entries map[string][]*entry // by Type/id
	all     []*entry            // in bundle order
	// badEntries counts the entries not recognised at all.
	badEntries int
	events     map[string]int // recognised events by Type/id, duplicates once
}

func (p *pairing) skip(reason string) { p.n.Unrecognized = append(p.n.Unrecognized, reason) }

// skipEntry counts an entry not recognised.
func (p *pairing) skipEntry(reason string) {
	p.badEntries++
	p.skip(reason)
}

// upsertMethods are the request.method values of a full-resource entry the
// fast path recognises: HealthLake's CREATE (documented) and UPDATE, and
// the HTTP verbs of a write. "" is an entry without request.
var upsertMethods = map[string]bool{"": true, "CREATE": true, "UPDATE": true, "POST": true, "PUT": true, "PATCH": true}

// addEntry reads one entry after the SubscriptionStatus.
func (p *pairing) addEntry(raw json.RawMessage) {
	var e struct {
		FullURL  *string         `json:"fullUrl"`
		Resource json.RawMessage `json:"resource"`
		Request  *struct {
			Method string `json:"method"`
			URL    string `json:"url"`
		} `json:"request"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &e) != nil {
		p.skipEntry(ReasonEntryShape)
		return
	}
	method, reqURL := "", ""
	if e.Request != nil {
		method, reqURL = strings.ToUpper(strings.TrimSpace(e.Request.Method)), e.Request.URL
	}
	var urls []string
	if e.FullURL != nil {
		urls = append(urls, *e.FullURL)
	}
	if e.Request != nil {
		urls = append(urls, reqURL)
	}
	if isAbsent(e.Resource) {
		// A deletion (modelled: HealthLake documents none): DELETE, no
		// resource, the resource named by request.url and fullUrl.
		if method != "DELETE" {
			p.skipEntry(ReasonEntryShape)
			return
		}
		var typ, id string
		for _, u := range urls {
			t, i, v, ok := entryRef(u)
			if !ok || v != "" || typ != "" && (t != typ || i != id) {
				p.skipEntry(ReasonEntryURL)
				return
			}
			typ, id = t, i
		}
		if typ == "" {
			p.skipEntry(ReasonEntryURL)
			return
		}
		p.add(&entry{typ: typ, id: id, deleted: true})
		return
	}
	if !upsertMethods[method] {
		p.skipEntry(ReasonEntryMethod)
		return
	}
	f, err := fhir.Peek(e.Resource)
	if err != nil || !isObject(e.Resource) {
		p.skipEntry(ReasonEntryResource)
		return
	}
	if !change.IsTypeName(f.ResourceType) || !change.IsID(f.ID) || !change.IsID(f.VersionID) || !isInstant(f.LastUpdated) {
		p.skipEntry(ReasonEntryFields)
		p.add(&entry{typ: f.ResourceType, id: f.ID, invalid: true})
		return
	}
	for _, u := range urls {
		t, i, v, ok := entryRef(u)
		if !ok || t != f.ResourceType || i != f.ID || v != "" && v != f.VersionID {
			p.skipEntry(ReasonEntryURL)
			p.add(&entry{typ: f.ResourceType, id: f.ID, invalid: true})
			return
		}
	}
	p.add(&entry{typ: f.ResourceType, id: f.ID, version: f.VersionID, lastUpdated: f.LastUpdated, resource: e.Resource})
}

// add keeps a recognised entry.
func (p *pairing) add(e *entry) {
	key := e.typ + "/" + e.id
	p.entries[key] = append(p.entries[key], e)
	p.all = append(p.all, e)
}

// event reads one notificationEvent: id, timestamp, focus (Type/id) and
// additionalContext (Type/id/_history/version, the same resource).
func (p *pairing) event(raw json.RawMessage) (notificationEvent, bool) {
	var e struct {
		ID                *string         `json:"id"`
		Timestamp         *string         `json:"timestamp"`
		Focus             json.RawMessage `json:"focus"`
		AdditionalContext json.RawMessage `json:"additionalContext"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &e) != nil {
		p.skip(ReasonEventShape)
		return notificationEvent{}, false
	}
	if e.ID == nil || strings.TrimSpace(*e.ID) == "" {
		p.skip(ReasonEventID)
		return notificationEvent{}, false
	}
	if e.Timestamp == nil || !isInstant(*e.Timestamp) {
		p.skip(ReasonTimestamp)
		return notificationEvent{}, false
	}
	ev := notificationEvent{id: *e.ID, timestamp: *e.Timestamp}
	var focus string
	if json.Unmarshal(e.Focus, &focus) != nil {
		p.skip(ReasonFocus)
		return notificationEvent{}, false
	}
	var ok bool
	if ev.typ, ev.rid, ok = typeID(focus); !ok {
		p.skip(ReasonFocus)
		return notificationEvent{}, false
	}
	if !isAbsent(e.AdditionalContext) {
		var ctx string
		if json.Unmarshal(e.AdditionalContext, &ctx) != nil {
			p.skip(ReasonAdditionalContext)
			return notificationEvent{}, false
		}
		t, i, v, ok := versionRef(ctx)
		if !ok {
			p.skip(ReasonAdditionalContext)
			return notificationEvent{}, false
		}
		if t != ev.typ || i != ev.rid {
			p.skip(ReasonContextMismatch)
			return notificationEvent{}, false
		}
		ev.version = v
	}
	return ev, true
}

// pair gives the change of one event: with its full-resource entry (the
// same resource and version), with a deletion entry of the resource, or
// id-only when the bundle has no entry for the resource.
func (p *pairing) pair(ev notificationEvent) (c Change, idOnly, ok bool) {
	c = Change{NotificationID: ev.id, ResourceType: ev.typ, ID: ev.rid, VersionID: ev.version,
		Operation: OperationUpsert, Timestamp: ev.timestamp}
	es := p.entries[ev.key()]
	if len(es) == 0 {
		if ev.version == "" {
			p.skip(ReasonNoVersion)
			return Change{}, false, false
		}
		return c, true, true // id-only
	}
	if ev.version == "" {
		// No additionalContext: the version is the one entry's, when the
		// bundle announces this resource once.
		if p.events[ev.key()] != 1 || len(es) != 1 || es[0].deleted || es[0].invalid {
			p.skip(ReasonNoVersion)
			return Change{}, false, false
		}
		es[0].used = true
		c.VersionID, c.LastUpdated, c.Resource = es[0].version, es[0].lastUpdated, es[0].resource
		return c, false, true
	}
	var found *entry
	for _, e := range es {
		if !e.deleted && !e.invalid && e.version == ev.version {
			if found == nil {
				found = e
			}
			// A repeated entry goes with it; one of other bytes is left
			// over, and the resource is not published.
			e.used = bytes.Equal(e.resource, found.resource)
		}
	}
	if found != nil {
		c.LastUpdated, c.Resource = found.lastUpdated, found.resource
		return c, false, true
	}
	for _, e := range es {
		if e.deleted && !e.used {
			e.used = true
			c.Operation = OperationDelete
			return c, false, true
		}
	}
	p.skip(ReasonEntryMismatch)
	return Change{}, false, false
}

// subscriptionOf reads a Subscription URL,
// {base}/datastore/{datastoreId}/r4/Subscription/{id}: the data store and
// the Subscription id (FHIR id pattern).
func subscriptionOf(s string) (datastoreID, id string, ok bool) {
	u, err := url.Parse(s)
	if err != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	n := len(parts)
	if n < 5 || parts[n-5] != "datastore" || parts[n-3] != "r4" || parts[n-2] != "Subscription" {
		return "", "", false
	}
	if parts[n-4] == "" || !change.IsID(parts[n-4]) || !change.IsID(parts[n-1]) {
		return "", "", false
	}
	return parts[n-4], parts[n-1], true
}

// typeID reads a "Type/id" reference in the v1 patterns.
func typeID(s string) (typ, id string, ok bool) {
	typ, id, found := strings.Cut(s, "/")
	if !found || !change.IsTypeName(typ) || !change.IsID(id) {
		return "", "", false
	}
	return typ, id, true
}

// versionRef reads a "Type/id/_history/version" reference in the v1 patterns.
func versionRef(s string) (typ, id, version string, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 4 || parts[2] != "_history" || !change.IsTypeName(parts[0]) || !change.IsID(parts[1]) || !change.IsID(parts[3]) {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[3], true
}

// entryRef reads an entry's fullUrl or request.url: "Type/id",
// "Type/id/_history/version", or either after an absolute base URL.
// version is "" when the URL names none.
func entryRef(s string) (typ, id, version string, ok bool) {
	if strings.ContainsAny(s, "?#") {
		return "", "", "", false
	}
	parts := strings.Split(strings.TrimSuffix(s, "/"), "/")
	if n := len(parts); n >= 4 && parts[n-2] == "_history" {
		version = parts[n-1]
		if !change.IsID(version) {
			return "", "", "", false
		}
		parts = parts[:n-2]
	}
	n := len(parts)
	if n < 2 || !change.IsTypeName(parts[n-2]) || !change.IsID(parts[n-1]) {
		return "", "", "", false
	}
	if n > 2 {
		// An absolute URL: {scheme}://{host}/…/{Type}/{id}.
		if u, err := url.Parse(strings.Join(parts, "/")); err != nil || u.Scheme == "" || u.Host == "" {
			return "", "", "", false
		}
	}
	return parts[n-2], parts[n-1], version, true
}

// isInstant reports whether s is a FHIR instant (envelope.ParseTime).
func isInstant(s string) bool {
	_, err := envelope.ParseTime(s)
	return err == nil
}

// isObject reports whether b, trimmed of JSON whitespace, starts an object
// (b has been decoded or checked as JSON by the caller).
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// isAbsent reports whether a raw member is missing or JSON null.
func isAbsent(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == 'n' // the member is valid JSON: null
	}
	return true
}
