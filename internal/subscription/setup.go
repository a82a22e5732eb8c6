// Package subscription creates, checks and removes the HealthLake FHIR
// Subscription of the fast path (docs/FASTPATH.md): a SubscriptionTopic
// with one resourceTrigger per resource type of the pipeline (create,
// update and delete), and an R5 Backport Subscription on that topic whose
// EventBridge channel delivers every notification to the pipeline's
// notification bus. Both are ordinary FHIR resources of the data store,
// written with the generic FHIR interactions (IAM: healthlake:CreateResource,
// ReadResource, UpdateResource, DeleteResource, SearchWithGet).
//
// What HealthLake documents and this package follows
// (https://docs.aws.amazon.com/healthlake/latest/devguide/managing-fhir-subscriptions-lifecycle.html,
// managing-fhir-subs-ex-sub-payload.html, managing-fhir-subscriptions-searching.html):
//
//   - the topic is created with status "unknown"; HealthLake sets it
//     "active" once a Subscription on it is active;
//   - the Subscription carries meta.profile backport-subscription, status
//     "requested", criteria = the topic's full resource URL
//     ({FHIR base}/SubscriptionTopic/{topicId}, not the topic's canonical
//     url), channel.type "event-bridge", channel.endpoint = the bus ARN,
//     channel.payload "application/fhir+json" and the payload content
//     (full-resource or id-only) in channel._payload's
//     backport-payload-content extension;
//   - HealthLake activates it in 5 to 10 minutes; a Subscription that
//     fails goes to status "error" (reason in `error`), and the documented
//     remedy is to delete it and create it again.
//
// The pipeline's resources are found again by search: the topic by its
// canonical url (TopicURL: `urn:healthlake-cdc:{pipeline name}:changes`),
// the Subscription by its criteria (the topic's resource URL) and its reason
// (Reason: it names the pipeline). Every search result is checked here,
// whatever parameters the server honours; a search parameter the server
// refuses (400) falls back to listing the type.
package subscription

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	cliptext "github.com/healthlake-cdc/healthlake-cdc/internal/clip"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Payload contents HealthLake documents for channel._payload.
const (
	PayloadFullResource = "full-resource"
	PayloadIDOnly       = "id-only"
)

// Subscription statuses (FHIR R4 SubscriptionStatus).
const (
	StatusRequested = "requested"
	StatusActive    = "active"
	StatusError     = "error"
	StatusOff       = "off"
)

// StatusUnknownTopic is the status a topic is created with ("unknown":
// HealthLake sets it "active" once a Subscription on it is active).
const StatusUnknownTopic = "unknown"

// FHIR resource types and R5 Backport IG canonicals the Subscription uses.
const (
	TopicType        = "SubscriptionTopic"
	SubscriptionType = "Subscription"

	BackportSubscriptionProfile = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-subscription"
	BackportPayloadContent      = "http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/backport-payload-content"

	// ChannelEventBridge is HealthLake's channel.type for an EventBridge bus.
	ChannelEventBridge = "event-bridge"
	// ChannelPayload is the channel's MIME type.
	ChannelPayload = "application/fhir+json"
)

// interactions are the topic's supportedInteraction for every type.
var interactions = []string{"create", "update", "delete"}

// API is the HealthLake FHIR client the package uses
// (*fhirrest.Client satisfies it).
type API interface {
	CreateResource(ctx context.Context, datastoreID, resourceType string, body []byte) (*fhirrest.Written, error)
	ReadResource(ctx context.Context, datastoreID, resourceType, id string) ([]byte, error)
	UpdateResource(ctx context.Context, datastoreID, resourceType, id string, body []byte) (*fhirrest.Written, error)
	DeleteResource(ctx context.Context, datastoreID, resourceType, id string) error
	SearchResources(ctx context.Context, datastoreID, resourceType string, params url.Values) ([]json.RawMessage, error)
}

// Spec is the Subscription a pipeline keeps in its data store.
type Spec struct {
	// DatastoreID is the HealthLake data store.
	DatastoreID string
	// BaseURL is the data store's FHIR base as HealthLake names it,
	// {endpoint}/datastore/{DatastoreID}/r4 (see FHIRBase): the
	// Subscription's criteria is {BaseURL}/SubscriptionTopic/{topicId}.
	BaseURL string
	// Types are the resource types the topic triggers on (at least one).
	Types []string
	// BusARN is the EventBridge bus the notifications go to.
	BusARN string
	// Payload is PayloadFullResource or PayloadIDOnly.
	Payload string
	// Name is the pipeline name: it is in the topic's url and the
	// Subscription's reason, which is how they are found again.
	Name string
}

