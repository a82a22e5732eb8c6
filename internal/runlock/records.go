package runlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// The records this package keeps in the table — STATE, HISTORY#, REPLAY# —
// in their DynamoDB form: keys, attribute names, and the codecs between
// items and the record types (their JSON form: records_json.go).
//
// Keys and attribute names of the items this package owns. docs/RUNLOCK.md
// describes every attribute.
const (
	pkRun        = "RUN"
	skState      = "STATE"
	skHistoryPfx = "HISTORY#"
	skReplayPfx  = "REPLAY#"

	attrPK  = "pk"
	attrSK  = "sk"
	attrTTL = stackconfig.TableTTLAttribute

	// STATE: checkpoint and bookkeeping.
	attrCheckpoint = "lastRunTime"
	attrVersion    = "version"
	attrCreatedAt  = "createdAt"
	// attrOrigin is the first checkpoint the record was created with: what
	// the pipeline is responsible for starts after it (the reconciliation
	// repairs nothing older).
	attrOrigin = "origin"
	// attrDatastore is the HealthLake data store the checkpoint belongs
	// to (the pipeline's CDC_DATASTORE_ID when the record was created, or
	// when a replay moved it to another: ReplayRequest.Datastore).
	attrDatastore = "datastoreId"
	// attrFromDatastore is, on a REPLAY audit item, the data store the
	// replay moved the record from.
	attrFromDatastore = "fromDatastoreId"
	// attrCheckpointBy says what set the checkpoint: checkpointByCommit (a
	// run delivered up to it, so the next window may skip what that run
	// already published in its overlap) or checkpointByReplay.
	attrCheckpointBy = "checkpointBy"
	// STATE: the lock, present only while a run holds it.
	attrOwner       = "owner"
	attrRunID       = "runId"
	attrStartTime   = "startTime"
	attrLockedAt    = "lockedAt"
	attrLeaseUntil  = "leaseUntil"
	attrWindowSince = "windowSince"
	attrWindowUntil = "windowUntil"
	attrHistorySK   = "historySk"
	// attrExportSince is the since of the holder's export window (its until
	// is windowUntil).
	attrExportSince = "exportSince"
	// STATE: the rest of a multi-part export (M, or "" when none) and the
	// per-deployment key of the keyed hash of identifiers (B).
	attrPending   = "pending"
	attrRedactKey = "redactKey"
	// STATE: the last finished run.
	attrLastRunID   = "lastRunId"
	attrLastOutcome = "lastOutcome"
	attrLastReason  = "lastReason"
	attrLastEndedAt = "lastEndedAt"
	// STATE: the last replay and the refusal counters.
	attrLastReplayAt     = "lastReplayAt"
	attrLastReplayBy     = "lastReplayBy"
	attrLastReplayFrom   = "lastReplayFrom"
	attrLastReplayTo     = "lastReplayTo"
	attrLastReplayReason = "lastReplayReason"
	attrSkippedRuns      = "skippedRuns"
	attrLastSkippedAt    = "lastSkippedAt"
	attrLastSkippedRunID = "lastSkippedRunId"
	attrTakeovers        = "takeovers"

	// HISTORY.
	attrExecutionID  = "executionId"
	attrEmpty        = "empty"
	attrOutcome      = "outcome"
	attrReason       = "reason"
	attrExportJobID  = "exportJobId"
	attrEndedAt      = "endedAt"
	attrDurationMs   = "durationMs"
	attrTookOverFrom = "tookOverFrom"
	attrCounts       = "counts"
	attrPart         = "part"
	attrParts        = "parts"

	// REPLAY.
	attrAt   = "at"
	attrBy   = "by"
	attrFrom = "from"
	attrTo   = "to"

	// EXPORT#{runId}/JOB, owned by internal/exportjob; read only.
	attrJobID     = "jobId"
	attrJobStatus = "status"
	attrStartedAt = "startedAt"
)

// Values of attrCheckpointBy.
const (
	checkpointByCommit = "commit"
	checkpointByReplay = "replay"
)

