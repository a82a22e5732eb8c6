package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/healthlake-cdc/healthlake-cdc/internal/change"
	"github.com/healthlake-cdc/healthlake-cdc/internal/events"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/healthlake"
	"github.com/healthlake-cdc/healthlake-cdc/internal/manifest"
	"github.com/healthlake-cdc/healthlake-cdc/internal/metrics"
	"github.com/healthlake-cdc/healthlake-cdc/internal/publish"
)

// Actions of the reconcile Lambda.
const (
	ActionPlan   = "plan"
	ActionIndex  = "index"
	ActionDiff   = "diff"
	ActionFinish = "finish"
)

// S3API is the part of the S3 client the handler uses.
type S3API interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// DynamoAPI is the part of the DynamoDB client the handler uses.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// HistoryAPI reads a resource's instance history, newest first
// (healthlake.Client); healthlake.ErrNoHistory when it is gone.
type HistoryAPI interface {
	History(ctx context.Context, datastoreID, resourceType, id string) ([]healthlake.HistoryEntry, error)
}

// Defaults of Config.
const (
	DefaultPartitions = 16
	// DefaultDeliveredMargin: delivered-index objects written this long
	// before the previous reconciliation started are read again (a union,
	// so re-reading is harmless), against clock skew between S3 and Lambda.
	DefaultDeliveredMargin = time.Hour
)

// Config configures the handler.
type Config struct {
	Bucket, KMSKeyID, Table, DatastoreID string
	// Partitions is N, the number of index partitions (CDC_RECONCILE_PARTITIONS).
	Partitions int
	// DeliveredMargin: see DefaultDeliveredMargin.
	DeliveredMargin time.Duration
	// Publish configures the bus (as for prepare-change).
	Publish publish.Config
	// Filter keeps or drops resource types, as prepare-change does.
	Filter change.Filter
	Logger *slog.Logger
	// Metrics receives ReconcileRepairs, ReconcileDeletes and
	// ReconcileResources at finish; nil writes none.
	Metrics *metrics.Recorder
}

// Handler is the reconcile Lambda: plan, index (Distributed Map child per
// manifest batch), diff (Distributed Map child per partition) and finish.
type Handler struct {
	s3  S3API
	db  DynamoAPI
	hl  HistoryAPI
	eb  publish.PutEventsAPI
	cfg Config
}

