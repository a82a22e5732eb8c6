package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
)

func (h *Handler) finish(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	if pl == nil {
		return Result{}, &InputError{Msg: "finish needs the plan"}
	}
	keys, err := h.listKeys(ctx, statsPrefix(pl.RunID))
	if err != nil {
		return Result{}, err
	}
	if len(keys) != pl.Partitions {
		return Result{}, fmt.Errorf("finish: %d of %d partitions compared", len(keys), pl.Partitions)
	}
	var sum Result
	for _, k := range keys {
		var r Result
		if err := h.getJSON(ctx, k, &r); err != nil {
			return Result{}, err
		}
		sum.Stats = sum.Stats.Add(r.Stats)
		sum.Unconfirmed += r.Unconfirmed
		sum.HardDeletes += r.HardDeletes
		sum.Unrepairable += r.Unrepairable
		sum.Deferred += r.Deferred
	}
	cs, err := h.countResult(ctx, pl.RunID)
	if err != nil {
		return Result{}, fmt.Errorf("finish: %w", err)
	}
	var ls listState
	if len(cs.Leaves) > 0 {
		if err := h.getJSON(ctx, listStateKey(pl.RunID), &ls); err != nil {
			return Result{}, fmt.Errorf("finish: %w", err)
		}
	}
	sum.Queries, sum.Refined, sum.Leaves, sum.Pages, sum.Listed = cs.Queries, cs.refined(), int64(len(cs.Leaves)), int64(ls.Seq), ls.Listed
	// The partitions' histograms (summed by the count step) hold each
	// live delivered version of the window once.
	sum.DeliveredLive = cs.Hist.total()
	counts, _ := json.Marshal(sum)
	now := h.now().UTC()
	_, err = h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.cfg.Table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: StatePK}, "sk": &ddbtypes.AttributeValueMemberS{Value: StateSK},
		"runId":      &ddbtypes.AttributeValueMemberS{Value: pl.RunID},
		"startedAt":  &ddbtypes.AttributeValueMemberS{Value: pl.StartedAt},
		"finishedAt": &ddbtypes.AttributeValueMemberS{Value: envelope.FormatTime(now)},
		"partitions": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(pl.Partitions)},
		"checkpoint": &ddbtypes.AttributeValueMemberS{Value: envelope.FormatTime(pl.Window.Until)},
		"jobId":      &ddbtypes.AttributeValueMemberS{Value: pl.Export.JobID},
		"counts":     &ddbtypes.AttributeValueMemberS{Value: string(counts)},
	}})
	if err != nil {
		return Result{}, fmt.Errorf("finish: write %s/%s: %w", StatePK, StateSK, err)
	}
	if h.cfg.Metrics != nil {
		_ = h.cfg.Metrics.Emit([]metrics.Value{
			metrics.Count(metrics.ReconcileRepairs, sum.Repairs),
			metrics.Count(metrics.ReconcileDeletes, sum.Deletes),
			metrics.Count(metrics.ReconcileResources, sum.Store),
		}, nil, map[string]any{"runId": pl.RunID, "executionId": in.ExecutionID, "jobId": pl.Export.JobID})
	}
	if h.cfg.Logger != nil {
		h.cfg.Logger.Info("reconciliation finished", "runId", pl.RunID, "queries", sum.Queries, "refined", sum.Refined, "leaves", sum.Leaves,
			"listed", sum.Listed, "known", sum.Known, "deliveredLive", sum.DeliveredLive,
			"repairs", sum.Repairs, "deletes", sum.Deletes, "hardDeletes", sum.HardDeletes, "pending", sum.Pending,
			"unconfirmed", sum.Unconfirmed, "unrepairable", sum.Unrepairable)
	}
	return sum, nil
}

// The DynamoDB item of the last finished reconciliation (the RUN table).
const (
	StatePK = "RECONCILE"
	StateSK = "STATE"
)

// LastRun is the last finished reconciliation as recorded by finish.
type LastRun struct {
	RunID      string `json:"runId"`
	StartedAt  string `json:"startedAt"`
	FinishedAt string `json:"finishedAt"`
	Partitions int    `json:"partitions"`
	Checkpoint string `json:"checkpoint"`
	JobID      string `json:"jobId"`
	Counts     Result `json:"counts"`
}

// Last reads the last finished reconciliation; nil before the first.
func Last(ctx context.Context, db DynamoAPI, table string) (*LastRun, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: StatePK}, "sk": &ddbtypes.AttributeValueMemberS{Value: StateSK}}})
	if err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", StatePK, StateSK, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	s := func(k string) string {
		if v, ok := out.Item[k].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	l := &LastRun{RunID: s("runId"), StartedAt: s("startedAt"), FinishedAt: s("finishedAt"), Checkpoint: s("checkpoint"), JobID: s("jobId")}
	if v, ok := out.Item["partitions"].(*ddbtypes.AttributeValueMemberN); ok {
		l.Partitions, _ = strconv.Atoi(v.Value)
	}
	if c := s("counts"); c != "" {
		_ = json.Unmarshal([]byte(c), &l.Counts)
	}
	return l, nil
}

func (h *Handler) previous(ctx context.Context) (*Previous, error) {
	l, err := Last(ctx, h.db, h.cfg.Table)
	if err != nil || l == nil {
		return nil, err
	}
	if l.Partitions <= 0 {
		return nil, fmt.Errorf("the last reconciliation %s records %d partitions", l.RunID, l.Partitions)
	}
	return &Previous{RunID: l.RunID, Partitions: l.Partitions, StartedAt: l.StartedAt, Checkpoint: l.Checkpoint}, nil
}
