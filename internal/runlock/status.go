package runlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
)

// Status is what an operator sees of the RUN record (cdcctl renders it;
// it is not a wire format).
type Status struct {
	// Exists: the RUN record exists (false on a fresh table).
	Exists     bool
	Checkpoint time.Time
	// Datastore is the HealthLake data store the checkpoint belongs to
	// ("" on a record from before the binding); DatastoreChanged holds
	// the refusal every run meets while it is not the configured one.
	Datastore        string
	DatastoreChanged *DatastoreChangedError
	// Lag is now − Checkpoint.
	Lag time.Duration
	// Now is the time the status was read.
	Now time.Time
	// Lock is the current holder, nil when free.
	Lock *LockInfo
	// Pending is the rest of a multi-part export the next runs deliver
	// before the checkpoint moves; nil when none.
	Pending *Pending
	// LastRun is the last run that ended, nil if none.
	LastRun    *LastRun
	LastReplay *ReplayRecord
	// SkippedRuns counts refused acquires; Takeovers counts stale locks taken over.
	SkippedRuns   int64
	LastSkippedAt time.Time
	Takeovers     int64
	// ExportJob is the export ledger entry of the current (or else the last) run.
	ExportJob *ExportJob
	// History holds the last runs, newest first.
	History []HistoryRecord
}

// LockInfo describes the lock holder.
type LockInfo struct {
	Owner      string
	RunID      string
	StartTime  time.Time
	LockedAt   time.Time
	LeaseUntil time.Time
	Window     envelope.Window
	// ExportWindow is what the holder exports and delivers.
	ExportWindow envelope.Window
	Liveness     Liveness
}

// LastRun is the STATE item's record of the last run that ended.
type LastRun struct {
	RunID   string
	Outcome Outcome
	Reason  string
	EndedAt time.Time
}

// ExportJob is the EXPORT#{runId}/JOB item as written by internal/exportjob,
// read defensively: missing attributes stay empty.
type ExportJob struct {
	RunID     string `json:"runId"`
	JobID     string `json:"jobId,omitempty"`
	Status    string `json:"status,omitempty"`
	StartedAt string `json:"startedAt,omitempty"`
}

// Status reads the RUN record, the last historyLimit runs and the export
// job of the current or last run.
func (s *Store) Status(ctx context.Context, historyLimit int) (Status, error) {
	st, err := s.getState(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("status: %w", err)
	}
	now := s.now()
	out := Status{Exists: st.exists, Now: now, History: []HistoryRecord{}}
	if st.exists {
		out.Checkpoint = st.checkpoint
		out.Datastore = st.datastoreID
		out.DatastoreChanged = s.boundElsewhere(st)
		out.Lag = now.Sub(st.checkpoint)
		out.LastReplay = st.lastReplay
		out.SkippedRuns, out.LastSkippedAt, out.Takeovers = st.skippedRuns, st.lastSkippedAt, st.takeovers
		out.Pending = st.pending
		if st.lastRunID != "" {
			out.LastRun = &LastRun{RunID: st.lastRunID, Outcome: st.lastOutcome, Reason: st.lastReason, EndedAt: st.lastEndedAt}
		}
	}
	if st.locked() {
		out.Lock = &LockInfo{Owner: st.owner, RunID: st.runID, StartTime: st.startTime, LockedAt: st.lockedAt,
			LeaseUntil: st.leaseUntil, Window: st.window, ExportWindow: s.heldExportWindow(st), Liveness: s.liveness(ctx, st, now)}
	}
	if historyLimit > 0 {
		out.History, err = s.History(ctx, historyLimit)
		if err != nil {
			return Status{}, fmt.Errorf("status: %w", err)
		}
	}
	jobRun := st.runID
	if jobRun == "" {
		jobRun = st.lastRunID
	}
	if jobRun != "" {
		out.ExportJob, err = s.exportJob(ctx, jobRun)
		if err != nil {
			return Status{}, fmt.Errorf("status: %w", err)
		}
	}
	return out, nil
}

