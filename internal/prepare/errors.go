package prepare

import (
	"fmt"
	"time"
)

// Errors Handle returns for Step Functions to retry the batch. Their Go type
// names are the Lambda errorType the Map child's Retry matches (the Go
// runtime reports the type name), so they break the Error suffix rule on
// purpose. Messages name files, line numbers and counts, never resources.

// BatchDeadlineExceeded: the invocation reached its internal deadline (the
// context's deadline less Config.DeadlineMargin) and stopped taking lines.
// What it published is harmless on retry: the same eventIds.
type BatchDeadlineExceeded struct {
	Files, Of     int   // files begun, of the batch's
	Lines, Events int64 // lines read and events emitted before stopping
	Margin        time.Duration
}

// Error implements error.
func (e *BatchDeadlineExceeded) Error() string {
	return fmt.Sprintf("prepare-change: stopped %v before the invocation's deadline, in file %d of %d after %d lines (%d events, which a retry publishes again with the same eventIds)",
		e.Margin, e.Files, e.Of, e.Lines, e.Events)
}

// PublishFailed: writing the batch's output failed for good: PutEvents
// entries or calls whose retries were spent, a claim-check or a quarantine
// object.
type PublishFailed struct{ Err error }

// Error implements error.
func (e *PublishFailed) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *PublishFailed) Unwrap() error { return e.Err }

// ReadFailed: an export file could not be read from S3.
type ReadFailed struct{ Err error }

// Error implements error.
func (e *ReadFailed) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *ReadFailed) Unwrap() error { return e.Err }
