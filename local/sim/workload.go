// Package sim runs the whole local stack — the real handlers, the real
// state machine (statemachine/cdc.asl.json through local/asl) and the
// emulators — on simulated time, driven by a workload file, and measures
// what the run delivered: lost latest versions, latency, duplicates,
// throttling, runs and cost (docs/SIMULATION.md).
//
// Run must be called inside a testing/synctest bubble: every goroutine of
// the stack then shares the bubble's fake clock, which jumps ahead whenever
// all of them wait, so a simulated day takes minutes. The stack is started
// in memory (stack.Options.InMemory) so that no goroutine waits on the
// network, which would stop the fake clock.
package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/gen"
	"github.com/healthlake-cdc/healthlake-cdc/local/fakehealthlake"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// Workload is a workload file: what is written to the data store over
// simulated time, what fails when, the replays, and the limits in force.
// Times ("at", "from") are offsets from the simulation's start.
type Workload struct {
	// Name and Description say what the workload stands for.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Duration is the default simulated duration (the writes stop then;
	// the pipeline then drains for at most Drain).
	Duration Duration `json:"duration,omitempty"`
	// Drain is how long windows keep running after Duration so that the
	// last writes can be delivered (default 1 h).
	Drain Duration `json:"drain,omitempty"`
	// Scale multiplies every count and rate (default 1): a workload states
	// its nominal volume and may be run scaled down.
	Scale float64 `json:"scale,omitempty"`
	// Seed fixes the generated resources and every random choice.
	Seed int64 `json:"seed,omitempty"`
	// Limits are the limits and models in force.
	Limits Limits `json:"limits"`
	// Initial is loaded before the first window, stamped in the past.
	Initial Initial `json:"initial"`
	// Streams write at steady rates; Bursts write a number of changes over
	// a short time.
	Streams []Stream `json:"streams,omitempty"`
	Bursts  []Burst  `json:"bursts,omitempty"`
	// Outages make parts of the stack fail for a while.
	Outages []Outage `json:"outages,omitempty"`
	// Replays move the checkpoint back (runlock's replay, as `cdcctl
	// replay` does).
	Replays []Replay `json:"replays,omitempty"`
	// Reconciliations are started on demand at their offsets (as `cdcctl
	// reconcile` does), beside the scheduled ones (Limits.ReconcileEvery).
	Reconciliations []OnDemandReconciliation `json:"reconciliations,omitempty"`
	// Latency changes the per-call latency model (docs/LOCAL.md, "Latency
	// model"): its entries replace the defaults', or "off" turns it off.
	// Absent: the defaults.
	Latency *localaws.LatencyConfig `json:"latency,omitempty"`
	// FastPath turns the Subscriptions fast path on (docs/FASTPATH.md) and
	// sets HealthLake's modelled notifications; absent or off: the export
	// path alone.
	FastPath *FastPath `json:"fastPath,omitempty"`
}

// The payloads of a fast path's Subscription.
const (
	PayloadFullResource = "full-resource"
	PayloadIDOnly       = "id-only"
)

// FastPath is the workload's fast path: the stack's FastPath setting and
// HealthLake's Subscription model (fakehealthlake.SubscriptionOptions). An
// absent duration takes the emulator's default (activation 5 min,
// notification delay 2 s, jitter 1 s, extra delay 1 min); "0s" means none.
type FastPath struct {
	// On deploys the fast path.
	On bool `json:"on"`
	// Payload is the Subscription's payload: full-resource (default) or
	// id-only (every version read back with a vread).
	Payload string `json:"payload,omitempty"`
	// ActivationDelay is how long HealthLake takes to activate the
	// Subscription created as the stack starts ("5-10 minutes"): nothing
	// written before is notified.
	ActivationDelay *Duration `json:"activationDelay,omitempty"`
	// NotificationDelay is the least time from a write to HealthLake's
	// delivery of its notification; NotificationJitter a uniform extra
	// delay in [0, jitter) per delivery, which reorders notifications.
	NotificationDelay  *Duration `json:"notificationDelay,omitempty"`
	NotificationJitter *Duration `json:"notificationJitter,omitempty"`
	// DropRate, DuplicateRate and DelayRate are the probabilities that a
	// notification is never delivered, delivered twice, or ExtraDelay late.
	DropRate      float64   `json:"dropRate,omitempty"`
	DuplicateRate float64   `json:"duplicateRate,omitempty"`
	DelayRate     float64   `json:"delayRate,omitempty"`
	ExtraDelay    *Duration `json:"extraDelay,omitempty"`
	// EventsPerBundle is the most notification events one bundle carries
	// (default 1).
	EventsPerBundle int `json:"eventsPerBundle,omitempty"`
	// BatchingWindow is the stack setting FastPathBatchingWindow, the
	// fast-path queue mapping's batching window (absent: the deployed 1 s;
	// "0s": none, batches of up to 10 as received).
	BatchingWindow *Duration `json:"batchingWindow,omitempty"`
	// LowTrafficWait is how long the mapping, with a window, holds a batch
	// whose first message came after an empty long poll: Lambda's wait at
	// very low traffic, modelled (absent: its longest, 20 s; "0s": not
	// modelled; stack.Options.FastPathLowTrafficWait).
	LowTrafficWait *Duration `json:"lowTrafficWait,omitempty"`
}

