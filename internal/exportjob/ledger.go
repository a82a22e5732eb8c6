package exportjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// DynamoAPI is the part of the DynamoDB client the ledger uses
// (*dynamodb.Client satisfies it).
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// attrTTL is the ledger items' time to live (the table's TTL attribute).
const attrTTL = stackconfig.TableTTLAttribute

// Ledger statuses beyond HealthLake's job statuses.
const (
	// LedgerClaimed: a start-export invocation holds the claim, no job yet.
	LedgerClaimed = "CLAIMED"
	// LedgerStartFailed: HealthLake refused the export.
	LedgerStartFailed = "START_FAILED"
)

// ErrClaimLost is returned by RecordJob when another invocation took the
// claim over (the lease expired).
var ErrClaimLost = errors.New("export ledger: claim lost to another invocation")

// LedgerEntry is the export ledger item of one run:
// pk "EXPORT#{runId}", sk "JOB".
type LedgerEntry struct {
	RunID       string
	JobID       string
	JobName     string
	Status      string
	Claimant    string
	ClaimedAt   time.Time
	StartedAt   time.Time
	RecheckSent bool
	// TokenHash identifies (SHA-256, hex) the task token whose re-check
	// chain polls the job; "" on items written before it was kept.
	TokenHash string
	// TokenAdopted: a start message with another task token than the first
	// one took the polling over (Step Functions retried WaitForExport, which
	// gives the retry a new token and kills the old one). Chains of any
	// other token are then superseded and stop without cancelling.
	TokenAdopted bool
	// TaskToken, ExecutionID and Window are those of the chain that polls
	// the job (set with its first re-check), so that a HealthLake job event
	// can drive a check of the run.
	TaskToken   string
	ExecutionID string
	Window      envelope.Window
	// NoticeSeconds is how long after the job's end (HealthLake's endTime)
	// check-export wrote the manifest; -1 when not known.
	NoticeSeconds float64
}

// TokenHash identifies a task token in the ledger (the token itself is kept
// too, for job events; the hash compares chains).
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// Superseded reports whether the re-check chain of token lost the polling
// to a newer token of the same run (see TokenAdopted).
func (e LedgerEntry) Superseded(token string) bool {
	return e.TokenAdopted && e.TokenHash != "" && e.TokenHash != TokenHash(token)
}

// Ledger records which export belongs to which run, in the CDC table.
type Ledger struct {
	db    DynamoAPI
	table string
	ttl   time.Duration
	now   func() time.Time
}

// NewLedger returns a ledger over the given table.
func NewLedger(db DynamoAPI, table string, ttl time.Duration, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{db: db, table: table, ttl: ttl, now: now}
}

func ledgerKey(runID string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "EXPORT#" + runID},
		"sk": &ddbtypes.AttributeValueMemberS{Value: "JOB"},
	}
}

func s(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }

func fmtTime(t time.Time) string { return envelope.FormatTime(t) }

func (l *Ledger) ttlValue() ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(l.now().Add(l.ttl).Unix(), 10)}
}

// Get reads a run's ledger entry with a consistent read.
func (l *Ledger) Get(ctx context.Context, runID string) (LedgerEntry, bool, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.table), Key: ledgerKey(runID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return LedgerEntry{}, false, fmt.Errorf("read export ledger of run %s: %w", runID, err)
	}
	if len(out.Item) == 0 {
		return LedgerEntry{}, false, nil
	}
	str := func(k string) string {
		if v, ok := out.Item[k].(*ddbtypes.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	e := LedgerEntry{
		RunID: runID, JobID: str("jobId"), JobName: str("jobName"), Status: str("status"),
		Claimant: str("claimant"), RecheckSent: str("recheckSentAt") != "",
		TokenHash: str("tokenHash"), TokenAdopted: str("tokenAdoptedAt") != "",
	}
	e.TaskToken, e.ExecutionID = str("taskToken"), str("executionId")
	e.NoticeSeconds = -1
	if v, ok := out.Item["noticeSeconds"].(*ddbtypes.AttributeValueMemberN); ok {
		if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
			e.NoticeSeconds = f
		}
	}
	if since, err := envelope.ParseTime(str("windowSince")); err == nil {
		if until, err := envelope.ParseTime(str("windowUntil")); err == nil {
			e.Window = envelope.Window{Since: since, Until: until}
		}
	}
	e.ClaimedAt, _ = envelope.ParseTime(str("claimedAt"))
	e.StartedAt, _ = envelope.ParseTime(str("startedAt"))
	return e, true, nil
}

