package stack

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/healthlake-cdc/healthlake-cdc/internal/awsclient"
	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/fhir"
	"github.com/healthlake-cdc/healthlake-cdc/internal/runlock"
)

// Exported is what the HealthLake export jobs wrote in all: their number,
// the non-blank NDJSON lines of their files and those lines' bytes (each
// with its newline), and the lines split by why they were exported.
type Exported struct {
	Jobs, Lines, Bytes int64
	ByCause            ExportedByCause
}

// ExportedByCause splits exported lines by why an export carried them,
// from each line's meta.lastUpdated against the window of the run whose
// job it is. Every line is counted in exactly one field.
type ExportedByCause struct {
	// Window: in the run's window (since, until] — what the run is for.
	Window int64 `json:"window"`
	// Overlap: in (since − overlap, since], re-read to catch late writes.
	Overlap int64 `json:"overlap"`
	// BeyondUntil: written after until, before the export read it; the next
	// window exports it again and publishes it.
	BeyondUntil int64 `json:"beyondUntil"`
	// Replay: lines of a run whose window starts before what committed
	// windows had already covered (after cdcctl replay).
	Replay int64 `json:"replay"`
	// Other: jobs no window run started (the reconciliation's, an
	// operator's) and lines without a readable lastUpdated or older than
	// the export window (a snapshot's).
	Other int64 `json:"other"`
}

// jobRun is the window of the run that started an export job.
type jobRun struct {
	window, exportWindow envelope.Window
	replay               bool
}

// noteJobRun records the window of rec's export job; a run whose window
// starts before the latest committed until replays.
func (s *Stack) noteJobRun(rec runlock.HistoryRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.ExportJobID != "" {
		if s.jobRuns == nil {
			s.jobRuns = map[string]jobRun{}
		}
		if _, ok := s.jobRuns[rec.ExportJobID]; !ok {
			s.jobRuns[rec.ExportJobID] = jobRun{window: rec.Window, exportWindow: rec.ExportWindow,
				replay: rec.Window.Since.Before(s.covered)}
		}
	}
	if rec.Outcome == runlock.OutcomeSucceeded && rec.Window.Until.After(s.covered) {
		s.covered = rec.Window.Until
	}
}

// Exported reads every export job's files back from S3 and counts them.
func (s *Stack) Exported(ctx context.Context) (Exported, error) {
	var e Exported
	client := awsclient.NewS3(s.Config)
	jobs := s.HealthLake.Jobs()
	s.mu.Lock()
	var overlap time.Duration
	for _, r := range s.jobRuns {
		overlap = max(overlap, r.window.Since.Sub(r.exportWindow.Since))
	}
	s.mu.Unlock()
	for i, j := range jobs {
		e.Jobs++
		s.mu.Lock()
		run, ok := s.jobRuns[j.JobID]
		s.mu.Unlock()
		if !ok && overlap > 0 && !j.Since.IsZero() && i+1 < len(jobs) && jobs[i+1].Since.After(j.Since) {
			// A window whose run record the stack could not read: its
			// export window starts at the job's _since and ends where the
			// next window's starts (consecutive windows are contiguous).
			end := jobs[i+1].Since.Add(overlap)
			run, ok = jobRun{window: envelope.Window{Since: j.Since.Add(overlap), Until: end},
				exportWindow: envelope.Window{Since: j.Since, Until: end}}, true
		}

		for _, f := range j.Output {
			u, err := url.Parse(f.URL)
			if err != nil {
				return Exported{}, fmt.Errorf("stack: export file URL of job %s: %w", j.JobID, err)
			}
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(u.Host), Key: aws.String(strings.TrimPrefix(u.Path, "/"))})
			if err != nil {
				return Exported{}, fmt.Errorf("stack: read export file of job %s: %w", j.JobID, err)
			}
			rd := fhir.NewReader(out.Body, fhir.Options{Validation: fhir.ValidateNone, MaxLineBytes: 64 << 20})
			for {
				line, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					_ = out.Body.Close()
					return Exported{}, fmt.Errorf("stack: read export file of job %s: %w", j.JobID, err)
				}
				e.Lines++
				e.Bytes += int64(len(line.Raw)) + 1
				e.ByCause.add(run, ok, line.LastUpdated)
			}
			_ = out.Body.Close()
		}
	}
	return e, nil
}

// add counts one line of a job of run (known: a window run started it).
func (c *ExportedByCause) add(run jobRun, known bool, lastUpdated string) {
	if !known {
		c.Other++
		return
	}
	t, err := envelope.ParseTime(lastUpdated)
	switch {
	case err != nil:
		c.Other++
	case t.After(run.window.Until):
		c.BeyondUntil++
	case run.replay:
		c.Replay++
	case t.After(run.window.Since):
		c.Window++
	case t.After(run.exportWindow.Since) || run.exportWindow.Since.Equal(time.Time{}):
		c.Overlap++
	default:
		c.Other++
	}
}