// fastPathOn reports whether the workload runs the fast path.
func (w Workload) fastPathOn() bool { return w.FastPath != nil && w.FastPath.On }

// optionDuration maps a workload duration onto the local stack's and the
// emulator's options: absent is 0 (their default), "0s" is negative
// (none).
func optionDuration(p *Duration) time.Duration {
	switch {
	case p == nil:
		return 0
	case *p == 0:
		return -1
	}
	return p.D()
}

// batchingWindow is stack.Options.FastPathBatchingWindow (optionDuration).
func (f FastPath) batchingWindow() time.Duration { return optionDuration(f.BatchingWindow) }

// lowTrafficWait is stack.Options.FastPathLowTrafficWait (optionDuration).
func (f FastPath) lowTrafficWait() time.Duration { return optionDuration(f.LowTrafficWait) }

// subscriptionOptions maps the fast path onto the emulator's model
// (optionDuration).
func (f FastPath) subscriptionOptions(seed int64) fakehealthlake.SubscriptionOptions {
	d := optionDuration
	return fakehealthlake.SubscriptionOptions{
		ActivationDelay: d(f.ActivationDelay), NotificationDelay: d(f.NotificationDelay), NotificationJitter: d(f.NotificationJitter),
		DropRate: f.DropRate, DuplicateRate: f.DuplicateRate, DelayRate: f.DelayRate, ExtraDelay: d(f.ExtraDelay),
		EventsPerBundle: f.EventsPerBundle,
		// The dice are the workload's: a seed gives the same drops.
		Seed: uint64(seed)*0x9e3779b97f4a7c15 + 0x2545f4914f6cdd1d,
	}
}

// maxNotificationDelay is the longest delay the model gives a notification:
// delay + jitter, and the extra delay when some are late (the emulator's
// defaults for absent durations).
func (f FastPath) maxNotificationDelay() time.Duration {
	d := func(p *Duration, def time.Duration) time.Duration {
		if p == nil {
			return def
		}
		return p.D()
	}
	m := d(f.NotificationDelay, 2*time.Second) + d(f.NotificationJitter, time.Second)
	if f.DelayRate > 0 {
		m += d(f.ExtraDelay, time.Minute)
	}
	return m
}

