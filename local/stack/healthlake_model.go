package stack

import "time"

// cdc-local's defaults of the HealthLake emulator's export model
// (docs/LOCAL.md): small enough that `cdc-local --once` finishes in seconds,
// large enough that the export is asynchronous and a write is not visible to
// an export the instant it commits. Raise them with the flags for realistic
// runs. Stack tests leave Options' zero values (each model off).
const (
	DefaultExportStartup = 250 * time.Millisecond
	DefaultExportPerMB   = 100 * time.Millisecond
	DefaultVisibilityLag = 250 * time.Millisecond
	// DefaultHistoryLag: eventually consistent history reads leave a new
	// version out this long (the same modelled lag as exports).
	DefaultHistoryLag = 250 * time.Millisecond
)
