// Package runlock keeps the RUN record of healthlake-cdc in DynamoDB: the
// single-flight lock of the export runs, the checkpoint lastRunTime from
// which every window starts, one history item per run, and the audit of
// replays. Every rule about windows and the checkpoint lives here, so the
// run-lock Lambda and cdcctl share one definition. The Lambda's handler (its
// acquire, commit and fail actions) is internal/runctl, which composes these
// rules; cmd/run-lock wires it. docs/RUNLOCK.md describes the item shapes and
// the recovery rules.
package runlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// Defaults of Config.
const (
	DefaultSafetyLag = 2 * time.Minute
	// DefaultOverlap widens every export window back by this much, so a
	// change HealthLake shows to exports later than the safety lag is
	// still delivered (as a duplicate with the same eventId at worst).
	DefaultOverlap = time.Minute
	DefaultLease   = 26 * time.Hour
	// leaseMargin is added to a run timeout to derive the lease when only
	// the timeout is given (internal/stackconfig uses the same margin).
	leaseMargin       = time.Hour
	DefaultHistoryTTL = 30 * 24 * time.Hour
	DefaultReplayTTL  = 400 * 24 * time.Hour
)

// Outcome is the state of one run in its history item.
type Outcome string

// The outcomes of a run.
const (
	// OutcomeRunning: the run holds the lock.
	OutcomeRunning Outcome = "RUNNING"
	// OutcomeSucceeded: the run committed; the checkpoint moved to its until.
	OutcomeSucceeded Outcome = "SUCCEEDED"
	// OutcomeEmpty: the window was empty; the run released the lock and left
	// the checkpoint where it was.
	OutcomeEmpty Outcome = "EMPTY"
	// OutcomePartial: the run delivered one part of a multi-part export; the
	// rest is pending in the RUN record and the checkpoint waits for the
	// last part.
	OutcomePartial Outcome = "PARTIAL"
	// OutcomeFailed: the run failed; the checkpoint did not move.
	OutcomeFailed Outcome = "FAILED"
	// OutcomeAbandoned: the run stopped without releasing the lock (crash,
	// timeout, abort) and a later run or an operator took the lock over.
	OutcomeAbandoned Outcome = "ABANDONED"
)

// Errors callers can test with errors.Is.
var (
	// ErrNotOwner: the caller does not hold the lock (it was taken over, released or never taken).
	ErrNotOwner = errors.New("the run does not hold the lock")
	// ErrLockHeld: a live run holds the lock.
	ErrLockHeld = errors.New("a live run holds the lock")
	// ErrStaleLock: a run that is no longer running still holds the lock.
	ErrStaleLock = errors.New("the lock is held by a run that is no longer running")
	// ErrNotBackwards: a replay would move the checkpoint forward.
	ErrNotBackwards = errors.New("replay moves the checkpoint back only")
	// ErrWindowMismatch: a commit carried another window than the one the lock holds.
	ErrWindowMismatch = errors.New("the window does not match the held one")
	// ErrConflict: the RUN record kept changing under the caller; try again.
	ErrConflict = errors.New("the RUN record changed concurrently")
)

// DatastoreChangedError refuses an acquire when the RUN record's checkpoint
// belongs to another HealthLake data store than the pipeline's: its
// DatastoreId changed on a deployed stack. Going on would start the new
// store at the old store's checkpoint, so nothing the new store holds from
// before it would ever be delivered. A replay that names the new store
// (cdcctl replay --since T --datastore ID) moves the record to it.
// Data store ids are not PHI.
type DatastoreChangedError struct {
	// Bound is the data store of the record; Configured the pipeline's.
	Bound, Configured string
}

func (e *DatastoreChangedError) Error() string {
	return "the RUN record's checkpoint belongs to HealthLake data store " + e.Bound + ", not to " + e.Configured +
		" (the pipeline's DatastoreId changed): no run starts until `cdcctl replay --since T --datastore " + e.Configured +
		"` says from when to deliver the new data store (docs/OPERATIONS.md, \"The pipeline's data store changed\")"
}

