package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Emitter turns exported resource versions into events (detail schema v1)
// and hands them to a Publisher. A resource whose entry would exceed the
// size limit is claim-checked first: stored in S3, its event carrying
// resourceRef instead of resource. The object is written before the event
// is queued, so a consumer can always resolve a reference it receives.
// With a dry-run Publisher (NewDryRun) and a dry-run ClaimCheck it builds
// exactly the events it would publish and publishes and stores nothing.
// Not safe for concurrent use.
type Emitter struct {
	Publisher  *Publisher
	ClaimCheck *ClaimCheck // nil: an oversized resource is an *EntryTooLargeError
	Window     envelope.Window
	Export     envelope.ExportRef
	// CheckJSON makes Emit check that a resource it must claim-check is
	// one JSON object before storing it, as EventBridge checks an inline
	// detail (MalformedDetail); one that is not is an *InvalidResourceError
	// and nothing is stored or queued. Set it when the lines were not
	// validated (fhir.ValidateNone).
	CheckJSON bool

	buf          []byte
	claimChecked int64
}

// Result tells what Emit did with one resource.
type Result struct {
	EventID      string
	ClaimChecked bool
}

// ClaimChecked returns how many resources were claim-checked so far.
func (e *Emitter) ClaimChecked() int64 { return e.claimChecked }

// Emit builds the event of r and queues it with token, which comes back with
// the event's Outcome (Publisher.Outcomes). The detail never grows past the
// size limit: an inline detail is only built when it fits. Errors: an
// *EntryTooLargeError when the event does not fit even with a resourceRef
// (absurdly long ids), an *InvalidResourceError (CheckJSON) — for both
// nothing was stored or queued —, a claim-check error, or the publisher's
// send error for the batch the event completed. No error names the resource.
func (e *Emitter) Emit(ctx context.Context, r envelope.Resource, token any) (Result, error) {
	r.VersionID = envelope.VersionOf(r)
	id := envelope.EventID(r.ResourceType, r.ID, r.VersionID)
	res := Result{EventID: id}

	raw := r.Raw
	r.Raw = nil
	e.buf = envelope.AppendDetail(e.buf[:0], r, e.Window, e.Export, nil)
	inline := len(e.buf) + len(raw) // the resource is copied verbatim after "resource":
	if e.Publisher.Fits(inline) {
		r.Raw = raw
		e.buf = envelope.AppendDetail(e.buf[:0], r, e.Window, e.Export, nil)
		return res, e.Publisher.Add(ctx, e.buf, token)
	}
	if e.ClaimCheck == nil {
		return res, &EntryTooLargeError{Size: e.Publisher.EntrySize(inline), Limit: e.Publisher.Config().MaxEntryBytes}
	}
	if e.CheckJSON && !isJSONObject(raw) {
		return res, &InvalidResourceError{}
	}
	// Check that the reference fits before writing the object.
	ref := envelope.ResourceRef{Bucket: e.ClaimCheck.Bucket, Key: ClaimCheckKey(r.ResourceType, zeroDigest), Size: int64(len(raw)), SHA256: zeroDigest}
	e.buf = envelope.AppendDetail(e.buf[:0], r, e.Window, e.Export, &ref)
	if !e.Publisher.Fits(len(e.buf)) {
		return res, &EntryTooLargeError{Size: e.Publisher.EntrySize(len(e.buf)), Limit: e.Publisher.Config().MaxEntryBytes}
	}
	stored, err := e.ClaimCheck.Store(ctx, r.ResourceType, raw)
	if err != nil {
		return res, fmt.Errorf("emit: %w", err)
	}
	e.buf = envelope.AppendDetail(e.buf[:0], r, e.Window, e.Export, &stored)
	res.ClaimChecked = true
	e.claimChecked++
	return res, e.Publisher.Add(ctx, e.buf, token)
}

// InvalidResourceError is returned by Emit (with Emitter.CheckJSON) for a
// resource to claim-check that is not one JSON object.
type InvalidResourceError struct{}

// Error implements error.
func (e *InvalidResourceError) Error() string {
	return "publish: a resource to claim-check is not one JSON object; not claim-checked"
}

// isJSONObject reports whether b is valid JSON whose value is an object.
func isJSONObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

// zeroDigest has the length of a hex SHA-256 digest, for sizing a reference.
const zeroDigest = "0000000000000000000000000000000000000000000000000000000000000000"
