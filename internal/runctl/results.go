package runctl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// Opener opens an object for reading; the S3 adapter is in
// internal/runctl/s3objects.
type Opener interface {
	Open(ctx context.Context, bucket, key string) (io.ReadCloser, error)
}

// Summary is prepare-change's output for one child execution: one export
// file, or a batch of files (ItemBatcher) whose Files says how many.
type Summary struct {
	File          string `json:"file"`
	Files         *int64 `json:"files"` // nil: an older single-file output, one file`
	Lines         int64  `json:"lines"`
	Events        int64  `json:"events"`
	OutsideWindow int64  `json:"outsideWindow"`
	Quarantined   int64  `json:"quarantined"`
	ClaimChecked  int64  `json:"claimChecked"`
	Bytes         int64  `json:"bytes"`
	QuarantineKey string `json:"quarantineKey,omitempty"`
	// OverlapSkipped: lines of the overlap the previous window had published.
	OverlapSkipped int64 `json:"overlapSkipped"`
	// FastPathSkipped and FastPathMissed: the Subscriptions fast path's
	// counts (docs/FASTPATH.md), absent with it off.
	FastPathSkipped int64 `json:"fastPathSkipped"`
	FastPathMissed  int64 `json:"fastPathMissed"`
}

// MapResults reads a Distributed Map's ResultWriter output: the manifest
// {"DestinationBucket", "MapRunArn", "ResultFiles": {"FAILED": [{"Key",
// "Size"}], "PENDING": [...], "SUCCEEDED": [...]}} and the result files it
// lists, each a JSON array (or JSON Lines) of child executions
// {"ExecutionArn", "Name", "Status", "Output", ...} whose Output is the
// child's output as a JSON string.
type MapResults struct {
	Objects Opener
}

type resultFile struct {
	Key  string `json:"Key"`
	Size int64  `json:"Size"`
}

type mapManifest struct {
	DestinationBucket string `json:"DestinationBucket"`
	MapRunArn         string `json:"MapRunArn"`
	ResultFiles       struct {
		Failed    []resultFile `json:"FAILED"`
		Pending   []resultFile `json:"PENDING"`
		Succeeded []resultFile `json:"SUCCEEDED"`
	} `json:"ResultFiles"`
}

type childResult struct {
	Name   string          `json:"Name"`
	Status string          `json:"Status"`
	Input  json.RawMessage `json:"Input"`
	Output json.RawMessage `json:"Output"`
}

