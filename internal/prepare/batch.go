package prepare

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/delivered"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/resume"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/s3read"
)

// fileState is one file of an invocation: its counts, its quarantine
// object, and its events without an outcome yet.
type fileState struct {
	ref      manifest.File // the file, or its byte range
	q        *quarantine
	counts   change.Counts
	blank    int64
	bytes    int64
	resumed  int64  // reads S3 ended early, resumed (pkg/resume)
	rejected int64  // lines quarantined after EventBridge rejected their event
	key      string // the quarantine object, once written
	pending  int    // events handed to the publisher without an outcome
	readDone bool   // every line read
	closed   bool   // quarantine object closed

	// linesBefore is the number of lines of the object before ref's range,
	// once based is set: 0 for a range at 0; for a later range, counted
	// from the object when it first quarantines a line (batch.linesBefore),
	// unless the range starts past Config.LineCountMaxBytes (q.lineFrom set,
	// based not).
	linesBefore int64
	based       bool
}

// lineRef is the token an event carries through the publisher: where its
// line is, to quarantine it if EventBridge rejects the event. raw is kept
// only at validation level none, the one level where that can happen.
type lineRef struct {
	file   *fileState
	number int64
	offset int64
	raw    []byte
	// The version the event carries, recorded in the delivered index once accepted.
	typ, id, versionID, lastUpdated string
}

// batch is one invocation's work: its files, publisher and emitter.
type batch struct {
	h        *Handler
	in       Input
	pub      *publish.Publisher
	em       *publish.Emitter
	rec      recorder // the batch's delivered-index object (D4)
	maxLive  int      // most children sharing the PutEvents share at once (0: not shared)
	ov       *overlap
	fp       *delivered.Set // what the fast path published; nil: not consulted
	files    []*fileState
	outcomes []publish.Outcome // reused buffer
	free     []*lineRef        // tokens whose event was accepted, for reuse
}

// run reads, classifies and publishes every file of the batch.
func (b *batch) run(parent context.Context) error {
	h := b.h
	ctx, cancel := h.cfg.internalDeadline(parent, b.in.childEnd())
	defer cancel()
	pcfg := h.cfg.Publish
	pcfg.Rate = h.cfg.RateFor(b.in.BatchCount)
	pcfg.Concurrency = h.cfg.concurrencyFor(pcfg.Concurrency)
	pub, err := publish.New(h.eb, pcfg)
	if err != nil {
		return fmt.Errorf("prepare-change: %w", err)
	}
	b.pub = pub
	defer func() { _ = pub.Wait() }() // no send outlives the invocation, also on error
	if stop := b.shareRate(ctx); stop != nil {
		defer stop()
	}
	b.em = &publish.Emitter{
		Publisher:  pub,
		ClaimCheck: &publish.ClaimCheck{S3: h.s3, Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID},
		Window:     b.in.eventWindow(),
		Export:     b.in.Export,
		CheckJSON:  h.cfg.Validation == fhir.ValidateNone,
	}
	if b.ov, err = h.overlapOf(ctx, b.in); err != nil {
		return b.failure(parent, ctx, err)
	}
	if b.fp, err = h.FastPathSet(ctx, b.in.Window.Since, b.in.Continues && b.in.Checkpoint != nil); err != nil {
		return b.failure(parent, ctx, &ReadFailed{Err: fmt.Errorf("prepare-change: the fast path's record: %w", err)})
	}
	defer func() {
		for _, fs := range b.files {
			fs.q.abort(context.WithoutCancel(ctx)) // no-op unless a multipart upload was left open
		}
	}()
	for _, f := range b.in.Files {
		fs := &fileState{ref: f, based: f.Start == 0, q: &quarantine{
			s3: h.s3, bucket: h.cfg.Bucket, key: QuarantineKey(b.in.RunID, f.Name()), kmsKeyID: h.cfg.KMSKeyID,
			rawCap: h.cfg.QuarantineRawBytes, partSize: h.cfg.QuarantinePartBytes,
		}}
		b.files = append(b.files, fs)
		if err := b.file(ctx, fs); err != nil {
			return b.failure(parent, ctx, err)
		}
		fs.readDone = true
		if err := b.closeReady(ctx); err != nil {
			return b.failure(parent, ctx, err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return b.failure(parent, ctx, b.publishFailed("", err))
	}
	if err := b.settle(ctx); err != nil {
		return b.failure(parent, ctx, err)
	}
	if err := b.closeReady(ctx); err != nil {
		return b.failure(parent, ctx, err)
	}
	for _, fs := range b.files {
		if !fs.closed {
			return fmt.Errorf("prepare-change: %d events of %s have no PutEvents outcome", fs.pending, fs.ref.Name())
		}
		if !fs.counts.Balanced() {
			return fmt.Errorf("prepare-change: line counts of %s do not balance: %+v", fs.ref.Name(), fs.counts)
		}
	}
	// What the batch published, once every event has its outcome: one
	// delivered-index object (the reconciliation reads it) and the overlap
	// object (the next window reads it).
	dkey := delivered.DeliveredKey(time.Now(), b.in.RunID, b.in.Files[0].Name())
	if err := b.rec.write(ctx, h.s3, h.cfg.Bucket, h.cfg.KMSKeyID, dkey); err != nil {
		return b.failure(parent, ctx, &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)})
	}
	if err := b.ov.write(ctx, h, b.in); err != nil {
		return b.failure(parent, ctx, &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)})
	}
	return nil
}

