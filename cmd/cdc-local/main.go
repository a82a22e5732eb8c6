// Command cdc-local runs the whole healthlake-cdc pipeline in one process on
// one port — the embedded default. With no flags it starts every emulator
// on 127.0.0.1:4566, loads a generated sample data store, runs a first
// window at once, prints its events to stdout, keeps running every 5
// minutes and prints (to stderr) how to change a resource and watch its
// event arrive.
//
//	cdc-local [--addr 127.0.0.1:4566] [--seed DIR] [--every 5m] [--once]
//	          [--sink stdout|file:PATH|http(s)://URL] [--safety-lag 0]
//	          [--fault-rate P --fault-seed N] [--report FILE] [--state DIR]
//	          [--latency FILE|off]
//	cdc-local --simulate DURATION --workload FILE [--report FILE] [--scale S] [--latency FILE|off] [-v]
//	cdc-local fhir METHOD PATH [--endpoint URL] < body
//
// The second form sends one SigV4-signed FHIR request to a running
// cdc-local (or any HealthLake endpoint), e.g.
// `cdc-local fhir PUT Patient/123 < patient.json`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/healthlake-cdc/healthlake-cdc/internal/stackconfig"
	"github.com/healthlake-cdc/healthlake-cdc/local/localaws"
	"github.com/healthlake-cdc/healthlake-cdc/local/report"
	"github.com/healthlake-cdc/healthlake-cdc/local/sink"
	"github.com/healthlake-cdc/healthlake-cdc/local/stack"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	addr  string
	seed  string
	every time.Duration
	// reconcileEvery is the reconciliation's schedule (0: daily, as deployed;
	// negative: none).
	reconcileEvery time.Duration
	once           bool
	sink           string
	safetyLag      time.Duration
	faultRate      float64
	faultSeed      uint64
	report         string
	state          string
	sample         int
	exportWait     time.Duration
	// The HealthLake emulator's export model (docs/LOCAL.md).
	exportStartup, exportPerMB, visibilityLag time.Duration
	historyLag                                time.Duration
	verbose                                   bool
	// fastPath and fastPathPayload: the Subscriptions fast path
	// (docs/FASTPATH.md).
	fastPath        bool
	fastPathPayload string
	// iam is "on" (every principal's statements enforced) or "off".
	iam string
	// datastoreKey is --datastore-key: the data store on a customer-managed
	// KMS key (stack.Options.DatastoreKey).
	datastoreKey string
	// healthLakeQuotas is --healthlake-quotas: current, legacy or off
	// (stack.Options.HealthLakeQuotas).
	healthLakeQuotas string
	// simulate, workload and scale: run a simulation instead (local/sim).
	simulate time.Duration
	workload string
	scale    float64
	// latency is --latency: "" (the default model), "off" or a file;
	// latencyModel the model it gives (docs/LOCAL.md, "Latency model").
	latency      string
	latencyModel localaws.LatencyConfig
	// set names the flags given on the command line (flag.FlagSet.Visit).
	set map[string]bool
}