// New returns a handler.
func New(s3c S3API, db DynamoAPI, hl HistoryAPI, eb publish.PutEventsAPI, cfg Config) (*Handler, error) {
	if s3c == nil || db == nil || hl == nil || eb == nil {
		return nil, errors.New("reconcile: S3, DynamoDB, HealthLake and EventBridge clients are required")
	}
	if cfg.Bucket == "" || cfg.Table == "" || cfg.DatastoreID == "" {
		return nil, errors.New("reconcile: bucket, table and datastore id are required")
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.Partitions > MaxPartitions {
		return nil, fmt.Errorf("reconcile: %d partitions, at most %d", cfg.Partitions, MaxPartitions)
	}
	if cfg.DeliveredMargin <= 0 {
		cfg.DeliveredMargin = DefaultDeliveredMargin
	}
	if _, err := publish.New(eb, cfg.Publish); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return &Handler{s3: s3c, db: db, hl: hl, eb: eb, cfg: cfg}, nil
}

// MaxPartitions bounds N: the partition list rides in the state (256 KiB).
const MaxPartitions = 10000

// Input is the payload of every action; each uses its own fields.
type Input struct {
	Action      string `json:"action"`
	RunID       string `json:"runId"`
	ExecutionID string `json:"executionId,omitempty"`
	// StartTime is the execution's start (plan): a hard delete's time.
	StartTime string `json:"startTime,omitempty"`
	// Window is the export window (SnapshotSince, checkpoint] (plan).
	Window *events.Window `json:"window,omitempty"`
	// Export is the export wait's output (plan).
	Export *manifest.Export `json:"export,omitempty"`
	// Files and Batch are one manifest batch and its index (index).
	Files []manifest.File `json:"files,omitempty"`
	Batch int             `json:"batch,omitempty"`
	// Partition is the partition to compare (diff).
	Partition int `json:"partition,omitempty"`
	// Plan is plan's output (index, diff, finish).
	Plan *Plan `json:"plan,omitempty"`
}

// Plan is the output of plan, carried to every later action.
type Plan struct {
	RunID      string        `json:"runId"`
	BatchesKey string        `json:"batchesKey"`
	Batches    int           `json:"batches"`
	Partitions int           `json:"partitions"`
	Window     events.Window `json:"window"`
	// StartedAt is the reconciliation's start: a hard delete's lastUpdated.
	StartedAt string           `json:"startedAt"`
	Export    events.ExportRef `json:"export"`
	// Previous is the last finished reconciliation, nil before the first.
	Previous *Previous `json:"previous"`
	// DeliveredKeysKey lists the delivered-index objects to read.
	DeliveredKeysKey string `json:"deliveredKeysKey"`
	Delivered        int    `json:"delivered"`
	// PartitionList is 0..Partitions-1, the items of the compare Map.
	PartitionList []int `json:"partitionList"`
}

// Previous names a finished reconciliation.
type Previous struct {
	RunID      string `json:"runId"`
	Partitions int    `json:"partitions"`
	StartedAt  string `json:"startedAt"`
}

// Result is the output of index, diff and finish: counts only.
type Result struct {
	Partition int   `json:"partition,omitempty"`
	Lines     int64 `json:"lines,omitempty"`
	Indexed   int64 `json:"indexed,omitempty"`
	Filtered  int64 `json:"filtered,omitempty"`
	Stats
	// Unconfirmed counts resources absent from the export whose history
	// does not end in a delete (nothing is published for them).
	Unconfirmed  int64 `json:"unconfirmed,omitempty"`
	HardDeletes  int64 `json:"hardDeletes,omitempty"`
	Unrepairable int64 `json:"unrepairable,omitempty"`
}

// Keys of the reconciliation's objects.
func storeRunKey(runID string, p, batch int) string {
	return fmt.Sprintf("%s%s/store/%05d/%06d.tsv.gz", Prefix, runID, p, batch)
}
func storeRunPrefix(runID string, p int) string {
	return fmt.Sprintf("%s%s/store/%05d/", Prefix, runID, p)
}

// IndexKey is partition p of a reconciliation's delivered index.
func IndexKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/index/%05d.tsv.gz", Prefix, runID, p)
}
func statsKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/stats/%05d.json", Prefix, runID, p)
}
func statsPrefix(runID string) string { return Prefix + runID + "/stats/" }

// reconcileDeliveredKey is what a diff child published, in the D4 form.
func reconcileDeliveredKey(runID string, p int) string {
	return fmt.Sprintf("%s%s/reconcile-%05d.tsv.gz", DeliveredPrefix, runID, p)
}

// Prefix holds the reconciliation's own objects.
const Prefix = "reconcile/"

// InputError is a malformed payload (not retried).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return "reconcile input: " + e.Msg }

// Refused: the export cannot be reconciled (COMPLETED_WITH_ERRORS, an
// unreadable line): deleting on its evidence could delete what exists.
type Refused struct{ Msg string }

func (e *Refused) Error() string { return "reconciliation refused: " + e.Msg }

// Handle runs one action.
func (h *Handler) Handle(ctx context.Context, in Input) (any, error) {
	if in.RunID == "" {
		return nil, &InputError{Msg: "runId is required"}
	}
	var out any
	var err error
	switch in.Action {
	case ActionPlan:
		out, err = h.plan(ctx, in)
	case ActionIndex:
		out, err = h.index(ctx, in)
	case ActionDiff:
		out, err = h.diff(ctx, in)
	case ActionFinish:
		out, err = h.finish(ctx, in)
	default:
		return nil, &InputError{Msg: fmt.Sprintf("unknown action %q: want plan, index, diff or finish", clipS(in.Action, 40))}
	}
	if err != nil && h.cfg.Logger != nil {
		h.cfg.Logger.Error("reconcile action failed", "action", in.Action, "runId", in.RunID, "executionId", in.ExecutionID, "error", err.Error())
	}
	return out, err
}