// file streams one export file, or its range, through the classifier and
// the emitter.
func (b *batch) file(ctx context.Context, fs *fileState) error {
	f, cfg := fs.ref, b.h.cfg
	// A range's read begins at the byte before it: the reader skips the end
	// of the line that began before it (fhir.Options.Start).
	body, err := b.get(ctx, f, max(f.Start-1, 0), -1)
	if err != nil {
		return &ReadFailed{Err: fmt.Errorf("prepare-change: get s3://%s/%s: %w", f.Bucket, f.Name(), err)}
	}
	defer body.Close()
	rd := fhir.NewReader(body, fhir.Options{
		File: f.Key, DeclaredType: f.ResourceType, MaxLineBytes: cfg.MaxLineBytes, Validation: cfg.Validation,
		Start: f.Start, End: f.End,
	})
	defer func() {
		st := rd.Stats()
		fs.blank, fs.bytes, fs.resumed = st.Blank, st.Bytes, body.Resumed()
	}()
	cls := change.Classifier{Window: b.in.Window, Filter: cfg.Filter}
	for {
		if ctx.Err() != nil {
			return ctx.Err() // the internal deadline: take no more lines
		}
		line, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &ReadFailed{Err: fmt.Errorf("prepare-change: read s3://%s/%s after %d lines: %w", f.Bucket, f.Name(), fs.counts.Lines, err)}
		}
		kind, reason := cls.Classify(line)
		var versionID string
		if kind == change.KindEvent {
			versionID = versionOf(line)
			repeat, err := b.ov.repeat(line, versionID)
			if err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
			if repeat {
				kind = change.KindRepeat
			}
		}
		if kind == change.KindEvent && b.fp != nil && b.fp.Has(delivered.Version{Type: line.ResourceType, ID: line.ID, VersionID: versionID}) {
			// Delivered by the fast path: recorded as delivered (the
			// reconciliation reads the index) and kept for the next
			// window's overlap, not published again.
			kind = change.KindFastPath
			e := delivered.Entry{Type: line.ResourceType, ID: line.ID, VersionID: versionID, LastUpdated: line.LastUpdated}
			if err := b.rec.add(e); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: delivered index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
			if err := b.ov.keep(e.Type, e.ID, e.VersionID, e.LastUpdated); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of s3://%s/%s: %w", f.Bucket, fs.at(line.Number), err)}
			}
		}
		if kind == change.KindEvent {
			tok := b.token(fs, line, versionID)
			fs.pending++
			r := envelope.Resource{ResourceType: line.ResourceType, ID: line.ID, VersionID: line.VersionID, LastUpdated: line.LastUpdated, Raw: line.Raw}
			_, err := b.em.Emit(ctx, r, tok)
			var tooLarge *publish.EntryTooLargeError
			var invalid *publish.InvalidResourceError
			switch {
			case errors.As(err, &tooLarge):
				fs.pending-- // nothing queued
				kind, reason = change.KindQuarantined, ReasonEventTooLarge
			case errors.As(err, &invalid):
				fs.pending--
				kind, reason = change.KindQuarantined, ReasonNotJSON
			case err != nil:
				return b.publishFailed(fmt.Sprintf(" (s3://%s/%s)", f.Bucket, fs.at(line.Number)), err)
			}
		}
		if kind == change.KindQuarantined {
			if err := b.quarantine(ctx, fs, line, reason); err != nil {
				return err
			}
		}
		fs.counts.Add(kind)
		if err := b.settle(ctx); err != nil {
			return err
		}
	}
}

