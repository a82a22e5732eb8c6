package stack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhirrest"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/pkg/backoff"
)

// State directory layout (--state DIR):
//
//	DIR/checkpoint                 lastRunTime, RFC 3339 with milliseconds
//	DIR/datastore.snapshot.ndjson  the data store's whole state: every version
//	                               of every resource (fhirrest.Datastore.Snapshot)
//
// On start a state directory that holds a snapshot replaces --seed and the
// generated sample: the data store is restored exactly (version ids, bytes,
// lastUpdated, deletions), and the checkpoint is the first window's since,
// so unchanged resources are not exported again and a resource changed
// after the restart gets the version after its last one.
//
// A directory written by an older cdc-local (DIR/datastore/{Type}.ndjson,
// current versions only) is still read, once, as a seed directory: those
// resources come back as new version 1s and are exported again. The next
// Persist writes the snapshot and removes the old files.
const (
	stateCheckpoint = "checkpoint"
	stateSnapshot   = "datastore.snapshot.ndjson"
	// stateLegacyDatastore is the older layout's folder of NDJSON files.
	stateLegacyDatastore = "datastore"
)

// loadState reads the state directory, if any: the checkpoint into
// startCheckpoint, and which snapshot (or older seed folder) to load.
func (s *Stack) loadState() error {
	dir := s.opts.StateDir
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("stack: state: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, stateCheckpoint))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("stack: state: %w", err)
	default:
		t, err := envelope.ParseTime(strings.TrimSpace(string(b)))
		if err != nil {
			return fmt.Errorf("stack: state checkpoint: %w", err)
		}
		s.startCheckpoint = t
	}
	snap := filepath.Join(dir, stateSnapshot)
	switch _, err := os.Stat(snap); {
	case err == nil:
		s.restoreFrom = snap
		return nil
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("stack: state: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, stateLegacyDatastore, "*.ndjson"))
	if len(files) > 0 {
		s.opts.SeedDir = filepath.Join(dir, stateLegacyDatastore)
	}
	return nil
}

// restoreState restores the data store from the state directory's snapshot
// instead of seeding it: nothing is re-stamped, every version keeps its id.
func (s *Stack) restoreState() error {
	ds, ok := s.HealthLake.Datastore(s.Res.DatastoreID)
	if !ok {
		return fmt.Errorf("stack: no data store %s", s.Res.DatastoreID)
	}
	f, err := os.Open(s.restoreFrom)
	if err != nil {
		return fmt.Errorf("stack: state: %w", err)
	}
	defer f.Close()
	if err := ds.Restore(f); err != nil {
		return fmt.Errorf("stack: state %s: %w", s.restoreFrom, err)
	}
	n := ds.Count()
	s.seeded = n
	s.Report.Update(func(r *report.Report) { r.Resources = n })
	s.log.Info("restored data store", "datastore", s.Res.DatastoreID, "resources", n, "from", s.restoreFrom)
	return nil
}

// Restored reports whether the data store was restored from the state
// directory's snapshot rather than seeded.
func (s *Stack) Restored() bool { return s.restoreFrom != "" }

// saveSnapshot is the HealthLake emulator's OnExportFinish hook: with a
// state directory, the data store is saved before an export can complete, so
// every version a window may publish is in the saved state even if the
// process dies before the window's end.
func (s *Stack) saveSnapshot(_ string, snapshot func(io.Writer) error) {
	if s.opts.StateDir == "" {
		return
	}
	var buf bytes.Buffer
	if err := snapshot(&buf); err != nil {
		s.log.Warn("state snapshot not written", "error", err.Error())
		return
	}
	if err := writeAtomic(filepath.Join(s.opts.StateDir, stateSnapshot), buf.Bytes()); err != nil {
		s.log.Warn("state snapshot not written", "error", err.Error())
	}
}

// Persist writes the checkpoint and a snapshot of the data store to the state
// directory (a no-op without one), each atomically. Without a RUN record
// (no window ran) a checkpoint saved earlier is kept, or else the first
// window's since is saved, so that a restart still exports what this run
// would have.
func (s *Stack) Persist(ctx context.Context) error {
	dir := s.opts.StateDir
	if dir == "" {
		return nil
	}
	ds, ok := s.HealthLake.Datastore(s.Res.DatastoreID)
	if !ok {
		return fmt.Errorf("stack: no data store %s", s.Res.DatastoreID)
	}
	// The snapshot first: a checkpoint ahead of the saved data store could
	// let a version id be reused after a restart; the reverse only repeats
	// events with the same ids.
	var buf bytes.Buffer
	if err := ds.Snapshot(&buf); err != nil {
		return fmt.Errorf("stack: state: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, stateSnapshot), buf.Bytes()); err != nil {
		return err
	}
	cpPath := filepath.Join(dir, stateCheckpoint)
	cp, err := s.Checkpoint(ctx)
	if err != nil {
		// No RUN record (or none readable): keep a checkpoint saved earlier,
		// else save where the first window starts.
		if _, serr := os.Stat(cpPath); serr == nil {
			cp = time.Time{}
		} else {
			cp = s.initialCheckpoint()
		}
	}
	if !cp.IsZero() {
		if err := writeAtomic(cpPath, []byte(envelope.FormatTime(cp)+"\n")); err != nil {
			return err
		}
	}
	// The snapshot supersedes an older layout's files.
	legacy := filepath.Join(dir, stateLegacyDatastore)
	files, _ := filepath.Glob(filepath.Join(legacy, "*.ndjson"))
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("stack: state: %w", err)
		}
	}
	_ = os.Remove(legacy) // only when empty
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("stack: state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("stack: state: %w", err)
	}
	return nil
}

// FHIR sends a SigV4-signed request to the HealthLake emulator's FHIR REST
// API: path is relative to /datastore/{id}/r4/ (e.g. "Patient/123"). As a
// well-behaved client of HealthLake, it retries a throttled answer (the
// request-rate quotas: docs/LOCAL.md, "HealthLake limits"; recognised as
// internal/fhirrest's client recognises one) with capped exponential
// backoff, up to fhirAttempts; any other answer is returned.
func (s *Stack) FHIR(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := s.fhirOnce(ctx, method, path, body)
		if err != nil || resp.StatusCode < 400 {
			return resp, err
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("fhir %s %s: read the HTTP %d answer: %w", method, path, resp.StatusCode, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if attempt == fhirAttempts || !fhirrest.ThrottledAnswer(resp.StatusCode, resp.Header, b) {
			return resp, nil
		}
		if err := backoff.Sleep(ctx, backoff.Ceiling(50*time.Millisecond, 2*time.Second, attempt)); err != nil {
			return nil, fmt.Errorf("fhir %s %s: waiting to retry a throttle: %w", method, path, err)
		}
	}
}

// fhirAttempts bounds the tries of one FHIR request, retries included.
const fhirAttempts = 10

// fhirOnce sends one signed request.
func (s *Stack) fhirOnce(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	url := s.Env.URL + "/datastore/" + s.Res.DatastoreID + "/r4/" + strings.TrimPrefix(path, "/")
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("fhir request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/fhir+json")
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: localaws.AccessKeyID, SecretAccessKey: localaws.SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), localaws.ServiceHealthLake, s.Env.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("fhir request: sign: %w", err)
	}
	resp, err := s.httpc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fhir %s %s: %w", method, path, err)
	}
	return resp, nil
}

// PutResource creates or updates a resource through the FHIR API, as a
// client of HealthLake would, and returns the version it got. It returns
// once the clock has passed the version's lastUpdated by more than the
// safety lag, so that a window started afterwards includes it.
func (s *Stack) PutResource(ctx context.Context, resourceType, id string, body []byte) (string, error) {
	resp, err := s.FHIR(ctx, http.MethodPut, resourceType+"/"+id, body)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("fhir PUT %s/%s: HTTP %d", resourceType, id, resp.StatusCode)
	}
	var r struct {
		Meta struct {
			VersionID   string `json:"versionId"`
			LastUpdated string `json:"lastUpdated"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Meta.VersionID == "" {
		return "", fmt.Errorf("fhir PUT %s/%s: no meta.versionId in the response", resourceType, id)
	}
	if t, err := envelope.ParseTime(r.Meta.LastUpdated); err == nil {
		lag := s.opts.SafetyLag
		if lag == 0 {
			lag = time.Millisecond
		}
		if d := time.Until(t.Add(lag + time.Millisecond)); d > 0 {
			select {
			case <-ctx.Done():
				return r.Meta.VersionID, ctx.Err()
			case <-time.After(d):
			}
		}
	}
	return r.Meta.VersionID, nil
}