func clipS(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// --- plan ---

func (h *Handler) plan(ctx context.Context, in Input) (Plan, error) {
	if in.Export == nil || in.Window == nil {
		return Plan{}, &InputError{Msg: "plan needs export and window"}
	}
	exp := *in.Export
	if exp.CompletedWithErrors {
		return Plan{}, &Refused{Msg: "the full export completed with errors; resources it lacks may exist"}
	}
	var batches []manifest.Batch
	if exp.Parts > 0 {
		if err := exp.Validate(); err != nil {
			return Plan{}, &InputError{Msg: err.Error()}
		}
		for k := 0; k < exp.Parts; k++ {
			var part []manifest.Batch
			if err := h.getJSON(ctx, manifest.PartKey(exp.ManifestRunID, k), &part); err != nil {
				return Plan{}, fmt.Errorf("plan: manifest part %d: %w", k, err)
			}
			batches = append(batches, part...)
		}
	}
	if batches == nil {
		batches = []manifest.Batch{}
	}
	start := in.StartTime
	if _, err := events.ParseTime(start); err != nil {
		return Plan{}, &InputError{Msg: "startTime: not a time"}
	}
	p := Plan{RunID: in.RunID, BatchesKey: Prefix + in.RunID + "/batches.json", Batches: len(batches),
		Partitions: h.cfg.Partitions, Window: *in.Window, StartedAt: start,
		Export:           events.ExportRef{DatastoreID: exp.DatastoreID, JobID: exp.JobID},
		DeliveredKeysKey: Prefix + in.RunID + "/delivered-keys.json"}
	if p.Export.DatastoreID == "" {
		p.Export.DatastoreID = h.cfg.DatastoreID
	}
	if err := h.putJSON(ctx, p.BatchesKey, batches); err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	prev, err := h.previous(ctx)
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	p.Previous = prev
	var cutoff time.Time
	if prev != nil {
		t, err := events.ParseTime(prev.StartedAt)
		if err != nil {
			return Plan{}, fmt.Errorf("plan: previous reconciliation's start: %w", err)
		}
		cutoff = t.Add(-h.cfg.DeliveredMargin)
	}
	keys, err := h.deliveredSince(ctx, cutoff)
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
		h.cfg.Logger.Info("reconciliation planned", "runId", in.RunID, "batches", len(batches), "partitions", p.Partitions,
			"deliveredObjects", len(keys), "previousRunId", prevID(prev))
	}
	return p, nil
}

func prevID(p *Previous) string {
	if p == nil {
		return ""
	}
	return p.RunID
}

// deliveredSince lists the delivered-index objects written at or after cutoff.
func (h *Handler) deliveredSince(ctx context.Context, cutoff time.Time) ([]string, error) {
	keys := []string{}
	var token *string
	for {
		out, err := h.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket),
			Prefix: aws.String(DeliveredPrefix), ContinuationToken: token})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", DeliveredPrefix, err)
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

// --- index ---