// newFlagSet returns cdc-local's flag set, parsing into c.
func newFlagSet(c *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cdc-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", stack.DefaultAddr, "listen address of the one local AWS endpoint")
	fs.StringVar(&c.seed, "seed", "", "load every *.ndjson file in `DIR` (one resource per line, ids kept) instead of a generated sample")
	fs.DurationVar(&c.every, "every", stack.DefaultEvery, "schedule: start a window this often")
	fs.DurationVar(&c.reconcileEvery, "reconcile-every", 0, "schedule of the reconciliation (0: the deployed one, daily; negative: none); cdcctl reconcile starts one at any time")
	fs.BoolVar(&c.once, "once", false, "seed, run one window, exit 0 if it succeeded and 1 if it failed")
	fs.StringVar(&c.sink, "sink", "stdout", "where events go: stdout, file:PATH or an http(s):// URL (one line or one POST per event)")
	fs.DurationVar(&c.safetyLag, "safety-lag", 0, "window safety lag (AWS default 2m; 0 locally)")
	fs.Float64Var(&c.faultRate, "fault-rate", 0, "probability `P` scaling every injected fault (0 = none)")
	fs.Uint64Var(&c.faultSeed, "fault-seed", 1, "seed `N` of the fault plan")
	fs.StringVar(&c.report, "report", "", "JSON report `FILE` rewritten after every window")
	fs.StringVar(&c.state, "state", "", "persist the data store and the checkpoint in `DIR` across restarts")
	fs.IntVar(&c.sample, "sample", stack.DefaultSampleSize, "number of generated resources when --seed is not given")
	fs.DurationVar(&c.exportWait, "export-delay", 0, "how long an export job stays SUBMITTED, each cancel step, and IN_PROGRESS when the duration model is off (0s startup and per-MB)")
	fs.DurationVar(&c.exportStartup, "export-startup", stack.DefaultExportStartup, "HealthLake model: how long an export runs before its first byte")
	fs.DurationVar(&c.exportPerMB, "export-per-mb", stack.DefaultExportPerMB, "HealthLake model: export time per MiB exported")
	fs.DurationVar(&c.visibilityLag, "export-visibility-lag", stack.DefaultVisibilityLag, "HealthLake model: how long a write takes to become visible to exports")
	fs.DurationVar(&c.historyLag, "history-lag", stack.DefaultHistoryLag, "HealthLake model: how long a write stays out of eventually consistent history and search reads")
	fs.BoolVar(&c.fastPath, "fast-path", false, "run the Subscriptions fast path: a HealthLake Subscription (active after HealthLake's modelled 5 minutes) publishes each change within seconds; the windows skip what it delivered (docs/FASTPATH.md)")
	fs.StringVar(&c.fastPathPayload, "fast-path-payload", "full-resource", "the fast path Subscription's payload: full-resource or id-only (read back with vread)")
	fs.StringVar(&c.iam, "iam", "on", "IAM: on enforces every principal's statements (internal/iampolicy); off allows every call and only counts what would be denied")
	fs.StringVar(&c.datastoreKey, "datastore-key", "", "the data store is encrypted with this customer-managed KMS key `ARN` (the DatastoreKey setting): every HealthLake call also needs the caller's use of the key through HealthLake; empty: an AWS owned key")
	fs.StringVar(&c.healthLakeQuotas, "healthlake-quotas", stack.QuotasCurrent, "HealthLake request-rate quotas: current (a data store created now), legacy (one created before 21 August 2023: 100 reads a second) or off (docs/LOCAL.md)")
	fs.BoolVar(&c.verbose, "v", false, "log the pipeline's steps (ids, counts, durations) to stderr")
	fs.DurationVar(&c.simulate, "simulate", 0, "run `DURATION` of --workload on simulated time and exit with the report (docs/SIMULATION.md)")
	fs.StringVar(&c.workload, "workload", "", "workload `FILE` of --simulate (testdata/workloads/*.json)")
	fs.Float64Var(&c.scale, "scale", 0, "--simulate: scale the workload's counts and rates (default: the workload's)")
	fs.StringVar(&c.latency, "latency", "", "per-call latency model: `FILE` (JSON, merged over the defaults) or off; default: the AWS-derived defaults (docs/LOCAL.md)")
	return fs
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := newFlagSet(&c, stderr)
	// -h prints the flags to stdout, a parse error how to see them (run).
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.every <= 0 {
		return c, errors.New("--every must be positive")
	}
	if c.safetyLag < 0 {
		return c, errors.New("--safety-lag must not be negative")
	}
	if c.faultRate < 0 || c.faultRate > 1 {
		return c, errors.New("--fault-rate must be a probability in [0, 1]")
	}
	if c.sample < 0 {
		return c, errors.New("--sample must not be negative")
	}
	if c.exportStartup < 0 || c.exportPerMB < 0 || c.visibilityLag < 0 || c.historyLag < 0 {
		return c, errors.New("--export-startup, --export-per-mb and --export-visibility-lag must not be negative")
	}
	if c.fastPathPayload != "full-resource" && c.fastPathPayload != "id-only" {
		return c, fmt.Errorf("--fast-path-payload must be full-resource or id-only (the payloads HealthLake documents), not %q", c.fastPathPayload)
	}
	if c.iam != "on" && c.iam != "off" {
		return c, fmt.Errorf("--iam must be on or off, not %q", c.iam)
	}
	if c.datastoreKey != "" {
		set := stackconfig.Default()
		set.DatastoreKey = c.datastoreKey
		if err := set.Validate(); err != nil {
			return c, fmt.Errorf("--datastore-key: %w", err)
		}
	}
	if err := stack.ValidHealthLakeQuotas(c.healthLakeQuotas); err != nil {
		return c, fmt.Errorf("--healthlake-quotas: %w", err)
	}
	if c.simulate < 0 || c.scale < 0 {
		return c, errors.New("--simulate and --scale must not be negative")
	}
	if c.workload != "" && c.simulate == 0 {
		return c, errors.New("--workload needs --simulate DURATION")
	}
	var err error
	if c.latencyModel, err = localaws.LoadLatency(c.latency); err != nil {
		return c, fmt.Errorf("--latency: %w", err)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fhir" {
		return runFHIR(ctx, args[1:], stdin, stdout, stderr)
	}
	c, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return exitOK
		}
		fmt.Fprintln(stderr, "cdc-local:", err)
		fmt.Fprintln(stderr, "run `cdc-local -h` for the flags")
		return exitUsage
	}
	if err := checkModeFlags(c); err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitUsage
	}
	if c.simulate > 0 {
		return runSimulate(ctx, c, stdout, stderr)
	}
	out, err := sink.Parse(c.sink, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitUsage
	}
	defer out.Close()

	level := slog.LevelWarn
	if c.verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sample := c.sample
	if sample == 0 {
		sample = -1
	}
	st, err := stack.Start(ctx, stack.Options{
		Addr: c.addr, SeedDir: c.seed, SampleSize: sample, Every: c.every, SafetyLag: c.safetyLag,
		Sink: out, FaultRate: c.faultRate, FaultSeed: c.faultSeed, ReportPath: c.report, StateDir: c.state,
		ExportDelay: c.exportWait, Logger: logger,
		ExportStartup: c.exportStartup, ExportPerMB: c.exportPerMB, VisibilityLag: c.visibilityLag, HistoryLag: c.historyLag,
		IAMOff: c.iam == "off", ReconcileEvery: c.reconcileEvery, Latency: &c.latencyModel,
		FastPath: c.fastPath, FastPathPayload: c.fastPathPayload, HealthLakeQuotas: c.healthLakeQuotas,
		DatastoreKey: c.datastoreKey,
	})
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitFailed
	}
	defer st.Close()

	if c.once {
		w, err := st.RunOnce(ctx)
		if err != nil {
			fmt.Fprintln(stderr, "cdc-local:", err)
			return exitFailed
		}
		printWindow(stderr, w)
		lambdaSeconds(stderr, st, true)
		if err := st.Persist(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(stderr, "cdc-local:", err)
		}
		// The run record decides, as in the line above and `cdcctl status`.
		if w.Outcome == report.OutcomeFailed || w.Outcome == report.OutcomeSkipped {
			return exitFailed
		}
		return exitOK
	}

	banner(stderr, st, c)
	// Windows and reconciliations started by hand (cdcctl run, cdcctl
	// reconcile, aws stepfunctions start-execution) are reported here too.
	var printMu sync.Mutex
	err = st.RunWith(ctx, stack.RunOptions{
		OnWindow: func(w report.Run, err error) {
			printMu.Lock()
			defer printMu.Unlock()
			if err != nil {
				fmt.Fprintln(stderr, "cdc-local: window:", err)
				return
			}
			printWindow(stderr, w)
			lambdaSeconds(stderr, st, false)
		},
		OnReconciliation: func(r stack.Reconciliation, err error) {
			printMu.Lock()
			defer printMu.Unlock()
			printReconciliation(stderr, r, err)
		},
	})
	if perr := st.Persist(context.WithoutCancel(ctx)); perr != nil {
		fmt.Fprintln(stderr, "cdc-local:", perr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "cdc-local:", err)
		return exitFailed
	}
	fmt.Fprintln(stderr, "cdc-local: stopped")
	return exitOK
}