// FHIRBase returns a data store's FHIR base URL from the HealthLake
// endpoint: {endpoint}/datastore/{datastoreID}/r4, as HealthLake names the
// data store (DescribeFHIRDatastore's DatastoreEndpoint) — under the
// Regional host also when the pipeline calls the FIPS host
// (healthlake-fips.{region}…, the FIPSEndpoints setting), which serves the
// same data stores and which HealthLake's own resource URLs do not name.
func FHIRBase(endpoint, datastoreID string) string {
	endpoint = strings.TrimRight(endpoint, "/")
	if u, err := url.Parse(endpoint); err == nil {
		if regional, fips := stackconfig.RegionalHealthLakeHost(u.Host); fips {
			u.Host = regional
			endpoint = u.String()
		}
	}
	return endpoint + "/datastore/" + datastoreID + "/r4"
}

// TopicURL is the canonical url of a pipeline's SubscriptionTopic,
// `urn:healthlake-cdc:{name}:changes` (an absolute URI that claims no web
// domain; HealthLake references topics by resource URL, so the canonical
// only identifies the topic, and `SubscriptionTopic?url=` finds it).
func TopicURL(name string) string { return "urn:healthlake-cdc:" + name + ":changes" }

// Reason is the Subscription's reason: it names the pipeline.
func Reason(name string) string { return "healthlake-cdc fast path of pipeline " + name }

// Criteria is the Subscription's criteria for a topic: the topic's full
// resource URL.
func (s Spec) Criteria(topicID string) string {
	return strings.TrimRight(s.BaseURL, "/") + "/" + TopicType + "/" + topicID
}

var (
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	typeRE = regexp.MustCompile(`^[A-Z][A-Za-z]{1,63}$`)
	busRE  = regexp.MustCompile(`^arn:aws[a-z-]*:(events|healthlake):[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9._/-]{1,256}$`)
)

// Validate checks a Spec: every field set, Name of letters, digits, '.',
// '_' and '-' (at most 128), Types FHIR resource type names (not
// Subscription nor SubscriptionTopic, whose status changes HealthLake
// writes itself), BusARN an EventBridge bus ARN, Payload full-resource or
// id-only, BaseURL an absolute http(s) URL ending in
// /datastore/{DatastoreID}/r4.
func (s Spec) Validate() error { return s.check(true) }

// check validates the fields that find the pipeline's resources (data
// store, name, FHIR base), and with settings the others too.
func (s Spec) check(settings bool) error {
	var errs []error
	if s.DatastoreID == "" {
		errs = append(errs, errors.New("datastore id is required"))
	}
	if !nameRE.MatchString(s.Name) {
		errs = append(errs, fmt.Errorf("name %q: want 1 to 128 letters, digits, '.', '_' or '-'", s.Name))
	}
	u, err := url.Parse(s.BaseURL)
	switch {
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, fmt.Errorf("FHIR base %q is not an absolute http(s) URL", s.BaseURL))
	case s.DatastoreID != "" && !strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/datastore/"+s.DatastoreID+"/r4"):
		errs = append(errs, fmt.Errorf("FHIR base %q does not end in /datastore/%s/r4", s.BaseURL, s.DatastoreID))
	}
	if settings {
		if len(s.Types) == 0 {
			errs = append(errs, errors.New("at least one resource type is required (the topic has one resourceTrigger per type)"))
		}
		for _, t := range s.Types {
			switch {
			case !typeRE.MatchString(t):
				errs = append(errs, fmt.Errorf("resource type %q is not a FHIR resource type name", t))
			case t == SubscriptionType || t == TopicType:
				errs = append(errs, fmt.Errorf("resource type %s cannot be subscribed to by the fast path", t))
			}
		}
		if !busRE.MatchString(s.BusARN) {
			errs = append(errs, fmt.Errorf("bus %q is not an EventBridge event bus ARN", s.BusARN))
		}
		if s.Payload != PayloadFullResource && s.Payload != PayloadIDOnly {
			errs = append(errs, fmt.Errorf("payload %q: want %s or %s", s.Payload, PayloadFullResource, PayloadIDOnly))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("subscription spec: %w", errors.Join(errs...))
	}
	return nil
}