type item = map[string]types.AttributeValue

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func tm(t time.Time) types.AttributeValue { return str(envelope.FormatTime(t)) }

func key(pk, sk string) item { return item{attrPK: str(pk), attrSK: str(sk)} }

func stateKey() item { return key(pkRun, skState) }

func historySK(start time.Time, runID string) string {
	return skHistoryPfx + envelope.FormatTime(start) + "#" + runID
}

// getS returns the string attribute name of it, or "" when absent or of
// another type.
func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// getAnyS renders a scalar attribute as a string whatever its type; used for
// items another package writes.
func getAnyS(it item, name string) string {
	switch v := it[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberBOOL:
		return strconv.FormatBool(v.Value)
	}
	return ""
}

func getN(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err == nil {
			return i
		}
	}
	return 0
}

func getBool(it item, name string) bool {
	if v, ok := it[name].(*types.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}

// getT parses a time attribute; absent gives the zero time.
func getT(it item, name string) (time.Time, error) {
	v := getS(it, name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := envelope.ParseTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("attribute %s: %w", name, err)
	}
	return t, nil
}

// times reads the time attributes of one item and keeps the first error:
// after it every read answers the zero time, so a decoder reads all its
// fields and checks err once.
type times struct {
	it  item
	err error
}

func (ts *times) get(name string) time.Time {
	if ts.err != nil {
		return time.Time{}
	}
	var t time.Time
	t, ts.err = getT(ts.it, name)
	return t
}

// Counts sums what one run did: one Files per published export file, the
// totals of prepare-change's summaries, and its delete scan's deletes.
type Counts struct {
	Files  int64 `json:"files"`
	Lines  int64 `json:"lines"`
	Events int64 `json:"events"`
	// Deletes counts the delete events the run's delete scan published
	// (Events counts the upserts of the export's lines).
	Deletes       int64 `json:"deletes"`
	OutsideWindow int64 `json:"outsideWindow"`
	Quarantined   int64 `json:"quarantined"`
	ClaimChecked  int64 `json:"claimChecked"`
	Bytes         int64 `json:"bytes"`
	// OverlapSkipped counts lines of the overlap not published again: the
	// previous window had published their version.
	OverlapSkipped int64 `json:"overlapSkipped"`
	// FastPathSkipped counts versions (lines and deletes) the Subscriptions
	// fast path had published; FastPathMissed the events (upserts and
	// deletes) the window published that the fast path should have
	// (docs/FASTPATH.md). Both 0 with the fast path off.
	FastPathSkipped int64 `json:"fastPathSkipped,omitempty"`
	FastPathMissed  int64 `json:"fastPathMissed,omitempty"`
	// FailedFiles counts children that did not succeed (failed or pending).
	FailedFiles int64 `json:"failedFiles"`
}

// Add returns the field-wise sum of c and o.
func (c Counts) Add(o Counts) Counts {
	return Counts{
		Files: c.Files + o.Files, Lines: c.Lines + o.Lines, Events: c.Events + o.Events, Deletes: c.Deletes + o.Deletes,
		OutsideWindow: c.OutsideWindow + o.OutsideWindow, Quarantined: c.Quarantined + o.Quarantined,
		ClaimChecked: c.ClaimChecked + o.ClaimChecked, Bytes: c.Bytes + o.Bytes,
		OverlapSkipped: c.OverlapSkipped + o.OverlapSkipped, FailedFiles: c.FailedFiles + o.FailedFiles,
		FastPathSkipped: c.FastPathSkipped + o.FastPathSkipped, FastPathMissed: c.FastPathMissed + o.FastPathMissed,
	}
}

func countsAV(c Counts) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: item{
		"files": n(c.Files), "lines": n(c.Lines), "events": n(c.Events), "deletes": n(c.Deletes),
		"outsideWindow": n(c.OutsideWindow), "quarantined": n(c.Quarantined),
		"claimChecked": n(c.ClaimChecked), "bytes": n(c.Bytes), "failedFiles": n(c.FailedFiles),
		"overlapSkipped": n(c.OverlapSkipped), "fastPathSkipped": n(c.FastPathSkipped), "fastPathMissed": n(c.FastPathMissed),
	}}
}