// usage prints how to call cdc-local and every flag (`cdc-local -h`).
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: cdc-local [flags]                                  the pipeline on one local endpoint (docs/LOCAL.md)")
	fmt.Fprintln(w, "       cdc-local --simulate D --workload FILE [--report FILE] [--scale S] [--latency FILE|off] [-v]")
	fmt.Fprintln(w, "                                                          simulated time (docs/SIMULATION.md)")
	fmt.Fprintln(w, "       cdc-local fhir GET|PUT|POST|DELETE PATH [--endpoint URL] < body")
	fmt.Fprintln(w)
	var c config
	fs := newFlagSet(&c, w)
	fs.PrintDefaults()
}

// simulateRefuses says, for every flag --simulate does not honour, what
// sets the same thing in a simulation. A flag not listed here and not in
// simulateHonours is refused too (with a generic reason).
var simulateRefuses = map[string]string{
	"fault-rate":            "a simulation injects the workload's outages instead (healthLakeUnavailable, putEventsThrottling, lambdaCrash)",
	"fault-seed":            "a simulation injects the workload's outages instead (healthLakeUnavailable, putEventsThrottling, lambdaCrash; the workload's seed)",
	"addr":                  "a simulation serves nothing on the network (an in-memory endpoint)",
	"seed":                  "the workload's initial load is the data store (initial.resources)",
	"sample":                "the workload's initial load is the data store (initial.resources)",
	"every":                 "the schedule is the workload's limits.every",
	"reconcile-every":       "the reconciliation's schedule is the workload's limits.reconcileEvery (and reconciliations for ones on demand)",
	"once":                  "a simulation runs the --simulate duration",
	"sink":                  "a simulation observes the events itself; the report counts them",
	"safety-lag":            "the safety lag is the workload's limits.safetyLag",
	"state":                 "a simulation starts empty and keeps nothing",
	"export-delay":          "the export model is the workload's limits.exportStartup and limits.exportPerMB",
	"export-startup":        "the export model is the workload's limits.exportStartup",
	"export-per-mb":         "the export model is the workload's limits.exportPerMB",
	"export-visibility-lag": "the visibility lag is the workload's limits.visibilityLag",
	"history-lag":           "the history lag is the workload's limits.historyLag",
	"iam":                   "a simulation always enforces every principal's IAM statements",
	"fast-path":             "the fast path is the workload's fastPath section (fastPath.on; testdata/workloads/fastpath.json)",
	"fast-path-payload":     "the fast path's payload is the workload's fastPath.payload",
	"datastore-key":         "a simulation's data store is on an AWS owned key",
}

