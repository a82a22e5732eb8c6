package subscription

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/cfnresponse"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/lambdart"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// The custom resource's properties (its ResourceProperties). CloudFormation
// passes every scalar as a string.
const (
	// PropDatastoreID is the data store id.
	PropDatastoreID = "DatastoreId"
	// PropTypes are the resource types: a comma-separated string or a list.
	PropTypes = "Types"
	// PropBusARN is the notification bus's ARN.
	PropBusARN = "BusArn"
	// PropPayload is full-resource or id-only; default full-resource.
	PropPayload = "Payload"
	// PropName is the pipeline name.
	PropName = "Name"
)

// The custom resource's Data (Fn::GetAtt attributes).
const (
	AttrSubscriptionID = "SubscriptionId"
	AttrTopicID        = "TopicId"
	AttrStatus         = "Status"
)

// FailedCreatePrefix starts the PhysicalResourceId of a Create that failed
// before a Subscription was made (followed by the request id): the Delete
// of its rollback removes whatever the pipeline has.
const FailedCreatePrefix = "create-failed-"

// PipelineIDPrefix starts the PhysicalResourceId that names a pipeline's
// Subscription by its data store and name (PipelineID).
const PipelineIDPrefix = "pipeline:"

// PipelineID is the PhysicalResourceId of spec's pipeline:
// "pipeline:{datastoreId}:{name}" (a name holds no colon: Spec.Validate).
func PipelineID(spec Spec) string {
	return PipelineIDPrefix + spec.DatastoreID + ":" + spec.Name
}

// CustomResource is the fast-path-setup Lambda: the CloudFormation custom
// resource that keeps the pipeline's SubscriptionTopic and Subscription.
// Create and Update run Ensure, Delete runs Remove; the answer goes to the
// event's ResponseURL. The PhysicalResourceId names the pipeline, not its
// Subscription: PipelineIDPrefix, the data store and the pipeline name
// (PipelineID). Ensure may replace the Subscription (in error, off, or of
// other settings) at any Update, and an operator may replace it by hand;
// the id stays, so CloudFormation's Delete at the stack's deletion removes
// whatever Subscription the pipeline has then. An Update that changes the
// data store or the name answers a new id, and CloudFormation's Delete of
// the old id (with the old properties) removes the old pipeline's topic
// and Subscriptions. A Create whose properties name no pipeline answers
// FailedCreatePrefix and the request id. Resources created before ids
// named the pipeline keep the Subscription's id as theirs (see remove).
// Data holds SubscriptionId, TopicId and Status ("requested" until
// HealthLake activates the Subscription). Responses and logs carry ids,
// statuses and error texts only, never a resource.
type CustomResource struct {
	api      API
	endpoint string
	opts     CustomResourceOptions
}

// CustomResourceOptions configure a CustomResource.
type CustomResourceOptions struct {
	// Logger receives one line per event; default slog.Default().
	Logger *slog.Logger
	// Margin is kept before the invocation's deadline for the response:
	// the HealthLake calls are cut off that much earlier, so that
	// CloudFormation always gets an answer. Default 10 s.
	Margin time.Duration
	// Sleep waits between the tries of the response PUT
	// (cfnresponse.Sender) and in a Delete's wait for a running check;
	// default a context-aware timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Metrics receives the scheduled check's metrics (HandleCheck); nil
	// emits none.
	Metrics *metrics.Recorder
	// CheckBudget bounds the scheduled check's HealthLake calls: they are
	// cut off this long after the check starts. A Delete that removed the
	// pipeline's resources waits this long and CheckSettle more, then
	// removes what a check running meanwhile created (sweep). Default
	// DefaultCheckBudget.
	CheckBudget time.Duration
	// CheckSettle is the Delete's wait beyond CheckBudget: for a write the
	// check sent just before its cut-off, which HealthLake may still
	// apply. Default DefaultCheckSettle.
	CheckSettle time.Duration
}

// Defaults of CustomResourceOptions.CheckBudget and CheckSettle: with the
// deployed 120-second timeout of the setup Lambda a Delete has time for
// both passes and the wait.
const (
	DefaultCheckBudget = 45 * time.Second
	DefaultCheckSettle = 15 * time.Second
)