// fastPathTypes are the types the Subscription's topic covers: every type
// the workload writes (its streams' and bursts', and the initial load's);
// nil when the initial load writes every generated type (the stack's
// default, gen.Types()).
func (w Workload) fastPathTypes() []string {
	if w.Initial.Resources > 0 && len(w.Initial.Types) == 0 {
		return nil
	}
	var types []string
	add := func(t string) {
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	for _, t := range w.Initial.Types {
		add(t)
	}
	for _, s := range w.Streams {
		add(s.ResourceType)
	}
	for _, b := range w.Bursts {
		add(b.ResourceType)
	}
	return types
}

// Limits are the limits and models of the simulated stack. Zero values
// take the stack's defaults (docs/LOCAL.md).
type Limits struct {
	// Every is the schedule (default 5 min); SafetyLag the window's safety
	// lag (default 2 min, as deployed).
	Every     Duration  `json:"every,omitempty"`
	SafetyLag *Duration `json:"safetyLag,omitempty"`
	// PutEventsQuota is the account's PutEvents requests per second
	// (default: the deployed configuration's); prepare-change's own rate
	// is derived from it as the CDK app derives it.
	PutEventsQuota float64 `json:"putEventsQuota,omitempty"`
	// ReconcileReadRate is the deployed setting of that name: the HealthLake
	// reads per second of the reconciliation's confirmations, all its
	// children together (default 0: unpaced).
	ReconcileReadRate float64 `json:"reconcileReadRate,omitempty"`
	// HealthLakeQuotas chooses HealthLake's request-rate quotas: "current"
	// (default: a data store created now), "legacy" (one created before
	// 21 August 2023, with its lower rates) or "off" (docs/LOCAL.md).
	HealthLakeQuotas string `json:"healthLakeQuotas,omitempty"`
	// ExportStartup, ExportPerMB and VisibilityLag are the HealthLake
	// export model: duration start-up + per MiB, and write-to-export lag.
	ExportStartup Duration `json:"exportStartup,omitempty"`
	ExportPerMB   Duration `json:"exportPerMB,omitempty"`
	VisibilityLag Duration `json:"visibilityLag,omitempty"`
	// ResourcesPerFile splits export files (default 5000).
	ResourcesPerFile int `json:"resourcesPerFile,omitempty"`
	// RecheckDelay is check-export's re-check delay (default 1 s locally).
	RecheckDelay Duration `json:"recheckDelay,omitempty"`
	// ReconcileEvery is the reconciliation's schedule (default the deployed
	// one, daily; "off" starts none).
	ReconcileEvery Schedule `json:"reconcileEvery,omitempty"`
	// HistoryLag is how long a new version stays out of HealthLake's
	// eventually consistent history and search reads (the pipeline reads
	// with strong consistency); HistoryOptOut the types opted out of
	// history (docs/LOCAL.md).
	HistoryLag    Duration `json:"historyLag,omitempty"`
	HistoryOptOut []string `json:"historyOptOut,omitempty"`
}

// Initial is a load written before the simulation starts: Resources
// generated resources stamped evenly over the SpreadOver before the start
// (default 1 h, which the first window covers).
type Initial struct {
	Resources  int      `json:"resources,omitempty"`
	SpreadOver Duration `json:"spreadOver,omitempty"`
	// Types restricts the generated types (default: all of gen.Types()).
	Types []string `json:"types,omitempty"`
}

// Stream writes changes of one resource type at steady daily rates
// between From and Until (default: the whole duration).
type Stream struct {
	ResourceType  string   `json:"resourceType"`
	CreatesPerDay float64  `json:"createsPerDay,omitempty"`
	UpdatesPerDay float64  `json:"updatesPerDay,omitempty"`
	DeletesPerDay float64  `json:"deletesPerDay,omitempty"`
	From          Duration `json:"from,omitempty"`
	Until         Duration `json:"until,omitempty"`
}

// Burst writes Creates, Updates and Deletes of one type evenly over Over
// (default 1 s) from At.
type Burst struct {
	ResourceType string   `json:"resourceType"`
	At           Duration `json:"at"`
	Over         Duration `json:"over,omitempty"`
	Creates      int      `json:"creates,omitempty"`
	Updates      int      `json:"updates,omitempty"`
	Deletes      int      `json:"deletes,omitempty"`
	// Erases are `$erase` jobs of random live resources (hard deletes, no
	// history left); BulkDelete ("soft" or "hard") starts one
	// `$bulk-delete` of every live resource of the type at At.
	Erases     int    `json:"erases,omitempty"`
	BulkDelete string `json:"bulkDelete,omitempty"`
}

// The BulkDelete kinds of a Burst.
const (
	BulkDeleteSoft = "soft"
	BulkDeleteHard = "hard"
)

// Outage kinds.
const (
	// OutageHealthLake answers every HealthLake API call 503 (writes the
	// workload makes through the data store's Go API go on).
	OutageHealthLake = "healthLakeUnavailable"
	// OutagePutEvents throttles a Fraction (default all) of PutEvents
	// calls as a whole, on top of the quota.
	OutagePutEvents = "putEventsThrottling"
	// OutageLambdaCrash makes a Rate (default all) of the invocations of
	// Function (default every function) crash, Before the handler runs or
	// After its side effects (default before).
	OutageLambdaCrash = "lambdaCrash"
	// OutageS3BodyCuts ends a Fraction (default all) of the export files'
	// GetObject bodies after a uniformly drawn share of their bytes: the
	// connection closes mid-body (localaws.BodyCut).
	OutageS3BodyCuts = "s3BodyCuts"
)

// Outage makes one part fail from From for For.
type Outage struct {
	Kind     string   `json:"kind"`
	From     Duration `json:"from"`
	For      Duration `json:"for"`
	Fraction float64  `json:"fraction,omitempty"`
	Function string   `json:"function,omitempty"`
	Rate     float64  `json:"rate,omitempty"`
	When     string   `json:"when,omitempty"`
}

// Replay moves the checkpoint back by Back at At (retried every 10 s while
// a run holds the lock).
type Replay struct {
	At   Duration `json:"at"`
	Back Duration `json:"back"`
}

// OnDemandReconciliation starts one reconciliation at At (the stack's
// Reconcile: it waits for a run holding the lock, docs/RECONCILE.md).
type OnDemandReconciliation struct {
	At Duration `json:"at"`
}

// Schedule is a period written as a Go duration string, or "off" (stored
// as a negative duration).
type Schedule Duration

// scheduleOff is how "off" is stored.
const scheduleOff = Schedule(-1)

// Off reports whether the schedule is turned off.
func (s Schedule) Off() bool { return s < 0 }

// MarshalJSON writes "off" or the duration.
func (s Schedule) MarshalJSON() ([]byte, error) {
	if s.Off() {
		return json.Marshal("off")
	}
	return Duration(s).MarshalJSON()
}

// UnmarshalJSON reads "off" or a positive Go duration string.
func (s *Schedule) UnmarshalJSON(b []byte) error {
	if string(b) == `"off"` {
		*s = scheduleOff
		return nil
	}
	var d Duration
	if err := d.UnmarshalJSON(b); err != nil {
		return fmt.Errorf("%w (or \"off\")", err)
	}
	if d <= 0 {
		return fmt.Errorf("schedule %s: want a positive duration or \"off\"", d.D())
	}
	*s = Schedule(d)
	return nil
}

// Duration is a time.Duration written as a Go duration string ("90s",
// "6h", "720h").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"90s\" or \"6h\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// Load reads and checks a workload file.
func Load(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("workload: %w", err)
	}
	w, err := Parse(b)
	if err != nil {
		return Workload{}, fmt.Errorf("workload %s: %w", path, err)
	}
	return w, nil
}