// simulateHonours are the flags --simulate acts on.
var simulateHonours = map[string]bool{"simulate": true, "workload": true, "report": true, "scale": true, "latency": true, "v": true}

// onceIgnores are the flags --once has no use for: it runs one window at
// once and no schedule.
var onceIgnores = map[string]string{
	"every":           "--once runs one window now and no schedule",
	"reconcile-every": "--once runs one window now and no reconciliation (cdcctl reconcile starts one against a running cdc-local)",
}

// checkModeFlags refuses a flag given on the command line that the chosen
// mode would silently ignore.
func checkModeFlags(c config) error {
	var names []string
	for n := range c.set {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		switch {
		case c.simulate > 0 && !simulateHonours[n]:
			why := simulateRefuses[n]
			if why == "" {
				why = "it configures the local endpoint, not the simulation"
			}
			return fmt.Errorf("--%s is not honoured by --simulate: %s; see docs/SIMULATION.md, \"Workload files\"", n, why)
		case c.simulate == 0 && n == "scale":
			return errors.New("--scale needs --simulate DURATION (it scales the workload)")
		case c.simulate == 0 && c.once && onceIgnores[n] != "":
			return fmt.Errorf("--%s is not honoured by --once: %s", n, onceIgnores[n])
		}
	}
	return nil
}

// lambdaSeconds records the functions' run durations in the report (and
// rewrites it) and prints a warning for every function whose longest run
// exceeded 80 % of its timeout; with all, also the slowest functions.
func lambdaSeconds(w io.Writer, st *stack.Stack, all bool) {
	d := st.Lambdas.Durations()
	st.Report.SetLambdaSeconds(d)
	if err := st.Report.Write(time.Now()); err != nil {
		fmt.Fprintln(w, "cdc-local:", err)
	}
	if all {
		for _, line := range report.Slowest(d, 5) {
			fmt.Fprintln(w, "cdc-local: lambda", line)
		}
	}
	for _, line := range report.TimeoutWarnings(d, report.TimeoutShare) {
		fmt.Fprintln(w, "cdc-local: WARNING lambda", line)
	}
}

func printWindow(w io.Writer, win report.Run) {
	span := ""
	if win.Window != nil {
		span = " (" + win.Window.Since + ", " + win.Window.Until + "]"
	}
	took := win.FinishedAt.Sub(win.StartedAt).Round(time.Millisecond)
	events := fmt.Sprintf("%d events", win.Events)
	if win.Deletes > 0 {
		events += fmt.Sprintf(" (%d deletes)", win.Deletes)
	}
	line := fmt.Sprintf("cdc-local: window %s %s%s: %s in %s", win.RunID, win.Outcome, span, events, took)
	switch {
	case win.Note != "" && win.Error != "":
		line += " — " + win.Note + ": " + win.Error
	case win.Note != "":
		line += " — " + win.Note
	case win.Error != "":
		line += " — " + win.Error
	}
	fmt.Fprintln(w, line)
}