func (h *Handler) index(ctx context.Context, in Input) (Result, error) {
	if in.Plan == nil || in.Plan.Partitions <= 0 {
		return Result{}, &InputError{Msg: "index needs the plan"}
	}
	n := in.Plan.Partitions
	parts := make([][]Entry, n)
	files := make([]FileRef, 0, len(in.Files))
	var res Result
	for fi, f := range in.Files {
		files = append(files, FileRef{Bucket: f.Bucket, Key: f.Key})
		obj, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(f.Bucket), Key: aws.String(f.Key)})
		if err != nil {
			return res, fmt.Errorf("index: get s3://%s/%s: %w", f.Bucket, f.Key, err)
		}
		rd := fhir.NewReader(obj.Body, fhir.Options{File: f.Key, Validation: fhir.ValidateNone})
		for {
			line, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				obj.Body.Close()
				return res, fmt.Errorf("index: read s3://%s/%s: %w", f.Bucket, f.Key, err)
			}
			res.Lines++
			if line.ResourceType == "" || line.ID == "" {
				obj.Body.Close()
				return res, &Refused{Msg: fmt.Sprintf("line %d of s3://%s/%s has no resourceType or id", line.Number, f.Bucket, f.Key)}
			}
			if !h.cfg.Filter.Allows(line.ResourceType) {
				res.Filtered++
				continue
			}
			v := line.VersionID
			if v == "" && line.Raw != nil {
				v = events.ContentVersion(line.Raw)
			}
			e := Entry{Type: line.ResourceType, ID: line.ID, VersionID: v, LastUpdated: line.LastUpdated,
				File: fi, Offset: line.Offset, Length: int64(len(line.Raw))}
			p := Partition(e.Type, e.ID, n)
			parts[p] = append(parts[p], e)
			res.Indexed++
		}
		obj.Body.Close()
	}
	for p, es := range parts {
		if len(es) == 0 {
			continue
		}
		SortEntries(es)
		var buf bytes.Buffer
		w := NewWriter(&buf, true)
		if err := w.Files(files); err != nil {
			return res, fmt.Errorf("index: %w", err)
		}
		for _, e := range es {
			if err := w.Write(e); err != nil {
				return res, fmt.Errorf("index: %w", err)
			}
		}
		if err := w.Close(); err != nil {
			return res, err
		}
		if err := h.put(ctx, storeRunKey(in.RunID, p, in.Batch), buf.Bytes()); err != nil {
			return res, fmt.Errorf("index: %w", err)
		}
	}
	return res, nil
}

// --- diff ---