// Claim takes the run's claim for claimant when there is no item, or the
// item has no job id and its claim is the claimant's own or has expired.
// It reports whether the claim was taken.
func (l *Ledger) Claim(ctx context.Context, runID, claimant string, lease time.Duration) (bool, error) {
	now := l.now()
	item := ledgerKey(runID)
	item["status"] = s(LedgerClaimed)
	item["claimant"] = s(claimant)
	item["claimedAt"] = s(fmtTime(now))
	item[attrTTL] = l.ttlValue()
	_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(l.table),
		Item:      item,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR (attribute_not_exists(jobId) AND " +
			"(claimant = :me OR claimedAt < :expired))"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":me":      s(claimant),
			":expired": s(fmtTime(now.Add(-lease))),
		},
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim export ledger of run %s: %w", runID, err)
	}
	return true, nil
}

// RecordJob stores the job id against the run, on condition that claimant
// still holds the claim and no job is recorded. ErrClaimLost otherwise.
func (l *Ledger) RecordJob(ctx context.Context, runID, claimant, jobID, jobName, status string, startedAt time.Time) error {
	return l.recordJob(ctx, runID, claimant, jobID, jobName, status, "", startedAt)
}

// recordJob is RecordJob that also notes the hash of the task token of the
// start message that started the job ("" notes none).
func (l *Ledger) recordJob(ctx context.Context, runID, claimant, jobID, jobName, status, tokenHash string, startedAt time.Time) error {
	update := "SET jobId = :j, jobName = :n, #s = :s, startedAt = :t, #ttl = :ttl"
	values := map[string]ddbtypes.AttributeValue{
		":j": s(jobID), ":n": s(jobName), ":s": s(status), ":t": s(fmtTime(startedAt)),
		":ttl": l.ttlValue(), ":me": s(claimant),
	}
	if tokenHash != "" {
		update += ", tokenHash = :h"
		values[":h"] = s(tokenHash)
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(l.table),
		Key:                 ledgerKey(runID),
		UpdateExpression:    aws.String(update),
		ConditionExpression: aws.String("claimant = :me AND attribute_not_exists(jobId)"),
		ExpressionAttributeNames: map[string]string{
			"#s": "status", "#ttl": attrTTL,
		},
		ExpressionAttributeValues: values,
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrClaimLost
	}
	if err != nil {
		return fmt.Errorf("record job %s for run %s: %w", jobID, runID, err)
	}
	return nil
}

// MarkRecheckSent notes that the first re-check message was sent.
func (l *Ledger) MarkRecheckSent(ctx context.Context, runID string) error {
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       ledgerKey(runID),
		UpdateExpression:          aws.String("SET recheckSentAt = :t"),
		ConditionExpression:       aws.String("attribute_exists(jobId)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":t": s(fmtTime(l.now()))},
	})
	if err != nil {
		return fmt.Errorf("mark re-check sent for run %s: %w", runID, err)
	}
	return nil
}

