package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// plan reads RUN/STATE's checkpoint and origin (no lock: the reconciliation
// takes neither the run lock nor HealthLake's export slot), the previous
// reconciliation and the delivered-index objects written since it.
func (h *Handler) plan(ctx context.Context, in Input) (Plan, error) {
	start := in.StartTime
	startedAt, err := envelope.ParseTime(start)
	if err != nil {
		return Plan{}, &InputError{Msg: "startTime: not a time"}
	}
	cp, ok, err := runlock.ReadCheckpoints(ctx, h.db, h.cfg.Table)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	if !ok {
		return Plan{}, &Refused{Msg: "no run has committed a checkpoint yet"}
	}
	if e := cp.BelongsTo(h.cfg.DatastoreID); e != nil {
		// The checkpoint and the delivered index are another data store's:
		// comparing this one with them would publish its resources as
		// repairs. Fail (ReconcileFailedAlarm), with the error's own name,
		// until a replay moves the record (docs/OPERATIONS.md).
		return Plan{}, e
	}
	origin := cp.Origin
	if origin.IsZero() {
		origin = h.cfg.Origin // a record written before the origin was kept
	}
	if !cp.Checkpoint.After(origin) {
		return Plan{}, &Refused{Msg: "nothing published yet: the checkpoint is at the origin"}
	}
	p := Plan{RunID: in.RunID, Partitions: h.cfg.Partitions,
		Window: envelope.Window{Since: origin, Until: cp.Checkpoint}, StartedAt: start,
		Export:           envelope.ExportRef{DatastoreID: h.cfg.DatastoreID, JobID: "reconciliation/" + in.RunID},
		Types:            h.types(),
		DeliveredKeysKey: Prefix + in.RunID + "/delivered-keys.json"}
	prev, err := h.previous(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	p.Previous = prev
	p.Split = recentSplit(&p)
	changed, err := h.changedSince(ctx, &p)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	if err := h.putJSON(ctx, changedKey(in.RunID), changed); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	p.Changed = len(changed)
	var cutoff time.Time
	if prev != nil {
		t, err := envelope.ParseTime(prev.StartedAt)
		if err != nil {
			return Plan{}, fmt.Errorf("plan: previous reconciliation's start: %w", err)
		}
		cutoff = t.Add(-h.cfg.DeliveredMargin)
	}
	keys, err := h.deliveredSince(ctx, cutoff, startedAt)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	p.Delivered = len(keys)
	if err := h.putJSON(ctx, p.DeliveredKeysKey, keys); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	p.PartitionList = make([]int, p.Partitions)
	for i := range p.PartitionList {
		p.PartitionList[i] = i
	}
	if h.cfg.Logger != nil {
		h.cfg.Logger.Info("reconciliation planned", "runId", in.RunID, "partitions", p.Partitions, "types", len(p.Types),
			"window", p.Window.String(), "deliveredObjects", len(keys), "previousRunId", prevID(prev))
	}
	return p, nil
}

// types returns every R4 type the pipeline's filter allows.
func (h *Handler) types() []string {
	var out []string
	for _, t := range fhir.R4Types() {
		if h.cfg.Filter.Allows(t) {
			out = append(out, t)
		}
	}
	return out
}

func prevID(p *Previous) string {
	if p == nil {
		return ""
	}
	return p.RunID
}

// deliveredSince lists the delivered-index objects written at or after
// cutoff (every one when cutoff is zero: the first reconciliation), day
// folder by day folder from cutoff's day to the day after now: the
// delivered index is read by date, never listed whole after the first.
func (h *Handler) deliveredSince(ctx context.Context, cutoff, now time.Time) ([]string, error) {
	if cutoff.IsZero() {
		return h.listModifiedSince(ctx, delivered.DeliveredPrefix, cutoff)
	}
	keys := []string{}
	for day := cutoff.UTC().Truncate(24 * time.Hour); !day.After(now.Add(24 * time.Hour)); day = day.Add(24 * time.Hour) {
		ks, err := h.listModifiedSince(ctx, delivered.DayPrefix(day), cutoff)
		if err != nil {
			return nil, err
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

// listModifiedSince lists the objects under prefix written at or after cutoff.
func (h *Handler) listModifiedSince(ctx context.Context, prefix string, cutoff time.Time) ([]string, error) {
	keys := []string{}
	var token *string
	for {
		out, err := h.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket),
			Prefix: aws.String(prefix), ContinuationToken: token})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range out.Contents {
			if o.LastModified == nil || !o.LastModified.Before(cutoff) {
				keys = append(keys, aws.ToString(o.Key))
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return keys, nil
		}
		token = out.NextContinuationToken
	}
}