// History returns the last limit runs, newest first.
func (s *Store) History(ctx context.Context, limit int) ([]HistoryRecord, error) {
	hs := make([]HistoryRecord, 0, min(limit, 1000))
	err := s.newest(ctx, skHistoryPfx, limit, func(it item) error {
		h, err := decodeHistory(it)
		if err != nil {
			return err
		}
		hs = append(hs, h)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query run history: %w", err)
	}
	return hs, nil
}

// RunHistory returns the history record of the run runID, whose execution
// started at started ($$.Execution.StartTime, which Step Functions'
// DescribeExecution gives as startDate), or nil when there is none: the
// execution was refused the lock (a skipped run) or ended before taking it.
// It reads the records of the minute either side of started, so a start time
// read at another precision still finds the run.
func (s *Store) RunHistory(ctx context.Context, runID string, started time.Time) (*HistoryRecord, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":   str(pkRun),
			":from": str(skHistoryPfx + envelope.FormatTime(started.Add(-time.Minute))),
			":to":   str(skHistoryPfx + envelope.FormatTime(started.Add(time.Minute)) + "#\uffff"),
		},
	}
	for {
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("query the history of run %s: %w", runID, err)
		}
		for _, it := range out.Items {
			if getS(it, attrRunID) != runID {
				continue
			}
			h, err := decodeHistory(it)
			if err != nil {
				return nil, fmt.Errorf("the history of run %s: %w", runID, err)
			}
			return &h, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// newest reads the RUN partition's items under prefix, newest first, until
// limit items or the end: page after page, as DynamoDB answers at most
// 1 MB at a time.
func (s *Store) newest(ctx context.Context, prefix string, limit int, fn func(item) error) error {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pfx)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(pkRun), ":pfx": str(prefix),
		},
		ScanIndexForward: aws.Bool(false),
	}
	n := 0
	for n < limit {
		in.Limit = aws.Int32(int32(min(limit-n, 1000)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return err
		}
		for _, it := range out.Items {
			if err := fn(it); err != nil {
				return err
			}
			n++
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return nil
}

// Replays returns the last limit replay audit items, newest first.
func (s *Store) Replays(ctx context.Context, limit int) ([]ReplayRecord, error) {
	rs := make([]ReplayRecord, 0, min(limit, 1000))
	err := s.newest(ctx, skReplayPfx, limit, func(it item) error {
		var err error
		get := func(name string) time.Time {
			t, e := getT(it, name)
			if e != nil && err == nil {
				err = e
			}
			return t
		}
		r := ReplayRecord{At: get(attrAt), By: getS(it, attrBy), From: get(attrFrom), To: get(attrTo), Reason: getS(it, attrReason),
			Datastore: getS(it, attrDatastore), FromDatastore: getS(it, attrFromDatastore)}
		if err != nil {
			return fmt.Errorf("decode %s: %w", getS(it, attrSK), err)
		}
		rs = append(rs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("query replays: %w", err)
	}
	return rs, nil
}

func (s *Store) exportJob(ctx context.Context, runID string) (*ExportJob, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: key("EXPORT#"+runID, "JOB"),
	})
	if err != nil {
		return nil, fmt.Errorf("read export job of run %s: %w", runID, err)
	}
	if out.Item == nil {
		return nil, nil
	}
	return &ExportJob{RunID: runID, JobID: getAnyS(out.Item, attrJobID), Status: getAnyS(out.Item, attrJobStatus),
		StartedAt: getAnyS(out.Item, attrStartedAt)}, nil
}

// TableAPI is the part of the DynamoDB client CreateTable uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// CreateTable creates the table the way the CDK stack does (key pk/sk,
// on-demand), for local runs and tests; an existing table is not an error.
// The TTL attribute ttl is enabled by the CDK stack in AWS.
func CreateTable(ctx context.Context, db TableAPI, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if errors.As(err, &inUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}