// types returns the spec's types without repeats, sorted.
func (s Spec) types() []string {
	t := slices.Clone(s.Types)
	slices.Sort(t)
	return slices.Compact(t)
}

// Result is the state of a pipeline's Subscription.
type Result struct {
	// TopicID and SubscriptionID are the resources' ids ("" when absent).
	TopicID, SubscriptionID string
	// Status is the Subscription's status as HealthLake reports it:
	// "requested" until HealthLake activates it (5 to 10 minutes), then
	// "active"; "error" or "off" when it stopped; "" without a Subscription.
	Status string
	// Error is the Subscription's `error` text (set by HealthLake with
	// status "error"), cut to 1,000 bytes.
	Error string
	// UpToDate reports whether the topic and Subscription have the spec's
	// settings, the Subscription in status requested or active: what
	// Ensure keeps as it is.
	UpToDate bool
	// Changes lists what Ensure did, in order ("created SubscriptionTopic/…",
	// "deleted Subscription/… (status error)", …); empty when nothing
	// changed.
	Changes []string
}

// maxErrorText bounds Result.Error.
const maxErrorText = 1000

// Ensure makes the data store hold the spec's SubscriptionTopic and
// Subscription, and is idempotent:
//
//   - the topic (found by TopicURL) is created when absent, with status
//     "unknown", or updated when its triggers differ from the spec's types;
//   - a Subscription of the pipeline (criteria naming the topic, reason
//     Reason) with the spec's settings in status requested or active is
//     kept; any other one of the pipeline's Subscriptions (in status error
//     or off, with other settings, on a topic whose triggers changed, or a
//     duplicate) is deleted, and a Subscription is created when none is
//     kept, in status "requested";
//   - duplicate topics of the pipeline (a create retried after an
//     ambiguous failure) are deleted.
//
// It returns the Subscription's status as HealthLake reports it. On error
// the Result holds what exists so far.
func Ensure(ctx context.Context, api API, spec Spec) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	st, err := lookup(ctx, api, spec)
	if err != nil {
		return Result{}, fmt.Errorf("ensure subscription: %w", err)
	}
	return st.ensure(ctx, api, spec)
}

// ensure is Ensure on what lookup found (st), for a valid spec.
func (st *state) ensure(ctx context.Context, api API, spec Spec) (Result, error) {
	var res Result
	topic := st.chooseTopic(spec)
	topicStale := topic != nil && !topic.upToDate(spec)
	var keep *subDoc
	if topic != nil {
		res.TopicID = topic.ID
		if !topicStale {
			keep = st.healthy(spec, topic.ID)
		}
	}
	// Subscriptions not kept go first: a changed topic is then never
	// referenced by a Subscription of the old settings.
	for i := range st.subs {
		s := &st.subs[i]
		if keep != nil && s.ID == keep.ID {
			continue
		}
		if err := deleteAbsentOK(ctx, api, spec.DatastoreID, SubscriptionType, s.ID); err != nil {
			return res, fmt.Errorf("ensure subscription: delete the replaced Subscription: %w", err)
		}
		res.Changes = append(res.Changes, "deleted "+SubscriptionType+"/"+s.ID+" ("+st.why(s, spec, topic, topicStale)+")")
	}
	switch {
	case topic == nil:
		w, err := api.CreateResource(ctx, spec.DatastoreID, TopicType, topicBody(spec, "", StatusUnknownTopic))
		if err != nil {
			return res, fmt.Errorf("ensure subscription: create the SubscriptionTopic: %w", err)
		}
		topic = &topicDoc{ID: w.ID}
		res.Changes = append(res.Changes, "created "+TopicType+"/"+w.ID)
		if w.Retried {
			// An earlier attempt may have created a topic too: it is one of
			// the duplicates deleted below.
			var err error
			if st.topics, err = findTopics(ctx, api, spec); err != nil {
				return res, fmt.Errorf("ensure subscription: %w", err)
			}
		}
	case topicStale:
		status, why := topic.Status, "resource types"
		if !usableTopicStatus(status) {
			status, why = StatusUnknownTopic, "status "+topic.Status
		}
		if _, err := api.UpdateResource(ctx, spec.DatastoreID, TopicType, topic.ID, topicBody(spec, topic.ID, status)); err != nil {
			return res, fmt.Errorf("ensure subscription: update the SubscriptionTopic: %w", err)
		}
		res.Changes = append(res.Changes, "updated "+TopicType+"/"+topic.ID+" ("+why+")")
	}
	res.TopicID = topic.ID
	for _, t := range st.topics {
		if t.ID == topic.ID {
			continue
		}
		if err := deleteAbsentOK(ctx, api, spec.DatastoreID, TopicType, t.ID); err != nil {
			return res, fmt.Errorf("ensure subscription: delete a duplicate SubscriptionTopic: %w", err)
		}
		res.Changes = append(res.Changes, "deleted "+TopicType+"/"+t.ID+" (duplicate)")
	}
	if keep != nil {
		res.SubscriptionID, res.Status, res.Error, res.UpToDate = keep.ID, keep.Status, clip(keep.Error), true
		return res, nil
	}
	created, err := createSubscription(ctx, api, spec, topic.ID)
	if err != nil {
		res.SubscriptionID = created.ID // when it was made but not read back
		return res, fmt.Errorf("ensure subscription: %w", err)
	}
	res.SubscriptionID, res.Status, res.Error, res.UpToDate = created.ID, created.Status, clip(created.Error), true
	res.Changes = append(res.Changes, "created "+SubscriptionType+"/"+created.ID)
	if created.retried {
		// An earlier attempt may have created a Subscription too.
		again, err := lookup(ctx, api, spec)
		if err != nil {
			return res, fmt.Errorf("ensure subscription: look for a duplicate Subscription: %w", err)
		}
		for _, s := range again.subs {
			if s.ID == created.ID {
				continue
			}
			if err := deleteAbsentOK(ctx, api, spec.DatastoreID, SubscriptionType, s.ID); err != nil {
				return res, fmt.Errorf("ensure subscription: delete a duplicate Subscription: %w", err)
			}
			res.Changes = append(res.Changes, "deleted "+SubscriptionType+"/"+s.ID+" (duplicate)")
		}
	}
	return res, nil
}