// versionOf is the version line's eventId carries: meta.versionId, else a
// hash of the content.
func versionOf(line *fhir.Line) string {
	if line.VersionID != "" {
		return line.VersionID
	}
	return envelope.ContentVersion(line.Raw)
}

// token returns the token of line's event (of version versionID), reusing
// one whose event was accepted.
func (b *batch) token(fs *fileState, line *fhir.Line, versionID string) *lineRef {
	var tok *lineRef
	if n := len(b.free); n > 0 {
		tok, b.free = b.free[n-1], b.free[:n-1]
	} else {
		tok = new(lineRef)
	}
	raw := tok.raw[:0]
	*tok = lineRef{file: fs, number: line.Number, offset: line.Offset,
		typ: line.ResourceType, id: line.ID, versionID: versionID, lastUpdated: line.LastUpdated}
	if b.h.cfg.Validation == fhir.ValidateNone {
		tok.raw = append(raw, line.Raw...)
	}
	return tok
}

// settle takes the outcomes the publisher reported: it quarantines the
// lines whose event EventBridge rejected for good, moving them from events
// to quarantined in their file's counts, then closes what became ready.
func (b *batch) settle(ctx context.Context) error {
	b.outcomes = b.pub.Outcomes(b.outcomes[:0])
	if len(b.outcomes) == 0 {
		return nil
	}
	defer clear(b.outcomes) // drop the tokens
	for _, o := range b.outcomes {
		lr := o.Token.(*lineRef)
		fs := lr.file
		fs.pending--
		if o.Code == "" {
			if err := b.rec.add(delivered.Entry{Type: lr.typ, ID: lr.id, VersionID: lr.versionID, LastUpdated: lr.lastUpdated}); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: delivered index of %s: %w", fs.at(lr.number), err)}
			}
			if err := b.ov.keep(lr.typ, lr.id, lr.versionID, lr.lastUpdated); err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: overlap index of %s: %w", fs.at(lr.number), err)}
			}
			b.free = append(b.free, lr) // accepted: the token is free again
			continue
		}
		if o.Code != CodeMalformedDetail {
			continue // failed: the publisher's error fails the invocation and names its tokens
		}
		if fs.closed {
			return fmt.Errorf("prepare-change: a rejected event of %s arrived after its quarantine object was closed", fs.ref.Name())
		}
		l := &fhir.Line{File: fs.ref.Key, Number: lr.number, Offset: lr.offset, Raw: lr.raw}
		if err := b.quarantine(ctx, fs, l, ReasonMalformedDetail); err != nil {
			return err
		}
		fs.counts.Events--
		fs.counts.Quarantined++
		fs.rejected++
	}
	return b.closeReady(ctx)
}

// quarantine adds line (numbered from its range's first line) to its file's
// quarantine object, numbered in the object, or from the range's first line
// with lineFrom for a range that starts past Config.LineCountMaxBytes.
func (b *batch) quarantine(ctx context.Context, fs *fileState, line *fhir.Line, reason string) error {
	switch {
	case fs.based || fs.q.lineFrom > 0:
	case fs.ref.Start-1 > b.h.cfg.LineCountMaxBytes:
		fs.q.lineFrom = fs.ref.Start
	default:
		n, err := b.linesBefore(ctx, fs.ref)
		if err != nil {
			return &ReadFailed{Err: fmt.Errorf("prepare-change: number the lines of s3://%s/%s: %w", fs.ref.Bucket, fs.ref.Name(), err)}
		}
		fs.linesBefore, fs.based = n, true
	}
	l := *line
	l.Number += fs.linesBefore
	if err := fs.q.add(ctx, &l, reason); err != nil {
		return &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)}
	}
	return nil
}

// get reads f's object from byte from to byte to (inclusive; < 0: to its
// end), resuming a body S3 ends early (pkg/s3read): a read at the
// publishing pace lasts minutes.
func (b *batch) get(ctx context.Context, f manifest.File, from, to int64) (*resume.Reader, error) {
	return s3read.Range(ctx, b.h.s3, f.Bucket, f.Key, from, to)
}