// NewCustomResource returns the handler; endpoint is the HealthLake
// endpoint the FHIR base of the properties' data store is built from
// (FHIRBase).
func NewCustomResource(api API, endpoint string, opts CustomResourceOptions) (*CustomResource, error) {
	if api == nil {
		return nil, errors.New("fast-path-setup: a HealthLake client is required")
	}
	if endpoint == "" {
		return nil, errors.New("fast-path-setup: the HealthLake endpoint is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Margin <= 0 {
		opts.Margin = 10 * time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = backoff.Sleep
	}
	if opts.CheckBudget <= 0 {
		opts.CheckBudget = DefaultCheckBudget
	}
	if opts.CheckSettle <= 0 {
		opts.CheckSettle = DefaultCheckSettle
	}
	return &CustomResource{api: api, endpoint: strings.TrimRight(endpoint, "/"), opts: opts}, nil
}

// NewFromEnv is the fast-path-setup Lambda built from its environment
// (CDC_HEALTHLAKE_ENDPOINT, else the public endpoint of the runtime's
// region) and the host's runtime. getenv is os.Getenv when nil.
func NewFromEnv(getenv func(string) string, rt lambdart.Runtime) (*CustomResource, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint := strings.TrimSpace(getenv(stackconfig.EnvHealthLakeEndpoint))
	if endpoint == "" {
		if rt.AWS.Region == "" {
			return nil, fmt.Errorf("fast-path-setup: neither %s nor an AWS region is set", stackconfig.EnvHealthLakeEndpoint)
		}
		// The stack gives this function no endpoint: the Region's, or its
		// FIPS host with the FIPSEndpoints setting (AWS_USE_FIPS_ENDPOINT).
		endpoint = awsclient.HealthLakeEndpoint(rt.AWS)
	}
	hc, err := fhirrest.NewFromConfig(rt.AWS, endpoint)
	if err != nil {
		return nil, fmt.Errorf("fast-path-setup: build the HealthLake client: %w", err)
	}
	return NewCustomResource(hc, endpoint, CustomResourceOptions{Logger: rt.Logger, Metrics: rt.Metrics})
}

// SpecFromProperties reads and validates a Spec from the custom resource's
// properties; endpoint gives the FHIR base.
func SpecFromProperties(props map[string]any, endpoint string) (Spec, error) {
	spec, err := specOf(props, endpoint)
	if err != nil {
		return Spec{}, err
	}
	return spec, spec.Validate()
}

// specOf reads the properties without validating the values.
func specOf(props map[string]any, endpoint string) (Spec, error) {
	var errs []error
	str := func(name string) string {
		switch v := props[name].(type) {
		case nil:
			return ""
		case string:
			return strings.TrimSpace(v)
		default:
			errs = append(errs, fmt.Errorf("property %s: want a string, got %T", name, v))
			return ""
		}
	}
	spec := Spec{
		DatastoreID: str(PropDatastoreID),
		BusARN:      str(PropBusARN),
		Payload:     str(PropPayload),
		Name:        str(PropName),
	}
	if spec.Payload == "" {
		spec.Payload = PayloadFullResource
	}
	spec.BaseURL = FHIRBase(endpoint, spec.DatastoreID)
	add := func(s string) {
		for _, t := range strings.Split(s, ",") {
			if t = strings.TrimSpace(t); t != "" {
				spec.Types = append(spec.Types, t)
			}
		}
	}
	switch v := props[PropTypes].(type) {
	case nil:
	case string:
		add(v)
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				errs = append(errs, fmt.Errorf("property %s: want strings, got a %T", PropTypes, x))
				continue
			}
			add(s)
		}
	case []string:
		for _, s := range v {
			add(s)
		}
	default:
		errs = append(errs, fmt.Errorf("property %s: want a comma-separated string or a list, got %T", PropTypes, v))
	}
	if len(errs) > 0 {
		return Spec{}, fmt.Errorf("custom resource properties: %w", errors.Join(errs...))
	}
	return spec, nil
}

// beforeMargin bounds ctx by its deadline less Margin, so that the
// HealthLake calls end in time for the answer (ctx as it is without a
// deadline).
func (h *CustomResource) beforeMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	if deadline, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, deadline.Add(-h.opts.Margin))
	}
	return ctx, func() {}
}

