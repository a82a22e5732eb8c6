package runlock

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
)

// Pending is the rest of an export whose manifest has more parts than one
// run delivers: the RUN record keeps it between runs, and the next acquire
// hands out Next instead of starting a new export. The checkpoint stays at
// Window.Since until the last part is committed.
type Pending struct {
	// Window is the window the checkpoint moves over once every part is
	// delivered; Next.Window is the export window (widened by the overlap).
	Window envelope.Window
	// Next is the part the next run delivers, in the shape of the export
	// wait's output (contract C2).
	Next manifest.Export
	// StoredAt and StoredBy say when and by which run the previous part was committed.
	StoredAt time.Time
	StoredBy string
}

// Names of the pending map's members.
const (
	pJobID         = "jobId"
	pDatastoreID   = "datastoreId"
	pBucket        = "bucket"
	pManifestRunID = "manifestRunId"
	pParts         = "parts"
	pPartFiles     = "partFiles"
	pPartBatches   = "partBatches"
	pNextPart      = "nextPart"
	pSince         = "windowSince"
	pUntil         = "windowUntil"
	pExportSince   = "exportSince"
	pExportUntil   = "exportUntil"
	pWithErrors    = "completedWithErrors"
	pStoredAt      = "storedAt"
	pStoredBy      = "storedBy"
)

func intList(v []int) types.AttributeValue {
	l := make([]types.AttributeValue, len(v))
	for i, x := range v {
		l[i] = n(int64(x))
	}
	return &types.AttributeValueMemberL{Value: l}
}

func getIntList(it item, name string) ([]int, error) {
	l, ok := it[name].(*types.AttributeValueMemberL)
	if !ok {
		return nil, nil
	}
	out := make([]int, len(l.Value))
	for i, v := range l.Value {
		nv, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return nil, fmt.Errorf("%s[%d] is not a number", name, i)
		}
		x, err := strconv.Atoi(nv.Value)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		out[i] = x
	}
	return out, nil
}

func pendingAV(p Pending) types.AttributeValue {
	e := p.Next
	m := item{
		pJobID: str(e.JobID), pDatastoreID: str(e.DatastoreID), pBucket: str(e.Bucket),
		pManifestRunID: str(e.ManifestRunID), pParts: n(int64(e.Parts)), pPartFiles: intList(e.PartFiles),
		pNextPart: n(int64(e.Part)), pSince: tm(p.Window.Since), pUntil: tm(p.Window.Until),
		pExportSince: tm(e.Window.Since), pExportUntil: tm(e.Window.Until),
		pWithErrors: &types.AttributeValueMemberBOOL{Value: e.CompletedWithErrors},
		pStoredAt:   tm(p.StoredAt), pStoredBy: str(p.StoredBy),
	}
	if len(e.PartBatches) > 0 {
		m[pPartBatches] = intList(e.PartBatches)
	}
	return &types.AttributeValueMemberM{Value: m}
}

func decodePending(m item) (*Pending, error) {
	ts := &times{it: m}
	get := ts.get
	p := &Pending{
		Window:   envelope.Window{Since: get(pSince), Until: get(pUntil)},
		StoredAt: get(pStoredAt), StoredBy: getS(m, pStoredBy),
	}
	e := manifest.Export{
		Bucket: getS(m, pBucket), ManifestRunID: getS(m, pManifestRunID), JobID: getS(m, pJobID),
		DatastoreID: getS(m, pDatastoreID), Part: int(getN(m, pNextPart)), Parts: int(getN(m, pParts)),
		Window:              envelope.Window{Since: get(pExportSince), Until: get(pExportUntil)},
		CompletedWithErrors: getBool(m, pWithErrors),
	}
	if ts.err != nil {
		return nil, fmt.Errorf("pending: %w", ts.err)
	}
	var err error
	if e.PartFiles, err = getIntList(m, pPartFiles); err != nil {
		return nil, fmt.Errorf("pending: %w", err)
	}
	if e.PartBatches, err = getIntList(m, pPartBatches); err != nil {
		return nil, fmt.Errorf("pending: %w", err)
	}
	if e.Part >= 0 && e.Part < len(e.PartFiles) {
		e.FileCount = e.PartFiles[e.Part]
	}
	if e.Part >= 0 && e.Part < len(e.PartBatches) {
		e.BatchCount = e.PartBatches[e.Part]
	}
	if e.ManifestRunID != "" {
		e.ManifestKey = manifest.PartKey(e.ManifestRunID, e.Part)
	}
	if verr := e.Validate(); verr != nil {
		return nil, fmt.Errorf("pending: %w", verr)
	}
	if e.Part == 0 {
		return nil, errors.New("pending: part 0 is never pending")
	}
	p.Next = e
	return p, nil
}

// ErrPartMismatch: a commit carried another export part than the one the
// run was given.
var ErrPartMismatch = errors.New("the export part does not match the one the run was given")

// nextPending returns what stays pending after the holder of st delivered
// exp (nil: the export is complete, the checkpoint may move), or an error
// when exp is not the part the holder was given.
func nextPending(st state, exp *manifest.Export, runID string, now time.Time) (*Pending, error) {
	if exp == nil || exp.Parts == 0 {
		// No part information: the holder delivered what it was given.
		if st.pending == nil {
			return nil, nil
		}
		e := st.pending.Next
		exp = &e
	} else {
		if err := exp.Validate(); err != nil {
			return nil, err
		}
		if st.pending != nil {
			want := st.pending.Next
			if exp.Part != want.Part || exp.JobID != want.JobID || exp.ManifestRunID != want.ManifestRunID || exp.Parts != want.Parts {
				return nil, fmt.Errorf("%w: got part %d of %d of job %s, was given part %d of %d of job %s",
					ErrPartMismatch, exp.Part, exp.Parts, exp.JobID, want.Part, want.Parts, want.JobID)
			}
		} else if exp.Part != 0 {
			return nil, fmt.Errorf("%w: got part %d of a new export, want part 0", ErrPartMismatch, exp.Part)
		}
		if !st.exportSince.IsZero() && !exp.Window.Since.IsZero() &&
			(!exp.Window.Since.Equal(st.exportSince) || !exp.Window.Until.Equal(st.window.Until)) {
			return nil, fmt.Errorf("%w: the export ran over %s, the lock holds the export window %s", ErrWindowMismatch,
				exp.Window, envelope.Window{Since: st.exportSince, Until: st.window.Until})
		}
	}
	next, ok := exp.Next()
	if !ok {
		return nil, nil
	}
	return &Pending{Window: st.window, Next: next, StoredAt: now, StoredBy: runID}, nil
}