// boundElsewhere returns the DatastoreChangedError of st for this store's
// configuration, or nil: the record belongs to the configured data store,
// predates the binding, or no data store is configured.
func (s *Store) boundElsewhere(st state) *DatastoreChangedError {
	return Checkpoints{Datastore: st.datastoreID}.BelongsTo(s.cfg.DatastoreID)
}

// DynamoAPI is the part of the DynamoDB client this package uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Config sets the table and the window rules.
type Config struct {
	// Table is the DynamoDB table (key pk/sk, TTL attribute ttl). Required.
	Table string
	// SafetyLag is subtracted from now to get a window's until. Default 2 min
	// unless SafetyLagSet, which makes a zero SafetyLag mean no lag at all.
	SafetyLag    time.Duration
	SafetyLagSet bool
	// MaxWindow caps a window's length; 0 (the default) means no cap: a
	// window ends at now − lag, and the volume of a catch-up is bounded by
	// the parts of the export's manifest instead (one part per run).
	MaxWindow time.Duration
	// Overlap widens the export window back: a run exports and delivers
	// (since − Overlap, until] while its checkpoint moves over (since,
	// until]. Default 1 min unless OverlapSet, which makes 0 mean none.
	Overlap    time.Duration
	OverlapSet bool
	// Lease is how long a lock stays valid without its owner being checked.
	// Default RunTimeout + 1 h when RunTimeout is set, else 26 h.
	Lease time.Duration
	// RunTimeout is the state machine's TimeoutSeconds, when known: a lease
	// not longer than it is refused (the lock could expire under a live run).
	RunTimeout time.Duration
	// InitialCheckpoint is the checkpoint the first run starts from on a
	// fresh table. Zero means a snapshot (CDC_INITIAL_CHECKPOINT "snapshot",
	// the default): the first window is (envelope.SnapshotSince, now − lag],
	// exported without _since, so the first run publishes the whole store.
	InitialCheckpoint time.Time
	// InitialNow (CDC_INITIAL_CHECKPOINT "now") starts the first run at its
	// own now − SafetyLag instead: an empty first window, and nothing written
	// before the first run is delivered. It wins over InitialCheckpoint.
	InitialNow bool
	// DatastoreID is the HealthLake data store the pipeline exports
	// (CDC_DATASTORE_ID). A RUN record binds its checkpoint to the data
	// store it was created for: an acquire with another one is refused
	// (DatastoreChangedError) until a replay moves the record to it
	// (ReplayRequest.Datastore). "" checks nothing.
	DatastoreID string
	// HistoryTTL and ReplayTTL keep history and replay items this long.
	HistoryTTL, ReplayTTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Owners tells whether a lock owner still runs; nil means the lease alone decides.
	Owners OwnerChecker
	// Logger receives refusals, take-overs and releases; nil discards them.
	Logger *slog.Logger
}

// Store is the RUN record over one DynamoDB table.
type Store struct {
	db  DynamoAPI
	cfg Config
	log *slog.Logger
}