// linesBefore counts the lines of f's object that begin before f.Start: the
// LFs before byte Start−1, and the line that byte is in, which the range
// before reads. Only a range that quarantines a line reads its object's
// earlier bytes.
func (b *batch) linesBefore(ctx context.Context, f manifest.File) (int64, error) {
	if f.Start <= 1 {
		return f.Start, nil
	}
	body, err := b.get(ctx, f, 0, f.Start-2)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	var n int64
	buf := make([]byte, 64<<10)
	for {
		k, err := body.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n + 1, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// at names line number (counted from the range's first line) of the file in
// an error: "{key} line N", or for a range after the first, whose earlier
// lines are not counted, "{key}@{start} line N" (docs/EXPORT.md).
func (fs *fileState) at(number int64) string {
	if fs.based {
		return fmt.Sprintf("%s line %d", fs.ref.Key, fs.linesBefore+number)
	}
	return fmt.Sprintf("%s line %d", fs.ref.Name(), number)
}

// closeReady closes the quarantine object of every file that is read and
// whose events all have an outcome.
func (b *batch) closeReady(ctx context.Context) error {
	for _, fs := range b.files {
		if !fs.closed && fs.readDone && fs.pending == 0 {
			key, err := fs.q.close(ctx)
			if err != nil {
				return &PublishFailed{Err: fmt.Errorf("prepare-change: %w", err)}
			}
			fs.key, fs.closed = key, true
		}
	}
	return nil
}

// publishFailed wraps a publisher error with where its entries came from:
// file keys and line numbers, never a resource id.
func (b *batch) publishFailed(where string, err error) error {
	var fe *publish.FailedEntriesError
	if where == "" {
		where = " of " + b.where()
	}
	if errors.As(err, &fe) && len(fe.Tokens) > 0 {
		var lines []string
		for _, t := range fe.Tokens {
			lr := t.(*lineRef)
			lines = append(lines, lr.file.at(lr.number))
		}
		where += "; first failed: " + strings.Join(lines, ", ")
	}
	return &PublishFailed{Err: fmt.Errorf("prepare-change: publish events%s: %w", where, err)}
}

// where names the files of the batch in an error.
func (b *batch) where() string {
	f := b.in.Files
	if len(f) == 1 {
		return "s3://" + f[0].Bucket + "/" + f[0].Name()
	}
	return fmt.Sprintf("a batch of %d files (s3://%s/%s first)", len(f), f[0].Bucket, f[0].Name())
}

// failure turns an error met after the internal deadline passed into a
// *BatchDeadlineExceeded: whatever failed, it failed because time ran out.
func (b *batch) failure(parent, ctx context.Context, err error) error {
	if ctx.Err() == nil || parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return err
	}
	var lines, events int64
	for _, fs := range b.files {
		lines += fs.counts.Lines
		events += fs.counts.Events
	}
	return &BatchDeadlineExceeded{Files: len(b.files), Of: len(b.in.Files), Lines: lines, Events: events, Margin: b.h.cfg.DeadlineMargin}
}

func (b *batch) summary() Output {
	var out Output
	out.Files = int64(len(b.files))
	for _, fs := range b.files {
		c := fs.counts
		out.Lines += c.Lines
		out.Events += c.Events
		out.OutsideWindow += c.OutsideWindow
		out.Quarantined += c.Quarantined
		out.OverlapSkipped += c.OverlapSkipped
		out.FastPathSkipped += c.FastPathSkipped
		out.Filtered += c.Filtered
		out.Blank += fs.blank
		out.Bytes += fs.bytes
		out.ReadsResumed += fs.resumed
		out.Rejected += fs.rejected
		if fs.key != "" {
			out.QuarantineObjects++
			if len(out.QuarantineKeys) < MaxListedQuarantineKeys {
				out.QuarantineKeys = append(out.QuarantineKeys, fs.key)
			}
		}
	}
	if b.fp != nil {
		out.FastPathMissed = out.Events
	}
	out.ShareLive = b.maxLive
	if b.pub != nil {
		ps := b.pub.Stats()
		out.ClaimChecked = b.em.ClaimChecked()
		out.PutEventsCalls, out.EntriesRetried, out.Throttled, out.Chunks = ps.Calls, ps.Retried, ps.Throttled, ps.Chunks
	}
	return out
}

// linesPerType returns the lines read per resource type.
func (b *batch) linesPerType() map[string]int64 {
	perType := map[string]int64{}
	for _, fs := range b.files {
		perType[fs.ref.ResourceType] += fs.counts.Lines
	}
	return perType
}