// Parse decodes and checks a workload; unknown fields are errors.
func Parse(b []byte) (Workload, error) {
	var w Workload
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Workload{}, fmt.Errorf("decode: %w", err)
	}
	if err := w.Check(); err != nil {
		return Workload{}, err
	}
	return w, nil
}

// Check reports the first thing wrong with the workload.
func (w Workload) Check() error {
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if w.Scale < 0 {
		bad("scale %v is negative", w.Scale)
	}
	if w.Duration < 0 || w.Drain < 0 {
		bad("duration and drain must not be negative")
	}
	l := w.Limits
	if l.Every < 0 || l.ExportStartup < 0 || l.ExportPerMB < 0 || l.VisibilityLag < 0 || l.RecheckDelay < 0 ||
		(l.SafetyLag != nil && *l.SafetyLag < 0) {
		bad("limits: durations must not be negative")
	}
	if l.PutEventsQuota < 0 || l.ResourcesPerFile < 0 || l.ReconcileReadRate < 0 {
		bad("limits: putEventsQuota, resourcesPerFile and reconcileReadRate must not be negative")
	}
	if err := stack.ValidHealthLakeQuotas(l.HealthLakeQuotas); err != nil {
		bad("limits: %v", err)
	}
	if w.Initial.Resources < 0 || w.Initial.SpreadOver < 0 {
		bad("initial: resources and spreadOver must not be negative")
	}
	for _, t := range w.Initial.Types {
		if !gen.Supported(t) {
			bad("initial: resource type %q is not one the generator writes (%s)", t, strings.Join(gen.Types(), ", "))
		}
	}
	for i, s := range w.Streams {
		if !gen.Supported(s.ResourceType) {
			bad("streams[%d]: resource type %q is not one the generator writes (%s)", i, s.ResourceType, strings.Join(gen.Types(), ", "))
		}
		if s.CreatesPerDay < 0 || s.UpdatesPerDay < 0 || s.DeletesPerDay < 0 || s.From < 0 || s.Until < 0 {
			bad("streams[%d]: rates and times must not be negative", i)
		}
		if s.Until > 0 && s.Until <= s.From {
			bad("streams[%d]: until %v is not after from %v", i, s.Until.D(), s.From.D())
		}
	}
	for i, b := range w.Bursts {
		if !gen.Supported(b.ResourceType) {
			bad("bursts[%d]: resource type %q is not one the generator writes", i, b.ResourceType)
		}
		if b.At < 0 || b.Over < 0 || b.Creates < 0 || b.Updates < 0 || b.Deletes < 0 {
			bad("bursts[%d]: counts and times must not be negative", i)
		}
		if b.Erases < 0 || (b.BulkDelete != "" && b.BulkDelete != BulkDeleteSoft && b.BulkDelete != BulkDeleteHard) {
			bad("bursts[%d]: erases must not be negative; bulkDelete is soft or hard", i)
		}
	}
	for i, o := range w.Outages {
		switch o.Kind {
		case OutageHealthLake, OutagePutEvents, OutageS3BodyCuts:
		case OutageLambdaCrash:
			if o.When != "" && o.When != "before" && o.When != "after" {
				bad("outages[%d]: when %q is neither before nor after", i, o.When)
			}
		default:
			bad("outages[%d]: unknown kind %q (want %s, %s, %s or %s)", i, o.Kind, OutageHealthLake, OutagePutEvents, OutageLambdaCrash, OutageS3BodyCuts)
		}
		if o.From < 0 || o.For <= 0 {
			bad("outages[%d]: from must not be negative and for must be positive", i)
		}
		if o.Fraction < 0 || o.Fraction > 1 || o.Rate < 0 || o.Rate > 1 {
			bad("outages[%d]: fraction and rate are probabilities in [0, 1]", i)
		}
	}
	for i, r := range w.Replays {
		if r.At < 0 || r.Back <= 0 {
			bad("replays[%d]: at must not be negative and back must be positive", i)
		}
	}
	for i, r := range w.Reconciliations {
		if r.At < 0 {
			bad("reconciliations[%d]: at must not be negative", i)
		}
	}
	if f := w.FastPath; f != nil {
		if f.Payload != "" && f.Payload != PayloadFullResource && f.Payload != PayloadIDOnly {
			bad("fastPath: payload %q: want %s or %s", f.Payload, PayloadFullResource, PayloadIDOnly)
		}
		for _, p := range []*Duration{f.ActivationDelay, f.NotificationDelay, f.NotificationJitter, f.ExtraDelay} {
			if p != nil && *p < 0 {
				bad("fastPath: durations must not be negative")
				break
			}
		}
		for _, r := range []float64{f.DropRate, f.DuplicateRate, f.DelayRate} {
			if r < 0 || r > 1 {
				bad("fastPath: dropRate, duplicateRate and delayRate are probabilities in [0, 1]")
				break
			}
		}
		if f.EventsPerBundle < 0 {
			bad("fastPath: eventsPerBundle must not be negative")
		}
	}
	if w.Latency != nil {
		if err := w.Latency.Check(); err != nil {
			bad("latency: %v", err)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// scale returns the workload's scale (1 when unset).
func (w Workload) scale() float64 {
	if w.Scale == 0 {
		return 1
	}
	return w.Scale
}

// ChangesPerDay is the workload's nominal streamed changes per day (before
// scaling).
func (w Workload) ChangesPerDay() float64 {
	var n float64
	for _, s := range w.Streams {
		n += s.CreatesPerDay + s.UpdatesPerDay + s.DeletesPerDay
	}
	return n
}
