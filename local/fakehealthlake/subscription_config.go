package fakehealthlake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The R5 Backport IG's canonical URLs HealthLake's Subscriptions use
// ("Example Subscription payloads", managing-fhir-subs-ex-sub-payload.html).
const (
	backportSubscriptionProfile = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription"
	backportPayloadContent      = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content"
	backportFilterCriteria      = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-filter-criteria"

	channelEventBridge = "event-bridge"
	payloadFHIRJSON    = "application/fhir+json"
)

// busARN matches an EventBridge bus ARN; the service may be "events" or,
// as the AWS example writes it, "healthlake".
var busARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:(events|healthlake):[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._/-]{1,256}$`)

func init() {
	// HealthLake takes a Subscription whose channel.type is "event-bridge"
	// (not an R4 code) and an R4B/R5 SubscriptionTopic on its R4 endpoint.
	r4 := validators[subscriptionType]
	validators[subscriptionType] = func(b []byte) error { return validateSubscription(b, r4) }
	validators[topicType] = validateTopic
}

type extension struct {
	URL         string  `json:"url"`
	ValueString *string `json:"valueString"`
	ValueCode   *string `json:"valueCode"`
}

type extended struct {
	Extension []extension `json:"extension"`
}

// subscriptionDoc is what the model reads of a Subscription.
type subscriptionDoc struct {
	Meta *struct {
		Profile []string `json:"profile"`
	} `json:"meta"`
	Status      *string   `json:"status"`
	End         *string   `json:"end"`
	Reason      *string   `json:"reason"`
	Criteria    *string   `json:"criteria"`
	CriteriaExt *extended `json:"_criteria"`
	Channel     *struct {
		Type       *string   `json:"type"`
		Endpoint   *string   `json:"endpoint"`
		Payload    *string   `json:"payload"`
		PayloadExt *extended `json:"_payload"`
	} `json:"channel"`
}

// validateSubscription refuses a Subscription without the elements R4
// requires (status, reason, criteria, channel.type) and checks the rest
// with the R4 validator, taking "event-bridge" as a channel type.
func validateSubscription(b []byte, r4 func([]byte) error) error {
	var doc subscriptionDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	var missing []string
	for name, absent := range map[string]bool{
		"status": doc.Status == nil, "reason": doc.Reason == nil, "criteria": doc.Criteria == nil,
		"channel": doc.Channel == nil, "channel.type": doc.Channel != nil && doc.Channel.Type == nil,
	} {
		if absent {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing required element(s): %s", strings.Join(missing, ", "))
	}
	if *doc.Channel.Type != channelEventBridge {
		return r4(b)
	}
	var m map[string]json.RawMessage
	var ch map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if err := json.Unmarshal(m["channel"], &ch); err != nil {
		return fmt.Errorf("decode channel: %w", err)
	}
	ch["type"] = json.RawMessage(`"rest-hook"`)
	var err error
	if m["channel"], err = json.Marshal(ch); err != nil {
		return fmt.Errorf("encode channel: %w", err)
	}
	nb, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return r4(nb)
}

// topicDoc is what the model reads of a SubscriptionTopic.
type topicDoc struct {
	URL             *string `json:"url"`
	Status          *string `json:"status"`
	ResourceTrigger []struct {
		Resource             *string         `json:"resource"`
		SupportedInteraction []string        `json:"supportedInteraction"`
		QueryCriteria        json.RawMessage `json:"queryCriteria"`
		FhirPathCriteria     *string         `json:"fhirPathCriteria"`
	} `json:"resourceTrigger"`
}

var publicationStatus = map[string]bool{"draft": true, "active": true, "retired": true, "unknown": true}

var interactionBits = map[string]uint8{"create": interactionCreate, "update": interactionUpdate, "delete": interactionDelete}

// validateTopic checks a SubscriptionTopic's structure (modelled: HealthLake
// documents no rule): url and status (a PublicationStatus) are required,
// each resourceTrigger names a resource, and supportedInteraction holds
// create, update or delete.
func validateTopic(b []byte) error {
	var doc topicDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	var errs []error
	if doc.URL == nil || *doc.URL == "" {
		errs = append(errs, errors.New("url is required"))
	}
	if doc.Status == nil || !publicationStatus[*doc.Status] {
		errs = append(errs, errors.New("status is required: draft, active, retired or unknown"))
	}
	for i, t := range doc.ResourceTrigger {
		if t.Resource == nil || *t.Resource == "" {
			errs = append(errs, fmt.Errorf("resourceTrigger[%d].resource is required", i))
		}
		for _, in := range t.SupportedInteraction {
			if interactionBits[in] == 0 {
				errs = append(errs, fmt.Errorf("resourceTrigger[%d].supportedInteraction: unknown code", i))
			}
		}
	}
	return errors.Join(errs...)
}

// topicState is a stored SubscriptionTopic as the model uses it.
type topicState struct {
	status string
	// triggers maps a resource type to the interactions it triggers on.
	triggers map[string]uint8
	// unmodelled says why a Subscription on this topic cannot be modelled
	// ("" when it can).
	unmodelled string
}

// parseTopicState reads a stored SubscriptionTopic. A trigger without
// supportedInteraction triggers on all three (R5: "If not present, all
// supported interactions are assumed").
func parseTopicState(body []byte) *topicState {
	tp := &topicState{triggers: map[string]uint8{}}
	var doc topicDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		tp.unmodelled = "the SubscriptionTopic cannot be read"
		return tp
	}
	if doc.Status != nil {
		tp.status = *doc.Status
	}
	for _, t := range doc.ResourceTrigger {
		if len(t.QueryCriteria) > 0 || t.FhirPathCriteria != nil {
			tp.unmodelled = "SubscriptionTopic.resourceTrigger queryCriteria and fhirPathCriteria are not modelled by the emulator"
		}
		if t.Resource == nil {
			continue
		}
		typ := strings.TrimPrefix(*t.Resource, "http://hl7.org/fhir/StructureDefinition/")
		bits := uint8(0)
		for _, in := range t.SupportedInteraction {
			bits |= interactionBits[in]
		}
		if len(t.SupportedInteraction) == 0 {
			bits = interactionCreate | interactionUpdate | interactionDelete
		}
		tp.triggers[typ] |= bits
	}
	if len(tp.triggers) == 0 && tp.unmodelled == "" {
		tp.unmodelled = "the SubscriptionTopic has no resourceTrigger"
	}
	return tp
}

// subConfig is a checked Subscription's settings.
type subConfig struct {
	topicID  string
	topicURL string // criteria, as written
	bus      string
	full     bool // full-resource (else id-only)
	filters  []subFilter
	end      time.Time // zero: none
}

// subscriptionConfig checks a Subscription as HealthLake does when it
// creates it and returns its settings, or why it goes to error. The
// caller holds e.mu.
func (e *Emulator) subscriptionConfig(d *Datastore, st *dsSubs, body []byte) (subConfig, string) {
	var cfg subConfig
	var doc subscriptionDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return cfg, "the Subscription cannot be read"
	}
	if doc.Meta == nil || !hasProfile(doc.Meta.Profile, backportSubscriptionProfile) {
		return cfg, "meta.profile must include " + backportSubscriptionProfile
	}
	if doc.Criteria == nil {
		return cfg, "criteria is required"
	}
	topicID, ok := topicIDOf(*doc.Criteria, d.id)
	if !ok {
		return cfg, "criteria must be the full URL of a SubscriptionTopic of this data store ([base]/datastore/[datastoreId]/r4/SubscriptionTopic/[topicId])"
	}
	tp := st.topics[topicID]
	switch {
	case tp == nil:
		return cfg, "criteria names no existing SubscriptionTopic"
	case tp.status != "unknown" && tp.status != "draft" && tp.status != "active":
		return cfg, "the SubscriptionTopic must be in status unknown, draft or active"
	case tp.unmodelled != "":
		return cfg, tp.unmodelled
	}
	cfg.topicID, cfg.topicURL = topicID, *doc.Criteria
	ch := doc.Channel
	switch {
	case ch == nil || ch.Type == nil:
		return cfg, "channel.type is required"
	case *ch.Type != channelEventBridge:
		return cfg, "channel.type " + *ch.Type + " is not modelled by the emulator (only event-bridge)"
	case ch.Endpoint == nil || !busARN.MatchString(*ch.Endpoint):
		return cfg, "channel.endpoint must be the ARN of an EventBridge event bus"
	case ch.Payload == nil || *ch.Payload != payloadFHIRJSON:
		return cfg, "channel.payload must be " + payloadFHIRJSON
	}
	cfg.bus = *ch.Endpoint
	content := ""
	if ch.PayloadExt != nil {
		for _, x := range ch.PayloadExt.Extension {
			if x.URL == backportPayloadContent && x.ValueCode != nil {
				content = *x.ValueCode
			}
		}
	}
	switch content {
	case "id-only":
	case "full-resource":
		cfg.full = true
	default:
		return cfg, "channel._payload needs the extension " + backportPayloadContent + " with valueCode id-only or full-resource"
	}
	if doc.CriteriaExt != nil {
		for _, x := range doc.CriteriaExt.Extension {
			if x.URL != backportFilterCriteria {
				continue
			}
			if x.ValueString == nil {
				return cfg, "the backport-filter-criteria extension needs a valueString"
			}
			f, reason := parseFilter(*x.ValueString)
			if reason != "" {
				return cfg, reason
			}
			if tp.triggers[f.typ] == 0 {
				return cfg, "the filter's resource type is not a resourceTrigger of the SubscriptionTopic"
			}
			cfg.filters = append(cfg.filters, f)
		}
	}
	if doc.End != nil {
		t, ok := parseDateTime(*doc.End)
		if !ok {
			return cfg, "end is not a valid dateTime"
		}
		cfg.end = t
	}
	return cfg, ""
}

func hasProfile(profiles []string, want string) bool {
	for _, p := range profiles {
		if p == want || strings.HasPrefix(p, want+"|") {
			return true
		}
	}
	return false
}

// topicIDOf returns the topic id of a criteria URL
// http(s)://{host}[/prefix]/datastore/{dsID}/r4/SubscriptionTopic/{id}. The
// host is not checked: the emulator is reached under several base URLs
// (its Options.Endpoint, https://healthlake.{region}.amazonaws.com, a
// local address).
func topicIDOf(criteria, dsID string) (string, bool) {
	u, err := url.Parse(criteria)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	marker := "/datastore/" + dsID + "/r4/SubscriptionTopic/"
	i := strings.Index(u.Path, marker)
	if i < 0 {
		return "", false
	}
	id := u.Path[i+len(marker):]
	return id, validID(id)
}

// parseDateTime reads a FHIR dateTime: an instant, or a date (its start, UTC).
func parseDateTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// subFilter is one backport-filter-criteria: Type?param=value&…, each
// parameter a comma-separated OR of values, the parameters ANDed.
type subFilter struct {
	typ    string
	params []filterParam
}

type filterParam struct {
	name   string
	values []string
}

// modelledFilterParams are the filter parameters the emulator evaluates.
var modelledFilterParams = map[string]bool{"_id": true, "status": true, "subject": true, "patient": true}

// parseFilter reads a filter criteria string, or says why it is not modelled.
func parseFilter(s string) (subFilter, string) {
	typ, query, _ := strings.Cut(s, "?")
	if _, ok := validators[typ]; !ok {
		return subFilter{}, "the filter criteria must start with a resource type (Type?params)"
	}
	f := subFilter{typ: typ}
	vals, err := url.ParseQuery(query)
	if err != nil {
		return f, "the filter criteria's parameters cannot be read"
	}
	names := make([]string, 0, len(vals))
	for name := range vals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !modelledFilterParams[name] {
			return f, "filter parameter " + name + " is not modelled by the emulator (modelled: _id, status, subject, patient without modifiers or prefixes)"
		}
		for _, v := range vals[name] {
			if v == "" {
				return f, "filter parameter " + name + " has an empty value"
			}
			f.params = append(f.params, filterParam{name: name, values: strings.Split(v, ",")})
		}
	}
	return f, ""
}

// hasFilterFor reports whether a filter applies to a type's resources.
func (c *subConfig) hasFilterFor(typ string) bool {
	for _, f := range c.filters {
		if f.typ == typ {
			return true
		}
	}
	return false
}

// accepts reports whether every filter of the type accepts the resource
// (res: its decoded JSON; nil when unreadable, which only _id can accept).
func (c *subConfig) accepts(typ, id string, res map[string]any) bool {
	for _, f := range c.filters {
		if f.typ != typ {
			continue
		}
		for _, p := range f.params {
			if !p.accepts(typ, id, res) {
				return false
			}
		}
	}
	return true
}

func (p filterParam) accepts(typ, id string, res map[string]any) bool {
	for _, v := range p.values {
		switch p.name {
		case "_id":
			if v == id {
				return true
			}
		case "status":
			if _, code, ok := strings.Cut(v, "|"); ok {
				v = code
			}
			if s, _ := res["status"].(string); s != "" && s == v {
				return true
			}
		case "subject":
			if refMatches(referenceOf(res["subject"]), v) {
				return true
			}
		case "patient":
			want := v
			if !strings.Contains(want, "/") {
				want = "Patient/" + want
			}
			if typ != "Patient" && (refMatches(referenceOf(res["patient"]), want) || refMatches(referenceOf(res["subject"]), want)) {
				return true
			}
		}
	}
	return false
}

// referenceOf is a Reference's reference string ("" when absent).
func referenceOf(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["reference"].(string)
	return s
}

// refMatches reports whether a reference names want ("Type/id", or a bare
// id matching any type): equal, or an absolute URL ending in it.
func refMatches(ref, want string) bool {
	if ref == "" {
		return false
	}
	if !strings.Contains(want, "/") {
		i := strings.LastIndexByte(ref, '/')
		return i > 0 && ref[i+1:] == want
	}
	return ref == want || strings.HasSuffix(ref, "/"+want)
}
