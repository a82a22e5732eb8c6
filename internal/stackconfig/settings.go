package stackconfig

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Setting is one value of Config that a deployment may override by name
// (CDK context "settings"), with what it means.
type Setting struct {
	Name, Doc string
	// Default is the value in Default(), as Set accepts it.
	Default string
}

type field struct {
	name, doc string
	ptr       any // *time.Duration, *int, *int64, *float64, *bool or *string
}

func (c *Config) fields() []field {
	fn := func(name string, f *Function) []field {
		return []field{
			{name + "Timeout", "timeout of the " + name + " Lambda", &f.Timeout},
			{name + "MemoryMB", "memory of the " + name + " Lambda, in MB", &f.MemoryMB},
		}
	}
	var out []field
	out = append(out, fn("StartExport", &c.StartExport)...)
	out = append(out, fn("CheckExport", &c.CheckExport)...)
	out = append(out, fn("PrepareChange", &c.PrepareChange)...)
	out = append(out, fn("RunLock", &c.RunLock)...)
	return append(out,
		field{"MaxReceiveCount", "receives of a start or re-check message before it moves to its dead-letter queue", &c.MaxReceiveCount},
		field{"RecheckCap", "longest delay between two export checks (re-check DelaySeconds)", &c.RecheckCap},
		field{"HeartbeatMargin", "added to the longest heartbeat gap to give HeartbeatSeconds", &c.HeartbeatMargin},
		field{"Heartbeat", "HeartbeatSeconds of the export wait; 0 derives it", &c.Heartbeat},
		field{"ExportTimeout", "TimeoutSeconds of the export wait: the longest an export may run", &c.ExportTimeout},
		field{"RunTimeout", "top-level TimeoutSeconds of an execution; the run-lock lease is this plus 1 h", &c.RunTimeout},
		field{"MapMaxConcurrency", "MaxConcurrency of the Distributed Map (concurrent prepare-change invocations)", &c.MapMaxConcurrency},
		field{"PutEventsQuota", "PutEvents quota of the account in the stack's region, requests per second", &c.PutEventsQuota},
		field{"PutEventsShare", "part of the PutEvents quota this pipeline may use (0 to 1)", &c.PutEventsShare},
		field{"DeadlineMargin", "prepare-change stops taking work this long before its timeout", &c.DeadlineMargin},
		field{"BatchMaxFiles", "export files per prepare-change batch", &c.BatchMaxFiles},
		field{"BatchMaxBytes", "bytes per prepare-change batch", &c.BatchMaxBytes},
		field{"ManifestPartBatches", "batches per manifest part", &c.ManifestPartBatches},
		field{"Overlap", "exported and delivered again before each window's start", &c.Overlap},
		field{"MaxWindow", "longest window; 0 means no cap", &c.MaxWindow},
		field{"ArchiveRetentionDays", "default retention of the event bus archive, in days (finite)", &c.ArchiveRetentionDays},
		field{"ReconcileTimeout", "timeout of the reconcile Lambda (below the EXPRESS children's 5 minutes)", &c.Reconcile.Timeout},
		field{"ReconcileMemoryMB", "memory of the reconcile Lambda, in MB (one partition of both indexes)", &c.Reconcile.MemoryMB},
		field{"ReconcileEvery", "how often the reconciliation runs (its schedule; at least 1 h)", &c.ReconcileEvery},
		field{"ReconcilePartitions", "index partitions of the reconciliation (CDC_RECONCILE_PARTITIONS); keep each below about 1 M resources", &c.ReconcilePartitions},
		field{"ReconcileReadRate", "HealthLake reads per second the reconciliation may make (type histories, deletion confirmations), all its invocations together: each of the MapMaxConcurrency compare children takes its share (CDC_HEALTHLAKE_READ_RATE); 0: unpaced", &c.ReconcileReadRate},
		field{"ReconcileHour", "hour of the day (0-23, in ReconcileTimeZone) the reconciliation's schedule starts from", &c.ReconcileHour},
		field{"ReconcileTimeZone", "IANA time zone of ReconcileHour (the schedule's ScheduleExpressionTimezone)", &c.ReconcileTimeZone},
		field{"DeliveredExpiryDays", "lifecycle expiry of delivered/ (what the reconciliation reads back), in days", &c.DeliveredExpiryDays},
		field{"ReconcileExpiryDays", "lifecycle expiry of reconcile/ (the reconciliation's own objects and index), in days", &c.ReconcileExpiryDays},
		field{"WindowDeletes", "true: every window publishes the deletions in it from the types' HealthLake history; false: only the reconciliation publishes deletes", &c.WindowDeletes},
		field{"FastPath", "true deploys the HealthLake Subscriptions fast path: changes published within seconds, the windows skip what it delivered (docs/FASTPATH.md)", &c.FastPath},
		field{"DatastoreKey", "ARN of the data store's customer-managed KMS key (its SseConfiguration); empty: an AWS owned key. Every role that calls HealthLake may then use it through HealthLake (UseDatastoreKey), and with FastPath the notification bus is encrypted with it", &c.DatastoreKey},
		field{"FastPathBusKey", "ARN of the KMS key of the fast path's notification bus: the data store's key when it is a customer-managed one (HealthLake requires the same key); empty: DatastoreKey, or the stack's key. Prefer DatastoreKey, which also lets the roles read the data store", &c.FastPathBusKey},
		field{"FastPathBatchingWindow", "the fast-path queue mapping's MaximumBatchingWindow (0s–30s, whole seconds; default 0s: no window, batches of up to 10 invoked as received): a window adds up to itself to each change's latency — and up to 20 s when traffic is very low — and makes fewer, larger invocations, cheaper for busy stores (docs/COST.md)", &c.FastPathBatchingWindow},
		field{"FastPathPayload", "the fast path Subscription's payload: full-resource or id-only (every version read back with vread)", &c.FastPathPayload},
		field{"FIPSEndpoints", "true: every Lambda calls AWS through the services' FIPS endpoints (AWS_USE_FIPS_ENDPOINT, HealthLake's healthlake-fips host); HealthLake has them only in us-east-1, us-east-2 and us-west-2", &c.FIPSEndpoints},
		field{"ReservedConcurrency", "true reserves concurrency for every Lambda (ReservedConcurrencyTotal: 32 with the defaults); the account's concurrency quota must exceed that by 100", &c.ReservedConcurrency},
	)
}