// New returns a Store over db with cfg's defaults filled in.
func New(db DynamoAPI, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("runlock: no DynamoDB client")
	}
	if cfg.Table == "" {
		return nil, errors.New("runlock: no table name: set CDC_TABLE")
	}
	if cfg.SafetyLag == 0 && !cfg.SafetyLagSet {
		cfg.SafetyLag = DefaultSafetyLag
	}
	if cfg.Overlap == 0 && !cfg.OverlapSet {
		cfg.Overlap = DefaultOverlap
	}
	if cfg.Lease == 0 {
		cfg.Lease = DefaultLease
		if cfg.RunTimeout > 0 {
			cfg.Lease = cfg.RunTimeout + leaseMargin
		}
	}
	if cfg.HistoryTTL == 0 {
		cfg.HistoryTTL = DefaultHistoryTTL
	}
	if cfg.ReplayTTL == 0 {
		cfg.ReplayTTL = DefaultReplayTTL
	}
	if cfg.SafetyLag < 0 || cfg.MaxWindow < 0 || cfg.Overlap < 0 || cfg.Lease < 0 || cfg.RunTimeout < 0 ||
		cfg.HistoryTTL < 0 || cfg.ReplayTTL < 0 {
		return nil, errors.New("runlock: durations must not be negative")
	}
	if cfg.RunTimeout > 0 && cfg.Lease <= cfg.RunTimeout {
		return nil, fmt.Errorf("runlock: lock lease %s must be longer than the run timeout %s, or a live run can lose its lock: set %s above %s",
			cfg.Lease, cfg.RunTimeout, stackconfig.EnvLockLease, stackconfig.EnvRunTimeout)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	return &Store{db: db, cfg: cfg, log: log}, nil
}

// Config returns the configuration in use, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

func (s *Store) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Millisecond) }

// WindowAt computes the window a run starting at now gets from checkpoint:
// since = checkpoint, until = now − lag (capped at since + maxWindow when
// maxWindow > 0, except for a snapshot: a checkpoint at envelope.SnapshotSince
// covers the whole store in one window), never before since (an empty
// window then).
func WindowAt(checkpoint, now time.Time, lag, maxWindow time.Duration) envelope.Window {
	since := checkpoint.UTC().Truncate(time.Millisecond)
	until := now.UTC().Add(-lag).Truncate(time.Millisecond)
	if maxWindow > 0 && !envelope.IsSnapshotSince(since) && until.Sub(since) > maxWindow {
		until = since.Add(maxWindow)
	}
	if until.Before(since) {
		until = since
	}
	return envelope.Window{Since: since, Until: until}
}

// ExportWindowOf widens w back by overlap: (since − overlap, until], never
// before envelope.SnapshotSince (a snapshot window stays a full export).
func ExportWindowOf(w envelope.Window, overlap time.Duration) envelope.Window {
	since := w.Since.Add(-overlap)
	if since.Before(envelope.SnapshotSince) {
		since = envelope.SnapshotSince
	}
	return envelope.Window{Since: since, Until: w.Until}
}

// initialCheckpoint is the checkpoint of a fresh table's first run at now:
// now − SafetyLag for InitialNow, else InitialCheckpoint (zero: the snapshot,
// envelope.SnapshotSince).
func (s *Store) initialCheckpoint(now time.Time) time.Time {
	switch {
	case s.cfg.InitialNow:
		return now.Add(-s.cfg.SafetyLag).Truncate(time.Millisecond)
	case s.cfg.InitialCheckpoint.IsZero():
		return envelope.SnapshotSince
	}
	return s.cfg.InitialCheckpoint
}

func (s *Store) getState(ctx context.Context) (state, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            stateKey(),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return state{}, fmt.Errorf("read RUN/STATE from %s: %w", s.cfg.Table, err)
	}
	return decodeState(out.Item)
}

// conditionFailed reports whether err is a failed condition, alone or inside
// a cancelled transaction.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) || cancelledFor(err, "ConditionalCheckFailed")
}

// transactionConflict reports whether DynamoDB refused a write because
// another request was writing one of its items at the same moment: a
// TransactionConflictException, or a transaction cancelled for a
// TransactionConflict ("Transaction conflict handling in DynamoDB",
// DynamoDB Developer Guide). The SDKs retry neither.
func transactionConflict(err error) bool {
	var tc *types.TransactionConflictException
	return errors.As(err, &tc) || cancelledFor(err, "TransactionConflict")
}

