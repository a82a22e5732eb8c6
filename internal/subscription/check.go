package subscription

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

// The scheduled check (docs/FASTPATH.md, "What the stack creates"): every stackconfig.FastPathCheckEvery a schedule invokes the
// setup Lambda with CheckEvent. It repairs the pipeline's Subscription as
// a deploy would — replaces one in error or off or with other settings,
// creates one deleted by hand — and reports whether HealthLake has it
// active, so that an operator learns of a stopped Subscription from its
// own alarm instead of from FastPathMissed.

// Metric names of the check (EMF, dimension Pipeline).
const (
	// MetricSubscriptionInactive is 0 when the pipeline's Subscription is
	// active after the check, else 1 (requested, error, off, none).
	MetricSubscriptionInactive = metrics.FastPathSubscriptionInactive
	// MetricSubscriptionRepaired is 1 when the check changed anything.
	MetricSubscriptionRepaired = "FastPathSubscriptionRepaired"
)

// CheckEvent is the scheduled check's invocation: the custom resource's
// properties (PropDatastoreID, PropTypes, PropBusARN, PropPayload,
// PropName) under "check".
type CheckEvent struct {
	Check map[string]any `json:"check"`
}

// Check repairs the pipeline's Subscription when it needs it and reports
// it: nothing is written when the Subscription Ensure would keep exists
// (requested or active, with the spec's settings), nor when the pipeline
// has neither topic nor Subscription — the stack is being deleted, or was
// never created: creating one then could leave a Subscription no stack
// removes. Otherwise it does what Ensure does, on the same reading of the
// data store (so it never creates a topic); repaired says whether that
// changed anything.
func Check(ctx context.Context, api API, spec Spec) (res Result, repaired bool, err error) {
	if err := spec.Validate(); err != nil {
		return Result{}, false, err
	}
	st, err := lookup(ctx, api, spec)
	if err != nil {
		return Result{}, false, fmt.Errorf("check subscription: %w", err)
	}
	cur := st.status(spec)
	if cur.UpToDate || (cur.TopicID == "" && cur.SubscriptionID == "") {
		return cur, false, nil
	}
	res, err = st.ensure(ctx, api, spec)
	if err != nil {
		return res, len(res.Changes) > 0, fmt.Errorf("check subscription: %w", err)
	}
	return res, len(res.Changes) > 0, nil
}

// Serve is the setup Lambda's handler: a CheckEvent runs the scheduled
// check (HandleCheck), anything else is a CloudFormation custom resource
// event (Handle).
func (h *CustomResource) Serve(ctx context.Context, raw json.RawMessage) error {
	if c, ok := checkEventOf(raw); ok {
		return h.HandleCheck(ctx, c)
	}
	var ev cfn.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("fast-path-setup: an event that is neither a check nor a custom resource event: %w", err)
	}
	return h.Handle(ctx, ev)
}

// checkEventOf reports whether raw is a CheckEvent.
func checkEventOf(raw json.RawMessage) (CheckEvent, bool) {
	if !bytes.Contains(raw, []byte(`"check"`)) {
		return CheckEvent{}, false
	}
	var c CheckEvent
	if err := json.Unmarshal(raw, &c); err != nil || c.Check == nil {
		return CheckEvent{}, false
	}
	return c, true
}

// HandleCheck runs the scheduled check and reports it: one log line (ids,
// status, changes and HealthLake's error text, never a resource) and the
// metrics. It returns an error, which Lambda retries, only when the check
// could not be made; a Subscription in error is a result, not a failure.
func (h *CustomResource) HandleCheck(ctx context.Context, ev CheckEvent) error {
	spec, err := SpecFromProperties(ev.Check, h.endpoint)
	if err != nil {
		h.opts.Logger.Error("fast-path-setup check: bad properties", "error", err.Error())
		return fmt.Errorf("fast-path-setup check: %w", err)
	}
	work, cancel := h.beforeMargin(ctx)
	defer cancel()
	// A Delete of the custom resource waits this long for a check that was
	// running while it removed the pipeline's resources (sweep).
	work, stop := context.WithTimeout(work, h.opts.CheckBudget)
	defer stop()
	res, repaired, err := Check(work, h.api, spec)
	log := h.opts.Logger.With("check", true, "topicId", res.TopicID, "subscriptionId", res.SubscriptionID,
		"status", res.Status, "changes", res.Changes)
	if err != nil {
		log.Error("fast-path-setup check failed", "error", err.Error())
		return err
	}
	inactive := int64(1)
	if res.Status == StatusActive {
		inactive = 0
	}
	rep := int64(0)
	if repaired {
		rep = 1
	}
	switch {
	case res.Status == "":
		log.Warn("fast-path-setup check: the pipeline has no Subscription (the next deploy creates it)")
	case inactive == 1 && res.Status != StatusRequested:
		log.Warn("fast-path-setup check: the Subscription is not active", "error", res.Error)
	default:
		log.Info("fast-path-setup check", "repaired", repaired)
	}
	if h.opts.Metrics != nil {
		if err := h.opts.Metrics.Emit([]metrics.Value{
			metrics.Count(MetricSubscriptionInactive, inactive),
			metrics.Count(MetricSubscriptionRepaired, rep),
		}, nil, nil); err != nil {
			return fmt.Errorf("fast-path-setup check: metrics: %w", err)
		}
	}
	return nil
}