func countsOf(it item) Counts {
	m, ok := it[attrCounts].(*types.AttributeValueMemberM)
	if !ok {
		return Counts{}
	}
	v := m.Value
	return Counts{
		Files: getN(v, "files"), Lines: getN(v, "lines"), Events: getN(v, "events"), Deletes: getN(v, "deletes"),
		OutsideWindow: getN(v, "outsideWindow"), Quarantined: getN(v, "quarantined"),
		ClaimChecked: getN(v, "claimChecked"), Bytes: getN(v, "bytes"), FailedFiles: getN(v, "failedFiles"),
		OverlapSkipped: getN(v, "overlapSkipped"), FastPathSkipped: getN(v, "fastPathSkipped"), FastPathMissed: getN(v, "fastPathMissed"),
	}
}

// state is the decoded RUN/STATE item.
type state struct {
	exists     bool
	version    int64
	checkpoint time.Time
	createdAt  time.Time
	// committed: a run's commit set the checkpoint (not a replay, not the
	// record's creation).
	committed bool

	owner      string
	runID      string
	startTime  time.Time
	lockedAt   time.Time
	leaseUntil time.Time
	window     envelope.Window
	// exportSince is the since of the holder's export window; zero on a
	// lock taken before overlaps existed.
	exportSince time.Time
	historySK   string

	// datastoreID is the data store the checkpoint belongs to; "" on a
	// record written before it was kept (the next acquire adopts its own).
	datastoreID string

	// pending is the rest of a multi-part export, nil when none.
	pending *Pending
	// redactKey keys the hash that replaces identifiers in stored reasons.
	redactKey []byte

	lastRunID   string
	lastOutcome Outcome
	lastReason  string
	lastEndedAt time.Time

	lastReplay *ReplayRecord

	skippedRuns   int64
	lastSkippedAt time.Time
	takeovers     int64
}

func (st state) locked() bool { return st.owner != "" }

func decodeState(it item) (state, error) {
	if it == nil {
		return state{}, nil
	}
	st := state{exists: true}
	ts := &times{it: it}
	get := ts.get
	st.version = getN(it, attrVersion)
	st.checkpoint = get(attrCheckpoint)
	st.createdAt = get(attrCreatedAt)
	st.committed = getS(it, attrCheckpointBy) == checkpointByCommit
	st.owner = getS(it, attrOwner)
	st.runID = getS(it, attrRunID)
	st.startTime = get(attrStartTime)
	st.lockedAt = get(attrLockedAt)
	st.leaseUntil = get(attrLeaseUntil)
	st.window.Since = get(attrWindowSince)
	st.window.Until = get(attrWindowUntil)
	st.historySK = getS(it, attrHistorySK)
	st.exportSince = get(attrExportSince)
	st.datastoreID = getS(it, attrDatastore)
	if b, ok := it[attrRedactKey].(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		st.redactKey = b.Value
	}
	if m, ok := it[attrPending].(*types.AttributeValueMemberM); ok && ts.err == nil {
		st.pending, ts.err = decodePending(m.Value)
	}
	st.lastRunID = getS(it, attrLastRunID)
	st.lastOutcome = Outcome(getS(it, attrLastOutcome))
	st.lastReason = getS(it, attrLastReason)
	st.lastEndedAt = get(attrLastEndedAt)
	st.skippedRuns = getN(it, attrSkippedRuns)
	st.lastSkippedAt = get(attrLastSkippedAt)
	st.takeovers = getN(it, attrTakeovers)
	if at := get(attrLastReplayAt); !at.IsZero() {
		st.lastReplay = &ReplayRecord{
			At: at, By: getS(it, attrLastReplayBy), From: get(attrLastReplayFrom),
			To: get(attrLastReplayTo), Reason: getS(it, attrLastReplayReason),
		}
	}
	if ts.err != nil {
		return state{}, fmt.Errorf("decode RUN/STATE: %w", ts.err)
	}
	if getS(it, attrCheckpoint) == "" {
		return state{}, fmt.Errorf("decode RUN/STATE: no %s", attrCheckpoint)
	}
	return st, nil
}