// cancelledFor reports whether err is a transaction cancelled with reason
// code for one of its items (or, without reasons, naming code).
func cancelledFor(err error, code string) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == code {
			return true
		}
	}
	return len(tce.CancellationReasons) == 0 && strings.Contains(tce.ErrorMessage(), code)
}

// Waits before the RUN record is written again after a transaction
// conflict: between half and all of 25 ms · 2^(attempt−1), at most 400 ms,
// so that the waits between maxAttempts attempts add up to at least 187 ms.
// The other writer's transaction is over within a DynamoDB round trip.
const (
	conflictBase = 25 * time.Millisecond
	conflictMax  = 400 * time.Millisecond
)

// decideAgain reports whether a refused write of the RUN record is decided
// again on a fresh read: its condition failed (the record changed since it
// was read), or another run, cdcctl or a take-over wrote the record at the
// same moment (a transaction conflict; then it first waits, see
// conflictBase). attempt counts from 0.
func (s *Store) decideAgain(ctx context.Context, err error, attempt int, what string) bool {
	if conditionFailed(err) {
		return true
	}
	if !transactionConflict(err) {
		return false
	}
	s.log.Info("run record written by another request at the same moment; reading it again", "write", what, "attempt", attempt+1)
	return s.waitOutConflict(ctx, attempt)
}

// waitOutConflict waits a jittered moment after the attempt-th (from 0)
// transaction conflict; false when ctx ended first.
func (s *Store) waitOutConflict(ctx context.Context, attempt int) bool {
	d := backoff.Ceiling(conflictBase, conflictMax, attempt+1)
	return backoff.Sleep(ctx, d/2+time.Duration(rand.Int64N(int64(d/2)))) == nil
}

func (s *Store) transact(ctx context.Context, items ...types.TransactWriteItem) error {
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return err
}

// lockClear empties the attributes that make up the lock (":none" is the
// empty string). The lock is free when owner is absent or empty. Emptying
// instead of REMOVE keeps one code path for DynamoDB and emulators whose
// REMOVE is incomplete.
const lockClear = "#owner = :none, #runId = :none, #startTime = :none, #lockedAt = :none, #leaseUntil = :none, #ws = :none, #wu = :none, #es = :none, #hsk = :none"

// lockFree is the condition that nobody holds the lock.
const lockFree = "(attribute_not_exists(#owner) OR #owner = :none)"

func lockNames(extra map[string]string) map[string]string {
	m := map[string]string{
		"#owner": attrOwner, "#runId": attrRunID, "#startTime": attrStartTime, "#lockedAt": attrLockedAt,
		"#leaseUntil": attrLeaseUntil, "#ws": attrWindowSince, "#wu": attrWindowUntil, "#es": attrExportSince, "#hsk": attrHistorySK,
		"#version": attrVersion, "#pending": attrPending, "#rk": attrRedactKey,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// used keeps the placeholders of names and values that the expressions
// mention: DynamoDB rejects unused ones.
func used(names map[string]string, values map[string]types.AttributeValue, exprs ...string) (map[string]string, map[string]types.AttributeValue) {
	mentioned := map[string]bool{}
	for _, e := range exprs {
		for i := 0; i < len(e); i++ {
			if e[i] != '#' && e[i] != ':' {
				continue
			}
			j := i + 1
			for j < len(e) && (e[j] == '_' || e[j] >= '0' && e[j] <= '9' || e[j] >= 'a' && e[j] <= 'z' || e[j] >= 'A' && e[j] <= 'Z') {
				j++
			}
			mentioned[e[i:j]] = true
			i = j - 1
		}
	}
	var on map[string]string
	for k, v := range names {
		if mentioned[k] {
			if on == nil {
				on = map[string]string{}
			}
			on[k] = v
		}
	}
	var ov map[string]types.AttributeValue
	for k, v := range values {
		if mentioned[k] {
			if ov == nil {
				ov = map[string]types.AttributeValue{}
			}
			ov[k] = v
		}
	}
	return on, ov
}