// createdSub is a Subscription just created.
type createdSub struct {
	ID, Status, Error string
	retried           bool
}

// createSubscription creates the spec's Subscription on a topic and reads
// its status from the answer (else reads it back).
func createSubscription(ctx context.Context, api API, spec Spec, topicID string) (createdSub, error) {
	w, err := api.CreateResource(ctx, spec.DatastoreID, SubscriptionType, subscriptionBody(spec, topicID))
	if err != nil {
		return createdSub{}, fmt.Errorf("create the Subscription: %w", err)
	}
	out := createdSub{ID: w.ID, retried: w.Retried}
	body := w.Body
	if len(body) == 0 {
		if body, err = api.ReadResource(ctx, spec.DatastoreID, SubscriptionType, w.ID); err != nil {
			return out, fmt.Errorf("read the new Subscription back: %w", err)
		}
	}
	var doc subDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return out, fmt.Errorf("the new Subscription is not a JSON resource: %w", err)
	}
	out.Status, out.Error = doc.Status, doc.Error
	return out, nil
}

// Remove deletes the pipeline's Subscriptions, then its topic. What is
// absent already is fine.
func Remove(ctx context.Context, api API, spec Spec) error {
	if err := spec.validateIdentity(); err != nil {
		return err
	}
	st, err := lookup(ctx, api, spec)
	if err != nil {
		return fmt.Errorf("remove subscription: %w", err)
	}
	return st.remove(ctx, api, spec)
}

// remove deletes what lookup found: the Subscriptions first, since they
// reference the topics.
func (st *state) remove(ctx context.Context, api API, spec Spec) error {
	for _, s := range st.subs {
		if err := deleteAbsentOK(ctx, api, spec.DatastoreID, SubscriptionType, s.ID); err != nil {
			return fmt.Errorf("remove subscription: delete the Subscription: %w", err)
		}
	}
	for _, t := range st.topics {
		if err := deleteAbsentOK(ctx, api, spec.DatastoreID, TopicType, t.ID); err != nil {
			return fmt.Errorf("remove subscription: delete the SubscriptionTopic: %w", err)
		}
	}
	return nil
}

// Status reports the pipeline's Subscription as it is, changing nothing:
// the Subscription Ensure would keep, else the one that best tells what
// went wrong (error, then off, then any other). Without a Subscription,
// Status and SubscriptionID are "".
func Status(ctx context.Context, api API, spec Spec) (Result, error) {
	if err := spec.validateIdentity(); err != nil {
		return Result{}, err
	}
	st, err := lookup(ctx, api, spec)
	if err != nil {
		return Result{}, fmt.Errorf("subscription status: %w", err)
	}
	return st.status(spec), nil
}