// printReconciliation prints how a reconciliation ended, with the counts
// `cdcctl status` and `cdcctl reconcile status` show for it.
func printReconciliation(w io.Writer, r stack.Reconciliation, err error) {
	if err != nil {
		fmt.Fprintln(w, "cdc-local: reconciliation:", err)
		return
	}
	took := r.Duration().Round(time.Millisecond)
	switch {
	case r.Finished():
		fmt.Fprintf(w, "cdc-local: reconciliation %s SUCCEEDED in %s: %s\n", r.RunID, took, r.Last.Counts.Summary())
	case r.Skipped:
		fmt.Fprintf(w, "cdc-local: reconciliation %s SKIPPED in %s: nothing compared (no checkpoint yet); the deletes and repairs wait for the next one\n", r.RunID, took)
	default:
		fmt.Fprintf(w, "cdc-local: reconciliation %s %s in %s — %s; nothing moved RECONCILE/STATE\n", r.RunID, r.Status, took, r.Error)
	}
}

func banner(w io.Writer, st *stack.Stack, c config) {
	res := st.Res
	url := st.Env.URL
	fhirBase := url + "/datastore/" + res.DatastoreID + "/r4"
	src := "a generated sample"
	if c.seed != "" {
		src = c.seed
	}
	verb := "seeded"
	if st.Restored() {
		verb, src = "restored", "the state in "+c.state+" (every version as saved)"
	}
	fmt.Fprintf(w, "cdc-local: healthlake-cdc on %s — S3, SQS, DynamoDB, EventBridge, Step Functions, HealthLake (FHIR R4 at %s/)\n", url, fhirBase)
	fmt.Fprintf(w, "cdc-local: data store %q %s with %d resources from %s; first window now, then every %s\n", res.DatastoreID, verb, st.Seeded(), src, c.every)
	if n := st.SeedSkipped(); n > 0 {
		fmt.Fprintf(w, "cdc-local: %d seed lines were not resources and were skipped (run with -v to see file, line and reason)\n", n)
	}
	fmt.Fprintf(w, "cdc-local: events go to %s", c.sink)
	if c.report != "" {
		fmt.Fprintf(w, "; report in %s", c.report)
	}
	if c.faultRate > 0 {
		fmt.Fprintf(w, "; faults at rate %g (seed %d)", c.faultRate, c.faultSeed)
	}
	if c.iam == "off" {
		fmt.Fprint(w, "; IAM off (would-be denials only counted)")
	}
	if c.latencyModel.Off {
		fmt.Fprint(w, "; latency model off (every call answers at once)")
	} else {
		fmt.Fprint(w, "; every call waits its modelled AWS latency (--latency off: none)")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "cdc-local: every Lambda, the state machine, the HealthLake export and the schedule act with their own IAM statements; the credentials below are an admin")
	if c.fastPath {
		fmt.Fprintf(w, "cdc-local: fast path on (%s notifications): HealthLake activates the Subscription after its modelled 5 minutes; from then each change is published about 3 s after its write, and the windows skip it (docs/FASTPATH.md)\n", c.fastPathPayload)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Point the AWS CLI, the SDKs and cdcctl at it:")
	var exports []string
	for _, kv := range st.CLIEnv() {
		exports = append(exports, kv[0]+"="+shellQuote(kv[1]))
	}
	fmt.Fprintln(w, "  export "+strings.Join(exports, " \\\n         "))
	fmt.Fprintln(w, "  aws s3 ls s3://"+res.Bucket+"/ --recursive")
	fmt.Fprintln(w, "  aws stepfunctions list-executions --state-machine-arn "+res.StateMachineARN)
	fmt.Fprintln(w, "  aws --endpoint-url "+url+" sqs list-queues   # AWS CLI v1 ignores AWS_ENDPOINT_URL for SQS")
	fmt.Fprintln(w, "  go run ./cmd/cdcctl status --endpoint "+url)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Change a resource and watch its event arrive in the next window (HealthLake checks SigV4):")
	fmt.Fprintln(w, "  echo '{\"resourceType\":\"Patient\",\"id\":\"example\",\"name\":[{\"family\":\"Doe\"}]}' \\")
	fmt.Fprintln(w, "    | go run ./cmd/cdc-local fhir PUT Patient/example --endpoint "+url)
	fmt.Fprintln(w, "  or with curl:")
	fmt.Fprintf(w, "  curl --aws-sigv4 aws:amz:%s:healthlake --user $AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY \\\n", st.Env.Region)
	fmt.Fprintf(w, "    -X PUT -H 'Content-Type: application/fhir+json' --data @patient.json %s/Patient/example\n", fhirBase)
	fmt.Fprintln(w, "  To see it sooner, run a window now and see how it ended: go run ./cmd/cdcctl run --wait --endpoint "+url)
	fmt.Fprintln(w, "  (or: aws stepfunctions start-execution --state-machine-arn "+res.StateMachineARN+")")
	fmt.Fprintln(w)
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@", r))
	}) < 0 {
		return s
	}
	return strconv.Quote(s)
}
