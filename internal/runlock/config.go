package runlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/envelope"
	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
)

// Values of CDC_INITIAL_CHECKPOINT besides an RFC 3339 time.
const (
	// InitialSnapshot (the default): the first run exports the whole store
	// (no _since) and publishes every resource, then continues incrementally.
	InitialSnapshot = "snapshot"
	// InitialNow: the first run starts at its own time; nothing written
	// before it is delivered.
	InitialNow = "now"
)

// ConfigFromEnv reads the table and window rules from the environment
// through getenv (os.Getenv in a main): durations in Go syntax ("2m",
// "24h"), the initial checkpoint as "snapshot" (the default), "now" or an
// RFC 3339 time. Unset variables keep the
// defaults; CDC_SAFETY_LAG, CDC_MAX_WINDOW and CDC_OVERLAP accept 0 (no
// lag, no cap, no overlap). The clock, owner checker and logger are left to
// the caller; New checks the lease against CDC_RUN_TIMEOUT.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Table: strings.TrimSpace(getenv(stackconfig.EnvTable))}
	if cfg.Table == "" {
		return Config{}, errors.New("config: " + stackconfig.EnvTable + " is not set: name the DynamoDB table of the RUN record")
	}
	var err error
	dur := func(name string, dst *time.Duration, allowZero bool) {
		v := strings.TrimSpace(getenv(name))
		if v == "" || err != nil {
			return
		}
		d, perr := time.ParseDuration(v)
		switch {
		case perr != nil:
			err = fmt.Errorf("config: %s=%q is not a duration such as 2m or 24h", name, v)
		case d < 0 || (d == 0 && !allowZero):
			err = fmt.Errorf("config: %s=%q must be positive", name, v)
		default:
			*dst = d
		}
	}
	dur(stackconfig.EnvSafetyLag, &cfg.SafetyLag, true)
	cfg.SafetyLagSet = strings.TrimSpace(getenv(stackconfig.EnvSafetyLag)) != ""
	dur(stackconfig.EnvMaxWindow, &cfg.MaxWindow, true)
	dur(stackconfig.EnvOverlap, &cfg.Overlap, true)
	cfg.OverlapSet = strings.TrimSpace(getenv(stackconfig.EnvOverlap)) != ""
	dur(stackconfig.EnvLockLease, &cfg.Lease, false)
	dur(stackconfig.EnvRunTimeout, &cfg.RunTimeout, false)
	dur(stackconfig.EnvHistoryTTL, &cfg.HistoryTTL, false)
	if err != nil {
		return Config{}, err
	}
	cfg.DatastoreID = strings.TrimSpace(getenv(stackconfig.EnvDatastoreID))
	switch v := strings.TrimSpace(getenv(stackconfig.EnvInitialCheckpoint)); v {
	case "", InitialSnapshot:
		// The zero InitialCheckpoint: the first run publishes the whole store.
	case InitialNow:
		cfg.InitialNow = true
	default:
		t, perr := envelope.ParseTime(v)
		if perr != nil {
			return Config{}, fmt.Errorf("config: %s is %q, %q or an RFC 3339 time: %w", stackconfig.EnvInitialCheckpoint, InitialSnapshot, InitialNow, perr)
		}
		cfg.InitialCheckpoint = t
	}
	return cfg, nil
}