// status summarises what lookup found.
func (st *state) status(spec Spec) Result {
	var res Result
	topic := st.chooseTopic(spec)
	if topic == nil {
		return res
	}
	res.TopicID = topic.ID
	if !topic.upToDate(spec) {
		// Any Subscription is on a stale topic: report the worst one.
		if s := st.worst(topic.ID); s != nil {
			res.SubscriptionID, res.Status, res.Error = s.ID, s.Status, clip(s.Error)
		}
		return res
	}
	if s := st.healthy(spec, topic.ID); s != nil {
		res.SubscriptionID, res.Status, res.Error, res.UpToDate = s.ID, s.Status, clip(s.Error), true
		return res
	}
	if s := st.worst(topic.ID); s != nil {
		res.SubscriptionID, res.Status, res.Error = s.ID, s.Status, clip(s.Error)
	}
	return res
}

// validateIdentity checks what Remove and Status need: the data store, the
// pipeline name and the FHIR base.
func (s Spec) validateIdentity() error { return s.check(false) }

// clip bounds an error text to maxErrorText bytes, on a rune boundary.
func clip(s string) string { return cliptext.String(s, maxErrorText) }

// deleteAbsentOK deletes a resource; one already absent is fine.
func deleteAbsentOK(ctx context.Context, api API, datastoreID, typ, id string) error {
	if err := api.DeleteResource(ctx, datastoreID, typ, id); err != nil && !fhirrest.IsAbsent(err) {
		return err
	}
	return nil
}

// The resources as written and as read back.

type extension struct {
	URL       string `json:"url"`
	ValueCode string `json:"valueCode,omitempty"`
}

type extended struct {
	Extension []extension `json:"extension"`
}

type trigger struct {
	Description          string   `json:"description,omitempty"`
	Resource             string   `json:"resource"`
	SupportedInteraction []string `json:"supportedInteraction,omitempty"`
}

// topicDoc is a SubscriptionTopic: what is written and what is read back.
type topicDoc struct {
	ResourceType    string    `json:"resourceType"`
	ID              string    `json:"id,omitempty"`
	URL             string    `json:"url"`
	Title           string    `json:"title,omitempty"`
	Status          string    `json:"status"`
	Description     string    `json:"description,omitempty"`
	ResourceTrigger []trigger `json:"resourceTrigger"`
}

// topicBody is the spec's topic (id "" for a create).
func topicBody(spec Spec, id, status string) []byte {
	doc := topicDoc{
		ResourceType: TopicType, ID: id, URL: TopicURL(spec.Name), Status: status,
		Title:       "healthlake-cdc " + spec.Name + " changes",
		Description: "Every create, update and delete of the resource types the healthlake-cdc pipeline " + spec.Name + " publishes (its fast path).",
	}
	for _, t := range spec.types() {
		doc.ResourceTrigger = append(doc.ResourceTrigger, trigger{
			Description: t + " create, update and delete", Resource: t, SupportedInteraction: interactions,
		})
	}
	b, _ := json.Marshal(doc) // strings only: cannot fail
	return b
}

// upToDate reports whether a topic triggers on exactly the spec's types,
// on create, update and delete each, in a status a Subscription may use.
func (t *topicDoc) upToDate(spec Spec) bool {
	if !usableTopicStatus(t.Status) {
		return false
	}
	got := map[string]bool{}
	for _, tr := range t.ResourceTrigger {
		r := strings.TrimPrefix(tr.Resource, "http://hl7.org/fhir/StructureDefinition/")
		in := slices.Clone(tr.SupportedInteraction)
		slices.Sort(in)
		// R5: without supportedInteraction, all interactions trigger.
		if len(in) > 0 && !slices.Equal(slices.Compact(in), []string{"create", "delete", "update"}) {
			return false
		}
		got[r] = true
	}
	want := spec.types()
	if len(got) != len(want) {
		return false
	}
	for _, t := range want {
		if !got[t] {
			return false
		}
	}
	return true
}

// usableTopicStatus: a Subscription must reference a topic in status
// unknown, draft or active (HealthLake, lifecycle page).
func usableTopicStatus(s string) bool {
	return s == StatusUnknownTopic || s == "draft" || s == StatusActive
}

