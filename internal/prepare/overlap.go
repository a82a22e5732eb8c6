package prepare

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// S3ListAPI lists the overlap objects of the previous window.
type S3ListAPI interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// overlap is what one invocation knows of its run's overlap
// (docs/RUNLOCK.md, "Overlap"). The export window reaches back before the
// checkpoint window's since, so its first minute holds versions the previous
// window already published: seen holds those (read from the previous
// window's overlap objects), and a line whose version is in it is skipped as
// a repeat. tail collects the versions this invocation publishes (or skips)
// after tailAfter — the next window's overlap — and is written as this
// batch's overlap object once the batch is done.
type overlap struct {
	seen      delivered.Set
	tailOn    bool
	tailAfter time.Time
	tailUntil time.Time // the checkpoint window's until: the next window's since
	tail      recorder
}

// overlapOf returns the invocation's overlap: off without a checkpoint
// window (an older payload) or without an overlap (export window = checkpoint
// window); seen is read only when the run continues a committed window.
func (h *Handler) overlapOf(ctx context.Context, in Input) (*overlap, error) {
	cp := in.Checkpoint
	if cp == nil || !in.Window.Since.Before(cp.Since) {
		return &overlap{}, nil
	}
	width := cp.Since.Sub(in.Window.Since)
	ov := &overlap{tailOn: true, tailAfter: cp.Until.Add(-width), tailUntil: cp.Until}
	if !in.Continues {
		return ov, nil
	}
	if err := h.readSeen(ctx, delivered.OverlapDir(cp.Since), &ov.seen); err != nil {
		return nil, &ReadFailed{Err: fmt.Errorf("prepare-change: the previous window's overlap objects: %w", err)}
	}
	return ov, nil
}

// readSeen adds the versions of every object under prefix to set.
func (h *Handler) readSeen(ctx context.Context, prefix string, set *delivered.Set) error {
	keys, err := h.listKeys(ctx, prefix, "")
	if err != nil {
		return err
	}
	for _, key := range keys {
		if err := h.readEntries(ctx, key, set.Add); err != nil {
			return err
		}
	}
	return nil
}

// repeat reports whether line's version (versionID: its eventId's) was
// published by the previous window; a repeat in the next window's overlap
// too (a window shorter than the overlap) stays in the tail.
func (ov *overlap) repeat(line *fhir.Line, versionID string) (bool, error) {
	if ov.seen.Len() == 0 || !ov.seen.Has(delivered.Version{Type: line.ResourceType, ID: line.ID, VersionID: versionID}) {
		return false, nil
	}
	return true, ov.keep(line.ResourceType, line.ID, versionID, line.LastUpdated)
}

// keep records a published (or skipped) version in the tail when it lies in
// the next window's overlap.
func (ov *overlap) keep(typ, id, versionID, lastUpdated string) error {
	if !ov.tailOn {
		return nil
	}
	t, err := envelope.ParseTime(lastUpdated)
	if err != nil || !t.After(ov.tailAfter) {
		return nil
	}
	return ov.tail.add(delivered.Entry{Type: typ, ID: id, VersionID: versionID, LastUpdated: lastUpdated})
}

// write puts the tail as the batch's overlap object (none when empty).
func (ov *overlap) write(ctx context.Context, h *Handler, in Input) error {
	if !ov.tailOn {
		return nil
	}
	key := delivered.OverlapKey(ov.tailUntil, in.RunID, in.Files[0].Name())
	return ov.tail.write(ctx, h.s3, h.cfg.Bucket, h.cfg.KMSKeyID, key)
}

// listKeys returns the keys under prefix (after startAfter when set).
func (h *Handler) listKeys(ctx context.Context, prefix, startAfter string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket), Prefix: aws.String(prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(startAfter)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(h.s3, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", h.cfg.Bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// readEntries calls fn with each entry of the index object at key.
func (h *Handler) readEntries(ctx context.Context, key string, fn func(delivered.Entry)) error {
	body, err := s3read.Object(ctx, h.s3, h.cfg.Bucket, key)
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer body.Close()
	if err := delivered.ReadAll(body, nil, func(e delivered.Entry) error { fn(e); return nil }); err != nil {
		return fmt.Errorf("s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}