// HistoryRecord is one run's RUN/HISTORY item.
type HistoryRecord struct {
	RunID        string
	ExecutionID  string
	StartTime    time.Time
	AcquiredAt   time.Time
	EndedAt      time.Time
	Window       envelope.Window
	Empty        bool
	Outcome      Outcome
	Reason       string
	ExportJobID  string
	Counts       Counts
	TookOverFrom string
	// ExportWindow is what the run exported and delivered: the window
	// widened by the overlap.
	ExportWindow envelope.Window
	// Part and Parts: the run delivered part Part (0-based) of an export of
	// Parts manifest parts; Parts is 0 when unknown (no export, or one part).
	Part, Parts int
}

func historyItem(h HistoryRecord, ttl time.Time) item {
	it := key(pkRun, historySK(h.StartTime, h.RunID))
	it[attrRunID] = str(h.RunID)
	it[attrExecutionID] = str(h.ExecutionID)
	it[attrStartTime] = tm(h.StartTime)
	it[attrLockedAt] = tm(h.AcquiredAt)
	it[attrWindowSince] = tm(h.Window.Since)
	it[attrWindowUntil] = tm(h.Window.Until)
	it[attrEmpty] = &types.AttributeValueMemberBOOL{Value: h.Empty}
	it[attrOutcome] = str(string(h.Outcome))
	it[attrCounts] = countsAV(h.Counts)
	it[attrTTL] = n(ttl.Unix())
	if !h.EndedAt.IsZero() {
		it[attrEndedAt] = tm(h.EndedAt)
		it[attrDurationMs] = n(h.EndedAt.Sub(h.AcquiredAt).Milliseconds())
	}
	if h.Reason != "" {
		it[attrReason] = str(h.Reason)
	}
	if h.ExportJobID != "" {
		it[attrExportJobID] = str(h.ExportJobID)
	}
	if h.TookOverFrom != "" {
		it[attrTookOverFrom] = str(h.TookOverFrom)
	}
	if !h.ExportWindow.Since.IsZero() {
		it[attrExportSince] = tm(h.ExportWindow.Since)
	}
	if h.Parts > 0 {
		it[attrPart] = n(int64(h.Part))
		it[attrParts] = n(int64(h.Parts))
	}
	return it
}

func decodeHistory(it item) (HistoryRecord, error) {
	ts := &times{it: it}
	get := ts.get
	h := HistoryRecord{
		RunID: getS(it, attrRunID), ExecutionID: getS(it, attrExecutionID),
		StartTime: get(attrStartTime), AcquiredAt: get(attrLockedAt), EndedAt: get(attrEndedAt),
		Window: envelope.Window{Since: get(attrWindowSince), Until: get(attrWindowUntil)},
		Empty:  getBool(it, attrEmpty), Outcome: Outcome(getS(it, attrOutcome)),
		Reason: getS(it, attrReason), ExportJobID: getS(it, attrExportJobID),
		Counts: countsOf(it), TookOverFrom: getS(it, attrTookOverFrom),
		Part: int(getN(it, attrPart)), Parts: int(getN(it, attrParts)),
	}
	if es := get(attrExportSince); !es.IsZero() {
		h.ExportWindow = envelope.Window{Since: es, Until: h.Window.Until}
	}
	if ts.err != nil {
		return HistoryRecord{}, fmt.Errorf("decode %s: %w", getS(it, attrSK), ts.err)
	}
	return h, nil
}

// ReplayRecord is one replay: who moved the checkpoint, when, from where to
// where, and why.
type ReplayRecord struct {
	At     time.Time
	By     string
	From   time.Time
	To     time.Time
	Reason string
	// Datastore is the data store the replay moved the record to, and
	// FromDatastore the one it belonged to ("" on a record from before the
	// binding); both "" when the replay kept the data store.
	Datastore, FromDatastore string
}