// Handle serves one custom resource event: it does the work, then PUTs
// the response to the event's ResponseURL. It returns an error only when
// the response could not be delivered (the invocation then fails and
// Lambda's asynchronous retries run it again: Ensure and Remove are
// idempotent).
func (h *CustomResource) Handle(ctx context.Context, ev cfn.Event) error {
	work, cancel := h.beforeMargin(ctx)
	defer cancel()
	out := h.apply(work, ev)
	resp := cfn.Response{
		Status: cfn.StatusSuccess, RequestID: ev.RequestID, LogicalResourceID: ev.LogicalResourceID,
		StackID: ev.StackID, PhysicalResourceID: out.physicalID, Data: out.data,
	}
	log := h.opts.Logger.With("requestType", string(ev.RequestType), "logicalResourceId", ev.LogicalResourceID,
		"physicalResourceId", out.physicalID)
	if out.err != nil {
		resp.Status, resp.Reason = cfn.StatusFailed, reason(out.err)
		log.Error("fast-path-setup failed", "error", out.err.Error(), "changes", out.changes)
	} else {
		log.Info("fast-path-setup done", "note", out.note, "status", out.status, "changes", out.changes)
	}
	if err := h.respond(ctx, ev.ResponseURL, resp); err != nil {
		log.Error("fast-path-setup could not answer CloudFormation", "error", err.Error())
		return err
	}
	return nil
}

// outcome is what an event did.
type outcome struct {
	physicalID string
	data       map[string]any
	status     string
	changes    []string
	note       string
	err        error
}

// apply runs Ensure or Remove for an event.
func (h *CustomResource) apply(ctx context.Context, ev cfn.Event) outcome {
	// A failed Create answers its pipeline's id (the rollback's Delete
	// then removes whatever it made), or FailedCreatePrefix and the
	// request id when its properties name no pipeline; a failed Update
	// keeps the resource's id.
	fallback := ev.PhysicalResourceID
	if ev.RequestType == cfn.RequestCreate || fallback == "" {
		fallback = FailedCreatePrefix + ev.RequestID
	}
	switch ev.RequestType {
	case cfn.RequestCreate, cfn.RequestUpdate:
		spec, err := SpecFromProperties(ev.ResourceProperties, h.endpoint)
		if err != nil {
			if ev.RequestType == cfn.RequestCreate {
				if id, err := specOf(ev.ResourceProperties, h.endpoint); err == nil && id.validateIdentity() == nil {
					fallback = PipelineID(id)
				}
			}
			return outcome{physicalID: fallback, err: err}
		}
		// A resource created before ids named the pipeline keeps the
		// Subscription's id: a new id would make CloudFormation delete the
		// old one, which remove could not tell from the stack's deletion.
		legacy := ev.RequestType == cfn.RequestUpdate && isLegacyID(ev.PhysicalResourceID)
		res, err := Ensure(ctx, h.api, spec)
		if err != nil {
			id := fallback
			if ev.RequestType == cfn.RequestCreate {
				id = PipelineID(spec)
			}
			return outcome{physicalID: id, changes: res.Changes, err: err}
		}
		id := PipelineID(spec)
		if legacy {
			id = res.SubscriptionID
		}
		return outcome{
			physicalID: id, status: res.Status, changes: res.Changes,
			data: map[string]any{AttrSubscriptionID: res.SubscriptionID, AttrTopicID: res.TopicID, AttrStatus: res.Status},
		}
	case cfn.RequestDelete:
		return h.remove(ctx, ev)
	}
	return outcome{physicalID: fallback, err: fmt.Errorf("unknown request type %q", ev.RequestType)}
}

// isLegacyID reports whether id is a Subscription's id: the
// PhysicalResourceId of a resource created before ids named the pipeline.
func isLegacyID(id string) bool {
	return id != "" && !strings.HasPrefix(id, PipelineIDPrefix) && !strings.HasPrefix(id, FailedCreatePrefix)
}