// subChannel is a Subscription's channel.
type subChannel struct {
	Type       string    `json:"type"`
	Endpoint   string    `json:"endpoint,omitempty"`
	Payload    string    `json:"payload,omitempty"`
	PayloadExt *extended `json:"_payload,omitempty"`
}

type subMeta struct {
	Profile []string `json:"profile,omitempty"`
}

// subDoc is a Subscription: what is written and what is read back.
type subDoc struct {
	ResourceType string     `json:"resourceType"`
	ID           string     `json:"id,omitempty"`
	Meta         *subMeta   `json:"meta,omitempty"`
	Status       string     `json:"status"`
	Reason       string     `json:"reason"`
	Criteria     string     `json:"criteria"`
	Error        string     `json:"error,omitempty"`
	Channel      subChannel `json:"channel"`
}

// subscriptionBody is the spec's Subscription on a topic, in HealthLake's
// documented shape.
func subscriptionBody(spec Spec, topicID string) []byte {
	doc := subDoc{
		ResourceType: SubscriptionType,
		Meta:         &subMeta{Profile: []string{BackportSubscriptionProfile}},
		Status:       StatusRequested,
		Reason:       Reason(spec.Name),
		Criteria:     spec.Criteria(topicID),
		Channel: subChannel{
			Type: ChannelEventBridge, Endpoint: spec.BusARN, Payload: ChannelPayload,
			PayloadExt: &extended{Extension: []extension{{URL: BackportPayloadContent, ValueCode: spec.Payload}}},
		},
	}
	b, _ := json.Marshal(doc) // strings only: cannot fail
	return b
}

// payloadContent is the Subscription's backport-payload-content code.
func (s *subDoc) payloadContent() string {
	if s.Channel.PayloadExt == nil {
		return ""
	}
	for _, x := range s.Channel.PayloadExt.Extension {
		if x.URL == BackportPayloadContent {
			return x.ValueCode
		}
	}
	return ""
}

// settingsMatch reports whether a Subscription has the spec's settings on
// a topic (its status aside).
func (s *subDoc) settingsMatch(spec Spec, topicID string) bool {
	return s.Meta != nil && slices.Contains(s.Meta.Profile, BackportSubscriptionProfile) &&
		s.Criteria == spec.Criteria(topicID) &&
		s.Channel.Type == ChannelEventBridge && s.Channel.Endpoint == spec.BusARN &&
		s.Channel.Payload == ChannelPayload && s.payloadContent() == spec.Payload
}

// topicOf is the topic id a criteria names ("" when it names none).
func topicOf(criteria string) string {
	i := strings.LastIndex(criteria, "/"+TopicType+"/")
	if i < 0 {
		return ""
	}
	return strings.TrimRight(criteria[i+len(TopicType)+2:], "/")
}

// state is what the data store holds of a pipeline's fast path.
type state struct {
	// topics are the SubscriptionTopics with the pipeline's url, as found.
	topics []topicDoc
	// subs are the Subscriptions on those topics with the pipeline's
	// reason, as found.
	subs []subDoc
}

// lookup finds the pipeline's topics and Subscriptions.
func lookup(ctx context.Context, api API, spec Spec) (*state, error) {
	return lookupWith(ctx, api, spec, nil)
}

// lookupWith is lookup that also finds the pipeline's Subscriptions on the
// topics named by gone, which may no longer exist.
func lookupWith(ctx context.Context, api API, spec Spec, gone []string) (*state, error) {
	topics, err := findTopics(ctx, api, spec)
	if err != nil {
		return nil, err
	}
	st := &state{topics: topics}
	ids := append(st.topicIDs(), gone...)
	seen := map[string]bool{}
	searched := map[string]bool{}
	for _, topicID := range ids {
		if searched[topicID] {
			continue
		}
		searched[topicID] = true
		raws, err := search(ctx, api, spec.DatastoreID, SubscriptionType, url.Values{"criteria": {spec.Criteria(topicID)}})
		if err != nil {
			return nil, fmt.Errorf("find the Subscription: %w", err)
		}
		for _, raw := range raws {
			var s subDoc
			if json.Unmarshal(raw, &s) != nil || s.ResourceType != SubscriptionType || s.ID == "" || seen[s.ID] {
				continue
			}
			if topicOf(s.Criteria) != topicID || s.Reason != Reason(spec.Name) {
				continue
			}
			seen[s.ID] = true
			st.subs = append(st.subs, s)
		}
	}
	return st, nil
}