// markRecheckSentFor notes that a first re-check was sent for the chain of
// msg's task token; adopted marks it as taking the polling over from another
// token's chain. The token, execution and window are kept so that a job
// event can drive a check.
func (l *Ledger) markRecheckSentFor(ctx context.Context, msg StartMessage, adopted bool) error {
	now := s(fmtTime(l.now()))
	update := "SET recheckSentAt = :t, tokenHash = :h, taskToken = :tok, executionId = :x, windowSince = :ws, windowUntil = :wu"
	values := map[string]ddbtypes.AttributeValue{
		":t": now, ":h": s(TokenHash(msg.TaskToken)), ":tok": s(msg.TaskToken), ":x": s(msg.ExecutionID),
		":ws": s(fmtTime(msg.Window.Since)), ":wu": s(fmtTime(msg.Window.Until)),
	}
	if msg.ExecutionID == "" {
		update = strings.Replace(update, ", executionId = :x", "", 1)
		delete(values, ":x")
	}
	if adopted {
		update += ", tokenAdoptedAt = :t"
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       ledgerKey(msg.RunID),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(jobId)"),
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return fmt.Errorf("mark re-check sent for run %s: %w", msg.RunID, err)
	}
	return nil
}

// jobPointerKey is the key of the item naming the run of a job:
// pk "EXPORTJOB#{jobId}", sk "RUN".
func jobPointerKey(jobID string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": s("EXPORTJOB#" + jobID),
		"sk": s("RUN"),
	}
}

// PointJob records which run a job belongs to (written as the job id
// becomes known; overwriting with the same run is harmless).
func (l *Ledger) PointJob(ctx context.Context, jobID, runID string) error {
	item := jobPointerKey(jobID)
	item["runId"] = s(runID)
	item[attrTTL] = l.ttlValue()
	_, err := l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: item})
	if err != nil {
		return fmt.Errorf("record the run of job %s: %w", jobID, err)
	}
	return nil
}

// RunOfJob returns the run a job belongs to.
func (l *Ledger) RunOfJob(ctx context.Context, jobID string) (string, bool, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.table), Key: jobPointerKey(jobID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", false, fmt.Errorf("read the run of job %s: %w", jobID, err)
	}
	v, ok := out.Item["runId"].(*ddbtypes.AttributeValueMemberS)
	if !ok || v.Value == "" {
		return "", false, nil
	}
	return v.Value, true, nil
}

// SetStatus records the latest known status of the run's export.
func (l *Ledger) SetStatus(ctx context.Context, runID, status string) error {
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       ledgerKey(runID),
		UpdateExpression:          aws.String("SET #s = :s, updatedAt = :t"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": s(status), ":t": s(fmtTime(l.now()))},
	})
	if err != nil {
		return fmt.Errorf("set export status of run %s: %w", runID, err)
	}
	return nil
}

// setManifested records the final status of a job whose manifest was
// written, and how long after the job's end that was (notice < 0: unknown).
func (l *Ledger) setManifested(ctx context.Context, runID, status string, notice time.Duration) error {
	update := "SET #s = :s, updatedAt = :t, manifestAt = :t"
	values := map[string]ddbtypes.AttributeValue{":s": s(status), ":t": s(fmtTime(l.now()))}
	if notice >= 0 {
		update += ", noticeSeconds = :n"
		values[":n"] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatFloat(notice.Seconds(), 'f', 3, 64)}
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.table),
		Key:                       ledgerKey(runID),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return fmt.Errorf("set export status of run %s: %w", runID, err)
	}
	return nil
}

var jobNameChars = regexp.MustCompile(`^[A-Za-z0-9_.:/=+\-@]+$`)

// JobName derives the deterministic HealthLake job name of a run: "cdc-"
// followed by the run id when it fits HealthLake's 64 characters and
// character set, otherwise a prefix of it and 16 hex digits of its SHA-256.
func JobName(runID string) string {
	name := "cdc-" + runID
	if len(name) <= 64 && jobNameChars.MatchString(runID) {
		return name
	}
	sum := sha256.Sum256([]byte(runID))
	keep := make([]rune, 0, 40)
	for _, r := range runID {
		if len(keep) == 40 {
			break
		}
		if r < 128 && jobNameChars.MatchString(string(r)) {
			keep = append(keep, r)
		}
	}
	return "cdc-" + string(keep) + "-" + hex.EncodeToString(sum[:8])
}