// files returns how many export files a child execution's Input carried:
// the length of its ItemBatcher "Items", else 1 (one file per child, or an
// Input the result file does not include).
func (ch childResult) files() int64 {
	raw := unquote(ch.Input)
	var in struct {
		Items []json.RawMessage `json:"Items"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &in) != nil || len(in.Items) == 0 {
		return 1
	}
	return int64(len(in.Items))
}

// unquote returns the JSON a ResultWriter field holds as a JSON string (or
// as the value itself), trimmed; nil for null or garbage.
func unquote(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return nil
		}
		return bytes.TrimSpace([]byte(inner))
	}
	return raw
}

// maxManifestBytes bounds the manifest read (it lists files, not results).
const maxManifestBytes = 8 << 20

// Summaries implements ResultReader: Files sums the files of succeeded
// children (an output's "files" when present, else 1 per child), the other
// counts sum their summaries, FailedFiles counts the files of children listed
// as failed or pending (and of succeeded ones whose status says otherwise):
// the length of a batch Input's "Items", else 1 per child.
func (m MapResults) Summaries(ctx context.Context, bucket, key string) (runlock.Counts, error) {
	if m.Objects == nil {
		return runlock.Counts{}, errors.New("map results: no object reader")
	}
	rc, err := m.Objects.Open(ctx, bucket, key)
	if err != nil {
		return runlock.Counts{}, fmt.Errorf("open map results manifest s3://%s/%s: %w", bucket, key, err)
	}
	raw, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	_ = rc.Close()
	if err != nil {
		return runlock.Counts{}, fmt.Errorf("read map results manifest s3://%s/%s: %w", bucket, key, err)
	}
	if len(raw) > maxManifestBytes {
		return runlock.Counts{}, fmt.Errorf("map results manifest s3://%s/%s is larger than %d bytes", bucket, key, maxManifestBytes)
	}
	var man mapManifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return runlock.Counts{}, fmt.Errorf("decode map results manifest s3://%s/%s: %w", bucket, key, err)
	}
	dest := man.DestinationBucket
	if dest == "" {
		dest = bucket
	}
	var c runlock.Counts
	for _, f := range man.ResultFiles.Succeeded {
		err := m.each(ctx, dest, f.Key, func(ch childResult) error {
			if ch.Status != "" && ch.Status != "SUCCEEDED" {
				c.FailedFiles += ch.files()
				return nil
			}
			s, err := decodeSummary(ch.Output)
			if err != nil {
				return fmt.Errorf("child %s: %w", ch.Name, err)
			}
			files := int64(1)
			if s.Files != nil {
				if *s.Files < 0 {
					return fmt.Errorf("child %s: output has %d files", ch.Name, *s.Files)
				}
				files = *s.Files
			}
			c = c.Add(runlock.Counts{Files: files, Lines: s.Lines, Events: s.Events, OutsideWindow: s.OutsideWindow,
				Quarantined: s.Quarantined, ClaimChecked: s.ClaimChecked, Bytes: s.Bytes, OverlapSkipped: s.OverlapSkipped,
				FastPathSkipped: s.FastPathSkipped, FastPathMissed: s.FastPathMissed})
			return nil
		})
		if err != nil {
			return runlock.Counts{}, err
		}
	}
	for _, f := range append(append([]resultFile{}, man.ResultFiles.Failed...), man.ResultFiles.Pending...) {
		err := m.each(ctx, dest, f.Key, func(ch childResult) error { c.FailedFiles += ch.files(); return nil })
		if err != nil {
			return runlock.Counts{}, err
		}
	}
	return c, nil
}

// decodeSummary accepts Output as a JSON string holding the summary (what
// Step Functions writes) or as the summary object itself.
func decodeSummary(raw json.RawMessage) (Summary, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Summary{}, errors.New("no output")
	}
	if raw[0] == '"' {
		var inner string
		if err := json.Unmarshal(raw, &inner); err != nil {
			return Summary{}, fmt.Errorf("output: %w", err)
		}
		raw = []byte(inner)
	}
	var s Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return Summary{}, fmt.Errorf("output is not a prepare-change summary: %w", err)
	}
	return s, nil
}

// each streams the child results of one result file, a JSON array or JSON Lines.
func (m MapResults) each(ctx context.Context, bucket, key string, fn func(childResult) error) error {
	rc, err := m.Objects.Open(ctx, bucket, key)
	if err != nil {
		return fmt.Errorf("open map result file s3://%s/%s: %w", bucket, key, err)
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	first, err := peekNonSpace(br)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read map result file s3://%s/%s: %w", bucket, key, err)
	}
	dec := json.NewDecoder(br)
	if first == '[' {
		if _, err := dec.Token(); err != nil {
			return fmt.Errorf("decode map result file s3://%s/%s: %w", bucket, key, err)
		}
	}
	for dec.More() {
		var ch childResult
		if err := dec.Decode(&ch); err != nil {
			return fmt.Errorf("decode map result file s3://%s/%s: %w", bucket, key, err)
		}
		if err := fn(ch); err != nil {
			return fmt.Errorf("map result file s3://%s/%s: %w", bucket, key, err)
		}
	}
	return nil
}

func peekNonSpace(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\n' && b != '\r' && b != '\t' {
			return b, br.UnreadByte()
		}
	}
}