// Settings lists every setting Set accepts, sorted by name.
func Settings() []Setting {
	c := Default()
	var out []Setting
	for _, f := range c.fields() {
		out = append(out, Setting{Name: f.name, Doc: f.doc, Default: format(f.ptr)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func format(ptr any) string {
	switch p := ptr.(type) {
	case *time.Duration:
		return p.String()
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'f', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	}
	return ""
}

// Set overrides one setting by name: durations as Go durations ("240s",
// "25h") or whole seconds, switches as true or false, time zones as text,
// the rest as numbers. It does not validate the
// whole configuration; call Validate after the last Set.
func (c *Config) Set(name, value string) error {
	value = strings.TrimSpace(value)
	for _, f := range c.fields() {
		if f.name != name {
			continue
		}
		var err error
		switch p := f.ptr.(type) {
		case *time.Duration:
			*p, err = parseDuration(value)
		case *int:
			*p, err = strconv.Atoi(value)
		case *int64:
			*p, err = strconv.ParseInt(value, 10, 64)
		case *float64:
			*p, err = strconv.ParseFloat(value, 64)
		case *bool:
			*p, err = strconv.ParseBool(value)
		case *string:
			*p = value
		}
		if err != nil {
			return fmt.Errorf("setting %s=%q: %w", name, value, err)
		}
		return nil
	}
	if why, ok := removed[name]; ok {
		return fmt.Errorf("setting %q: removed: %s", name, why)
	}
	return fmt.Errorf("setting %q: unknown (known: %s)", name, strings.Join(names(), ", "))
}

// removed names the settings an earlier version took, with why they went.
var removed = map[string]string{
	"FastPathFlushAfter": "the fast path records what it published at every invocation, in the pipeline's table (docs/FASTPATH.md); remove the setting",
}

// Apply sets every name of values, in name order, and validates the result.
func (c *Config) Apply(values map[string]string) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := c.Set(k, values[k]); err != nil {
			return err
		}
	}
	return c.Validate()
}

func names() []string {
	var out []string
	for _, s := range Settings() {
		out = append(out, s.Name)
	}
	return out
}

func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a duration such as 240s or 25h, nor whole seconds")
	}
	return d, nil
}
