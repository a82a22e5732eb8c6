// Package logging builds the structured JSON loggers every part of the
// pipeline uses, so that each line carries the same keys: executionId, runId,
// jobId and window. Log ids, counts and durations only — never a resource
// body, a name, a birth date or an identifier value.
package logging

import (
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Keys of the run context carried on every line.
const (
	KeyExecutionID = "executionId"
	KeyRunID       = "runId"
	KeyJobID       = "jobId"
	KeyWindow      = "window"
	KeyComponent   = "component"
)

// New returns a JSON logger writing to w at the level named by CDC_LOG_LEVEL
// (debug, info, warn, error; default info), tagged with the component name.
func New(w io.Writer, component string) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToLower(os.Getenv(stackconfig.EnvLogLevel)) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With(KeyComponent, component)
}

// Run returns l with the run context attached; empty values are left out.
func Run(l *slog.Logger, executionID, runID, jobID, window string) *slog.Logger {
	var attrs []any
	for _, kv := range [][2]string{{KeyExecutionID, executionID}, {KeyRunID, runID}, {KeyJobID, jobID}, {KeyWindow, window}} {
		if kv[1] != "" {
			attrs = append(attrs, kv[0], kv[1])
		}
	}
	return l.With(attrs...)
}

// Discard returns a logger that writes nothing (for tests that do not read logs).
func Discard() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