// remove serves a Delete. CloudFormation sends one when the stack is
// deleted or rolls back a Create, and after an Update that answered a new
// PhysicalResourceId, with the old id and the old properties. A pipeline's
// id (PipelineID) removes that pipeline's topic and Subscriptions, whatever
// their ids now; a failed Create's id (FailedCreatePrefix) whatever the
// properties' pipeline has. A Subscription's id — a resource created before
// ids named the pipeline, or the old id after such a resource's Update
// replaced its Subscription — removes them only when it is one of the
// pipeline's Subscriptions or the pipeline has none; otherwise the Delete is
// for a Subscription already replaced, and nothing is removed.
func (h *CustomResource) remove(ctx context.Context, ev cfn.Event) outcome {
	out := outcome{physicalID: ev.PhysicalResourceID}
	spec, err := specOf(ev.ResourceProperties, h.endpoint)
	if err == nil {
		err = spec.validateIdentity()
	}
	if err != nil {
		// Nothing can have been created with such properties.
		out.note = "nothing to remove: the properties name no pipeline (" + err.Error() + ")"
		return out
	}
	if strings.HasPrefix(ev.PhysicalResourceID, PipelineIDPrefix) && ev.PhysicalResourceID != PipelineID(spec) {
		out.note = "nothing to remove: the id names another pipeline than the properties"
		return out
	}
	st, err := lookup(ctx, h.api, spec)
	if err != nil {
		out.err = fmt.Errorf("remove subscription: %w", err)
		return out
	}
	current := len(st.subs) == 0 || !isLegacyID(ev.PhysicalResourceID)
	for _, s := range st.subs {
		current = current || s.ID == ev.PhysicalResourceID
	}
	if !current {
		out.note = "kept the pipeline's Subscription: this Delete is for one it replaced"
		return out
	}
	if err := st.remove(ctx, h.api, spec); err != nil {
		out.err = err
		return out
	}
	out.changes = append(out.changes, st.deletions("", "")...)
	if len(st.subs)+len(st.topics) > 0 {
		h.sweep(ctx, spec, st, &out)
	}
	return out
}

// sweepReserve is what sweep leaves of the Delete's time for its second
// pass.
const sweepReserve = 10 * time.Second

// sweep is the second pass of a Delete that removed the pipeline's
// resources (removed). CloudFormation deletes the check's schedule before
// the custom resource, but not a check already running: one that read the
// data store before the first pass can still create a Subscription after it
// — on a topic just deleted, where lookup no longer finds it. sweep waits
// until such a check's HealthLake calls are cut off (CheckBudget, then
// CheckSettle), then deletes the pipeline's Subscriptions on the removed
// topics and whatever lookup finds again. A check that reads the data store
// after the first pass finds neither topic nor Subscription and creates
// nothing. A failure here leaves the Delete successful, with a warning.
func (h *CustomResource) sweep(ctx context.Context, spec Spec, removed *state, out *outcome) {
	wait := h.opts.CheckBudget + h.opts.CheckSettle
	if deadline, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(deadline)-sweepReserve)
	}
	if wait > 0 {
		if err := h.opts.Sleep(ctx, wait); err != nil {
			out.note = "second pass not made: " + err.Error()
			return
		}
	}
	late, err := lookupWith(ctx, h.api, spec, removed.topicIDs())
	if err == nil && len(late.subs)+len(late.topics) > 0 {
		err = late.remove(ctx, h.api, spec)
	}
	if err != nil {
		out.note = "second pass failed (search the data store for Subscriptions of the pipeline, docs/DEPLOY.md): " + reason(err)
		h.opts.Logger.Warn("fast-path-setup: the Delete's second pass failed", "error", err.Error())
		return
	}
	out.changes = append(out.changes, late.deletions(" (created by a check during the deletion)", " (created during the deletion)")...)
}

// reason is a FAILED response's Reason: the error text, cut to about
// 1,000 bytes.
func reason(err error) string { return cfnresponse.Reason(err) }

// respond PUTs the response to the pre-signed ResponseURL, retrying
// transport errors and non-2xx answers.
func (h *CustomResource) respond(ctx context.Context, responseURL string, resp cfn.Response) error {
	return cfnresponse.Sender{Sleep: h.opts.Sleep}.Send(ctx, responseURL, resp)
}