func (h *Handler) diff(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	if pl == nil || pl.Partitions <= 0 || in.Partition < 0 || in.Partition >= pl.Partitions {
		return Result{}, &InputError{Msg: "diff needs the plan and a partition in range"}
	}
	p := in.Partition
	res := Result{Partition: p}
	checkpoint := pl.Window.Until
	store, files, err := h.loadStore(ctx, pl.RunID, p)
	if err != nil {
		return res, err
	}
	known, err := h.loadKnown(ctx, pl, p)
	if err != nil {
		return res, err
	}
	next := make([]Entry, 0, len(known)+len(store)/8)
	var repairs []repairAt
	var deletes []int // positions in next
	st, err := Diff(store, known, checkpoint, func(d Decision) error {
		switch d.Kind {
		case KindRepair:
			e := *d.Store
			repairs = append(repairs, repairAt{entry: e, pos: len(next), known: d.Known})
			e.File, e.Offset, e.Length = 0, 0, 0
			next = append(next, e)
		case KindDelete:
			deletes = append(deletes, len(next))
			next = append(next, *d.Known)
		default:
			if d.Known != nil {
				next = append(next, *d.Known)
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Stats = st
	pub, err := publish.New(h.eb, h.cfg.Publish)
	if err != nil {
		return res, err
	}
	defer func() { _ = pub.Wait() }()
	var record []Entry
	em := &publish.Emitter{Publisher: pub, ClaimCheck: &publish.ClaimCheck{S3: h.s3, Bucket: h.cfg.Bucket, KMSKeyID: h.cfg.KMSKeyID},
		Window: pl.Window, Export: pl.Export}
	for _, r := range repairs {
		ok, err := h.repair(ctx, em, files, r.entry)
		if err != nil {
			return res, err
		}
		if !ok { // not delivered after all: the index keeps what was
			res.Unrepairable++
			res.Repairs--
			next[r.pos] = Entry{}
			if r.known != nil {
				next[r.pos] = *r.known
			}
			continue
		}
		rec := r.entry
		rec.File, rec.Offset, rec.Length = 0, 0, 0
		record = append(record, rec)
	}
	var detail []byte
	for _, i := range deletes {
		k := next[i]
		hist, err := h.hl.History(ctx, pl.Export.DatastoreID, k.Type, k.ID)
		var v, at string
		switch {
		case errors.Is(err, healthlake.ErrNoHistory):
			v, at = events.HardDeleteVersion(k.VersionID), pl.StartedAt
			res.HardDeletes++
		case err != nil:
			return res, fmt.Errorf("diff partition %d: %w", p, err)
		case len(hist) > 0 && hist[0].Deleted:
			v, at = hist[0].VersionID, hist[0].LastUpdated
		default:
			// Live in the history: written after the export looked, or
			// not yet visible to it. The next reconciliation decides.
			res.Unconfirmed++
			res.Deletes--
			continue
		}
		d := events.Deletion{ResourceType: k.Type, ResourceID: k.ID, VersionID: v, LastUpdated: at, Window: pl.Window, Export: pl.Export}
		detail = events.AppendDeleteDetail(detail[:0], d)
		if err := pub.Add(ctx, detail, nil); err != nil {
			return res, fmt.Errorf("diff partition %d: publish a delete: %w", p, err)
		}
		tomb := Entry{Type: k.Type, ID: k.ID, VersionID: v, LastUpdated: at, Deleted: true}
		next[i] = tomb
		record = append(record, tomb)
	}
	if err := pub.Flush(ctx); err != nil {
		return res, fmt.Errorf("diff partition %d: publish: %w", p, err)
	}
	if err := pub.Wait(); err != nil {
		return res, fmt.Errorf("diff partition %d: publish: %w", p, err)
	}
	// Published: record it (D4 form), then the partition's new index.
	if len(record) > 0 {
		if err := h.writeIndex(ctx, reconcileDeliveredKey(pl.RunID, p), record); err != nil {
			return res, err
		}
	}
	if err := h.writeIndex(ctx, IndexKey(pl.RunID, p), next); err != nil {
		return res, err
	}
	if err := h.putJSON(ctx, statsKey(pl.RunID, p), res); err != nil {
		return res, err
	}
	return res, nil
}

// repairAt is a repair, its position in the next index and what was delivered before.
type repairAt struct {
	entry Entry
	pos   int
	known *Entry
}

// repair re-publishes the store version e from its export line, as a
// normal upsert (same eventId as the run that missed it would have sent).
func (h *Handler) repair(ctx context.Context, em *publish.Emitter, files []FileRef, e Entry) (bool, error) {
	if e.Length <= 0 || e.File < 0 || e.File >= len(files) {
		return false, nil // an over-long line: the runs quarantine it too
	}
	f := files[e.File]
	rng := "bytes=" + strconv.FormatInt(e.Offset, 10) + "-" + strconv.FormatInt(e.Offset+e.Length-1, 10)
	obj, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(f.Bucket), Key: aws.String(f.Key), Range: aws.String(rng)})
	if err != nil {
		return false, fmt.Errorf("repair: get s3://%s/%s: %w", f.Bucket, f.Key, err)
	}
	raw, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		return false, fmt.Errorf("repair: read s3://%s/%s: %w", f.Bucket, f.Key, err)
	}
	line, err := fhir.NewReader(bytes.NewReader(raw), fhir.Options{File: f.Key, Validation: fhir.ValidateJSON}).Next()
	if err != nil || line.Problem != "" || line.ID != e.ID || line.ResourceType != e.Type {
		return false, nil // not the line indexed, or a bad line: the runs quarantine it
	}
	r := events.Resource{ResourceType: line.ResourceType, ID: line.ID, VersionID: line.VersionID, LastUpdated: line.LastUpdated, Raw: line.Raw}
	if _, err := em.Emit(ctx, r, nil); err != nil {
		var tooLarge *publish.EntryTooLargeError
		if errors.As(err, &tooLarge) {
			return false, nil
		}
		return false, fmt.Errorf("repair: %w", err)
	}
	return true, nil
}

// loadStore reads partition p of the store index: every batch's sorted run.
func (h *Handler) loadStore(ctx context.Context, runID string, p int) ([]Entry, []FileRef, error) {
	keys, err := h.list(ctx, storeRunPrefix(runID, p))
	if err != nil {
		return nil, nil, err
	}
	var es []Entry
	var files []FileRef
	for _, k := range keys {
		base := len(files)
		err := h.read(ctx, k, func(f FileRef) { files = append(files, f) }, func(e Entry) error {
			e.File += base
			es = append(es, e)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	SortEntries(es)
	return Reduce(es), files, nil
}

// loadKnown builds partition p of the delivered index: the previous
// reconciliation's index and every delivered object of the plan.
func (h *Handler) loadKnown(ctx context.Context, pl *Plan, p int) ([]Entry, error) {
	var es []Entry
	keep := func(e Entry) error {
		if Partition(e.Type, e.ID, pl.Partitions) == p {
			e.File, e.Offset, e.Length = 0, 0, 0
			es = append(es, e)
		}
		return nil
	}
	if prev := pl.Previous; prev != nil {
		if prev.Partitions == pl.Partitions {
			if err := h.read(ctx, IndexKey(prev.RunID, p), nil, keep); err != nil {
				return nil, fmt.Errorf("previous index: %w", err)
			}
		} else {
			for q := 0; q < prev.Partitions; q++ { // N changed: filter every old partition
				if err := h.read(ctx, IndexKey(prev.RunID, q), nil, keep); err != nil {
					return nil, fmt.Errorf("previous index: %w", err)
				}
			}
		}
	}
	var keys []string
	if err := h.getJSON(ctx, pl.DeliveredKeysKey, &keys); err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := h.read(ctx, k, nil, keep); err != nil {
			return nil, err
		}
	}
	SortEntries(es)
	return Reduce(es), nil
}

// --- finish ---

func (h *Handler) finish(ctx context.Context, in Input) (Result, error) {
	pl := in.Plan
	if pl == nil {
		return Result{}, &InputError{Msg: "finish needs the plan"}
	}
	keys, err := h.list(ctx, statsPrefix(pl.RunID))
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
	}
	counts, _ := json.Marshal(sum)
	now := time.Now().UTC()
	_, err = h.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(h.cfg.Table), Item: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: StatePK}, "sk": &ddbtypes.AttributeValueMemberS{Value: StateSK},
		"runId":      &ddbtypes.AttributeValueMemberS{Value: pl.RunID},
		"startedAt":  &ddbtypes.AttributeValueMemberS{Value: pl.StartedAt},
		"finishedAt": &ddbtypes.AttributeValueMemberS{Value: events.FormatTime(now)},
		"partitions": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(pl.Partitions)},
		"checkpoint": &ddbtypes.AttributeValueMemberS{Value: events.FormatTime(pl.Window.Until)},
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
		h.cfg.Logger.Info("reconciliation finished", "runId", pl.RunID, "store", sum.Store, "known", sum.Known,
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
	return &Previous{RunID: l.RunID, Partitions: l.Partitions, StartedAt: l.StartedAt}, nil
}

// --- S3 helpers ---

func (h *Handler) put(ctx context.Context, key string, body []byte) error {
	in := &s3.PutObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}
	if h.cfg.KMSKeyID != "" {
		in.ServerSideEncryption = s3types.ServerSideEncryptionAwsKms
		in.SSEKMSKeyId = aws.String(h.cfg.KMSKeyID)
	}
	if _, err := h.s3.PutObject(ctx, in); err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) putJSON(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return h.put(ctx, key, b)
}

func (h *Handler) getJSON(ctx context.Context, key string, v any) error {
	obj, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer obj.Body.Close()
	if err := json.NewDecoder(obj.Body).Decode(v); err != nil {
		return fmt.Errorf("decode s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) read(ctx context.Context, key string, files func(FileRef), fn func(Entry) error) error {
	obj, err := h.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(h.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("get s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	defer obj.Body.Close()
	if err := ReadAll(obj.Body, files, fn); err != nil {
		return fmt.Errorf("s3://%s/%s: %w", h.cfg.Bucket, key, err)
	}
	return nil
}

func (h *Handler) writeIndex(ctx context.Context, key string, es []Entry) error {
	var buf bytes.Buffer
	w := NewWriter(&buf, false)
	for _, e := range es {
		if e.Type == "" {
			continue // dropped
		}
		if err := w.Write(e); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return h.put(ctx, key, buf.Bytes())
}

func (h *Handler) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	var token *string
	for {
		out, err := h.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(h.cfg.Bucket), Prefix: aws.String(prefix), ContinuationToken: token})
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", h.cfg.Bucket, prefix, err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return keys, nil
		}
		token = out.NextContinuationToken
	}
}