// deletions lists what remove deleted, for Result.Changes: each
// Subscription, then each topic, with its note.
func (st *state) deletions(subNote, topicNote string) []string {
	var out []string
	for _, s := range st.subs {
		out = append(out, "deleted "+SubscriptionType+"/"+s.ID+subNote)
	}
	for _, t := range st.topics {
		out = append(out, "deleted "+TopicType+"/"+t.ID+topicNote)
	}
	return out
}

// topicIDs returns the ids of the topics found.
func (st *state) topicIDs() []string {
	ids := make([]string, 0, len(st.topics))
	for _, t := range st.topics {
		ids = append(ids, t.ID)
	}
	return ids
}

// search searches a type by params; a server that refuses the parameter
// (400: HealthLake's list of SubscriptionTopic search parameters is not
// fully documented) is asked for every resource of the type instead. The
// caller checks each result either way.
func search(ctx context.Context, api API, datastoreID, typ string, params url.Values) ([]json.RawMessage, error) {
	raws, err := api.SearchResources(ctx, datastoreID, typ, params)
	var refused *fhirrest.APIError
	if errors.As(err, &refused) && refused.StatusCode == http.StatusBadRequest {
		raws, err = api.SearchResources(ctx, datastoreID, typ, nil)
	}
	return raws, err
}

// findTopics finds the SubscriptionTopics with the pipeline's url.
func findTopics(ctx context.Context, api API, spec Spec) ([]topicDoc, error) {
	raws, err := search(ctx, api, spec.DatastoreID, TopicType, url.Values{"url": {TopicURL(spec.Name)}})
	if err != nil {
		return nil, fmt.Errorf("find the SubscriptionTopic: %w", err)
	}
	var out []topicDoc
	seen := map[string]bool{}
	for _, raw := range raws {
		var t topicDoc
		if json.Unmarshal(raw, &t) != nil || t.ResourceType != TopicType || t.ID == "" || t.URL != TopicURL(spec.Name) || seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		out = append(out, t)
	}
	return out, nil
}

// chooseTopic picks the topic to keep among the pipeline's: the one with a
// healthy Subscription of the spec's settings, else one with any
// Subscription not in error or off, else one in the spec's settings, else
// the first found.
func (st *state) chooseTopic(spec Spec) *topicDoc {
	if len(st.topics) == 0 {
		return nil
	}
	for i := range st.topics {
		if t := &st.topics[i]; t.upToDate(spec) && st.healthy(spec, t.ID) != nil {
			return t
		}
	}
	for i := range st.topics {
		t := &st.topics[i]
		for _, s := range st.subs {
			if topicOf(s.Criteria) == t.ID && (s.Status == StatusRequested || s.Status == StatusActive) {
				return t
			}
		}
	}
	for i := range st.topics {
		if t := &st.topics[i]; t.upToDate(spec) {
			return t
		}
	}
	return &st.topics[0]
}

// healthy returns the Subscription on a topic that Ensure keeps: the
// spec's settings, status active (preferred) or requested.
func (st *state) healthy(spec Spec, topicID string) *subDoc {
	var requested *subDoc
	for i := range st.subs {
		s := &st.subs[i]
		if !s.settingsMatch(spec, topicID) {
			continue
		}
		switch s.Status {
		case StatusActive:
			return s
		case StatusRequested:
			if requested == nil {
				requested = s
			}
		}
	}
	return requested
}

// worst returns the Subscription on a topic that best tells what went
// wrong: in error, else off, else any.
func (st *state) worst(topicID string) *subDoc {
	var off, other *subDoc
	for i := range st.subs {
		s := &st.subs[i]
		if topicOf(s.Criteria) != topicID {
			continue
		}
		switch {
		case s.Status == StatusError:
			return s
		case s.Status == StatusOff && off == nil:
			off = s
		case other == nil:
			other = s
		}
	}
	if off != nil {
		return off
	}
	return other
}

// why says why Ensure deletes a Subscription (for Result.Changes).
func (st *state) why(s *subDoc, spec Spec, topic *topicDoc, topicStale bool) string {
	switch {
	case s.Status == StatusError || s.Status == StatusOff:
		return "status " + s.Status
	case topic == nil || topicOf(s.Criteria) != topic.ID:
		return "on a duplicate topic"
	case topicStale:
		return "resource types changed"
	case !s.settingsMatch(spec, topic.ID):
		return "settings changed"
	}
	return "duplicate"
}
